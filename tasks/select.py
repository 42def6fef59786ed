"""Task: decide which sessions Phase 1 extracts now, and why the others wait."""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from dsh_memory import readers
from dsh_memory.context import MemoryContext
from dsh_memory.models import SessionRef
from dsh_memory.phase1 import selection
from dsh_memory.settings import MemorySettings


@task(name="plan-extractions", cache_policy=NO_CACHE)
def plan_extractions(
    refs: list[SessionRef],
    settings: MemorySettings,
    now: datetime,
    only_ids: list[str] | None = None,
    backfill: bool = False,
    respect_idle: bool = True,
) -> list[selection.Decision]:
    with MemoryContext.of(settings) as ctx:
        claims, overrides = ctx.state.claims(), ctx.state.overrides()
    return selection.plan(
        refs,
        claims,
        settings,
        now,
        load=readers.load,
        only_ids=set(only_ids) if only_ids is not None else None,
        backfill=backfill,
        respect_idle=respect_idle,
        overrides=overrides,
    )
