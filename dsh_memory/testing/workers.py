"""Real `prefect worker start` processes for tests and benches, each in its own process group
(stopped by its id)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def worker_env(base: dict[str, str], api_url: str, **extra: str) -> dict[str, str]:
    """`base` pointed at the server at `api_url`, polling every second; `extra` overrides."""
    env = {**base, "PREFECT_API_URL": api_url, "PREFECT_LOGGING_LEVEL": "INFO"}
    env["PREFECT_WORKER_QUERY_SECONDS"] = "1"  # default 10: runs would wait for the next poll
    return {**env, **extra}


@contextmanager
def running_workers(specs: list[tuple[str, str, dict[str, str]]], logs: Path, limit: int = 1) -> Iterator[list]:
    """Start one process worker per (name, pool, env); stop them all on exit. Their output goes
    to `logs/<name>.log` (a failing test shows it)."""
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for name, pool, env in specs:
            out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
            cmd = [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process"]
            cmd += ["--name", name, "--limit", str(limit)]
            procs.append(
                (
                    subprocess.Popen(
                        cmd,
                        env=env,
                        cwd=env.get("HOME") or str(Path.cwd()),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    ),
                    out,
                )
            )
        yield [p for p, _ in procs]
    finally:
        for p, _ in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p, out in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            out.close()


def worker_logs(logs: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(logs.glob("*.log")))


def wait_for_workers(pool: str, names: list[str], procs: list, timeout: float = 180.0) -> None:
    """Return once every named worker has said hello to the server for `pool` (under load a
    worker takes many seconds to start: runs scheduled before would all go to the first ones).
    Raises RuntimeError when one exits or the time is up."""
    import time

    from prefect import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            dead = [p.args for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a worker exited: {dead[0]}")
            online = {w.name for w in client.read_workers_for_work_pool(pool)}
            if set(names) <= online:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers not online after {timeout:.0f}s: {sorted(set(names) - online)}")
            time.sleep(0.5)
