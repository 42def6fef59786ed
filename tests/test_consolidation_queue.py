"""Consolidation requests coalesce on a real Prefect server: many extract-session runs asking at
once queue ONE `consolidate` run; a run queued already covers later requests; the cooldown
schedules the run for its end instead of creating runs that would only skip; a far-future
scheduled run (the 6-hour schedule) does not count as queued."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from dsh_memory.context import MemoryContext
from dsh_memory.flows.consolidate import consolidate_flow
from dsh_memory.serve.consolidation_queue import request_consolidation
from dsh_memory.settings import MemorySettings

pytestmark = pytest.mark.usefixtures("prefect_api")


def _deployment() -> tuple[str, str]:
    """A consolidate deployment of its own on the shared test server (nothing serves it)."""
    name = f"queue-{uuid.uuid4().hex[:8]}"
    deployment_id = consolidate_flow.to_deployment(name=name).apply()
    return f"consolidate/{name}", str(deployment_id)


def _runs(api: str, deployment_id: str) -> list[dict]:
    body = {"deployments": {"id": {"any_": [deployment_id]}}, "limit": 50}
    return httpx.post(f"{api}/flow_runs/filter", json=body, timeout=10).json()


def _settings(tmp_path: Path, **kw) -> MemorySettings:
    settings = MemorySettings(memory_root=tmp_path / "mem", **kw)
    with MemoryContext.of(settings) as ctx:
        ctx.state.set_pending(True)
    return settings


def test_a_storm_of_requests_queues_one_run(prefect_api, tmp_path):
    name, dep_id = _deployment()
    settings = _settings(tmp_path)
    results = []

    def ask():
        results.append(request_consolidation(settings, name))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 8 and all(r.requested for r in results)
    assert sum(r.created for r in results) == 1
    [run] = _runs(prefect_api, dep_id)
    assert run["state"]["type"] == "SCHEDULED"
    assert {r.run_name for r in results} == {run["name"]}
    # Later requests, while it is still queued: coalesced, nothing new.
    again = request_consolidation(settings, name)
    assert (again.requested, again.created, again.run_name) == (True, False, run["name"])
    assert len(_runs(prefect_api, dep_id)) == 1


def test_cooldown_queues_the_run_for_its_end_and_a_far_scheduled_run_does_not_count(prefect_api, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    name, dep_id = _deployment()
    settings = _settings(tmp_path, phase2_cooldown_seconds=3600)
    now = datetime.now(UTC)
    with MemoryContext.of(settings) as ctx:
        ctx.state.record_phase2_success(now - timedelta(minutes=20))
        ctx.state.set_pending(True)
    with get_client(sync_client=True) as client:  # the 6-hour schedule's next run, far away
        client.create_flow_run_from_deployment(
            uuid.UUID(dep_id), state=Scheduled(scheduled_time=now + timedelta(hours=6))
        )
    req = request_consolidation(settings, name, now=now)
    assert req.created and abs((req.start_at - (now + timedelta(minutes=40))).total_seconds()) < 2
    starts = sorted(r["expected_start_time"] for r in _runs(prefect_api, dep_id))
    assert len(starts) == 2
    assert abs((datetime.fromisoformat(starts[0]) - (now + timedelta(minutes=40))).total_seconds()) < 2


def test_nothing_is_queued_when_nothing_is_pending_or_runs_are_paused(prefect_api, tmp_path):
    name, dep_id = _deployment()
    settings = MemorySettings(memory_root=tmp_path / "mem")
    assert request_consolidation(settings, name).requested is False  # no pending flag
    with MemoryContext.of(settings) as ctx:
        ctx.state.set_pending(True)
        for _ in range(3):
            ctx.state.record_phase2_failure("boom", datetime.now(UTC))
    paused = request_consolidation(settings, name)
    assert paused.requested is False and "consecutive failures" in paused.reason
    assert _runs(prefect_api, dep_id) == []
