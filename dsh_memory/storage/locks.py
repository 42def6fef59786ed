"""Single-flight locks for the pipeline phases, released by the kernel: an exclusive `flock` on
`<memory root>/.state/<phase>.lock` (the `filelock` package, native Unix backend only: no "soft"
fallback, whose marker files survive a killed process), so a crash can never wedge the pipeline
(unlike a Prefect concurrency slot in ephemeral mode, DESIGN.md). Each `phase_lock` call opens its
own descriptor: exclusive across threads of one process as well as across processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from dsh_memory.errors import DshMemoryError
from dsh_memory.storage.store_format import STATE_DIRNAME

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
# A probe (`is_running`) holds the lock for a few microseconds. A real acquirer polls this long
# before giving up, so a concurrent probe never makes a genuine run skip. Still "non-blocking"
# from the caller's point of view: a real holder makes the call fail well under a second.
PROBE_GRACE_SECONDS = 0.2
_POLL_SECONDS = 0.02


class AlreadyRunning(DshMemoryError):
    """Another thread or process holds this phase's lock."""

    exit_code = 5
    http_status = 409
    code = "already_running"

    def __init__(self, name: str, message: str | None = None):
        self.name = name
        super().__init__(message or f"{name} is already running")


def lock_path(memory_root: Path | str, name: str) -> Path:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"invalid lock name {name!r}")
    return Path(memory_root).expanduser() / STATE_DIRNAME / f"{name}.lock"


def _file_lock(path: Path):
    from filelock import FileLock

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # preserve_lock_file: never unlink on release (unlinking a flock file races with waiters);
    # fallback_to_soft=False: a soft lock is not released by the kernel, so refuse it.
    return FileLock(str(path), timeout=0, thread_local=False, preserve_lock_file=True, fallback_to_soft=False)


@contextmanager
def phase_lock(memory_root: Path | str, name: str) -> Iterator[Path]:
    """Hold `<root>/.state/<name>.lock` exclusively for the block (yields its path); raise
    AlreadyRunning if taken. Never waits for a real holder, only PROBE_GRACE_SECONDS."""
    from filelock import Timeout

    path = lock_path(memory_root, name)
    lock = _file_lock(path)
    try:
        held = lock.acquire(timeout=PROBE_GRACE_SECONDS, poll_interval=_POLL_SECONDS)
    except Timeout:
        raise AlreadyRunning(name) from None
    with held:  # released on the way out, whatever happens in the block
        # best effort: the holder's pid in the lock file (diagnostics only, never trusted)
        with suppress(OSError), open(path, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
        yield path


def is_running(memory_root: Path | str, name: str) -> bool:
    """True when some thread or process currently holds the lock. Never creates the root."""
    from filelock import Timeout

    path = lock_path(memory_root, name)
    if not path.exists():
        return False
    lock = _file_lock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    except OSError:
        return False
    lock.release()
    return False
