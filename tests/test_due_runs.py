"""Due extract-session runs on a real Prefect server: a run reads the other runs of its
deployment whose trigger fired and that no runner took, and completes those whose session it
finished — never one that is not due, not its own, or already taken by a runner."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from dsh_memory.flows.extract_session import extract_session_flow
from dsh_memory.serve.due_runs import complete_covered, read_due_runs

pytestmark = pytest.mark.usefixtures("prefect_api")


def test_due_runs_are_read_and_only_finished_scheduled_ones_completed(monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.states import Pending, Scheduled

    deployment_id = extract_session_flow.to_deployment(name=f"due-{uuid.uuid4().hex[:8]}").apply()
    now = datetime.now(UTC)
    with get_client(sync_client=True) as client:
        created = []

        def run(session: str, at: datetime):
            state = Scheduled(scheduled_time=at)
            flow_run = client.create_flow_run_from_deployment(
                deployment_id, parameters={"session": f"dsh.session.{session}"}, state=state
            )
            created.append(flow_run.id)
            return flow_run

        try:
            own = run("a", now - timedelta(seconds=3))
            b = run("b", now - timedelta(seconds=2))
            c = run("c", now - timedelta(seconds=1))
            later = run("d", now + timedelta(hours=1))  # not due
            taken = run("e", now - timedelta(seconds=1))
            client.set_flow_run_state(taken.id, Pending())  # a runner took it

            assert read_due_runs(exclude_run=own.id) == []  # not inside a deployment run: no sweep
            monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", str(deployment_id))
            due = read_due_runs(exclude_run=own.id)
            assert [r.session for r in due] == ["dsh.session.b", "dsh.session.c"]
            assert later.id not in {r.id for r in due}

            client.set_flow_run_state(c.id, Pending(), force=True)  # taken between the read and the cover
            covered = complete_covered(
                due, {"dsh.session.b", "dsh.session.c"}, by="run test-run", name_for=lambda s: f"named/{s}"
            )
            assert [r.id for r in covered] == [b.id]
            b_run = client.read_flow_run(b.id)
            assert b_run.state.type.value == "COMPLETED" and "test-run" in b_run.state.message
            assert b_run.name == "named/dsh.session.b"  # named as if it had run
            assert client.read_flow_run(c.id).state.type.value == "PENDING"
            assert client.read_flow_run(later.id).state.type.value == "SCHEDULED"
            # A session that is not done: its run is left to run on its own.
            d_due = read_due_runs(exclude_run=own.id)
            assert complete_covered(d_due, set(), by="run test-run") == []
        finally:  # the server is shared by the suite: leave no due run of flow extract-session behind
            for run_id in created:
                client.delete_flow_run(run_id)
            client.delete_deployment(deployment_id)


def _fired_event(session: str) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "occurred": datetime.now(UTC).isoformat(),
        "event": "dsh.turn.ended",
        "resource": {"prefect.resource.id": f"dsh.session.{session}"},
        "payload": {"session_id": session, "seq": 1},
    }


def test_fired_sessions_are_every_firing_whose_run_has_not_run(monkeypatch, prefect_api):
    """Prefect fires a storm's triggers at once but creates their runs one by one: a run reads the
    firings of its deployment's trigger, so the first run takes every session whose debounce is
    over — except one whose run already ran since its firing (a later turn waits for its own)."""
    from prefect.client.orchestration import get_client
    from prefect.states import Completed

    from dsh_memory.hooks.events import post_events
    from dsh_memory.serve.deployments import EXTRACT_SESSION, build, load_spec
    from dsh_memory.serve.due_runs import read_fired_sessions

    spec = next(s for s in load_spec() if s["name"] == EXTRACT_SESSION.split("/")[1])
    spec = {**spec, "triggers": [{**t, "within": 10} for t in spec["triggers"]]}  # Prefect's minimum
    deployment_id = build(spec, None, suffix=f"-fired-{uuid.uuid4().hex[:8]}").apply()
    tag = uuid.uuid4().hex[:8]
    sessions = {k: f"{tag}-{k}" for k in ("a", "b", "c", *(f"x{i}" for i in range(57)))}  # > one page of 50
    with get_client(sync_client=True) as client:
        try:
            assert read_fired_sessions(exclude_run=None) == []  # not inside a deployment run
            monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", str(deployment_id))
            assert read_fired_sessions(exclude_run=None) == []  # nothing fired yet
            post_events([_fired_event(s) for s in sessions.values()], prefect_api)
            fired: list[str] = []
            deadline = time.monotonic() + 60  # debounce 10 s, then the event persister's flush
            while len(fired) < len(sessions) and time.monotonic() < deadline:
                time.sleep(1)
                fired = [s for s in read_fired_sessions(exclude_run=None) if tag in s]  # the suite's server is shared
            assert sorted(fired) == sorted(f"dsh.session.{s}" for s in sessions.values())
            # the trigger's own runs: c's ran since its firing, a's and b's wait
            deadline = time.monotonic() + 60
            while len(runs := _runs_of(client, deployment_id)) < len(sessions) and time.monotonic() < deadline:
                time.sleep(0.5)
            by_session = {r.parameters["session"]: r for r in runs}
            client.set_flow_run_state(by_session[f"dsh.session.{sessions['c']}"].id, Completed(), force=True)
            own = by_session[f"dsh.session.{sessions['a']}"]
            left = [s for s in read_fired_sessions(exclude_run=own.id) if tag in s]
            assert sorted(left) == sorted(f"dsh.session.{s}" for k, s in sessions.items() if k != "c")
            assert len(read_fired_sessions(exclude_run=own.id, limit=1)) == 1
        finally:
            client.delete_resource_owned_automations(f"prefect.deployment.{deployment_id}")
            for run in _runs_of(client, deployment_id):
                client.delete_flow_run(run.id)
            client.delete_deployment(deployment_id)


def _runs_of(client, deployment_id) -> list:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    flt = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
    return client.read_flow_runs(deployment_filter=flt, limit=200)
