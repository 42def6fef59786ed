"""Due extract-session runs on a real Prefect server: a run reads the other runs of its
deployment whose trigger fired and that no runner took, and completes those whose session it
finished — never one that is not due, not its own, or already taken by a runner."""

from __future__ import annotations

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
