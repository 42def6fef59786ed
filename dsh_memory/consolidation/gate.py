"""Should Phase 2 run now? Pure decision over the pipeline bookkeeping (when it runs:
docs/running.md). Raw blocks waiting count as work even without the pending flag (a Phase 1
that died between appending and flagging, or blocks left over by the input cap); `force`
bypasses the cooldown and the failure pause, never the "nothing to do" check.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from dsh_memory.consolidation.inputs import as_utc

PAUSE_AFTER_FAILURES = 3
RUN = "run"
SKIP_NOTHING = "skipped: nothing to consolidate"
SKIP_COOLDOWN = "skipped: cooldown"
SKIP_PAUSED = "skipped: paused after repeated failures"
SKIP_RUNNING = "skipped: already running"
SKIP_NO_ROUTE = "skipped: no model route"
CONSOLIDATED = "consolidated"


@dataclass
class GateDecision:
    outcome: str  # RUN or one of the SKIP_* outcomes
    reason: str
    force: bool
    pending: bool
    notes: int
    raw_blocks: int
    failures: int
    last_phase2_at: str | None
    cooldown_seconds: int
    cooldown_remaining_seconds: int

    @property
    def run(self) -> bool:
        return self.outcome == RUN


def _span(seconds: int) -> str:
    """`seconds` as a person reads a wait: "5 h 50 min", "12 min", "40 s"."""
    h, m = divmod(seconds // 60, 60)
    return f"{h} h {m} min" if h else f"{m} min" if m else f"{seconds} s"


def decide(
    meta: Any, *, notes: int, raw_blocks: int, now: datetime, cooldown_seconds: int, force: bool
) -> GateDecision:
    last = as_utc(getattr(meta, "last_phase2_at", None))
    failures = int(getattr(meta, "phase2_failures", 0) or 0)
    pending = bool(getattr(meta, "pending_consolidation", False))
    remaining = 0
    if last is not None and cooldown_seconds > 0:
        remaining = max(0, int(cooldown_seconds - (as_utc(now) - last).total_seconds()))

    d = partial(
        GateDecision,
        force=force,
        pending=pending,
        notes=notes,
        raw_blocks=raw_blocks,
        failures=failures,
        last_phase2_at=last.isoformat() if last else None,
        cooldown_seconds=cooldown_seconds,
        cooldown_remaining_seconds=remaining,
    )
    if not (pending or notes or raw_blocks):
        return d(SKIP_NOTHING, "no pending flag, no ad hoc notes, no raw memories waiting")
    if failures >= PAUSE_AFTER_FAILURES and not force:
        return d(
            SKIP_PAUSED,
            f"{failures} consecutive failures; automatic runs are paused until a manual "
            f"`dsh-memory consolidate --force` succeeds",
        )
    if remaining > 0 and not force:
        return d(
            SKIP_COOLDOWN,
            f"last consolidation at {last.isoformat(timespec='seconds')}; next allowed in {_span(remaining)}"
            " (`dsh-memory consolidate --force` runs it now)",
        )
    why = [
        "pending flag" if pending else "",
        f"{notes} ad hoc notes" if notes else "",
        f"{raw_blocks} raw blocks" if raw_blocks else "",
    ]
    bypassed = force and (remaining or failures >= PAUSE_AFTER_FAILURES)
    extra = " (forced: cooldown and pause bypassed)" if bypassed else ""
    return d(RUN, "work: " + ", ".join(w for w in why if w) + extra)
