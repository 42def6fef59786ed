"""Bookkeeping state in SQLite at `<memory root>/.state/state.sqlite3`.

Claims per session (running | done | noop | failed, with backoff, parking and a `last_seq`
watermark), pipeline globals, user overrides, read-path usage and retired summaries; the
schema, the Claim / PipelineMeta records and who owns a running claim are in state_schema.py.

WAL mode, a busy timeout, one connection per thread (and per process after fork), and every
mutation inside `BEGIN IMMEDIATE … COMMIT`, so threads and processes serialize on SQLite's own
lock, which the kernel releases when a process dies. Schema changes are ordered `MIGRATIONS`;
the applied count is `PRAGMA user_version`. All datetimes are timezone-aware UTC.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
from contextlib import AbstractContextManager, suppress
from datetime import datetime, timedelta
from pathlib import Path

from dsh_memory.storage.state_schema import (
    DEAD_OWNER_ERROR,
    STALE_ERROR,
    Claim,
    PipelineMeta,
    _clean_error,
    _clean_path,
    _dt,
    _ts,
    _utc,
    apply_migrations,
    connect,
    current_owner,
    from_row,
    immediate,
    owner_is_gone,
)


class StateStore(AbstractContextManager["StateStore"]):
    def __init__(self, memory_root: Path | str, timeout_s: float = 30.0):
        self.memory_root = Path(memory_root).expanduser()
        self.db_path = self.memory_root / ".state" / "state.sqlite3"
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._migrated = False

    # -- connections / transactions ---------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = connect(self.db_path, self.timeout_s)
            if not self._migrated:
                apply_migrations(conn)
                # the one row of pipeline globals, made anew (a new memory id) if a hand edit deleted it;
                # looked for first: a read-only database must still open for reading
                if conn.execute("SELECT 1 FROM pipeline WHERE id=1").fetchone() is None:
                    conn.execute("INSERT OR IGNORE INTO pipeline (id, memory_id) VALUES (1, lower(hex(randomblob(8))))")
                self._migrated = True
            self._local.conn, self._local.pid = conn, os.getpid()
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        return immediate(self._conn())

    def _write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        """One statement in its own IMMEDIATE transaction."""
        with self._tx() as conn:
            return conn.execute(sql, params)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection this store opened (any thread). Reopens lazily if used again."""
        with self._all_lock:
            conns, self._all = self._all, []
        for c in conns:
            with suppress(sqlite3.Error):
                c.close()
        self._local = threading.local()

    def schema_version(self) -> int:
        return self._conn().execute("PRAGMA user_version").fetchone()[0]

    # -- claims ---------------------------------------------------------------------------------
    def get_claim(self, session_id: str) -> Claim | None:
        return self._get(self._conn(), session_id)

    def claims(self) -> dict[str, Claim]:
        rows = self._conn().execute("SELECT * FROM claims ORDER BY session_id").fetchall()
        return {r["session_id"]: Claim.from_row(r) for r in rows}

    @staticmethod
    def _ensure(conn: sqlite3.Connection, session_id: str, status: str, ts: str) -> None:
        """A claim row for the UPDATE that follows (inserted with `status` when missing)."""
        sql = "INSERT INTO claims (session_id, status, updated_at) VALUES (?, ?, ?) ON CONFLICT(session_id) DO NOTHING"
        conn.execute(sql, (session_id, status, ts))

    @staticmethod
    def _get(conn: sqlite3.Connection, session_id: str) -> Claim | None:
        row = conn.execute("SELECT * FROM claims WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else Claim.from_row(row)

    def try_start(
        self,
        session_id: str,
        now: datetime,
        stale_after_s: float = 1800,
        source: str | None = None,
        path: str | None = None,
        owner: str | None = None,
        reclaim: bool = False,
    ) -> bool:
        """Mark running (owned by `owner`, default this process) unless a live running claim
        exists: one renewed less than stale_after_s ago whose owner process still runs. A claim
        whose owner is gone is taken over at once. Keeps last_seq/parts/attempts. `reclaim`: a
        live claim of this same owner is taken again (the run claimed its batch up front). The
        log's `path` is kept redacted (a key in a folder name must not reach the database)."""
        path, owner = _clean_path(path), owner or current_owner()
        with self._tx() as conn:
            return self._start(conn, session_id, _utc(now), stale_after_s, source, path, owner, reclaim)

    def try_start_many(self, session_ids: list[str], now: datetime, stale_after_s: float = 1800) -> list[str]:
        """`try_start` for a whole batch in one transaction (this process the owner): the ids
        claimed. A run claims what it planned before extracting any, so runs that planned the
        same sessions at the same time split them instead of each queueing all of them."""
        owner, now = current_owner(), _utc(now)
        with self._tx() as conn:
            return [s for s in session_ids if self._start(conn, s, now, stale_after_s, None, None, owner, False)]

    def _start(self, conn, session_id, now, stale_after_s, source, path, owner, reclaim) -> bool:
        ts = _ts(now)
        c = self._get(conn, session_id)
        live = c is not None and c.status == "running" and not c.recoverable(now, stale_after_s)
        if live and not (reclaim and c.owner == owner):
            return False
        if c is None:
            conn.execute(
                "INSERT INTO claims (session_id, status, updated_at, started_at, source, path, owner)"
                " VALUES (?, 'running', ?, ?, ?, ?, ?)",
                (session_id, ts, ts, source, path, owner),
            )
        else:
            conn.execute(
                "UPDATE claims SET status='running', updated_at=?, started_at=?, owner=?,"
                " source=COALESCE(?, source), path=COALESCE(?, path) WHERE session_id=?",
                (ts, ts, owner, source, path, session_id),
            )
        return True

    def renew(self, session_ids: list[str], now: datetime) -> int:
        """This process renews its running claims (so a long model call never looks stale)."""
        if not session_ids:
            return 0
        owner = current_owner()
        marks = ",".join("?" * len(session_ids))
        sql = f"UPDATE claims SET started_at=? WHERE status='running' AND owner=? AND session_id IN ({marks})"
        return self._write(sql, (_ts(now), owner, *session_ids)).rowcount

    def finish(
        self,
        session_id: str,
        status: str,
        last_seq: int,
        now: datetime,
        slug: str | None = None,
        parts_inc: int = 0,
        usage: dict | None = None,
        model: str = "",
        provider: str = "",
        source: str | None = None,
    ) -> Claim:
        """done|noop: reset attempts/backoff/error, set the watermark, add token usage (totals).
        'done' also sets pending_consolidation in the same transaction."""
        if status not in ("done", "noop"):
            raise ValueError(f"finish() status must be 'done' or 'noop', not {status!r}")
        ts = _ts(now)
        usage = usage or {}
        it, ot = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        with self._tx() as conn:
            self._ensure(conn, session_id, status, ts)
            conn.execute(
                "UPDATE claims SET status=:status, attempts=0, next_retry_at=NULL, parked=0, error=NULL,"
                " last_seq=:seq, parts=parts+:parts, updated_at=:ts, last_checked_at=:ts, slug=COALESCE(:slug, slug),"
                " input_tokens=input_tokens+:it, output_tokens=output_tokens+:ot,"
                " model=CASE WHEN :model='' THEN model ELSE :model END,"
                " provider=CASE WHEN :provider='' THEN provider ELSE :provider END,"
                " source=COALESCE(:source, source) WHERE session_id=:sid",
                dict(status=status, seq=int(last_seq), parts=int(parts_inc), ts=ts, slug=slug, it=it, ot=ot)
                | dict(model=model, provider=provider, source=source, sid=session_id),
            )
            if status == "done":
                conn.execute("UPDATE pipeline SET pending_consolidation=1 WHERE id=1")
            return self._get(conn, session_id)

    def fail(
        self,
        session_id: str,
        error: object,
        now: datetime,
        retry_base_s: float,
        retry_limit: int,
        jitter: float = 0.1,
        provider: str = "",
        model: str = "",
    ) -> Claim:
        """attempts+1; next retry at now + base * 2**(attempts-1) * (1 + U[0, jitter));
        parked (no next retry) once attempts >= retry_limit. `provider`/`model` name the route
        that failed (a parked session resumes when that route works again: `unpark`)."""
        ts = _ts(now)
        with self._tx() as conn:
            c = self._get(conn, session_id)
            attempts = (c.attempts if c else 0) + 1
            parked = attempts >= retry_limit
            delay = retry_base_s * 2 ** (attempts - 1) * (1 + random.uniform(0, jitter) if jitter else 1)
            nxt = None if parked else _ts(_utc(now) + timedelta(seconds=delay))
            self._ensure(conn, session_id, "failed", ts)
            self._failed(conn, session_id, attempts, nxt, parked, _clean_error(error), ts, provider, model)
            return self._get(conn, session_id)

    @staticmethod
    def _failed(conn, session_id, attempts, next_at, parked, error, ts, provider="", model="") -> None:
        """Mark a claim failed; `provider` / `model` ("" = keep) name the route that failed."""
        conn.execute(
            "UPDATE claims SET status='failed', attempts=?, next_retry_at=?, parked=?, error=?,"
            " updated_at=?, provider=CASE WHEN ?='' THEN provider ELSE ? END,"
            " model=CASE WHEN ?='' THEN model ELSE ? END WHERE session_id=?",
            (attempts, next_at, int(parked), error, ts, provider, provider, model, model, session_id),
        )

    def parked(self) -> list[Claim]:
        """Failed claims past their retries: not retried until unparked."""
        rows = self._conn().execute("SELECT * FROM claims WHERE status='failed' AND parked=1 ORDER BY session_id")
        return [Claim.from_row(r) for r in rows.fetchall()]

    def unpark(self, now: datetime, provider: str | None = None, model: str | None = None) -> list[str]:
        """Parked sessions become due now with a fresh retry budget. With `provider`/`model`
        (a route that just worked), only the sessions parked on that route (or on an unknown
        route) resume. Returns their session ids."""
        where, args = "status='failed' AND parked=1", []
        for column, value in (("provider", provider), ("model", model)):
            if value is not None:
                where += f" AND ({column}='' OR {column}=?)"
                args.append(value)
        with self._tx() as conn:
            ids = [r["session_id"] for r in conn.execute(f"SELECT session_id FROM claims WHERE {where}", args)]
            sql = f"UPDATE claims SET parked=0, attempts=0, next_retry_at=?, updated_at=? WHERE {where}"
            conn.execute(sql, (_ts(now), _ts(now), *args))
        return ids

    def touch_checked(self, session_id: str, now: datetime) -> None:
        self._write("UPDATE claims SET last_checked_at=? WHERE session_id=?", (_ts(now), session_id))

    def recover_stale(self, now: datetime, stale_after_s: float = 1800, retry_limit: int | None = None) -> list[str]:
        """Running claims whose owner process is gone, or not renewed for stale_after_s, become
        failed (attempts+1, due now; parked when retry_limit is given and reached). Returns their
        session ids."""
        now = _utc(now)
        recovered: list[str] = []
        with self._tx() as conn:
            for r in conn.execute("SELECT * FROM claims WHERE status='running'").fetchall():
                c = Claim.from_row(r)
                if not c.recoverable(now, stale_after_s):
                    continue
                parked = retry_limit is not None and c.attempts + 1 >= retry_limit
                error = DEAD_OWNER_ERROR if owner_is_gone(c.owner) else STALE_ERROR
                self._failed(conn, c.session_id, c.attempts + 1, None if parked else _ts(now), parked, error, _ts(now))
                recovered.append(c.session_id)
        return recovered

    def forget(self, session_id: str) -> bool:
        return self._write("DELETE FROM claims WHERE session_id=?", (session_id,)).rowcount > 0

    def baseline(self, session_id: str, last_seq: int, now: datetime) -> Claim:
        """Give a legacy claim (already consolidated, no watermark) its watermark without
        re-extracting. A missing claim is recorded as done at that watermark."""
        ts = _ts(now)
        with self._tx() as conn:
            self._ensure(conn, session_id, "done", ts)
            conn.execute(
                "UPDATE claims SET last_seq=?, last_checked_at=?, updated_at=? WHERE session_id=?",
                (int(last_seq), ts, ts, session_id),
            )
            return self._get(conn, session_id)

    # -- pipeline globals -------------------------------------------------------------------
    def get_meta(self) -> PipelineMeta:
        row = self._conn().execute("SELECT * FROM pipeline WHERE id=1").fetchone()
        return from_row(PipelineMeta, row, flags=("pending_consolidation",))

    def _set_meta(self, sql: str, params: tuple) -> None:
        self._write(f"UPDATE pipeline SET {sql} WHERE id=1", params)

    def set_phase1_ran(self, now: datetime) -> None:
        self._set_meta("last_phase1_at=?", (_ts(now),))

    def set_pending(self, pending: bool) -> None:
        self._set_meta("pending_consolidation=?", (int(bool(pending)),))

    def record_phase2_success(self, now: datetime, outcome: str = "consolidated") -> None:
        self._set_meta(
            "last_phase2_at=?, phase2_error=NULL, phase2_failures=0, last_phase2_failure_at=NULL,"
            " pending_consolidation=0, last_phase2_outcome=?",
            (_ts(now), outcome),
        )

    def record_phase2_failure(self, error: object, now: datetime) -> None:
        """Consecutive failures +1, failed `now`; pending is kept; last_phase2_at (the last success) is kept."""
        self._set_meta(
            "phase2_error=?, phase2_failures=phase2_failures+1, last_phase2_failure_at=?, last_phase2_outcome='error'",
            (_clean_error(error), _ts(now)),
        )

    def record_phase2_outcome(self, outcome: str) -> None:
        """E.g. 'skipped: cooldown'. Changes nothing else."""
        self._set_meta("last_phase2_outcome=?", (outcome,))

    # -- overrides --------------------------------------------------------------------------
    def set_override(self, session_id: str, value: str | None) -> None:
        if value not in ("include", "exclude", None):
            raise ValueError(f"override must be 'include', 'exclude' or None, not {value!r}")
        if value is None:
            self._write("DELETE FROM overrides WHERE session_id=?", (session_id,))
        else:
            self._write(
                "INSERT INTO overrides (session_id, value) VALUES (?, ?)"
                " ON CONFLICT(session_id) DO UPDATE SET value=excluded.value",
                (session_id, value),
            )

    def overrides(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._conn().execute("SELECT session_id, value FROM overrides")}

    # -- usage (forgetting input) and retired summaries -------------------------------------
    def record_usage(self, path_key: str, now: datetime) -> None:
        self._write(
            "INSERT INTO usage (path_key, count, last_at) VALUES (?, 1, ?) ON CONFLICT(path_key)"
            " DO UPDATE SET count=count+1, last_at=MAX(last_at, excluded.last_at)",
            (path_key, _ts(now)),
        )

    def usage(self) -> dict[str, tuple[int, datetime]]:
        return {r[0]: (r[1], _dt(r[2])) for r in self._conn().execute("SELECT path_key, count, last_at FROM usage")}

    def mark_retired(self, slug: str, now: datetime) -> None:
        self._write(
            "INSERT INTO retired (slug, retired_at) VALUES (?, ?)"
            " ON CONFLICT(slug) DO UPDATE SET retired_at=excluded.retired_at",
            (slug, _ts(now)),
        )

    def unmark_retired(self, slug: str) -> None:
        self._write("DELETE FROM retired WHERE slug=?", (slug,))

    def retired(self) -> dict[str, datetime]:
        return {r[0]: _dt(r[1]) for r in self._conn().execute("SELECT slug, retired_at FROM retired")}
