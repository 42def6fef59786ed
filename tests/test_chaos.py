"""The chaos harness (bench/chaos.py) with a few trials, and regressions for what it found.

- A killed run's running claims are extracted by the very next run: selection treats a claim
  whose owner process is gone as free (it used to skip it as "being extracted by another run"
  until the claim went stale, so a plain rerun left those sessions failed, for a later run).
- The temp file a killed writer left is swept by the next Phase 1 at once (it used to stay
  until five minutes old): its name says which process wrote it.
- A run killed after the model answered, while that session's files were being written, costs
  the rerun no second model call and leaves one rollout summary: the answer is committed to the
  cache when the call returns (it used to be committed with the enclosing task, after the files,
  so the rerun asked again and a new slug put a second summary beside the first).
- A CLI run killed while its temporary Prefect server is still starting takes the server with it
  (the server used to be tethered only once healthy, seconds later).
"""

from __future__ import annotations

import importlib.util
import io
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_memory.phase1.selection import Action, ReasonKind, plan
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.state_schema import owner_is_gone
from dsh_memory.storage.store import MemoryStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import copy_tree_aged
from tests.fs_helpers import nested, remove_deep
from tests.test_selection import _ref, _session

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "dsh_memory" / "samples"
WEATHER = "5a1d3c7e-0b2f-4e6a-9c8d-1f2e3a4b5c6d"  # a bundled DSH sample session


def _claim_in_a_process_that_exits(root: Path, session_id: str) -> None:
    code = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from dsh_memory.storage.state import StateStore\n"
        "s = StateStore(sys.argv[1])\n"
        "assert s.try_start(sys.argv[2], datetime.now(UTC))\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(root), session_id], check=True)


def test_a_dead_owners_fresh_claim_is_extracted_by_the_next_run(tmp_path):
    _claim_in_a_process_that_exits(tmp_path, "s1")
    state = StateStore(tmp_path)
    state.try_start("s2", datetime.now(UTC))  # this process: alive
    claims = state.claims()
    assert owner_is_gone(claims["s1"].owner) and not owner_is_gone(claims["s2"].owner)
    settings = MemorySettings(memory_root=tmp_path, idle_seconds=60, max_rollout_age_days=0)
    refs = [_ref("s1"), _ref("s2")]
    decisions = {d.ref.id: d for d in plan(refs, claims, settings, datetime.now(UTC), load=lambda r: _session(r.id))}
    assert decisions["s1"].action == Action.EXTRACT
    assert (decisions["s2"].action, decisions["s2"].kind) == (Action.SKIP, ReasonKind.RUNNING_ELSEWHERE)


def test_a_killed_writers_temp_file_is_swept_at_once(tmp_path):
    store = MemoryStore(tmp_path)
    store.ensure_layout()
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from dsh_memory.storage.store_format import _prepare_temp\n"
        "print(_prepare_temp(Path(sys.argv[1]) / 'MEMORY.md', 'half a handbook'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, capture_output=True, text=True)
    dead = Path(out.stdout.strip())  # its writer exited without renaming it
    from dsh_memory.storage.store_format import _prepare_temp

    mine = Path(_prepare_temp(tmp_path / "rollout_summaries" / "x.md", "in flight"))  # a live writer's
    legacy = tmp_path / ".raw_memories.md.abc123xy.tmp"  # no writer in its name: the age rule
    legacy.write_text("?")
    assert dead.exists() and dead.name.startswith(".MEMORY.md.w")
    assert store.sweep_temp_files() == [dead.name]
    assert mine.exists() and legacy.exists()
    os.utime(legacy, (1, 1))
    assert store.sweep_temp_files() == [legacy.name]
    assert mine.exists()


def test_the_sweep_passes_a_folder_tree_thousands_deep(tmp_path):
    """A folder tree 1,500 deep in the memory root (a skill's own, or a hostile one) made the
    sweep, which starts every extraction, a RecursionError (os.walk recurses on Python 3.11):
    no session was extracted any more. A temp file at its bottom is swept like any other."""
    store = MemoryStore(tmp_path)
    store.ensure_layout()
    os.utime(nested(tmp_path / "skills", ["d"] * 1500, ".x.md.abc123xy.tmp", "?"), (1, 1))  # left long ago
    try:
        swept = store.sweep_temp_files()
        assert len(swept) == 1 and swept[0].endswith("/d/.x.md.abc123xy.tmp"), swept
    finally:
        remove_deep(tmp_path / "skills" / "d")


# The extract flow in a process that dies (SIGKILL) right after the rollout summary is written.
DIE_AFTER_THE_SUMMARY = r"""
import os, signal, sys
import dsh_memory.tasks._session as session_tasks

real_apply = session_tasks.apply_output

def apply_then_die(store, state, decision, output, now=None):
    write = store.write_rollout_summary
    def write_then_die(*args, **kwargs):
        write(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    store.write_rollout_summary = write_then_die
    return real_apply(store, state, decision, output, now)

session_tasks.apply_output = apply_then_die
from dsh_memory.flows.extract import extract_flow
extract_flow(session_ids=[sys.argv[1]])
"""


def test_a_run_killed_while_writing_files_is_redone_from_the_cached_answer(monkeypatch, tmp_path, prefect_api):
    calls = []

    def answer(request: dict) -> Reply:  # a model that names the same session differently each time
        calls.append(1)
        return Reply.tool(
            {
                "raw_memory": "- Use `make test`, not pytest directly: the Makefile sets up the fixtures.",
                "rollout_summary": "## Task\nFix the forecast crash.\n\n## Outcome\n`make test` passes.",
                "rollout_slug": f"forecast-fix-take-{len(calls)}",
            }
        )

    with FakeOpenAIServer(handler=answer) as fake:
        for k, v in dict(
            HOME=str(tmp_path),
            DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")),
            CODEX_HOME=str(tmp_path / "none"),
            CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
            DSH_MEMORY_ROOT=str(tmp_path / "mem"),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="k",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
            DSH_MEMORY_IGNORE_BLOCKS="1",
        ).items():
            monkeypatch.setenv(k, v)
        child = subprocess.run(
            [sys.executable, "-c", DIE_AFTER_THE_SUMMARY, WEATHER], cwd=str(REPO), capture_output=True, timeout=300
        )
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
        root = tmp_path / "mem"
        assert len(list((root / "rollout_summaries").glob("*.md"))) == 1 and len(calls) == 1
        assert StateStore(root).get_claim(WEATHER).status == "running"  # its owner is gone

        from dsh_memory.flows.extract import extract_flow

        result = extract_flow(session_ids=[WEATHER])
    assert [o.outcome for o in result.outcomes] == ["extracted"]
    assert len(calls) == 1, "the rerun asked the model again instead of reusing the answer it paid for"
    mine = [s.slug for s in MemoryStore(root).list_rollout_summaries() if s.provenance.get("session_id") == WEATHER]
    assert mine == ["forecast-fix-take-1"]
    claim = StateStore(root).get_claim(WEATHER)
    assert (claim.status, claim.parts, claim.slug) == ("done", 1, "forecast-fix-take-1")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_run_killed_while_its_prefect_server_starts_takes_the_server_with_it(tmp_path):
    dsh = copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_", "CODEX_", "CLAUDE_"))}
    env.update(
        HOME=str(tmp_path),
        PREFECT_HOME=str(tmp_path / "prefect"),
        DSH_HOME=str(dsh),
        CODEX_HOME=str(tmp_path / "none"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
        DSH_MEMORY_ROOT=str(tmp_path / "mem"),
        DSH_MEMORY_BASE_URL="http://127.0.0.1:9/v1",  # never reached: the kill comes first
        DSH_MEMORY_API_KEY="k",
        DSH_MEMORY_MODEL="fake-model",
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh_memory.cli", "run"],
        cwd=str(REPO),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = None
    try:
        deadline = time.monotonic() + 120
        while server is None and time.monotonic() < deadline and proc.poll() is None:
            kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            server = next((int(k) for k in kids if b"uvicorn" in _cmdline(k)), None)
            time.sleep(0.05)
        assert server is not None, "no temporary Prefect server seen"
        time.sleep(0.3)  # still migrating / starting: seconds before it answers /health
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(server), "the starting Prefect server outlived the killed CLI run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if server is not None and _alive(server):
            os.kill(server, signal.SIGKILL)


def _load_harness():
    spec = importlib.util.spec_from_file_location("dsh_chaos", REPO / "bench" / "chaos.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_chaos_harness_two_trials(tmp_path, new_prefect_home):
    """Two kills (at a Phase 1 file write, just after the Phase 2 answer), each followed by a plain
    rerun: nothing torn, lost, doubled, orphaned, left behind or stuck. (`bench/chaos.py` kills at
    every point, start-up included; a CLI run killed at start-up: tests/test_no_orphans.py.)
    The harness's PREFECT_HOME (`work/prefect`) starts with a migrated database, so its warm-up
    run is an ordinary one instead of one that first migrates a new database."""
    new_prefect_home(tmp_path / "prefect")
    chaos = _load_harness()
    out = io.StringIO()
    result = chaos.run_chaos(
        2,
        seed=7,
        clones=1,
        latency=(0.1, 0.4),
        work=tmp_path,
        modes=("p1-write", "p2-reply"),
        measure_clean=False,
        out=out,
    )
    assert result["trials"] == 2
    assert result["counts"] == dict.fromkeys(chaos.COUNTERS, 0), out.getvalue()


def _cmdline(pid: str) -> bytes:
    """A process's command line; b"" when it ended between listing and reading (a race, not a failure)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
