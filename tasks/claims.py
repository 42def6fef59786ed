"""Phase 1 bookkeeping tasks: the claims and flags in `.state/state.sqlite3`, one verb each.

- `recover_stale_claims`: running claims older than `stale_claim_seconds` (a killed run) → failed.
- `record_decisions`: what the plan means for sessions that are not extracted now: an unreadable
  log fails its claim alone, a legacy done claim gets its watermark, a session that grew too
  little is marked checked (so it is not re-read before `recheck_interval_seconds`).
- `finish_phase1`: set the pending-consolidation flag when anything was extracted; stamp the run.
"""

from __future__ import annotations

from datetime import datetime

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.selection import BASELINE, UNREADABLE, DecisionRow, ReasonKind
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore


@task(name="recover-stale-claims", cache_policy=NO_CACHE)
def recover_stale_claims(settings: MemorySettings, now: datetime) -> list[str]:
    state = StateStore(settings.memory_root)
    try:
        recovered = state.recover_stale(now, settings.stale_claim_seconds)
    finally:
        state.close()
    if recovered:
        get_run_logger().warning(
            "recovered %d stale running claims as failed: %s", len(recovered), ", ".join(recovered)
        )
    return recovered


@task(name="record-decisions", cache_policy=NO_CACHE)
def record_decisions(decisions: list[DecisionRow], settings: MemorySettings, now: datetime) -> list[Outcome]:
    """Bookkeeping for the sessions not extracted now. Returns an outcome per unreadable log."""
    state = StateStore(settings.memory_root)
    outcomes = []
    try:
        for d in decisions:
            if d.action == UNREADABLE:
                state.fail(d.session, d.reason, now, settings.retry_base_seconds, settings.retry_limit)
                outcomes.append(
                    Outcome(session=d.session, source=d.source, outcome="unreadable", part=d.part, error=d.reason)
                )
            elif d.action == BASELINE:
                state.baseline(d.session, d.watermark, now)
            elif d.kind is ReasonKind.TOO_FEW_NEW_EVENTS:  # looked at, not extracted: recheck later
                state.touch_checked(d.session, now)
    finally:
        state.close()
    return outcomes


@task(name="finish-phase1", cache_policy=NO_CACHE)
def finish_phase1(settings: MemorySettings, outcomes: list[Outcome], now: datetime) -> None:
    state = StateStore(settings.memory_root)
    try:
        if any(o.outcome == "extracted" for o in outcomes):
            state.set_pending(True)
        state.set_phase1_ran(now)
    finally:
        state.close()
