"""Catch-up flow: Phase 1 over every candidate, then Phase 2 when consolidation is pending, as
its `extract` and `consolidate` subflows (docs/running.md). Returns a CatchUpResult.
"""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow, get_run_logger
from pydantic import BaseModel

from dsh_memory.consolidation.result import Phase2NotRun, Phase2Result
from dsh_memory.flows.consolidate import consolidate_flow
from dsh_memory.flows.extract import extract_flow
from dsh_memory.phase1.result import Phase1Result


class CatchUpResult(BaseModel):
    phase1: Phase1Result
    phase2: Phase2NotRun | Phase2Result  # this order: a reloaded {outcome, reason} is a Phase2NotRun


def _run_name() -> str:
    """`catch-up/<start time, UTC, to the minute>`, e.g. `catch-up/2026-05-01T09:00Z`."""
    return f"catch-up/{datetime.now(UTC):%Y-%m-%dT%H:%MZ}"


@flow(name="catch-up", flow_run_name=_run_name)
def catch_up_flow(backfill: bool = False, force_consolidation: bool = False) -> CatchUpResult:
    log = get_run_logger()
    phase1 = extract_flow(backfill=backfill)
    if phase1.skipped_no_route:
        log.warning("no model route: nothing extracted, consolidation not attempted")
        return CatchUpResult(phase1=phase1, phase2=Phase2NotRun(reason="no model route"))
    return CatchUpResult(phase1=phase1, phase2=consolidate_flow(force=force_consolidation))
