"""Prefect servers this process starts, and how they die with it (even by SIGKILL):
`PrefectServer`, a real `prefect server start` on 127.0.0.1 with a parent-death signal, and
`tether_ephemeral_server()`, a watcher process for Prefect's temporary server (started by the
first client call when PREFECT_API_URL is unset), so a killed CLI run leaves no server.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import httpx

from dsh_memory.storage.state_schema import proc_start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the process that started it dies (even by SIGKILL)."""
    with suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# The watcher: PR_SET_PDEATHSIG makes the kernel signal it when its parent (the CLI) dies; it then
# stops the server (TERM, KILL after 5 s) if that pid still runs the same process (start time).
_TETHER = """
import ctypes, os, signal, sys, time
pid, started = int(sys.argv[1]), sys.argv[2]
def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19] == started
    except OSError:
        return False
def stop(*_):
    if alive():
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            if not alive():
                break
        else:
            os.kill(pid, signal.SIGKILL)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
if os.getppid() != int(sys.argv[3]):
    stop()
while alive():
    time.sleep(5)
"""


def tether(pid: int) -> subprocess.Popen | None:
    """Stop process `pid` when this process dies (Linux; a no-op elsewhere). Returns the watcher."""
    started = proc_start(pid)
    if started is None:
        return None
    return subprocess.Popen(
        [sys.executable, "-S", "-c", _TETHER, str(pid), started, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def tether_ephemeral_server() -> None:
    """Make Prefect's temporary server (started on the first API call when PREFECT_API_URL is
    unset) die with this process. Uses Prefect's documented singleton seam: the instance under
    `SubprocessASGIServer._instances[None]` is the one every internal call gets."""
    from prefect.server.api.server import SubprocessASGIServer

    tethered = _tethered_server_class()
    current = SubprocessASGIServer._instances.get(None)
    if isinstance(current, tethered) or (current is not None and current.running):
        return
    SubprocessASGIServer._instances.pop(None, None)
    tethered()  # registers itself under None (SubprocessASGIServer.__new__)


class PrefectServer:
    """A `prefect server start` child process with its own PREFECT_HOME (SQLite)."""

    def __init__(self, home: Path, port: int | None = None, ui: bool = False):
        self.home = Path(home)
        self.port = port or free_port()
        self.ui = ui
        self.proc: subprocess.Popen | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self, timeout: float = 180.0) -> PrefectServer:
        if self.proc and self.proc.poll() is None:
            return self  # already running (`with PrefectServer(home).start() as server:` enters it again)
        self.home.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_UI_ENABLED": "true" if self.ui else "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }
        env.pop("PREFECT_API_URL", None)
        # the flow runs' setting (180 s by default), not the server's
        env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", None)
        exe = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
        self._log = open(self.home / "server.log", "ab")
        self.proc = subprocess.Popen(
            [exe, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {self.proc.returncode}; see {self.home / 'server.log'}")
            with suppress(httpx.HTTPError):
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return self
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"prefect server did not become healthy within {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> PrefectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _OwnSession(subprocess.Popen):
    """A child in a session of its own (no signal to this one's process group reaches it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**kwargs, "start_new_session": True})


MAX_SERVER_LOG = 1 << 20  # bytes: past it, the next temporary server starts the log anew


def _server_log():
    """The temporary server's log, `temporary-server.log` in Prefect's home, opened to append (a
    new one past MAX_SERVER_LOG; nowhere when it cannot be written)."""
    from prefect.settings import get_current_settings

    path = Path(get_current_settings().home).expanduser() / "temporary-server.log"
    with suppress(OSError):
        return open(path, "wb" if path.is_file() and path.stat().st_size > MAX_SERVER_LOG else "ab")
    return open(os.devnull, "wb")


@functools.cache
def _tethered_server_class():
    from prefect.server.api.server import SubprocessASGIServer

    class TetheredServer(SubprocessASGIServer):
        """Prefect's ephemeral server plus a watcher that stops it if this process dies."""

        def _run_uvicorn_command(self):  # Prefect's spawn of the server process
            # In its own session: a terminal's Ctrl-C (SIGINT to the foreground process group)
            # must not stop it while this process, interrupted, still reports its flow runs'
            # end through it (Prefect's client would retry that for minutes). It stops at exit
            # (Prefect's atexit) or with the tether below. Tethered the moment it exists: the
            # server takes seconds to become healthy, and a kill in that window must not orphan it.
            # Its output (its logs; tracebacks of its shutdown when this process ends mid-flush)
            # goes to its log in Prefect's home, never onto this command's terminal.
            with _server_log() as log:
                popen = subprocess.Popen
                subprocess.Popen = functools.partial(_OwnSession, stdout=log, stderr=subprocess.STDOUT)
                try:
                    proc = super()._run_uvicorn_command()
                finally:
                    subprocess.Popen = popen
            self._untether()  # a retry on another port replaces the process
            self._tether = tether(proc.pid)
            return proc

        def stop(self) -> None:
            super().stop()
            self._untether()

        def _untether(self) -> None:
            watcher = getattr(self, "_tether", None)
            if watcher is not None:
                watcher.terminate()
                watcher.wait(timeout=5)
                self._tether = None

    return TetheredServer
