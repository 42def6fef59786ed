"""One `dsh-memory serve` per Prefect home, and where it is (docs/running.md, "One process").

`serve` holds a kernel-released lock on `<prefect home>.stack.lock` while it runs and writes
`<prefect home>.stack.json` beside it; other commands find the running stack through that file
when PREFECT_API_URL is unset, and ignore it once its pid no longer runs the process that wrote it.
Only the standard library: `notify` reads this on every agent turn.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory.settings_loader import shown_url
from dsh_memory.storage.locks import AlreadyRunning
from dsh_memory.storage.state_schema import proc_start

PREFECT_HOME_ENV = "DSH_MEMORY_PREFECT_HOME"


def default_prefect_home() -> Path:
    """The Prefect home `serve` starts its server with: $DSH_MEMORY_PREFECT_HOME, or
    ~/.dsh-memory/prefect."""
    return Path(os.environ.get(PREFECT_HOME_ENV) or Path.home() / ".dsh-memory" / "prefect").expanduser()


def state_path(prefect_home: Path | None = None) -> Path:
    home = prefect_home or default_prefect_home()
    return home.with_name(home.name + ".stack.json")


def lock_path(prefect_home: Path | None = None) -> Path:
    return state_path(prefect_home).with_suffix(".lock")


def http_url(host: str, port: int) -> str:
    """`http://host:port`, an IPv6 address in brackets (`--host ::1`)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass
class StackInfo:
    """What a running `serve` publishes about itself."""

    pid: int
    pid_start: str  # the process's start time (/proc): a reused pid is not this stack
    prefect_home: str
    api_url: str  # the Prefect API the stack uses (its own server, or the one it attached to)
    ui_url: str
    prefect_port: int | None  # the port of the server it started (None when attached)
    http_host: str
    http_port: int
    started_at: str

    @property
    def http_url(self) -> str:
        return http_url(self.http_host, self.http_port)

    @property
    def hook_url(self) -> str:
        return f"{self.http_url}/hooks/turn-end"

    def where(self) -> str:
        return f"pid {self.pid}, Prefect UI {self.ui_url}, memory API {self.http_url}"


class StackAlreadyRunning(AlreadyRunning):
    """A second `serve` on a Prefect home that already has one (exit 5, like any lock holder)."""

    def __init__(self, prefect_home: Path, info: StackInfo | None):
        where = f" ({info.where()})" if info else ""
        super().__init__(
            "serve",
            f"dsh-memory serve is already running for Prefect home {prefect_home}{where}: use that one "
            f"(`dsh-memory status` shows it), stop it first, or set {PREFECT_HOME_ENV} to another folder",
        )


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot), None when it does not run.
    Without /proc (not Linux): "" for any live pid."""
    if (started := proc_start(pid)) is not None or os.path.exists("/proc/self/stat"):
        return started  # Linux
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return ""


def read_state(prefect_home: Path | None = None) -> StackInfo | None:
    """The state file as written, or None (absent, unreadable, another format)."""
    try:
        data = json.loads(state_path(prefect_home).read_text())
        return StackInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def running_stack(prefect_home: Path | None = None) -> StackInfo | None:
    """The stack serving this Prefect home, or None: no state file, or its process is gone."""
    info = read_state(prefect_home)
    return info if info is not None and process_start(info.pid) == info.pid_start else None


class StackLock:
    """Held by `serve` for its whole life: `acquire()` raises StackAlreadyRunning when another
    process holds it. `publish()` writes the state file; `release()` removes it and unlocks."""

    def __init__(self, prefect_home: Path | None = None):
        self.prefect_home = prefect_home or default_prefect_home()
        self._lock = None

    def acquire(self) -> StackLock:
        from filelock import FileLock, Timeout

        path = lock_path(self.prefect_home)
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=0, thread_local=False, preserve_lock_file=True, fallback_to_soft=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise StackAlreadyRunning(self.prefect_home, running_stack(self.prefect_home)) from None
        self._lock = lock
        return self

    def publish(self, info: StackInfo) -> None:
        """Write the state file atomically (only the lock holder writes it)."""
        path = state_path(self.prefect_home)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(info), indent=2) + "\n")
        os.replace(tmp, path)

    def release(self) -> None:
        if self._lock is None:
            return
        try:
            info = read_state(self.prefect_home)
            if info is not None and info.pid == os.getpid():
                state_path(self.prefect_home).unlink(missing_ok=True)
        finally:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> StackLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def info_for_this_process(
    prefect_home: Path, api_url: str, prefect_port: int | None, http_host: str, http_port: int
) -> StackInfo:
    pid = os.getpid()
    return StackInfo(
        pid=pid,
        pid_start=process_start(pid) or "",
        prefect_home=str(prefect_home),
        api_url=api_url,
        ui_url=shown_url(api_url).removesuffix("/api"),  # shown: a basic-auth password is no part of it
        prefect_port=prefect_port,
        http_host=http_host,
        http_port=http_port,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def use_running_stack() -> StackInfo | None:
    """When PREFECT_API_URL is unset and a stack runs, point this process (and the flow runs
    and Prefect clients it starts) at the stack's Prefect API. Call before prefect is imported."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    info = running_stack()
    if info is not None:
        os.environ["PREFECT_API_URL"] = info.api_url
    return info
