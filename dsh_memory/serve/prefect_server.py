"""Start and stop a real `prefect server start` on 127.0.0.1 (tests, benchmarks, e2e checks)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the process that started it dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def server_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", None)  # heartbeats off (unset = none)
    return env


class PrefectServer:
    """A `prefect server start` child process with its own PREFECT_HOME (SQLite)."""

    def __init__(self, home: Path, port: int | None = None, ui: bool = False, die_with_parent: bool = True):
        self.home = Path(home)
        self.port = port or free_port()
        self.ui = ui
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self, timeout: float = 180.0) -> PrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        env = server_env(self.home)
        if self.ui:
            env["PREFECT_SERVER_UI_ENABLED"] = "true"
        exe = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
        self._log = open(self.home / "server.log", "ab")
        self.proc = subprocess.Popen(
            [exe, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {self.proc.returncode}; see {self.home / 'server.log'}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"prefect server did not become healthy within {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> PrefectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
