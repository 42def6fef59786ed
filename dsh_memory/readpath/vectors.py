"""Section vectors for the semantic half of ranked search, kept next to the FTS5 index.

`.state/search_vectors.f32` is a float32 matrix on disk (embedder.DIM columns). The section whose
`sections.slot` (index.py) is n has its vector in row n. A query reads the file through a memory
map and scores every row with one matrix-vector product (0.8 ms for 30,000 sections, about what
10,000 rollout summaries make). sqlite-vec was the other candidate: its loadable extension needs
`sqlite3.Connection.enable_load_extension`, which many Python builds (the CI's included) lack.

Rows are written by the index update, in its transaction, before it commits. The slot of a section
dropped by an update is reused by LATER updates only (were the update rolled back, the old section
would still point at it). Free rows keep stale vectors; only slots a section holds are returned."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dsh_memory.readpath._common import read_text
from dsh_memory.readpath.embedder import Embedder

VECTORS_NAME = "search_vectors.f32"
_ROW = 4  # bytes per float32

_maps: dict[str, tuple[tuple[int, int], Any]] = {}  # path → ((inode, size), memmap)
_maps_lock = threading.Lock()


class Slots:
    """Free rows of the matrix, as they were when the update began."""

    def __init__(self, conn: sqlite3.Connection, path: Path, dim: int) -> None:
        used = {s for (s,) in conn.execute("SELECT slot FROM sections WHERE slot IS NOT NULL")}
        try:
            rows = os.path.getsize(path) // (dim * _ROW)
        except FileNotFoundError:
            rows = 0
        self._free = iter([s for s in range(rows) if s not in used])
        self._next = max(rows, max(used, default=-1) + 1)

    def take(self) -> int:
        s = next(self._free, None)
        if s is None:
            s, self._next = self._next, self._next + 1
        return s


def store_sections(
    conn: sqlite3.Connection, path: Path, emb: Embedder, slots: Slots, items: list[tuple[int, str]]
) -> None:
    """Embed (section id, text) pairs, write their rows and record their slots."""
    if not items:
        return
    vecs = emb.embed([text for _, text in items])
    taken = [slots.take() for _ in items]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        for slot, vec in zip(taken, vecs, strict=True):
            os.pwrite(fd, vec.tobytes(), slot * emb.dim * _ROW)
        os.fsync(fd)
    finally:
        os.close(fd)
    conn.executemany("UPDATE sections SET slot=? WHERE id=?", [(s, i) for s, (i, _) in zip(taken, items, strict=True)])


def _matrix(path: Path, dim: int) -> Any:
    import numpy as np

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return np.zeros((0, dim), dtype=np.float32)
    key = (st.st_ino, st.st_size)
    with _maps_lock:
        got = _maps.get(str(path))
        if got is not None and got[0] == key:
            return got[1]
    rows = st.st_size // (dim * _ROW)
    m = np.memmap(path, dtype=np.float32, mode="r", shape=(rows, dim)) if rows else np.zeros((0, dim), np.float32)
    with _maps_lock:
        _maps[str(path)] = (key, m)
    return m


def nearest(
    conn: sqlite3.Connection, path: Path, qv: Any, prefix_sql: tuple[str, list[Any]], k: int
) -> list[tuple[int, str, int, int, float]]:
    """The k sections most like the query vector: (id, path, start, end, cosine), best first.
    `prefix_sql`: a condition on `sections` (and its arguments) that keeps to a path."""
    import numpy as np

    m = _matrix(path, len(qv))
    where, args = prefix_sql
    if where:  # a path: score the rows of its sections only
        slots = np.array(
            [s for (s,) in conn.execute(f"SELECT slot FROM sections WHERE slot IS NOT NULL{where}", args)],
            dtype=np.int64,
        )
        slots = slots[slots < len(m)]
        scores = m[slots] @ qv
    else:  # every row; free rows (stale vectors) are skipped below
        slots = np.arange(len(m))
        scores = m @ qv
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
    if not ids:
        return {}
    m = _matrix(path, len(qv))
    marks = ",".join("?" * len(ids))
    rows = [
        (i, s)
        for i, s in conn.execute(f"SELECT id, slot FROM sections WHERE slot IS NOT NULL AND id IN ({marks})", ids)
    ]
    rows = [(i, s) for i, s in rows if s < len(m)]
    if not rows:
        return {}
    scores = m[[s for _, s in rows]] @ qv
    return {i: float(c) for (i, _), c in zip(rows, scores, strict=True)}


def unembedded(
    conn: sqlite3.Connection, root: Path, emb: Embedder, text_of: Callable[[str, str], str]
) -> list[tuple[int, str]]:
    """(id, text) of the sections with no vector: indexed before the embedder was turned on, or by
    another model (then every vector is redone). `text_of(rel, section)`: what is embedded."""
    model = conn.execute("SELECT value FROM meta WHERE key='model'").fetchone()
    if model is None or model[0] != emb.model_id:
        conn.execute("UPDATE sections SET slot=NULL WHERE slot IS NOT NULL")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('model', ?)", (emb.model_id,))
    out: list[tuple[int, str]] = []
    rows = conn.execute("SELECT id, path, start_line, end_line FROM sections WHERE slot IS NULL ORDER BY path, id")
    lines: list[str] = []
    last = None
    for sid, rel, a, b in rows.fetchall():
        if rel != last:
            try:
                lines = (read_text(root / rel) or "").splitlines()
            except (FileNotFoundError, NotADirectoryError):
                lines = []
            last = rel
        out.append((sid, text_of(rel, "\n".join(lines[a - 1 : b]))))
    return out
