"""The stack side of bench/bench_storm.py: `dsh-memory serve` in a subprocess, its process
tree sampled (count, RSS), and what the bench reads back from it (search, runs, events)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

TRIGGER = "extract-session on turn end (wakes the debounced run)"  # prefect.yaml


def stack_sample(pid: int) -> tuple[int, int]:
    """(processes, RSS bytes) of `pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, procs, rss = [pid], 0, 0
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
            procs += 1
        except OSError:
            pass
        todo += children.get(p, [])
    return procs, rss


class Sampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop, self.peak_procs, self.peak_rss = pid, threading.Event(), 0, 0

    def run(self) -> None:
        while not self.stop.wait(0.5):
            procs, rss = stack_sample(self.pid)
            self.peak_procs, self.peak_rss = max(self.peak_procs, procs), max(self.peak_rss, rss)


class Stack:
    """`dsh-memory serve` in a subprocess: its own Prefect server, or attached to `api_url`."""

    def __init__(self, work: Path, fake_url: str, debounce: int, api_url: str | None, extra_env: dict | None = None):
        self.port = _free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_API_URL"))}
        self.env.update(
            HOME=str(work / "home"),
            DSH_HOME=str(work / "dsh"),
            CODEX_HOME=str(work / "none"),
            CLAUDE_CONFIG_DIR=str(work / "none"),
            DSH_MEMORY_ROOT=str(work / "memories"),
            DSH_MEMORY_PREFECT_HOME=str(work / "prefect-home"),
            DSH_MEMORY_IGNORE_BLOCKS="1",
            DSH_MEMORY_BASE_URL=fake_url,
            DSH_MEMORY_API_KEY="bench",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_DEBOUNCE_SECONDS=str(debounce),
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
            PREFECT_LOGGING_LEVEL="WARNING",
            **(extra_env or {}),
        )
        if api_url:
            self.env["PREFECT_API_URL"] = api_url
        (work / "home").mkdir(exist_ok=True)
        self.root = work / "memories"
        self.log_path = work / "serve.log"
        self.base = f"http://127.0.0.1:{self.port}"
        self.prefect_port = _free_port()

    def start(self, timeout: float = 300) -> None:
        self.log = open(self.log_path, "w")
        argv = [sys.executable, "-m", "dsh_memory.cli", "serve", "--port", str(self.port)]
        argv += ["--prefect-port", str(self.prefect_port), "--no-boot-catch-up"]
        since = datetime.now(UTC)
        self.proc = subprocess.Popen(argv, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("serve exited: " + self.log_path.read_text()[-3000:])
            if "serving 3 deployments" in self.log_path.read_text():
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("serve did not come up: " + self.log_path.read_text()[-3000:])
        from dsh_memory.serve.stack_state import running_stack

        info = running_stack(Path(self.env["DSH_MEMORY_PREFECT_HOME"]))
        self.api_url = info.api_url
        self._wait_registered(since, deadline)

    def _wait_registered(self, since: datetime, deadline: float) -> None:
        """Return once this serve has registered its turn-end trigger and its last deployment
        (consolidate; `serve()` registers them in prefect.yaml's order, after the log line): a turn
        end then wakes a run. Created/updated after `since`: an attached server holds other stacks'."""

        def fresh(items: list[dict], field: str) -> set[str]:
            return {i["name"] for i in items if datetime.fromisoformat(i[field]) >= since}

        while True:
            automations = httpx.post(f"{self.api_url}/automations/filter", json={}, timeout=30).json()
            body = {"deployments": {"name": {"any_": ["consolidate"]}}}
            deployments = httpx.post(f"{self.api_url}/deployments/filter", json=body, timeout=30).json()
            if TRIGGER in fresh(automations, "created") and "consolidate" in fresh(deployments, "updated"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("serve registered no turn-end trigger: " + self.log_path.read_text()[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def searchable(self, token: str) -> bool:
        body = {"method": "search", "params": {"queries": [token]}}
        r = httpx.post(self.base + "/dsh-memory/rpc", json=body, timeout=30)
        matches = r.json().get("result", {}).get("matches") or [] if r.status_code == 200 else []
        return any(token in (m.get("content") or "") for m in matches)

    def runs(self, flow: str) -> list[dict]:
        out, offset = [], 0
        while True:
            body = {"flows": {"name": {"any_": [flow]}}, "limit": 200, "offset": offset}
            page = httpx.post(f"{self.api_url}/flow_runs/filter", json=body, timeout=30).json()
            out += page
            if len(page) < 200:
                return out
            offset += 200

    def events_received(self) -> int:
        """dsh.turn.ended events the Prefect server holds (every POST the receiver made)."""
        body = {"filter": {"event": {"name": ["dsh.turn.ended"]}}, "time_unit": "day", "time_interval": 1.0}
        r = httpx.post(f"{self.api_url}/events/count-by/event", json=body, timeout=60)
        return sum(c["count"] for c in r.json()) if r.status_code == 200 else -1

    def last_turn_end_event(self, session_id: str) -> dict | None:
        """The last dsh.turn.ended event Prefect holds for a session (`occurred`, `received`…)."""
        flt = {"filter": {"event": {"name": ["dsh.turn.ended"]}, "any_resource": {"id": [f"dsh.session.{session_id}"]}}}
        flt["filter"]["order"] = "DESC"
        flt["limit"] = 1
        events = httpx.post(f"{self.api_url}/events/filter", json=flt, timeout=30).json().get("events") or []
        return events[0] if events else None

    def events(self, name: str) -> list[dict]:
        """Every event of this name from the last day (Prefect pages them)."""
        body = {"filter": {"event": {"name": [name]}, "order": "ASC"}, "limit": 50}
        page = httpx.post(f"{self.api_url}/events/filter", json=body, timeout=30).json()
        out = list(page.get("events") or [])
        while page.get("next_page"):
            page = httpx.get(page["next_page"], timeout=30).json()
            out += page.get("events") or []
        return out


def _free_port() -> int:
    from dsh_memory.serve.prefect_server import free_port

    return free_port()
