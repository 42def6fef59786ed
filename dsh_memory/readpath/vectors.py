"""Section vectors for the semantic half of ranked search, kept next to the FTS5 index in
`.state/search_vectors.f32` (docs/search.md: what it holds and costs). The section whose
`sections.slot` (index.py) is n has its vector in row n; a query scores every row through a memory
map with one matrix-vector product. sqlite-vec was the other candidate: its loadable extension
needs `sqlite3.Connection.enable_load_extension`, which many Python builds (the CI's) lack.

Rows are written by the index update, in its transaction, before it commits. The slot of a section
dropped by an update goes to `free_slots` and is reused by LATER updates only (were the update
rolled back, the old section would still point at it). Free rows keep stale vectors; only slots a
section holds are returned. The file never shrinks (a reader may have it mapped)."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, count, islice
from pathlib import Path
from typing import Any

from dsh_memory.errors import DshMemoryError
from dsh_memory.readpath._common import FileCache, read_text
from dsh_memory.readpath.embedder import Embedder

VECTORS_NAME = "search_vectors.f32"
DIM = 64
_ROW = 4  # bytes per float32

log = logging.getLogger(__name__)


def set_aside(path: Path) -> bool:
    """Move what stands where the vector file goes and is no regular file (a folder, a link that
    may lead out of the memory root, a FIFO) next to it as `<name>.set-aside-<ns>`, untouched, and
    say so (a warning): the vectors are derived from the memory files and are built again. True
    when it moved one (the caller starts a new index: its sections' rows were in it); one that
    cannot be moved (a read-only memory root) is one error naming it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISREG(st.st_mode):
        return False
    aside = path.with_name(f"{path.name}.set-aside-{time.time_ns()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:  # another process moved it first (and starts the new index)
        return False
    except OSError as exc:
        raise DshMemoryError(
            f"{path} is not a file, so ranked search cannot keep its vectors there, and it cannot be moved "
            f"aside ({exc.strerror}): move it away (the vectors are built again from the memory files)"
        ) from None
    log.warning("%s was not a file: moved aside to %s, the search vectors are built again", path, aside)
    return True


def model_key(emb: Embedder) -> str:
    """What the stored vectors are: another model or width means every vector is redone."""
    return f"{emb.model_id}/{DIM}"


def cut(vecs: Any) -> Any:
    """The first DIM dimensions of model vectors, unit length again."""
    import numpy as np

    v = vecs[..., :DIM]
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms == 0, 1.0, norms)


_maps = FileCache(16)  # path → its memmap, per file version


def free_rows(conn: sqlite3.Connection, path: Path) -> Iterator[int]:
    """The rows an update writes, in order: the free rows as they were when it began (`free_slots`:
    rows of sections dropped by earlier updates), lowest first, then new rows at the end."""
    free = [s for (s,) in conn.execute("SELECT slot FROM free_slots ORDER BY slot")]
    try:
        rows = os.path.getsize(path) // (DIM * _ROW)
    except FileNotFoundError:
        rows = 0
    top = conn.execute("SELECT max(slot) FROM sections").fetchone()[0]
    if top is None:  # no section holds a row (a new index over an old file): all rows are free
        free = list(range(rows))
    return chain(free, count(max(rows, -1 if top is None else top + 1, free[-1] + 1 if free else 0)))


def store_sections(
    conn: sqlite3.Connection, path: Path, emb: Embedder, rows: Iterator[int], items: list[tuple[int, str]]
) -> None:
    """Embed (section id, text) pairs, write them to the next `rows` (`free_rows`) and record
    their slots."""
    if not items:
        return
    vecs = cut(emb.embed([text for _, text in items])).astype("float32")
    taken = list(islice(rows, len(items)))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # never through a link
    try:  # no fsync: like the index (synchronous=NORMAL), vectors lost to a power cut are rebuilt
        for slot, vec in zip(taken, vecs, strict=True):
            os.pwrite(fd, vec.tobytes(), slot * DIM * _ROW)
    finally:
        os.close(fd)
    conn.executemany("UPDATE sections SET slot=? WHERE id=?", [(s, i) for s, (i, _) in zip(taken, items, strict=True)])
    # held now; a new row at the end was never free (free_rows starts them past every free one)
    conn.executemany("DELETE FROM free_slots WHERE slot=?", [(s,) for s in taken])


def _dot(m: Any, qv: Any) -> Any:
    """m @ qv on this thread: BLAS would spread one small product over threads that spin-wait,
    which on a busy machine cost 10× the CPU (3.3 ms vs 0.5 ms for 50,000 × 64 measured)."""
    import numpy as np

    return np.einsum("ij,j->i", m, qv)


def _matrix(path: Path) -> Any:
    import numpy as np

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    rows = st.st_size // (DIM * _ROW) if st else 0
    if not rows:
        return np.zeros((0, DIM), dtype=np.float32)
    return _maps.get(str(path), st, lambda: np.memmap(path, dtype=np.float32, mode="r", shape=(rows, DIM)))


def nearest(
    conn: sqlite3.Connection, path: Path, qv: Any, prefix_sql: tuple[str, list[Any]], k: int
) -> list[tuple[int, str, int, int, float]]:
    """The k sections most like the query vector: (id, path, start, end, cosine), best first.
    `prefix_sql`: a condition on `sections` (and its arguments) that keeps to a path."""
    import numpy as np

    qv = cut(qv)
    m = _matrix(path)
    where, args = prefix_sql
    if where:  # a path: score the rows of its sections only
        slots = np.array(
            [s for (s,) in conn.execute(f"SELECT slot FROM sections WHERE slot IS NOT NULL{where}", args)],
            dtype=np.int64,
        )
        slots = slots[slots < len(m)]
        scores = _dot(m[slots], qv)
    else:  # every row; free rows (stale vectors) are skipped below
        slots = np.arange(len(m))
        scores = _dot(m, qv)
    out: list[tuple[int, str, int, int, float]] = []
    want = 2 * k
    while True:
        n = min(want, len(slots))
        top = np.argpartition(-scores, n - 1)[:n] if 0 < n < len(slots) else np.arange(len(slots))
        top = top[np.argsort(-scores[top], kind="stable")]
        chosen = [int(slots[i]) for i in top]
        marks = ",".join("?" * len(chosen))
        held = {
            r[0]: r[1:]
            for r in conn.execute(
                f"SELECT slot, id, path, start_line, end_line FROM sections WHERE slot IN ({marks})", chosen
            )
        }
        out = [(*held[s], float(scores[i])) for s, i in zip(chosen, top, strict=True) if s in held]
        if len(out) >= k or n == len(slots):
            return out[:k]
        want *= 4


def cosines(conn: sqlite3.Connection, path: Path, qv: Any, ids: Iterable[int]) -> dict[int, float]:
    """{section id: cosine with the query vector} for the sections that have a vector."""
    ids = list(ids)
    m = _matrix(path)
    sql = f"SELECT id, slot FROM sections WHERE slot IS NOT NULL AND id IN ({','.join('?' * len(ids))})"
    rows = [(i, s) for i, s in conn.execute(sql, ids) if s < len(m)]
    scores = _dot(m[[s for _, s in rows]], cut(qv))
    return {i: float(c) for (i, _), c in zip(rows, scores, strict=True)}


def unembedded(
    conn: sqlite3.Connection, root: Path, emb: Embedder, text_of: Callable[[str, str], str]
) -> list[tuple[int, str]]:
    """(id, text) of the sections with no vector: indexed before the embedder was turned on, or by
    another model (then every vector is redone). `text_of(rel, section)`: what is embedded."""
    model = conn.execute("SELECT value FROM meta WHERE key='model'").fetchone()
    if model is None or model[0] != model_key(emb):
        conn.execute("INSERT OR IGNORE INTO free_slots SELECT slot FROM sections WHERE slot IS NOT NULL")
        conn.execute("UPDATE sections SET slot=NULL WHERE slot IS NOT NULL")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('model', ?)", (model_key(emb),))
    out: list[tuple[int, str]] = []
    rows = conn.execute("SELECT id, path, start_line, end_line FROM sections WHERE slot IS NULL ORDER BY path, id")
    lines: list[str] = []
    last = None
    for sid, rel, a, b in rows.fetchall():
        if rel != last:
            lines = (read_text(root / rel) or "").splitlines()  # none when deleted since it was indexed
            last = rel
        out.append((sid, text_of(rel, "\n".join(lines[a - 1 : b]))))
    return out
