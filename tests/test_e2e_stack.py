"""End to end: `dsh-memory serve` on a real Prefect server, turn-end webhooks → debounced runs.

20 turn-ends for 3 sessions within two thirds of the debounce (5 s): each session extracted
exactly once, by a few `extract-session/due` runs (not one per session), one consolidation, the
memory files written, `dsh-memory status` reporting them; every child stopped.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from dsh_memory.serve.prefect_server import free_port
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_api")]

# A session is due once its newest turn end is this old. The 20 turn ends (0.1 s apart) must all be
# in within two thirds of it, so they fall in one debounce window.
DEBOUNCE = 5
SESSIONS = {
    "3b8f2c1e-5a7d-4e29-9c41-7d2e8f6a1b03": "--home-alice-src-invoice-api--",
    "9d4e6a2b-1c3f-4b8e-a5d7-2f1e0c9b8a64": "--home-alice-src-invoice-api--",
    "5e8b2d0f-3c7a-4f4e-9b6d-0a2f8c4e7d53": "--home-alice-src-invoice-api--",
}


def _llm(request: dict) -> Reply:
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool(
            {
                "memory_md": "# Memory\n\n## invoice-api\n- Use `uv run pytest`.\n",
                "memory_summary_md": "v1\n- invoice-api: use uv run (see MEMORY.md)\n",
            }
        )
    return Reply.tool(
        {
            "raw_memory": "- The user runs tests with `uv run pytest`.",
            "rollout_summary": "Worked on invoice-api.",
            "rollout_slug": "invoice-api-work",
        }
    )


def _flow_runs(api_url: str, flow_name: str, since: datetime, after: str = "start_time") -> list[dict]:
    """This stack's runs of `flow_name` whose `after` time (start_time, expected_start_time) is past
    `since`: serve's deployment of that name (the suite's server holds other tests' deployments of
    the same flows)."""
    body = {
        "flows": {"name": {"any_": [flow_name]}},
        "deployments": {"name": {"any_": [flow_name]}},
        "flow_runs": {after: {"after_": since.isoformat()}},
        "limit": 100,
    }
    r = httpx.post(f"{api_url}/flow_runs/filter", json=body, timeout=10)
    r.raise_for_status()
    return r.json()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


TRIGGER = "extract-session on turn end (wakes the debounced run)"


def _wait_for_trigger(api_url: str, since: datetime, deadline: float) -> None:
    """Return once serve has created its turn-end automation (after `since`): from then on a turn
    end's event wakes a run (the server loads an automation as it commits it)."""
    while True:
        automations = httpx.post(f"{api_url}/automations/filter", json={}, timeout=10).json()
        if any(a["name"] == TRIGGER and datetime.fromisoformat(a["created"]) >= since for a in automations):
            return
        assert time.monotonic() < deadline, "serve registered no turn-end trigger"
        time.sleep(0.2)


def _settled(api_url: str, since: datetime, deadline: float) -> list[dict]:
    """This stack's extract-session runs once none that is due is still waiting or running (the
    interval schedule's future runs apart)."""
    while True:
        now = datetime.now(UTC).isoformat()
        runs = [
            r
            for r in _flow_runs(api_url, "extract-session", since, "expected_start_time")
            if r["expected_start_time"] <= now
        ]
        if all(r["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for r in runs):
            return runs
        assert time.monotonic() < deadline, [(r["name"], r["state"]["type"]) for r in runs]
        time.sleep(0.25)


def test_serve_extracts_each_quiet_session_once_in_one_debounced_run(prefect_api, tmp_path, fixtures_dir):
    dsh_home = tmp_path / "dsh"
    for sid, project in SESSIONS.items():
        src = fixtures_dir / "dsh" / "plain" / "sessions" / project / sid
        shutil.copytree(src, dsh_home / "sessions" / project / sid)
    root = tmp_path / "memories"
    port = free_port()
    since = datetime.now(UTC)
    with FakeOpenAIServer(handler=_llm) as fake:
        env = dict(os.environ)
        env.update(
            HOME=str(tmp_path),
            DSH_HOME=str(dsh_home),
            CODEX_HOME=str(tmp_path / "none"),
            CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
            DSH_MEMORY_ROOT=str(root),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="test-key",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_DEBOUNCE_SECONDS=str(DEBOUNCE),
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
            PREFECT_API_URL=prefect_api,
            PREFECT_RUNNER_POLL_FREQUENCY="2",
        )
        log = open(tmp_path / "serve.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "serve", "--port", str(port), "--no-boot-catch-up"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            hook = f"http://127.0.0.1:{port}/hooks/turn-end"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            else:
                pytest.fail("serve did not come up: " + (tmp_path / "serve.log").read_text()[-3000:])
            _wait_for_trigger(prefect_api, since, deadline=time.monotonic() + 120)
            ids = list(SESSIONS)
            posted: dict[str, list[float]] = {}
            with httpx.Client(timeout=5) as client:  # one connection: the posts' time is the receiver's
                for i in range(20):
                    sid = ids[i % 3]
                    body = {
                        "sessionId": sid,
                        "turn": i // 3 + 1,
                        "reason": {"kind": "completed"},
                        "seq": i,
                        "header": {"cwd": "/home/alice/src/invoice-api", "origin": "user", "delegationDepth": 0},
                    }
                    r = client.post(hook, json=body)
                    assert r.status_code == 202, r.text
                    posted.setdefault(sid, []).append(time.monotonic())
                    time.sleep(0.1)
            # The premise of "once each": no session went quiet for a debounce between two of its
            # turn ends (a post would have to take seconds; then a second extraction is right).
            gaps = [b - a for times in posted.values() for a, b in itertools.pairwise(times)]
            assert max(gaps) < DEBOUNCE, f"a session went quiet mid-storm: gaps {gaps}"

            def completed(name):
                return [r for r in _flow_runs(prefect_api, name, since) if r["state"]["type"] == "COMPLETED"]

            def extractions():
                return [q for q in fake.requests if "memory_save" in json.dumps(q.get("tools"))]

            def consolidations():
                return [q for q in fake.requests if "memory_write" in json.dumps(q.get("tools"))]

            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:  # (another test's stack may leave a consolidate run too)
                summaries = len(list((root / "rollout_summaries").glob("*.md")))
                if summaries >= 3 and consolidations() and completed("consolidate"):
                    break
                time.sleep(0.25)
            settled = _settled(prefect_api, since, deadline=time.monotonic() + 120)
            # One debounced run extracted the three sessions, once each; the runs are few (the
            # trigger's wake-up, the due run it scheduled), not one per session, and none failed.
            assert len(extractions()) == 3, [q.get("messages", [{}])[-1] for q in extractions()]
            assert {r["state"]["type"] for r in settled} == {"COMPLETED"}, [(r["name"], r["state"]) for r in settled]
            assert 1 <= len(settled) <= 5, [r["name"] for r in settled]
            assert {r["name"] for r in settled} == {"extract-session/due"}
            automations = httpx.post(f"{prefect_api}/automations/filter", json={}, timeout=10).json()
            assert TRIGGER in {a["name"] for a in automations}
            assert len(consolidations()) == 1, "exactly one consolidation reached the model"
            assert (root / "MEMORY.md").is_file()
            assert (root / "memory_summary.md").read_text().startswith("v1\n")
            assert len(list((root / "rollout_summaries").glob("*.md"))) == 3

            status = subprocess.run(
                [sys.executable, "-m", "dsh_memory.cli", "status", "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert status.returncode == 0, status.stderr
            data = json.loads(status.stdout)
            assert data["local"]["counts"]["done"] == 3
            assert data["server"]["available"] is True
            flows = {r["flow"] for r in data["server"]["last_runs"]}
            assert {"extract-session", "consolidate"} <= flows
        finally:
            children = _children(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                pytest.fail("serve did not stop on SIGTERM")
            log.close()
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text().lower()


# ---- one stack per Prefect home -------------------------------------------------------------


def _serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "CODEX_", "CLAUDE_", "PREFECT_API_URL"))}
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp_path / "home"),
        DSH_HOME=str(tmp_path / "no-dsh"),
        CODEX_HOME=str(tmp_path / "none"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
        DSH_MEMORY_ROOT=str(tmp_path / "memories"),
        DSH_MEMORY_PREFECT_HOME=str(tmp_path / "prefect-home"),
        DSH_MEMORY_IGNORE_BLOCKS="1",
        PREFECT_RUNNER_POLL_FREQUENCY="2",
    )
    env.update(extra)
    return env


def _dsh_memory(args: list[str], env: dict[str, str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", *args], env=env, capture_output=True, text=True, timeout=timeout, **kw
    )


def _wait_healthy(port: int, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve exited: " + log_path.read_text()[-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail("serve did not come up: " + log_path.read_text()[-3000:])


def _wait_published(port: int, proc: subprocess.Popen, log_path: Path, home: Path):
    """serve answers on `port` and has published its state in `home`: that state (None if not)."""
    from dsh_memory.serve.stack_state import running_stack

    _wait_healthy(port, proc, log_path)
    deadline = time.monotonic() + 30
    while running_stack(home) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return running_stack(home)


def test_one_serve_per_prefect_home_and_the_cli_finds_it(prefect_api, tmp_path):
    from dsh_memory.serve.stack_state import StackLock, lock_path, state_path

    home = tmp_path / "prefect-home"
    port = free_port()
    env = _serve_env(tmp_path)
    log_path = tmp_path / "serve1.log"
    log = open(log_path, "w")
    # The first stack attaches to the test server (no second Prefect server to migrate).
    first = subprocess.Popen(
        [sys.executable, "-m", "dsh_memory.cli", "serve", "--port", str(port), "--no-boot-catch-up"],
        env={**env, "PREFECT_API_URL": prefect_api},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        info = _wait_published(port, first, log_path, home)
        assert info is not None and info.pid == first.pid, state_path(home)
        assert (info.api_url, info.http_port) == (prefect_api, port)

        # A second serve on the same home — no PREFECT_API_URL, another HTTP port — refuses at
        # once with one line saying where the first one is, and starts nothing.
        second = _dsh_memory(["serve", "--port", str(free_port()), "--no-boot-catch-up"], env)
        assert second.returncode == 5, second.stderr
        (line,) = second.stderr.strip().splitlines()
        assert line.startswith(f"error: dsh-memory serve is already running for Prefect home {home}")
        assert f"pid {first.pid}" in line and f"memory API http://127.0.0.1:{port}" in line
        assert not home.exists()  # no Prefect server was started on that home
        assert first.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200

        # Another process, PREFECT_API_URL unset: status finds the stack and its Prefect API.
        status = _dsh_memory(["status", "--json"], env)
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert data["stack"]["pid"] == first.pid and data["stack"]["http_port"] == port
        assert data["server"]["available"] is True and data["server"]["api_url"] == prefect_api
        text = _dsh_memory(["status"], env)
        assert f"dsh-memory serve running (pid {first.pid}" in text.stdout

        # settings (and the read commands, through the same resolution) use the stack's Prefect API.
        shown = _dsh_memory(
            ["settings", "show", "--json"], {k: v for k, v in env.items() if k != "DSH_MEMORY_IGNORE_BLOCKS"}
        )
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["prefect_api_url"] == prefect_api

        # notify without --url reaches the stack's receiver (not the default port).
        body = {
            "sessionId": "3b8f2c1e-5a7d-4e29-9c41-7d2e8f6a1b03",
            "turn": 1,
            "reason": {"kind": "completed"},
            "seq": 1,
            "header": {"cwd": "/home/alice/src/invoice-api", "origin": "user", "delegationDepth": 0},
        }
        sent = _dsh_memory(["notify", "--kind", "dsh"], env, input=json.dumps(body))
        assert (sent.returncode, sent.stderr) == (0, ""), sent.stderr  # delivered: nothing to say
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(timeout=60)
        except subprocess.TimeoutExpired:
            first.kill()
            pytest.fail("serve did not stop on SIGTERM")
        log.close()
    # A clean stop removes the state file and frees the home for the next serve.
    assert not state_path(home).exists() and lock_path(home).exists()
    with StackLock(home):
        pass


def test_serve_stops_with_one_line_when_its_own_prefect_server_dies(tmp_path, new_prefect_home):
    """serve's own Prefect server (no PREFECT_API_URL) dies: serve stops too, exit 6 and one line,
    instead of a stack that looks alive (state file, healthy HTTP app) while nothing runs flows."""
    from dsh_memory.serve.stack_state import state_path

    home = new_prefect_home(tmp_path / "prefect-home")  # migrated already: a faster first start
    port, prefect_port = free_port(), free_port()
    since = datetime.now(UTC)
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "serve", "--port", str(port)]
            + ["--prefect-port", str(prefect_port)],
            env=_serve_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            info = _wait_published(port, proc, log_path, home)
            assert info is not None and info.prefect_port == prefect_port, log_path.read_text()[-3000:]
            # Serving, after a flow run (the boot catch-up): the runner's graceful stop then retries
            # the dead API for over a minute.
            deadline = time.monotonic() + 120
            while not (
                done := [r for r in _flow_runs(info.api_url, "catch-up", since) if r["state"]["type"] == "COMPLETED"]
            ):
                assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.5)
            # the run's address, not the random name it had when scheduled (it renames itself)
            assert f"boot catch-up scheduled: {info.ui_url}/runs/flow-run/{done[0]['id']}" in log_path.read_text()
            (server,) = [p for p in _children(proc.pid) if "server" in Path(f"/proc/{p}/cmdline").read_text()]
            os.kill(server, signal.SIGKILL)
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("serve kept running without its Prefect server")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 6, log_path.read_text()[-3000:]
    # the last line (Prefect's own threads may still be writing theirs: it may not start the line)
    last = log_path.read_text().strip().splitlines()[-1]
    assert "error: the Prefect server serve started exited (code -9; log " in last, last
    assert not state_path(home).exists()
    # No flow-run process of that stack lives on (reparented, talking to a dead API).
    memories = f"DSH_MEMORY_ROOT={tmp_path / 'memories'}".encode()
    deadline = time.monotonic() + 30
    while left := [p for p in Path("/proc").glob("[0-9]*/environ") if _reads(p, memories)]:
        assert time.monotonic() < deadline, left
        time.sleep(0.5)


def _reads(environ: Path, entry: bytes) -> bool:
    try:
        return entry in environ.read_bytes().split(b"\0")
    except OSError:
        return False
