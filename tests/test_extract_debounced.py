"""The debounced extraction run on a real Prefect server (flows/extract_session.py): it maps
Phase 1 over every session quiet for the debounce (one `extract-<id>` task run each), leaves the
others pending, asks for its next run at the next due time (one scheduled run however often it
is asked), and asks for one consolidation however many extractions do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsh_memory.testing.fake_openai import FakeOpenAIServer
from tests.flow_helpers import memory_reply, pipeline_env, task_runs_of

pytestmark = pytest.mark.usefixtures("prefect_api")

QUIET = ["3b8f2c1e-5a7d-4e29-9c41-7d2e8f6a1b03", "5e8b2d0f-3c7a-4f4e-9b6d-0a2f8c4e7d53"]
BUSY = "9d4e6a2b-1c3f-4b8e-a5d7-2f1e0c9b8a64"


def _ends(root):
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    return TurnEnds(StateStore(root))


def test_a_run_extracts_every_quiet_session_and_leaves_the_busy_one_pending(monkeypatch, tmp_path, fixtures_dir):
    from prefect.client.orchestration import get_client

    from dsh_memory.flows.extract_session import extract_session_flow

    with FakeOpenAIServer(handler=memory_reply) as fake:
        root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_DEBOUNCE_SECONDS", "20")
        now = datetime.now(UTC)
        ends = _ends(root)
        ends.record([(s, now - timedelta(seconds=60)) for s in QUIET] + [(BUSY, now)])
        state = extract_session_flow(consolidate=False, return_state=True)
    assert state.is_completed()
    result = state.result()
    assert sorted(o.session for o in result.extracted) == sorted(QUIET)
    run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
    wanted = {f"extract-{s}" for s in QUIET}
    tasks = task_runs_of(run_id, until=lambda tasks: wanted <= {t.name for t in tasks})
    assert run.name == "extract-session/due"
    names = {t.name for t in tasks}
    assert {f"extract-{s}" for s in QUIET} <= names and f"extract-{BUSY}" not in names  # one per session
    assert ends.pending() == 1 and ends.due(now + timedelta(seconds=25), 20) == {BUSY: now.timestamp()}
    assert ends.next_due(20) == datetime.fromtimestamp(now.timestamp() + 20, UTC)
    ends.state.close()


def test_a_session_due_within_seconds_is_taken_by_the_same_run(monkeypatch, tmp_path, fixtures_dir):
    """A run waits a few seconds for the next due session rather than start another process."""
    from dsh_memory.flows.extract_session import extract_session_flow

    with FakeOpenAIServer(handler=memory_reply) as fake:
        root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_DEBOUNCE_SECONDS", "20")
        now = datetime.now(UTC)
        ends = _ends(root)
        ends.record([(QUIET[0], now - timedelta(seconds=60)), (QUIET[1], now - timedelta(seconds=17))])
        result = extract_session_flow(consolidate=False)
    assert sorted(o.session for o in result.extracted) == sorted(QUIET)
    assert (ends.pending(), result.counts) == (0, {"extracted": 2})
    ends.state.close()


def test_the_next_run_and_the_consolidation_are_asked_for_once(monkeypatch, tmp_path, fixtures_dir):
    """Asked twice (two runs finding the same next due time; two extractions finding
    consolidation pending), Prefect holds one scheduled run of each: idempotency keys."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from dsh_memory.flows.extract_session import ask_for_next_run, next_run_time, request_consolidation
    from dsh_memory.serve.deployments import import_entrypoint, load_spec

    root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, "http://127.0.0.1:9")
    monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "3600")
    specs = {s["name"]: s for s in load_spec()}
    ids = {
        name: import_entrypoint(specs[name]["entrypoint"]).to_deployment(name=deployment).apply()
        for name, deployment in (("extract-session", "extract-session-test"), ("consolidate", "consolidate"))
    }
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", str(ids["extract-session"]))
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__NAME", "extract-session-test")
    from dsh_memory.storage.state import StateStore

    with StateStore(root) as state:  # consolidated 10 min ago, something extracted since
        state.record_phase2_success(datetime.now(UTC) - timedelta(minutes=10))
        state.set_pending(True)
    due = datetime.now(UTC) + timedelta(minutes=5)

    @flow
    def ask_twice() -> tuple:
        return ask_for_next_run(due, 20), ask_for_next_run(due, 20), request_consolidation(), request_consolidation()

    try:
        asked_from = datetime.now(UTC)
        first, second, asked, asked_again = ask_twice()
        assert first == second and asked and asked_again
        with get_client(sync_client=True) as client:
            # Only the runs this test asked for: the deployments' interval schedules add runs
            # whenever the server's scheduler gets to them (auto_scheduled), and earlier tests on
            # the suite's server asked for consolidations of the same `consolidate` deployment.
            runs = {
                d: [
                    r
                    for r in client.read_flow_runs(deployment_filter=_deployment(i))
                    if not r.auto_scheduled and r.created >= asked_from
                ]
                for d, i in ids.items()
            }
        (run,) = runs["extract-session"]
        assert run.state.is_scheduled() and run.name == first
        assert run.state.state_details.scheduled_time == next_run_time(due, 20, datetime.now(UTC))
        (consolidate,) = runs["consolidate"]  # at the end of the cooldown, not now
        start = consolidate.state.state_details.scheduled_time
        assert timedelta(minutes=49) < start - datetime.now(UTC) <= timedelta(minutes=50)
    finally:
        with get_client(sync_client=True) as client:
            for deployment_id in ids.values():
                for r in client.read_flow_runs(deployment_filter=_deployment(deployment_id)):
                    client.delete_flow_run(r.id)
            client.delete_deployment(ids["extract-session"])


def test_the_next_run_gathers_the_sessions_due_just_after():
    from dsh_memory.flows.extract_session import next_run_time

    now = datetime(2026, 5, 1, 9, 0, 0, tzinfo=UTC)
    assert next_run_time(now + timedelta(seconds=10.2), 20, now) == now + timedelta(seconds=14)  # 2 s grid
    assert next_run_time(now + timedelta(seconds=11.9), 20, now) == now + timedelta(seconds=14)  # the same run
    assert next_run_time(now - timedelta(seconds=30), 180, now) == now + timedelta(seconds=2)  # overdue: now
    assert next_run_time(now + timedelta(seconds=0.5), 5, now) == now + timedelta(seconds=2)  # 1 s at least


def _deployment(deployment_id):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    return DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))


def test_two_memories_on_one_prefect_server_ask_for_their_own_consolidations(tmp_path):
    """The consolidate run's idempotency key named the last consolidation and the failures only:
    every fresh memory asked for `…:after:None:0`, so a second memory root on the same Prefect
    server (or one wiped and made anew) got the first one's finished run back and no consolidation
    until the schedule. The key names the memory (its `memory_id`, made once with its state)."""
    from dsh_memory.flows.extract_session import consolidation_key
    from dsh_memory.storage.state import StateStore

    metas = []
    for name in ("a", "b"):
        with StateStore(tmp_path / name) as st:
            metas.append(st.get_meta())
    with StateStore(tmp_path / "a") as st:
        assert st.get_meta().memory_id == metas[0].memory_id  # made once, kept
    keys = {consolidation_key("consolidate/consolidate", m) for m in metas}
    assert len(keys) == 2 and all(m.memory_id and len(m.memory_id) == 16 for m in metas)


def test_after_repeated_failures_extraction_asks_for_a_consolidation_at_the_end_of_the_back_off(
    monkeypatch, tmp_path, fixtures_dir
):
    """Three consolidations failed in a row 10 minutes ago: an extraction still asks for the next
    one (it used to ask for none until a manual `--force`), scheduled when the back-off ends."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from dsh_memory.flows.extract_session import request_consolidation
    from dsh_memory.serve.deployments import import_entrypoint, load_spec
    from dsh_memory.storage.state import StateStore

    root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, "http://127.0.0.1:9")
    spec = next(s for s in load_spec() if s["name"] == "consolidate")
    deployment_id = import_entrypoint(spec["entrypoint"]).to_deployment(name="consolidate").apply()
    with StateStore(root) as state:
        state.set_pending(True)
        for i in range(3):
            state.record_phase2_failure(f"endpoint down {i}", datetime.now(UTC) - timedelta(minutes=10))

    try:
        asked_from = datetime.now(UTC)
        assert flow(request_consolidation)()
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(deployment_filter=_deployment(deployment_id))
            (run,) = [r for r in runs if not r.auto_scheduled and r.created >= asked_from]
        start = run.state.state_details.scheduled_time
        assert timedelta(minutes=10) < start - datetime.now(UTC) <= timedelta(minutes=20)  # 30 min after the failure
    finally:
        with get_client(sync_client=True) as client:
            for r in client.read_flow_runs(deployment_filter=_deployment(deployment_id)):
                client.delete_flow_run(r.id)
