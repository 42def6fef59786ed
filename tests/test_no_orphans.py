"""No orphans: a CLI run killed with SIGKILL takes its temporary Prefect server with it.

`extract --all` with no PREFECT_API_URL starts Prefect's temporary server (a uvicorn child);
the run is killed -9 while the model is answering; the server must be gone within seconds
instead of living on, reparented to PID 1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parents[1] / "dsh_memory" / "samples" / "dsh"


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigkill_of_a_cli_run_leaves_no_prefect_server(tmp_path, new_prefect_home):
    new_prefect_home(tmp_path / "prefect")  # a migrated database: no migration to wait for
    dsh = tmp_path / "dsh"
    shutil.copytree(SAMPLES, dsh)
    old = time.time() - 3600
    for p in dsh.rglob("*"):
        os.utime(p, (old, old))
    with FakeOpenAIServer(latency_seconds=600) as fake:  # every model call hangs: the run is mid-flight
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_"))}
        env.update(
            HOME=str(tmp_path),
            PREFECT_HOME=str(tmp_path / "prefect"),
            DSH_HOME=str(dsh),
            CODEX_HOME=str(tmp_path / "none"),
            CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
            DSH_MEMORY_ROOT=str(tmp_path / "mem"),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="k",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "extract", "--all"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = None
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None:
                servers = [c for c in _children(proc.pid) if "uvicorn" in _cmdline(c)]
                if servers and fake.requests:
                    server = servers[0]
                    break
                time.sleep(0.1)
            assert server is not None, "no temporary Prefect server and model call seen"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            deadline = time.monotonic() + 20
            while _alive(server) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _alive(server), f"orphaned Prefect server {server}: {_cmdline(server)}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if server is not None and _alive(server):
                os.kill(server, signal.SIGKILL)
