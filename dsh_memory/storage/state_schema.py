"""The state database's schema and its rows: ordered migrations, the connection setup, the
Claim / PipelineMeta records, timestamps, and who owns a running claim (`current_owner`,
`owner_is_gone`, `proc_start`).

Apart from `StateStore` (state.py, the only writer) because it is what the store is built from,
and the pipeline, the serve stack and the memory store read process owners and claims from here
without the store's queries.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory.errors import ConfigError, DshMemoryError

STALE_ERROR = "process died (stale running claim)"
DEAD_OWNER_ERROR = "the process that claimed it is gone (reclaimed)"
MAX_ERROR_CHARS = 4000

# Ordered, append-only. Never edit a shipped entry: add a new one.
MIGRATIONS: list[str] = [
    # v1: claims, pipeline globals, overrides
    """
    CREATE TABLE claims (
        session_id TEXT PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('running','done','noop','failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_retry_at TEXT,
        last_seq INTEGER NOT NULL DEFAULT -1,
        parts INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL,
        started_at TEXT,
        last_checked_at TEXT,
        error TEXT,
        slug TEXT,
        source TEXT,
        path TEXT
    );
    CREATE TABLE pipeline (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        last_phase1_at TEXT,
        last_phase2_at TEXT,
        phase2_error TEXT,
        phase2_failures INTEGER NOT NULL DEFAULT 0,
        pending_consolidation INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO pipeline (id) VALUES (1);
    CREATE TABLE overrides (
        session_id TEXT PRIMARY KEY,
        value TEXT NOT NULL CHECK (value IN ('include','exclude'))
    );
    """,
    # v2: forgetting input (read-path usage) and retired summaries
    """
    CREATE TABLE usage (path_key TEXT PRIMARY KEY, count INTEGER NOT NULL, last_at TEXT NOT NULL);
    CREATE TABLE retired (slug TEXT PRIMARY KEY, retired_at TEXT NOT NULL);
    """,
    # v3: token usage / model per claim, parking, last phase-2 outcome
    """
    ALTER TABLE claims ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE claims ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE claims ADD COLUMN model TEXT NOT NULL DEFAULT '';
    ALTER TABLE claims ADD COLUMN provider TEXT NOT NULL DEFAULT '';
    ALTER TABLE claims ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE pipeline ADD COLUMN last_phase2_outcome TEXT;
    CREATE INDEX claims_status ON claims (status);
    """,
    # v4: who holds a running claim (host:pid:process start), and the route of the last failure
    """
    ALTER TABLE claims ADD COLUMN owner TEXT;
    """,
    # v5: the debounce as data: each session's newest turn end (epoch seconds, as received) and
    # the newest one a debounced extraction run has handled (storage/turn_ends.py)
    """
    CREATE TABLE turn_ends (
        session_id TEXT PRIMARY KEY,
        ended_at REAL NOT NULL,
        handled_at REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX turn_ends_ended ON turn_ends (ended_at);
    """,
    # v6: this memory's own id (random, made once): Prefect run keys name it, so a memory made anew
    # (a wiped root, a second root on one Prefect server) is never taken for one it has seen
    """
    ALTER TABLE pipeline ADD COLUMN memory_id TEXT;
    UPDATE pipeline SET memory_id = lower(hex(randomblob(8)));
    """,
    # v7: when Phase 2 last failed: automatic runs back off from it after repeated failures
    """
    ALTER TABLE pipeline ADD COLUMN last_phase2_failure_at TEXT;
    """,
    # v8: a claim keeps its log's path redacted (a project folder is named after the cwd, so a key
    # in a cwd is in the path); the raw paths kept before go (forget finds logs through the readers)
    """
    UPDATE claims SET path = NULL WHERE path IS NOT NULL;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def proc_stat(pid: int) -> list[str]:
    """A process's /proc/PID/stat fields after its name (Linux; [] when it is gone): [1] is its
    parent's pid, [19] its start time in clock ticks since boot."""
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def proc_start(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (Linux /proc), None when it is gone."""
    fields = proc_stat(pid)
    return fields[19] if len(fields) > 19 else None


def current_owner() -> str:
    """This process as a claim owner: `host:pid:start` (the start time tells a reused pid apart)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{proc_start(pid) or '?'}"


def owner_is_gone(owner: str | None) -> bool:
    """True when `owner` was a process on this host that no longer runs. An owner on another host
    (a remote worker) or an unknown one is never declared gone: its claim ages out instead."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit() or start in ("", "?"):
        return False
    return proc_start(int(pid)) != start


def _utc(dt: datetime) -> datetime:
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a datetime, got {type(dt).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("naive datetime: pass a timezone-aware UTC datetime")
    return dt.astimezone(UTC)


def _ts(dt: datetime | None) -> str | None:
    return None if dt is None else _utc(dt).isoformat(timespec="microseconds")


def _dt(s: object) -> datetime | None:
    """A stored timestamp as a UTC datetime (naive ones are UTC). None when absent, and when it is
    not one (a hand edit, another tool: a number, bytes, text that is no ISO date, a date past
    year 9999 in UTC): one unreadable cell must not make every read of the database fail."""
    if not s or not isinstance(s, str):
        return None
    try:
        d = datetime.fromisoformat(s)
        return d.replace(tzinfo=UTC) if d.tzinfo is None else d.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _clean_error(error: object) -> str:
    from dsh_memory.transcript.redact import redact  # lazy; errors can quote request bodies

    # redacted, then cut: a secret the cut splits is no longer one the redactor can tell
    return redact(str(error)[: MAX_ERROR_CHARS * 4])[:MAX_ERROR_CHARS]


def _clean_path(path: str | None) -> str | None:
    """A session log's path as its claim keeps it: redacted. A DSH or Claude Code project folder is
    named after the session's cwd, so a key in the cwd is in the path (forget_project's guard finds
    the log again through the readers when a marker took part of it)."""
    from dsh_memory.transcript.redact import redact  # lazy, as in _clean_error

    return None if path is None else redact(path)


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A `BEGIN IMMEDIATE … COMMIT` transaction, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def apply_migrations(conn: sqlite3.Connection, migrations: list | None = None, target: int | None = None) -> int:
    """Apply pending migrations in order, all inside one IMMEDIATE transaction. Returns version."""
    migrations = MIGRATIONS if migrations is None else migrations
    target = len(migrations) if target is None else target
    with immediate(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(migrations):
            raise ConfigError(
                f"state database schema v{version} is newer than this dsh-memory (v{len(migrations)}): upgrade dsh-memory"
            )
        for i in range(version, target):
            for stmt in (s.strip() for s in migrations[i].split(";")):
                if stmt:
                    conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {i + 1}")
    return max(version, target)


# Failures that mean the file, not the code, is at fault: damaged pages, a schema a hand edit
# changed, a disk or permission failure, a lock held past the busy timeout.
_FILE_FAULTS = (
    "no such table",
    "no such column",
    "disk I/O error",
    "attempt to write a readonly",
    "unable to open",
    "database is locked",
)


def _cannot_use(db_path: object, exc: sqlite3.Error) -> DshMemoryError:
    return DshMemoryError(
        f"cannot use the state database {db_path} ({exc}): the memory root (DSH_MEMORY_ROOT) must be "
        "a writable directory and that file dsh-memory's intact SQLite database (move a damaged one aside)"
    )


def _guarded(method):
    """`method` of sqlite3.Cursor, raising a fault of the file (not of the code: a syntax error
    stays itself) as one DshMemoryError naming the file instead of a sqlite3 traceback."""

    def call(self, *args):
        try:
            return method(self, *args)
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError or (
                isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(_FILE_FAULTS)
            ):
                raise _cannot_use(self.connection.db_path, exc) from None
            raise

    return call


class _Cursor(sqlite3.Cursor):
    """A cursor whose statements and row reads report a damaged database as one clear error:
    damage past the first page shows only when a query reaches it, long after the open."""

    execute = _guarded(sqlite3.Cursor.execute)
    executemany = _guarded(sqlite3.Cursor.executemany)
    fetchone = _guarded(sqlite3.Cursor.fetchone)
    fetchmany = _guarded(sqlite3.Cursor.fetchmany)
    fetchall = _guarded(sqlite3.Cursor.fetchall)
    __next__ = _guarded(sqlite3.Cursor.__next__)


class _Connection(sqlite3.Connection):
    """A connection whose cursors, and those its `execute` / `executemany` make, are `_Cursor`s."""

    db_path: Path

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql: str, parameters=()):
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters):
        return self.cursor().executemany(sql, parameters)


def connect(db_path: Path, timeout_s: float = 30.0) -> sqlite3.Connection:
    db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(
            str(db_path), timeout=timeout_s, isolation_level=None, check_same_thread=False, factory=_Connection
        )
        conn.db_path = db_path
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.DatabaseError as exc:  # not a database, a directory, a read-only memory root
        raise _cannot_use(db_path, exc) from None
    if mode.lower() != "wal":
        # Switching to WAL ignores the busy timeout ("database is locked" at once when several
        # processes create the DB together): serialize the one-time switch with a file lock.
        from filelock import FileLock

        with FileLock(str(db_path) + ".init.lock", timeout=timeout_s):
            conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


@dataclass
class Claim:
    session_id: str
    status: str  # 'running' | 'done' | 'noop' | 'failed'
    attempts: int
    next_retry_at: datetime | None
    last_seq: int  # watermark: highest seq already extracted; -1 = none
    parts: int
    updated_at: datetime
    started_at: datetime | None
    last_checked_at: datetime | None
    error: str | None
    slug: str | None
    source: str | None
    path: str | None
    input_tokens: int
    output_tokens: int
    model: str
    provider: str
    parked: bool
    owner: str | None = None

    @classmethod
    def from_row(cls, r: sqlite3.Row) -> Claim:
        return from_row(cls, r, flags=("parked",))

    def fresh(self, now: datetime, stale_after_s: float) -> bool:
        """Started (or renewed) less than `stale_after_s` ago. A start as far ahead of `now` (a
        clock that was ahead, then set back) is not fresh: else the claim would hold its session
        until the clock reached it. Less ahead (hosts' clocks apart) still is."""
        return self.started_at is not None and abs((now - self.started_at).total_seconds()) < stale_after_s

    def recoverable(self, now: datetime, stale_after_s: float) -> bool:
        """A running claim another run may take over: not renewed for `stale_after_s`, or its owner is gone."""
        return not self.fresh(now, stale_after_s) or owner_is_gone(self.owner)

    @property
    def shown_status(self) -> str:
        """The status as `status` counts it: a failed claim past its retries is 'parked'."""
        return "parked" if self.status == "failed" and self.parked else self.status


@dataclass
class PipelineMeta:
    last_phase1_at: datetime | None
    last_phase2_at: datetime | None
    phase2_error: str | None
    phase2_failures: int  # consecutive
    pending_consolidation: bool
    last_phase2_outcome: str | None
    memory_id: str | None
    last_phase2_failure_at: datetime | None  # the newest of the consecutive failures


def _int(value: object, default: int) -> int:
    """An integer column's value; `default` (the column's) when it is not one (a hand edit)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def from_row(cls, r: sqlite3.Row, flags: tuple[str, ...] = ()):
    """A record (dataclass `cls`) from its row: `*_at` columns as UTC datetimes, `flags` as bools,
    `int` fields as ints (a value that is not one reads as the column's default: -1 for
    `last_seq`, else 0), so a hand-edited cell cannot break the sums and comparisons of readers."""

    def value(k: str, kind: object):
        v = r[k]
        if k.endswith("_at"):
            return _dt(v)
        if k in flags:
            return bool(v)
        return _int(v, -1 if k == "last_seq" else 0) if kind == "int" else v

    return cls(**{k: value(k, f.type) for k, f in cls.__dataclass_fields__.items()})
