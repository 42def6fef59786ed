"""The debounce as data (docs/running.md): each session's newest turn end, as the receiver
recorded it, and the newest one a debounced extraction run (flows/extract_session.py) handled. A
turn end newer than the one a run handled keeps its session pending: nothing recorded is lost to
a run already under way. Times are epoch seconds (REAL): one comparison per row, no parsing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from dsh_memory.storage.state import StateStore


def _num(column: str) -> str:
    """`column` as a number in SQL, 0 for a value that is not one (a hand edit): one such row
    must not fail every run's `next_due`, nor keep its session from being recorded again."""
    return f"(CASE WHEN typeof({column}) IN ('integer', 'real') THEN {column} ELSE 0 END)"


ENDED, HANDLED = _num("ended_at"), _num("handled_at")
PENDING = f"{ENDED} > {HANDLED}"


def _epoch(dt: datetime) -> float:
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


class TurnEnds:
    """The `turn_ends` table of a memory root's state database."""

    def __init__(self, state: StateStore):
        self.state = state

    def record(self, ends: Iterable[tuple[str, datetime]]) -> int:
        """Record turn ends (session, when it ended) in one transaction; an older one than the
        session's newest is ignored. Returns how many were given."""
        rows = [(sid, _epoch(at)) for sid, at in ends if sid]
        if not rows:
            return 0
        with self.state._tx() as conn:
            conn.executemany(
                "INSERT INTO turn_ends (session_id, ended_at) VALUES (?, ?) "
                f"ON CONFLICT(session_id) DO UPDATE SET ended_at = max({ENDED}, excluded.ended_at)",
                rows,
            )
        return len(rows)

    def due(self, now: datetime, debounce_seconds: float, limit: int = 1000) -> dict[str, float]:
        """Sessions quiet for at least the debounce whose newest turn end is not handled yet:
        {session: newest turn end}, the oldest first (at most `limit`)."""
        rows = self.state._conn().execute(
            f"SELECT session_id, ended_at FROM turn_ends WHERE {PENDING} AND ended_at <= ? ORDER BY ended_at LIMIT ?",
            (_epoch(now) - debounce_seconds, limit),
        )
        return {r["session_id"]: r["ended_at"] for r in rows}

    def handled(self, seen: Mapping[str, float]) -> None:
        """Mark these turn ends handled (the values `due` returned): a newer one stays pending."""
        if not seen:
            return
        with self.state._tx() as conn:
            conn.executemany(
                f"UPDATE turn_ends SET handled_at = max({HANDLED}, ?) WHERE session_id = ?",
                [(at, sid) for sid, at in seen.items()],
            )

    def next_due(self, debounce_seconds: float) -> datetime | None:
        """When the next pending session will have been quiet for the debounce (None: none is)."""
        row = self.state._conn().execute(f"SELECT min(ended_at) FROM turn_ends WHERE {PENDING}").fetchone()
        return None if row[0] is None else datetime.fromtimestamp(row[0] + debounce_seconds, UTC)

    def pending(self) -> int:
        """Sessions with a turn end not handled yet (due or not)."""
        return self.state._conn().execute(f"SELECT count(*) FROM turn_ends WHERE {PENDING}").fetchone()[0]
