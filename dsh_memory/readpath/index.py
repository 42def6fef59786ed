"""The ranked-search index: SQLite FTS5 (BM25, `porter unicode61`) over sections of the memory
files, kept in `.state/search_index.sqlite3` and refreshed incrementally before each query:
only files whose (size, mtime_ns) changed are re-indexed; deleted files are dropped.

CJK text has no spaces, so unicode61 would turn a whole CJK run into one token. Each run is
also indexed as overlapping bigrams (plus its last character) in a shadow column `cjk`; a CJK
query becomes a phrase of bigrams there, which matches the exact substring."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from dsh_memory.readpath._common import corpus, read_text, root_of
from dsh_memory.readpath.models import SearchMatch

SCHEMA_VERSION = "1"
INDEX_NAME = "search_index.sqlite3"
CHUNK_MAX_LINES = 24
SNIPPET_MAX_CHARS = 4000

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[^\\W_{_CJK}]+|[{_CJK}]+", re.UNICODE)
_HEADING = re.compile(r"^#{1,6}\s")

_local = threading.local()


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def cjk_shadow(text: str) -> str:
    return " ".join(g for run in _CJK_RUN.findall(text) for g in _bigrams(run))


def latin_body(text: str) -> str:
    return _CJK_RUN.sub(" ", text)


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


def _connect(store: Any) -> sqlite3.Connection:
    state_dir = Path(getattr(store, "state_dir", root_of(store) / ".state"))
    path = state_dir / INDEX_NAME
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    conn = conns.get(str(path))
    if conn is not None and path.exists():
        return conn
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if str(version) != SCHEMA_VERSION:
        conn.executescript(
            f"""
            BEGIN IMMEDIATE;
            DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS sections; DROP TABLE IF EXISTS fts;
            CREATE TABLE files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
            CREATE TABLE sections(id INTEGER PRIMARY KEY, path TEXT NOT NULL,
                                  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL);
            CREATE INDEX sections_path ON sections(path);
            CREATE VIRTUAL TABLE fts USING fts5(body, cjk, tokenize='porter unicode61');
            PRAGMA user_version={SCHEMA_VERSION};
            COMMIT;
            """
        )
    conns[str(path)] = conn
    return conn


def _diff(conn: sqlite3.Connection, store: Any):
    known = {p: (s, m) for p, s, m in conn.execute("SELECT path, size, mtime_ns FROM files")}
    current = {}
    changed = []
    for rel, path, st in corpus(store):
        sig = (st.st_size, st.st_mtime_ns)
        current[rel] = (path, st)
        if known.get(rel) != sig:
            changed.append(rel)
    deleted = [p for p in known if p not in current]
    return current, changed, deleted


def _drop(conn: sqlite3.Connection, rel: str) -> None:
    ids = [r[0] for r in conn.execute("SELECT id FROM sections WHERE path=?", (rel,))]
    conn.executemany("DELETE FROM fts WHERE rowid=?", [(i,) for i in ids])
    conn.execute("DELETE FROM sections WHERE path=?", (rel,))
    conn.execute("DELETE FROM files WHERE path=?", (rel,))


# Fast path: creating, deleting or atomically replacing a file (the store always writes with
# os.replace) changes its directory's mtime. While no directory changed, the per-file stat walk
# is skipped, but at most for FULL_SCAN_SECONDS, so in-place edits by hand are seen within that.
FULL_SCAN_SECONDS = 5.0
_SETTLE_NS = 1_000_000_000  # a directory modified this close to a scan is not trusted
_scans: dict[str, tuple[float, dict[str, int]]] = {}


def _dir_mtimes(store: Any) -> dict[str, int]:
    root = str(root_of(store))
    out: dict[str, int] = {}

    def walk(path: str, recursive: bool) -> None:
        try:
            out[path] = os.lstat(path).st_mtime_ns
            if recursive:
                with os.scandir(path) as it:
                    for e in it:
                        if e.name[0] != "." and e.is_dir(follow_symlinks=False):
                            walk(e.path, True)
        except (FileNotFoundError, NotADirectoryError):
            out[path] = -1

    walk(root, False)
    walk(os.path.join(root, "rollout_summaries"), False)
    walk(os.path.join(root, "skills"), True)
    walk(str(getattr(store, "notes_dir", os.path.join(root, "extensions", "ad_hoc", "notes"))), True)
    return out


def refresh(store: Any, *, force: bool = False) -> dict[str, int]:
    """Bring the index up to date; returns counts of re-indexed and dropped files."""
    conn = _connect(store)
    key = str(root_of(store))
    dirs = _dir_mtimes(store)
    last = _scans.get(key)
    if not force and last and last[1] == dirs and time.monotonic() - last[0] < FULL_SCAN_SECONDS:
        return {"indexed": 0, "dropped": 0}
    scan_ns = time.time_ns()
    settled = all(m < scan_ns - _SETTLE_NS for m in dirs.values())
    # diff under the write lock: another process indexing the same root waits, then sees its work
    conn.execute("BEGIN IMMEDIATE")
    try:
        current, changed, deleted = _diff(conn, store)
        for rel in deleted:
            _drop(conn, rel)
        for rel in changed:
            path, st = current[rel]
            _drop(conn, rel)
            text = read_text(path, st)
            conn.execute("INSERT INTO files(path, size, mtime_ns) VALUES (?,?,?)", (rel, st.st_size, st.st_mtime_ns))
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
                # the rel path is searchable too: slugs carry topic words
                conn.execute(
                    "INSERT INTO fts(rowid, body, cjk) VALUES (?,?,?)",
                    (cur.lastrowid, latin_body(rel + "\n" + section), cjk_shadow(section)),
                )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if settled:
        _scans[key] = (time.monotonic(), dirs)
    else:
        _scans.pop(key, None)
    if len(changed) + len(deleted) > 200:  # a big (re)build: fold the WAL now, not in a later query
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"indexed": len(changed), "dropped": len(deleted)}


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_terms(queries: list[str]) -> list[str]:
    """FTS5 terms for the queries: words (stemmed by porter) in any column, CJK runs as bigram
    phrases in the `cjk` column (a single CJK character as a prefix of bigrams)."""
    parts: list[str] = []
    for q in queries:
        for tok in _WORD.findall(q):
            if _CJK_RUN.fullmatch(tok):
                if len(tok) == 1:
                    parts.append(f"cjk : {_quote(tok)}*")
                else:
                    parts.append(f"cjk : {_quote(' '.join(_bigrams(tok)[:-1]))}")
            else:
                parts.append(f"body : {_quote(tok)}")
    return list(dict.fromkeys(parts))


def _hit(words: list[str], low: str) -> bool:
    # stemmed FTS terms: "migrations" matched "migration"; approximate with a short prefix
    return any(w in low or (len(w) > 4 and w[: max(4, len(w) - 3)] in low) for w in words)


def _matched(queries: list[str], text: str) -> list[str]:
    low = text.casefold()
    return [q for q in queries if _hit([w.casefold() for w in _WORD.findall(q)], low)]


def _focus(queries: list[str], lines: list[str], first: int) -> tuple[int, int]:
    """Narrow a section to the lines that carry the terms (the range to cite)."""
    words = [w.casefold() for q in queries for w in _WORD.findall(q)]
    hits = [first + i for i, ln in enumerate(lines) if _hit(words, ln.casefold())]
    return (hits[0], hits[-1]) if hits else (first, first + max(0, len(lines) - 1))


def _prefix_filter(prefix: str | None) -> tuple[str, list[Any]]:
    if not prefix:
        return "", []
    esc = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return (
        " AND fts.rowid IN (SELECT id FROM sections WHERE path = ? OR path LIKE ? ESCAPE '\\')",
        [prefix, esc.rstrip("/") + "/%"],
    )


def _count(conn: sqlite3.Connection, expr: str, prefix: str | None) -> int:
    extra, args = _prefix_filter(prefix)
    return conn.execute(f"SELECT count(*) FROM fts WHERE fts MATCH ?{extra}", [expr, *args]).fetchone()[0]


def _ranked_rows(conn: sqlite3.Connection, expr: str, prefix: str | None, limit: int, offset: int) -> list[tuple]:
    # rank + LIMIT inside the FTS query (a top-N sort), then join only the rows kept
    extra, args = _prefix_filter(prefix)
    sql = (
        "SELECT s.path, s.start_line, s.end_line, t.score FROM "
        f"(SELECT rowid, bm25(fts, 1.0, 1.0) AS score FROM fts WHERE fts MATCH ?{extra} "
        "ORDER BY score, rowid LIMIT ? OFFSET ?) t JOIN sections s ON s.id = t.rowid ORDER BY t.score, t.rowid"
    )
    return conn.execute(sql, [expr, *args, limit, offset]).fetchall()


def ranked_search(
    store: Any, queries: list[str], prefix: str | None, offset: int, limit: int
) -> tuple[list[SearchMatch], bool]:
    terms = fts_terms(queries)
    if not terms:
        from dsh_memory.errors import UserInputError

        raise UserInputError("ranked search needs at least one word or CJK character in the queries")
    refresh(store)
    conn = _connect(store)
    # Two tiers, one total order: sections with every term (BM25), then sections with some
    # terms (BM25). The first tier is small and usually fills the page on its own.
    all_expr = " AND ".join(terms)
    tiers = [all_expr]
    if len(terms) > 1:
        tiers.append(f"({' OR '.join(terms)}) NOT ({all_expr})")
    rows: list[tuple] = []
    want, skip = limit + 1, offset
    for expr in tiers:
        if want <= 0:
            break
        if skip:
            n = _count(conn, expr, prefix)
            if skip >= n:
                skip -= n
                continue
        got = _ranked_rows(conn, expr, prefix, want, skip)
        rows += got
        want -= len(got)
        skip = 0
    more = len(rows) > limit
    root = root_of(store)
    out = []
    for rel, a, b, score in rows[:limit]:
        path = root / rel
        try:
            text = read_text(path) or ""
        except FileNotFoundError:  # deleted between refresh and now
            continue
        lines = text.splitlines()[a - 1 : b]
        content = "\n".join(lines)[:SNIPPET_MAX_CHARS]
        m_a, m_b = _focus(queries, lines, a)
        out.append(
            SearchMatch(
                path=rel,
                start_line=a,
                end_line=b,
                match_line=m_a,
                match_end_line=m_b,
                content=content,
                matched_queries=_matched(queries, content),
                score=round(-score, 4),
            )
        )
    return out, more
