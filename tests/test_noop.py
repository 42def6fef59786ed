"""Nothing to do costs nothing: `extract --all`, `extract --dry-run` and `run` decide from stat and
the state database whether there is work before any Prefect engine starts (dsh_memory/serve/preflight.py).

Real CLI in a subprocess. A no-op must not import prefect at all (a small wrapper reports
`sys.modules` at exit) and must succeed even when PREFECT_API_URL points at a closed port; with
work, the same commands run the flows on a real server. No timing assertions (bench/bench_noop.py
measures).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_memory import readers
from dsh_memory.serve.prefect_server import free_port
from dsh_memory.settings import SourceRoots
from dsh_memory.storage.state import StateStore
from tests.flow_helpers import copy_tree_aged
from tests.test_cli_behaviour import (  # noqa: F401
    REPO,
    SAMPLES,
    WEATHER,
    clean_env,
    cli,
    fake_llm,
    pipeline_env,
    run_argv,
)

# Runs the CLI like `python -m dsh_memory.cli`, then says on stderr whether prefect was imported.
WRAPPER = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(f"\\nprefect imported: {'prefect' in sys.modules}\\n"))
sys.argv = ["dsh-memory", *sys.argv[1:]]
from dsh_memory.cli import main
main()
"""


def cli_watched(args: list[str], env: dict[str, str], timeout: float = 120) -> tuple[subprocess.CompletedProcess, bool]:
    """The CLI through WRAPPER: (result, whether prefect was imported)."""
    res = run_argv([sys.executable, "-c", WRAPPER, *args], env, timeout, label=" ".join(args))
    err = res.stderr
    marks = [line for line in err.splitlines() if line.startswith("prefect imported: ")]
    assert len(marks) == 1, err
    return res, marks[0].endswith("True")


def mark_processed(env: dict[str, str], *, but: str | None = None) -> None:
    """Record every DSH session under env's DSH_HOME as extracted (except `but`); consolidation done."""
    refs = readers.discover(SourceRoots(dsh_sessions=Path(env["DSH_HOME"]) / "sessions"), ("dsh",))
    now = datetime.now(UTC)
    with StateStore(env["DSH_MEMORY_ROOT"]) as state:
        for ref in refs:
            if ref.id != but:
                state.finish(ref.id, "done", readers.load(ref).last_seq, now, slug=ref.id[:8])
        state.record_phase2_success(now)


@pytest.fixture()
def processed(tmp_path) -> dict[str, str]:
    """Three idle DSH sample sessions, all processed; PREFECT_API_URL at a closed port."""
    env = clean_env(
        tmp_path,
        DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")),
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        PREFECT_API_URL=f"http://127.0.0.1:{free_port()}/api",  # nothing listens there
    )
    mark_processed(env)
    return env


@pytest.mark.parametrize("api", ["closed-port", "unset"])
@pytest.mark.parametrize(
    "args",
    [["extract", "--all"], ["extract", "--all", "--json"], ["run"], ["run", "--json"]],
    ids=lambda a: " ".join(a),
)
def test_nothing_to_do_succeeds_without_prefect(processed, args, api):
    env = dict(processed)
    if api == "unset":
        env.pop("PREFECT_API_URL")
    r, imported = cli_watched(args, env)
    assert r.returncode == 0, r.stderr
    assert not imported, "a no-op imported prefect"
    assert "Traceback" not in r.stderr
    if "--json" in args:
        data = json.loads(r.stdout)
        phase1 = data["phase1"] if args[0] == "run" else data
        assert phase1["candidates"] == 0 and phase1["outcomes"] == [] and phase1["discovered"] == 3
        assert {d["reason"] for d in phase1["decisions"]} == {"up to date"}
        if args[0] == "run":
            assert data["phase2"]["outcome"] == "skipped: nothing to consolidate"
    else:
        assert "nothing to extract" in r.stdout
        if args[0] == "run":
            assert "Phase 2: skipped: nothing to consolidate" in r.stdout


def test_run_waits_for_the_consolidation_cooldown_without_prefect(processed):
    """Nothing to extract, consolidation pending but inside its cooldown: still a no-op."""
    with StateStore(processed["DSH_MEMORY_ROOT"]) as state:
        state.set_pending(True)
    r, imported = cli_watched(["run", "--json"], processed)
    assert r.returncode == 0 and not imported, r.stderr
    phase2 = json.loads(r.stdout)["phase2"]
    assert phase2["outcome"] == "skipped: cooldown" and phase2["gate"]["pending"] is True


@pytest.mark.parametrize("pending", [False, True], ids=["nothing-pending", "cooldown"])
@pytest.mark.parametrize("args", [["consolidate"], ["consolidate", "--json"]], ids=" ".join)
def test_consolidate_with_its_gate_closed_succeeds_without_prefect(processed, args, pending):
    """Nothing to consolidate, or pending inside the cooldown: `consolidate` says so from the
    state database; it started a temporary Prefect server for that (~16 s) before."""
    if pending:
        with StateStore(processed["DSH_MEMORY_ROOT"]) as state:
            state.set_pending(True)
    r, imported = cli_watched(args, processed)
    assert r.returncode == 0 and not imported, r.stderr
    outcome = "skipped: cooldown" if pending else "skipped: nothing to consolidate"
    if "--json" in args:
        assert json.loads(r.stdout)["outcome"] == outcome
    else:
        assert r.stdout.startswith(f"Phase 2: {outcome}\n")


def test_consolidate_while_another_runs_succeeds_without_prefect(processed):
    """Work waiting but another consolidation holds Phase 2's lock: the flow would only skip
    ("already running"), so `consolidate` says so from the lock; it started Prefect for it (a
    closed PREFECT_API_URL: exit 6)."""
    from dsh_memory.storage.locks import phase_lock

    with StateStore(processed["DSH_MEMORY_ROOT"]) as state:
        state.set_pending(True)
    with phase_lock(processed["DSH_MEMORY_ROOT"], "phase2"):
        r, imported = cli_watched(["consolidate", "--force", "--json"], processed)
    assert r.returncode == 0 and not imported, r.stderr
    assert json.loads(r.stdout)["outcome"] == "skipped: already running"


def test_dry_run_plans_without_prefect(tmp_path):
    """A dry run never starts Prefect, with work to plan or not."""
    env = clean_env(
        tmp_path,
        DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")),
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        PREFECT_API_URL=f"http://127.0.0.1:{free_port()}/api",
    )
    r, imported = cli_watched(["extract", "--dry-run", "--all", "--json"], env)
    assert r.returncode == 0 and not imported, r.stderr
    plan = json.loads(r.stdout)
    assert plan["candidates"] == 3 and {d["action"] for d in plan["decisions"]} == {"extract"}
    assert not (tmp_path / "mem" / ".state").exists()  # a plan writes nothing

    r, imported = cli_watched(["extract", "--dry-run", "--all"], env)
    assert r.returncode == 0 and not imported, r.stderr
    assert "Phase 1 plan (dry run)" in r.stdout and "never processed" in r.stdout


def test_unknown_session_is_still_not_found_without_prefect(processed):
    r, imported = cli_watched(["extract", "no-such-session"], processed)
    assert r.returncode == 3 and not imported, r.stderr
    assert "unknown session id(s): no-such-session" in r.stderr


def test_work_runs_the_flows_and_the_next_run_is_a_no_op(tmp_path, prefect_api, fake_llm):  # noqa: F811
    env = pipeline_env(
        tmp_path, prefect_api, fake_llm.base_url, DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh"))
    )
    mark_processed(env, but=WEATHER)
    r = cli(["run", "--json"], env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [(o["session"], o["outcome"]) for o in data["phase1"]["outcomes"]] == [(WEATHER, "extracted")]
    assert data["phase2"]["outcome"] == "consolidated"
    assert data["phase2"]["flow_run_id"]  # a real flow run on the server

    r, imported = cli_watched(["run", "--json"], env)
    assert r.returncode == 0 and not imported, r.stderr
    data = json.loads(r.stdout)
    assert data["phase1"]["candidates"] == 0 and data["phase2"]["outcome"] == "skipped: nothing to consolidate"
