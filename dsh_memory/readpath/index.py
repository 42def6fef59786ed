"""The ranked-search index: SQLite FTS5 (BM25, `porter unicode61`) over sections of the memory
files, kept in `.state/search_index.sqlite3` (home.py: a private copy when the memory root is
read-only) and refreshed incrementally before each query:
only files whose (size, mtime_ns, inode) changed (changes.py), or that were modified within 2 s of
being read (a coarse file-system clock gives an edit right after the same mtime), are re-indexed;
deleted files are dropped (see `refresh` for when the directories alone are read). It finds the
SECTIONS_SCANNED best sections for the query terms (terms.py); lines.py then ranks every line in
them.

CJK text has no spaces, so unicode61 would turn a whole CJK run into one token. Each run is
also indexed as overlapping bigrams (plus its last character) in a shadow column `cjk`; a CJK
term is a phrase of bigrams there, which matches the exact substring."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any, TypeVar

from dsh_memory.errors import DshMemoryError, UserInputError
from dsh_memory.readpath import changes, embedder, fusion, home, vectors
from dsh_memory.readpath._common import read_text, why_no_text
from dsh_memory.readpath.home import INDEX_NAME
from dsh_memory.readpath.lines import Hit, Section, idf, score_sections
from dsh_memory.readpath.terms import CJK_RUN, Term, bigrams, query_terms

SCHEMA_VERSION = "5"
CHUNK_MAX_LINES = 24

_HEADING = re.compile(r"^#{1,6}\s")
T = TypeVar("T")

_local = threading.local()


def cjk_shadow(text: str) -> str:
    return " ".join(g for run in CJK_RUN.findall(text) for g in bigrams(run))


def latin_body(text: str) -> str:
    return CJK_RUN.sub(" ", text)


def chunks(lines: list[str]) -> list[tuple[int, int]]:
    """0-based inclusive (start, end) sections: a heading starts one; long ones are split."""
    out: list[tuple[int, int]] = []
    start = 0
    for i, line in enumerate(lines):
        if i > start and (_HEADING.match(line) or i - start >= CHUNK_MAX_LINES):
            out.append((start, i - 1))
            start = i
    if lines:
        out.append((start, len(lines) - 1))
    return out


LOCK_WAIT_SECONDS = 30.0  # how long an update waits for another process's update of the index


class _Conn(sqlite3.Connection):
    ino = -1  # the inode of the file it opened: another one at its path is another index


def _open(path: Path) -> _Conn:
    conn = sqlite3.connect(
        path, timeout=LOCK_WAIT_SECONDS, isolation_level=None, check_same_thread=False, factory=_Conn
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.ino = os.stat(path).st_ino
    return conn


_TABLES = f"""
    DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS sections; DROP TABLE IF EXISTS fts;
    DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS free_slots;
    CREATE TABLE files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                       ino INTEGER NOT NULL DEFAULT 0,
                       skipped TEXT);  -- why it has no text (_common.why_no_text), if so
    CREATE TABLE sections(id INTEGER PRIMARY KEY, path TEXT NOT NULL,
                          start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
                          slot INTEGER);  -- its row in the vector file (vectors.py), if any
    CREATE INDEX sections_path ON sections(path);
    CREATE INDEX sections_slot ON sections(slot);
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE free_slots(slot INTEGER PRIMARY KEY);  -- rows of dropped sections
    CREATE VIRTUAL TABLE fts USING fts5(body, cjk, tokenize='porter unicode61');
    PRAGMA user_version={SCHEMA_VERSION}"""


def _create_tables(conn: sqlite3.Connection) -> None:
    """The tables of a new index (or of one another version of this module made), unless they
    are there once the write lock is held: processes opening a new index at once all find it
    without them, and one that made them late would drop what another had made and filled."""
    conn.execute("BEGIN IMMEDIATE")
    with conn:  # commits, or rolls back on any exception
        if str(conn.execute("PRAGMA user_version").fetchone()[0]) != SCHEMA_VERSION:
            for statement in _TABLES.split(";"):
                conn.execute(statement)


def _connect(store: Any) -> sqlite3.Connection:
    path = home.of(store.state_dir) / INDEX_NAME
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    conn = conns.get(str(path))
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:  # a new, empty index (deleted since): what this process scanned is not in it
        ino = None
        _forget(store)
    if conn is not None:
        if conn.ino == ino:  # (an inode is not reused while a connection holds its file open)
            return conn
        conns.pop(str(path)).close()  # a deleted file: another process built the index again, or this one will
    conn = _open(path)  # bytes that are no database: `_guarded` builds it again
    if str(conn.execute("PRAGMA user_version").fetchone()[0]) != SCHEMA_VERSION:
        _create_tables(conn)
    conns[str(path)] = conn
    return conn


def _discard(store: Any) -> None:
    """Delete the index of `store` (this thread's connection to it closed): the next `_connect`
    builds a new one."""
    path = home.of(store.state_dir) / INDEX_NAME
    conn = getattr(_local, "conns", {}).pop(str(path), None)
    if conn is not None:
        conn.close()
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    _forget(store)


_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (the primary codes)


def _guarded(store: Any, fn: Callable[[], T]) -> T:
    """fn(), which uses the index of `store`. An index SQLite finds damaged (pages a disk error or
    a copy cut short left malformed) is deleted and fn runs once more on a new one: the index is
    derived from the memory files. Any other failure of it (held by another process past
    LOCK_WAIT_SECONDS, a full disk), or of the vector file, is one error naming it, not a traceback."""
    for attempt in (1, 2):
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if attempt == 2 or getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _DAMAGED:
                raise DshMemoryError(
                    f"cannot use the search index {home.of(store.state_dir) / INDEX_NAME} ({exc}): ranked search "
                    f"waits at most {LOCK_WAIT_SECONDS:.0f} s for another process's update of it; the line modes do not use it"
                ) from None
        except OSError as exc:  # the vector file (vectors.py): a disk error, a full disk, a folder swapped in
            raise DshMemoryError(f"ranked search cannot use {exc.filename} ({exc.strerror})") from None
        _discard(store)
    raise AssertionError("unreachable")


def _drop(conn: sqlite3.Connection, rel: str) -> None:
    conn.execute("INSERT OR IGNORE INTO free_slots SELECT slot FROM sections WHERE path=? AND slot IS NOT NULL", (rel,))
    ids = [r[0] for r in conn.execute("SELECT id FROM sections WHERE path=?", (rel,))]
    conn.executemany("DELETE FROM fts WHERE rowid=?", [(i,) for i in ids])
    conn.execute("DELETE FROM sections WHERE path=?", (rel,))
    conn.execute("DELETE FROM files WHERE path=?", (rel,))


# Fast paths: creating, deleting or atomically replacing a file (the store always writes with
# os.replace) changes its directory's mtime. While no directory changed, nothing is listed;
# when one did, a quick diff (directory entries and inodes, no stat per file) finds what is new.
# A full diff (a stat per file) runs at most every FULL_SCAN_SECONDS, so in-place edits by hand
# are seen within that.
FULL_SCAN_SECONDS = 5.0
_SETTLE_NS = 1_000_000_000  # a directory modified this close to a scan is not trusted
_scans: dict[str, tuple[float, dict[str, int] | None]] = {}  # root → (last full diff, trusted dir mtimes)


_embedded: set[str] = set()  # roots whose sections without a vector were looked for in this process


def _forget(store: Any) -> None:
    """The index of `store` is new: the next refresh diffs every file, and embeds every section."""
    _scans.pop(str(store.root), None)
    _embedded.discard(str(store.root))


def _vectors_path(store: Any) -> Path:
    return home.of(store.state_dir) / vectors.VECTORS_NAME


def _section_text(rel: str, section: str) -> str:
    return rel + "\n" + section  # the rel path is searchable too: slugs carry topic words


def refresh(store: Any, *, force: bool = False, semantic_search: str = "auto") -> dict[str, int]:
    """Bring the index (and the section vectors, with the embedder: the
    `semantic_search` setting) up to date; returns counts of re-indexed and dropped files."""
    emb = embedder.for_mode(semantic_search)
    if emb is not None and vectors.set_aside(_vectors_path(store)):
        _discard(store)  # its sections' rows were in what was set aside: all of them are built again
    conn = _connect(store)
    key = str(store.root)
    backfill = emb is not None and key not in _embedded
    dirs = changes.dir_mtimes(store)
    last = _scans.get(key)
    now = time.monotonic()
    if force or last is None:
        quick = False
    else:
        expired = now - last[0] >= FULL_SCAN_SECONDS
        if last[1] == dirs and not expired and not backfill:
            return {"indexed": 0, "dropped": 0}
        # a directory changed: list it quickly, even when a full diff is due (it runs next time)
        quick = not expired or (last[1] is not None and last[1] != dirs)
    scan_ns = time.time_ns()
    settled = all(m < scan_ns - _SETTLE_NS for m in dirs.values())
    vpath = _vectors_path(store)
    # diff under the write lock: another process indexing the same root waits, then sees its work
    conn.execute("BEGIN IMMEDIATE")
    with conn:  # commits, or rolls back on any exception
        recent_ns = scan_ns - 2 * _SETTLE_NS
        current, changed, deleted = changes.diff(conn, store, quick, recent_ns)
        # free rows as before the drops below (a slot they free is reused by later updates only)
        slots = vectors.free_rows(conn, vpath) if emb and (changed or backfill) else None
        for rel in deleted:
            _drop(conn, rel)
        pending: list[tuple[int, str]] = []
        for rel in changed:
            path, st = current[rel]
            _drop(conn, rel)
            text = read_text(path, st)
            why = None if text is not None else why_no_text(path, st)
            # modified this recently, it may change again within its mtime's tick (1-2 s on some file
            # systems) with the same size; or unreadable until its mode changes (no new mtime):
            # recorded with no size, it is read again by the next diff
            size = st.st_size if st.st_mtime_ns < recent_ns and why != "not readable" else -1
            conn.execute(
                "INSERT INTO files(path, size, mtime_ns, ino, skipped) VALUES (?,?,?,?,?)",
                (rel, size, st.st_mtime_ns, st.st_ino, why),
            )
            if not text:
                continue
            lines = text.splitlines()
            for a, b in chunks(lines):
                section = "\n".join(lines[a : b + 1])
                if not section.strip():
                    continue
                cur = conn.execute(
                    "INSERT INTO sections(path, start_line, end_line) VALUES (?,?,?)", (rel, a + 1, b + 1)
                )
                conn.execute(
                    "INSERT INTO fts(rowid, body, cjk) VALUES (?,?,?)",
                    (cur.lastrowid, latin_body(_section_text(rel, section)), cjk_shadow(section)),
                )
                if emb:
                    pending.append((cur.lastrowid, _section_text(rel, section)))
        if emb and slots:
            if backfill:  # the sections just indexed included
                pending = vectors.unembedded(conn, store.root, emb, _section_text)
            vectors.store_sections(conn, vpath, emb, slots, pending)
    if backfill:
        _embedded.add(key)
    elif emb is None and (changed or deleted):  # sections indexed without vectors: look again with the embedder
        _embedded.discard(key)
    # an unsettled directory may change again within its mtime's tick: list it again next time
    _scans[key] = (last[0] if quick and last else now, dirs if settled else None)
    if len(changed) + len(deleted) > 200:  # a big (re)build: fold the WAL now, not in a later query
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"indexed": len(changed), "dropped": len(deleted)}


def _path_condition(prefix: str | None) -> tuple[str, list[Any]]:
    """` AND <sections in the file or folder prefix>` for a query on `sections` (and its arguments)."""
    if not prefix:
        return "", []
    esc = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return " AND (path = ? OR path LIKE ? ESCAPE '\\')", [prefix, esc.rstrip("/") + "/%"]


def doc_freqs(conn: sqlite3.Connection, terms: list[Term]) -> tuple[int, list[int]]:
    """The number of sections, and how many hold each term (BM25's document frequency)."""
    n = conn.execute("SELECT count(*) FROM sections").fetchone()[0]
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_rows USING fts5vocab(main, fts, 'row')")
    latin = [t.key for t in terms if not t.cjk]
    df: dict[str, int] = {}
    if latin:
        marks = ",".join("?" * len(latin))
        df = dict(conn.execute(f"SELECT term, doc FROM temp.fts_rows WHERE term IN ({marks})", latin).fetchall())
    cjk_df = "SELECT count(*) FROM fts WHERE fts MATCH ?"
    return n, [conn.execute(cjk_df, (t.fts,)).fetchone()[0] if t.cjk else df.get(t.key, 0) for t in terms]


CANDIDATE_ROWS = 12_000  # past this many matching sections, the OR query keeps to the rarer terms


def candidate_sections(
    conn: sqlite3.Connection, terms: list[Term], dfs: list[int], prefix: str | None, limit: int
) -> list[tuple[int, str, int, int, float]]:
    """The `limit` sections with the best BM25 for any of the terms: (id, path, start, end, BM25),
    best first.

    BM25 scores every section that holds any term; words found in a large share of the memory
    would make that slow (and say little), so when the terms match more than CANDIDATE_ROWS
    sections, the OR keeps to the rarest terms that fit (at least one), and sections holding
    every term come first. The common terms still count when the lines are scored."""
    where, args = _path_condition(prefix)
    extra = f" AND fts.rowid IN (SELECT id FROM sections WHERE {where[5:]})" if where else ""
    sql = (
        "SELECT t.rowid, s.path, s.start_line, s.end_line, -t.score FROM "
        f"(SELECT rowid, bm25(fts, 1.0, 1.0) AS score FROM fts WHERE fts MATCH ?{extra} "
        "ORDER BY score, rowid LIMIT ?) t JOIN sections s ON s.id = t.rowid ORDER BY t.score, t.rowid"
    )
    exprs = [" OR ".join(t.fts for t in terms)]
    if sum(dfs) > CANDIDATE_ROWS:
        order = sorted(range(len(terms)), key=lambda i: dfs[i])
        fit = bisect_right(list(accumulate(dfs[i] for i in order)), CANDIDATE_ROWS)
        keep = order[: max(1, fit)]  # the rarest terms whose sections fit, at least one
        exprs = [" OR ".join(terms[i].fts for i in sorted(keep))]
        if len(terms) > 1:
            exprs.insert(0, " AND ".join(t.fts for t in terms))
    seen: dict[int, tuple[int, str, int, int, float]] = {}
    for expr in exprs:
        if len(seen) >= limit:
            break
        for row in conn.execute(sql, [expr, *args, limit]):
            seen.setdefault(row[0], row)
    return list(seen.values())[:limit]


def skipped_files(store: Any, prefix: str | None) -> list[tuple[str, str]]:
    """(path, why) of the indexed files under `prefix` that have no text (search names them)."""
    where, args = _path_condition(prefix)
    sql = f"SELECT path, skipped FROM files WHERE skipped IS NOT NULL{where} ORDER BY path"
    return _guarded(store, lambda: _connect(store).execute(sql, args).fetchall())


SECTIONS_SCANNED = 40  # sections re-read and scored line by line per query (the ranked results come from these)


def ranked_search(
    store: Any, queries: list[str], prefix: str | None, semantic_search: str = "auto"
) -> tuple[list[Hit], dict, list[Term]]:
    """Every line of the best sections, scored (lines.py), best first; with the embedder
    (the `semantic_search` setting, embedder.for_mode), the sections most like the
    question join them and the lines are ranked by both (fusion.py)."""
    terms = query_terms(queries)
    if not terms:
        raise UserInputError("ranked search needs at least one word or CJK character in the queries")
    emb = embedder.for_mode(semantic_search)

    def run() -> tuple[list[Hit], dict]:
        refresh(store, semantic_search=semantic_search)
        conn = _connect(store)
        n, dfs = doc_freqs(conn, terms)
        weights = [idf(n, df) for df in dfs]
        rows = candidate_sections(conn, terms, dfs, prefix, SECTIONS_SCANNED)
        if emb is not None and fusion.applies(terms):
            return fusion.ranked(store, conn, _vectors_path(store), emb, queries, terms, weights, rows, where)
        return score_sections(store, terms, weights, [Section(p, a, b, i) for i, (_, p, a, b, _) in enumerate(rows)])

    where = _path_condition(prefix)
    hits, files = _guarded(store, run)
    return hits, files, terms
