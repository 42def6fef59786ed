"""Phase 1 bookkeeping tasks, one verb each: find the session logs under the configured roots
(stat only), decide which ones Phase 1 extracts now and why the others wait, and keep the claims
and flags in `.state/state.sqlite3`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dsh_memory import readers
from dsh_memory.context import MemoryContext
from dsh_memory.models import SessionRef
from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.selection import BASELINE, UNREADABLE, Decision, DecisionRow, ReasonKind
from dsh_memory.serve import preflight
from dsh_memory.settings import MemorySettings


@task(name="discover-sessions", cache_policy=NO_CACHE)
def discover_sessions(settings: MemorySettings) -> list[SessionRef]:
    return readers.discover(settings.roots)


@task(name="plan-extractions", cache_policy=NO_CACHE)
def plan_extractions(
    refs: list[SessionRef],
    settings: MemorySettings,
    now: datetime,
    only_ids: list[str] | None = None,
    backfill: bool = False,
    respect_idle: bool = True,
) -> list[Decision]:
    """`selection.plan` over the claims and overrides in the state database (the same plan the
    CLI makes before it starts any flow: dsh_memory/serve/preflight.py)."""
    with MemoryContext.of(settings) as ctx:
        return preflight.plan_extractions(ctx, refs, now, only_ids, backfill, respect_idle)


@task(name="recover-stale-claims", cache_policy=NO_CACHE)
def recover_stale_claims(settings: MemorySettings, now: datetime) -> list[str]:
    """Running claims whose owner process is gone (at once) or not renewed for
    `stale_claim_seconds` become failed, due now."""
    with MemoryContext.of(settings) as ctx:
        recovered = ctx.state.recover_stale(now, settings.stale_claim_seconds)
    if recovered:
        get_run_logger().warning(
            "recovered %d running claims of dead or stale runs: %s", len(recovered), ", ".join(recovered)
        )
    return recovered


@task(name="claim-sessions", cache_policy=NO_CACHE)
def claim_sessions(session_ids: list[str], settings: MemorySettings, now: datetime) -> list[str]:
    """Claim the planned sessions before extracting any, in one transaction: the ids this run
    got. Runs that planned the same sessions at once (a storm's triggered runs all take the
    fired sessions) split them here instead of each queueing every one and contending for them
    session by session."""
    with MemoryContext.of(settings) as ctx:
        return ctx.state.try_start_many(session_ids, now, settings.stale_claim_seconds)


@task(name="sweep-temp-files", cache_policy=NO_CACHE)
def sweep_temp_files(settings: MemorySettings) -> list[str]:
    with MemoryContext.of(settings) as ctx:
        removed = ctx.store.sweep_temp_files()
    if removed:
        get_run_logger().warning("removed %d temp files left by a killed writer", len(removed))
    return removed


@task(name="record-decisions", cache_policy=NO_CACHE)
def record_decisions(decisions: list[DecisionRow], settings: MemorySettings, now: datetime) -> list[Outcome]:
    """Bookkeeping for the sessions not extracted now. Returns an outcome per unreadable log."""
    outcomes = []
    with MemoryContext.of(settings) as ctx:
        state = ctx.state
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
    return outcomes


@task(name="finish-phase1", cache_policy=NO_CACHE)
def finish_phase1(
    settings: MemorySettings, outcomes: list[Outcome], now: datetime, provider: str = "", model: str = ""
) -> list[str]:
    """Pending flag, run stamp, and parked sessions resumed when this route just worked.
    Returns the resumed session ids."""
    worked = any(o.outcome in ("extracted", "noop") for o in outcomes)
    resumed: list[str] = []
    with MemoryContext.of(settings) as ctx:
        if any(o.outcome == "extracted" for o in outcomes):
            ctx.state.set_pending(True)
        if worked and provider:
            resumed = ctx.state.unpark(now, provider=provider, model=model)
        ctx.state.set_phase1_ran(now)
    if resumed:
        get_run_logger().info(
            "the model works again: %d parked sessions resume on the next run (%s)", len(resumed), ", ".join(resumed)
        )
    return resumed


@contextmanager
def renewing_claims(settings: MemorySettings, session_ids: list[str]) -> Iterator[None]:
    """Renew this process's running claims on `session_ids` every stale_claim_seconds / 3, in the
    background: a live owner never looks stale, however long a local model decodes."""
    stop = threading.Event()
    every = max(1.0, settings.stale_claim_seconds / 3)

    def loop() -> None:
        with MemoryContext.of(settings) as ctx:
            while not stop.wait(every):
                with suppress(Exception):  # a busy database: try again next round
                    ctx.state.renew(session_ids, datetime.now(UTC))

    thread = threading.Thread(target=loop, name="dsh-memory-claim-renewal", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
