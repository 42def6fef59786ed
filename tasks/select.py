"""Tasks: find the session logs under the configured roots (stat only), and decide which ones
Phase 1 extracts now and why the others wait."""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from dsh_memory import readers
from dsh_memory.context import MemoryContext
from dsh_memory.models import SessionRef
from dsh_memory.phase1 import selection
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
) -> list[selection.Decision]:
    """`selection.plan` over the claims and overrides in the state database (the same plan the
    CLI makes before it starts any flow: dsh_memory/serve/preflight.py)."""
    with MemoryContext.of(settings) as ctx:
        return preflight.plan_extractions(ctx, refs, now, only_ids, backfill, respect_idle)
