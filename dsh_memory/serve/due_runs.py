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

Fired sessions: Prefect fires a storm's triggers within a second but its actions service
creates their runs one by one — a minute for 100 runs while flow runs write to its database — so
the first runs would see few due runs. A run therefore also reads the trigger's FIRINGS (the
`prefect.automation.triggered` events of its deployment's automations, the debounce + 2 min
back) and extracts those sessions too, unless a run of theirs already ran since its latest
firing. Their runs, created later, find the session up to date: the next run's sweep completes
them, or they start and finish at once.

Sound by construction: the due runs and firings are read BEFORE the plan, so the extraction saw
everything their triggers announced; a turn end after that triggers a new run, which is not
covered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

MAX_DUE = 32  # due runs one run takes over: bounds its duration
MAX_FIRED = 128  # fired sessions one run takes over (the model slots bound how fast it goes)
# Firings looked at: the debounce plus this. An older firing whose run still waits is a due run
# (read apart); one whose run ran is left out anyway.
FIRED_SLACK_SECONDS = 120


@dataclass
class DueRun:
    id: UUID
    name: str
    session: str  # the `session` parameter (resource id or bare id)


def queued_runs(client, deployment_id: UUID | str, before: datetime, types: tuple[str, ...], limit: int) -> list:
    """A deployment's runs in these state types expected to start by `before`, oldest first."""
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    return client.read_flow_runs(
        deployment_filter=_deployment(deployment_id),
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


def read_fired_sessions(exclude_run: UUID | str | None, limit: int = MAX_FIRED) -> list[str]:
    """Sessions whose turn-end trigger on this run's deployment FIRED within the last debounce
    (the trigger's `within`) + FIRED_SLACK_SECONDS and whose run no runner took since: the
    newest `limit`, as the trigger's `session` parameter (`dsh.session.<id>`). [] when this is
    not a deployment run.

    Prefect fires a storm's triggers within a second but creates their runs one by one (its
    actions service: a minute for 100 runs while flow runs write to its database), so the due
    runs show only the first few; the firings (`prefect.automation.triggered` events of the
    deployment's automations) show them all. A session whose run is already running or done
    since its latest firing is left out: it was extracted after its debounce, and a later turn
    waits for its own."""
    from datetime import timedelta

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter, EventResourceFilter
    from prefect.runtime import deployment

    deployment_id = deployment.id
    if not deployment_id:
        return []
    now = datetime.now(UTC)
    with get_client(sync_client=True) as client:
        automations = client.read_resource_related_automations(f"prefect.deployment.{deployment_id}")
        if not automations:
            return []
        within = max(getattr(a.trigger, "within", None) or timedelta(0) for a in automations)
        since = now - within - timedelta(seconds=FIRED_SLACK_SECONDS)
        flt = EventFilter(
            occurred=EventOccurredFilter(since=since, until=now),
            event=EventNameFilter(name=["prefect.automation.triggered"]),
            resource=EventResourceFilter(id=[f"prefect.automation.{a.id}" for a in automations]),
        )
        fired: dict[str, datetime] = {}
        page = client.read_events(filter=flt, limit=50)  # the API pages by at most 50
        while True:
            for event in page.events:  # newest first
                session = str((event.payload.get("triggering_labels") or {}).get("prefect.resource.id") or "")
                if session.startswith("dsh.session.") and session not in fired:
                    fired[session] = event.occurred
            if len(fired) >= limit or not page.next_page:
                break
            page = client.read_events_page(page.next_page)
        if not fired:
            return []
        waiting = {StateType.SCHEDULED}  # Scheduled, Late, AwaitingConcurrencySlot: not taken
        runs, offset = [], 0
        while True:  # the API pages by at most 200
            page = client.read_flow_runs(
                deployment_filter=_deployment(deployment_id),
                flow_run_filter=_created_since(since),
                limit=200,
                offset=offset,
            )
            runs += page
            offset += len(page)
            if len(page) < 200 or offset >= 4 * limit:
                break
    for run in runs:  # a run taken (or done) since the session's latest firing: it needs none
        session = str((run.parameters or {}).get("session") or "")
        if (
            session in fired
            and str(run.id) != str(exclude_run)
            and run.state is not None
            and run.state.type not in waiting
            and run.created is not None
            and run.created >= fired[session]
        ):
            del fired[session]
    return list(fired)[:limit]


def _deployment(deployment_id):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    return DeploymentFilter(id=DeploymentFilterId(any_=[UUID(str(deployment_id))]))


def _created_since(since: datetime):
    """Runs expected to start since `since` (a triggered run's expected start is its creation)."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterExpectedStartTime

    return FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(after_=since))


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
