"""Is there anything to do? Decided from `stat` and the state database, before any Prefect engine
(docs/running.md: "Nothing to do costs nothing"): `extract`, `run`, `demo` and `consolidate` start
a flow only when it would do something (extract a session, or record bookkeeping for one). The decision is the
flows' own: `plan_extractions` is the `plan-extractions` task's body, `phase2_gate`
`phase2-check-gate`'s. Nothing here writes or imports prefect.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from dsh_memory import readers
from dsh_memory.context import MemoryContext
from dsh_memory.phase1 import selection

if TYPE_CHECKING:
    from dsh_memory.consolidation.gate import GateDecision
    from dsh_memory.consolidation.result import Phase2Result
    from dsh_memory.models import SessionRef
    from dsh_memory.phase1.result import Phase1Result
    from dsh_memory.settings import MemorySettings
    from dsh_memory.storage.state_schema import Claim


def plan_extractions(
    ctx: MemoryContext,
    refs: list[SessionRef],
    now: datetime,
    only_ids: list[str] | None = None,
    backfill: bool = False,
    respect_idle: bool = True,
    *,
    claims: dict[str, Claim] | None = None,
) -> list[selection.Decision]:
    """Phase 1's plan over discovered `refs` (the `plan-extractions` task). Never creates the
    state database: without one every session is new."""
    if claims is None:
        claims = ctx.state.claims() if ctx.state_exists() else {}
    overrides = ctx.state.overrides() if ctx.state_exists() else {}
    return selection.plan(
        refs,
        claims,
        ctx.settings,
        now,
        load=readers.load,
        only_ids=set(only_ids) if only_ids is not None else None,
        backfill=backfill,
        respect_idle=respect_idle,
        overrides=overrides,
    )


def phase2_gate(settings: MemorySettings, now: datetime, force: bool) -> GateDecision:
    """Should Phase 2 run now (the `phase2-check-gate` task)? Never creates the state database."""
    from dsh_memory.consolidation import gate

    with MemoryContext.of(settings) as ctx:
        meta = ctx.state.get_meta() if ctx.state_exists() else None  # the gate reads absent fields as unset
        return gate.decide(
            meta,
            notes=len(ctx.store.list_notes()),
            raw_blocks=len(ctx.store.read_raw_blocks()),
            now=now,
            cooldown_seconds=settings.phase2_cooldown_seconds,
            force=force,
        )


def phase2_skipped(settings: MemorySettings, now: datetime, force: bool) -> Phase2Result | None:
    """Phase 2's result when its gate is closed (nothing to consolidate, the cooldown, the
    back-off after failures) or another consolidation holds its lock, written like the flow's;
    None when it would run. Nothing is recorded."""
    from dsh_memory.consolidation import gate as gate_mod
    from dsh_memory.consolidation.result import Phase2Result
    from dsh_memory.storage.locks import is_running

    gate = phase2_gate(settings, now, force)
    if gate.run and is_running(settings.memory_root, "phase2"):  # the flow would skip too
        reason = "another consolidation holds .state/phase2.lock"
        return Phase2Result(
            outcome=gate_mod.SKIP_RUNNING, reason=reason, force=force, memory_root=str(settings.memory_root)
        )
    if gate.run:
        return None
    return Phase2Result(
        outcome=gate.outcome, reason=gate.reason, force=force, memory_root=str(settings.memory_root), gate=gate
    )


@dataclass
class Phase1Preview:
    """Phase 1 as the extract flow would see it now (a dry run), and whether it would do anything."""

    result: Phase1Result
    has_work: bool
    session_ids: list[str] | None = None  # the requested ids made whole (`whole_ids`)


def whole_ids(session_ids: list[str], known: list[str]) -> list[str]:
    """Each id, or the one known id it is a prefix of (6+ characters, as `sessions` prints them and
    `render` takes them); an unknown or ambiguous one as given (reported unknown)."""
    out = []
    for s in session_ids:
        found = [k for k in known if k.startswith(s)] if len(s) >= 6 and s not in known else []
        out.append(found[0] if len(found) == 1 else s)
    return out


def preview_phase1(
    ctx: MemoryContext,
    now: datetime,
    session_ids: list[str] | None = None,
    backfill: bool = False,
    respect_idle: bool = True,
) -> Phase1Preview:
    from dsh_memory.phase1.result import Phase1Result

    refs = readers.discover(ctx.settings.roots)
    if session_ids:
        session_ids = whole_ids(session_ids, [r.id for r in refs])
    claims = ctx.state.claims() if ctx.state_exists() else {}
    decisions = plan_extractions(ctx, refs, now, session_ids, backfill, respect_idle, claims=claims)
    todo = [d for d in decisions if d.action == selection.EXTRACT]
    result = Phase1Result(discovered=len(refs), candidates=len(todo), decisions=[d.row() for d in decisions])
    if session_ids:
        known = {r.id for r in refs}
        result.unknown_ids = [s for s in session_ids if s not in known]
    work = bool(todo) or any(_bookkeeping(d) for d in decisions) or _recoverable(claims, ctx.settings, now)
    return Phase1Preview(result, work, session_ids)


def _bookkeeping(d: selection.Decision) -> bool:
    """Whether the flow would record something for a session it does not extract."""
    return d.action in (selection.UNREADABLE, selection.BASELINE) or d.kind is selection.ReasonKind.TOO_FEW_NEW_EVENTS


def _recoverable(claims: dict[str, Claim], settings: MemorySettings, now: datetime) -> bool:
    """A running claim the flow's `recover-stale-claims` would take over (owner dead, or stale)."""
    return any(c.status == "running" and c.recoverable(now, settings.stale_claim_seconds) for c in claims.values())
