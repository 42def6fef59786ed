"""Due extract-session runs: one flow-run process extracts every session whose trigger fired.

After a storm, the turn-end trigger fires for many sessions within seconds; `serve` runs at most
`flow_run_limit` flow runs at once and each costs a process (≈ 3 s of CPU to import Prefect on
2 cores). Run one at a time, 100 sessions would wait minutes for their turn. So an
extract-session run, before planning, reads the OTHER runs of its deployment that are due — the
trigger fired (expected start time passed) and no runner slot took them yet (still Scheduled,
Late or AwaitingConcurrencySlot) — and extracts their sessions too, in the same process and
thread pool. Afterwards each due run whose session is now done (extracted, no-op, or already up
to date) is set Completed with a message naming the run that did the work, so it never starts a
process. A due run whose session failed, or that a runner took meanwhile, is left alone: it
runs as usual. Every session keeps exactly one extract-session run per trigger.

Sound by construction: the due runs are read BEFORE the plan, so the extraction saw everything
their triggers announced; a turn end after that triggers a new run, which is not covered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

MAX_DUE = 32  # sessions one run takes over: bounds its duration


@dataclass
class DueRun:
    id: UUID
    name: str
    session: str  # the `session` parameter (resource id or bare id)


def queued_runs(client, deployment_id: UUID | str, before: datetime, types: tuple[str, ...], limit: int) -> list:
    """A deployment's runs in these state types expected to start by `before`, oldest first."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    return client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[UUID(str(deployment_id))])),
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType(t) for t in types])),
            expected_start_time=FlowRunFilterExpectedStartTime(before_=before),
        ),
        sort=FlowRunSort.EXPECTED_START_TIME_ASC,
        limit=limit,
    )


def read_due_runs(exclude_run: UUID | str | None, limit: int = MAX_DUE) -> list[DueRun]:
    """The current run's deployment's other runs that are due and not taken (oldest first).
    [] when this is not a deployment run."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import deployment

    deployment_id = deployment.id
    if not deployment_id:
        return []
    with get_client(sync_client=True) as client:
        runs = queued_runs(client, deployment_id, datetime.now(UTC), ("SCHEDULED",), limit + 1)
    out = [
        DueRun(r.id, r.name, str((r.parameters or {}).get("session") or ""))
        for r in runs
        if str(r.id) != str(exclude_run)
    ]
    return [r for r in out if r.session][:limit]


def complete_covered(
    runs: list[DueRun], done_sessions: set[str], by: str, name_for: Callable[[str], str] | None = None
) -> list[DueRun]:
    """Set Completed the due runs whose session is done, if still Scheduled, named as if they had
    run (`name_for(session parameter)`: a run never started never named itself). Returns those set."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.responses import SetStateStatus
    from prefect.states import Completed

    covered = []
    with get_client(sync_client=True) as client:
        for run in runs:
            if run.session not in done_sessions:
                continue
            current = client.read_flow_run(run.id)
            if current.state is None or current.state.type != StateType.SCHEDULED:
                continue  # a runner took it meanwhile: it runs (and finds its session up to date)
            state = Completed(message=f"extracted by {by} (due-session sweep); no process started")
            result = client.set_flow_run_state(run.id, state)
            if result.status == SetStateStatus.ACCEPT:
                covered.append(run)
                if name_for is not None:
                    client.set_flow_run_name(run.id, name_for(run.session))
    return covered
