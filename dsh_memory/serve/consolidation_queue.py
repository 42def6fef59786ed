"""Consolidation requests coalesce: one pending flag + at most one queued `consolidate` run.

Every extract-session run that extracted something asks for a consolidation. One `consolidate`
run per request would, after a storm, queue one run per session — all but one cancelled by the
deployment's concurrency limit, each costing its extract-session run time. Instead:

- The pending flag in the state database (set by Phase 1) says THAT work waits; the queued run
  does all of it, however many extractions asked.
- `request_consolidation` creates a run only when no `consolidate` run of the deployment is
  already queued (Scheduled, AwaitingConcurrencySlot or Pending) to start by the time wanted.
  The time wanted is now, or the end of the cooldown (`phase2_cooldown_seconds`) when that is
  later — a run that would only answer "skipped: cooldown" is never created; the queued one
  starts when the cooldown ends. Nothing is queued while automatic runs are paused.
- Check-and-create happens under a kernel-released file lock (`.state/phase2-request.lock`), so
  concurrent extract-session runs on this machine never queue two. It costs two API calls:
  nothing waits on the consolidation itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dsh_memory.consolidation import gate as gate_mod
from dsh_memory.settings import MemorySettings

LOCK_NAME = "phase2-request"
LOCK_WAIT_SECONDS = 30.0
SLACK_SECONDS = 60  # a queued run starting this much after the wanted time still covers it


@dataclass
class ConsolidationRequest:
    requested: bool  # a run exists (created now, or already queued) that will consolidate
    created: bool  # this call created it
    run_name: str = ""
    start_at: datetime | None = None
    reason: str = ""


def wanted_start(settings: MemorySettings, now: datetime) -> tuple[datetime | None, str]:
    """When a consolidation run should start (None: it would not run; the reason says why)."""
    from dsh_memory.context import MemoryContext

    with MemoryContext.of(settings) as ctx:
        meta = ctx.state.get_meta()
    decision = gate_mod.decide(
        meta, notes=0, raw_blocks=0, now=now, cooldown_seconds=settings.phase2_cooldown_seconds, force=False
    )
    if decision.outcome == gate_mod.SKIP_PAUSED:
        return None, decision.reason
    if not decision.pending:
        return None, "nothing pending"
    return now + timedelta(seconds=decision.cooldown_remaining_seconds), ""


def request_consolidation(settings: MemorySettings, deployment_name: str, now: datetime | None = None):
    """Make sure one `consolidate` run is queued to start when wanted; create it only if none is."""
    from filelock import FileLock

    from dsh_memory.storage.locks import lock_path

    now = now or datetime.now(UTC)
    start_at, why_not = wanted_start(settings, now)
    if start_at is None:
        return ConsolidationRequest(False, False, reason=why_not)
    path = lock_path(settings.memory_root, LOCK_NAME)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = FileLock(str(path), thread_local=False, preserve_lock_file=True, fallback_to_soft=False)
    with lock.acquire(timeout=LOCK_WAIT_SECONDS, poll_interval=0.05):
        return _queue_once(deployment_name, start_at)


def _queue_once(deployment_name: str, start_at: datetime) -> ConsolidationRequest:
    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    from dsh_memory.serve.due_runs import queued_runs

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(deployment_name)
        before = start_at + timedelta(seconds=SLACK_SECONDS)
        queued = queued_runs(client, deployment.id, before, ("SCHEDULED", "PENDING"), limit=1)
        if queued:
            run = queued[0]
            return ConsolidationRequest(
                True, False, run.name, run.expected_start_time, "coalesced into the run already queued"
            )
        run = client.create_flow_run_from_deployment(deployment.id, state=Scheduled(scheduled_time=start_at))
        return ConsolidationRequest(True, True, run.name, start_at, "queued")
