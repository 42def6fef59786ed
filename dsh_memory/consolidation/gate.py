"""Should Phase 2 run now? Pure decision over the pipeline bookkeeping (when it runs:
docs/running.md). Raw blocks waiting count as work even without the pending flag (a Phase 1
that died between appending and flagging, or blocks left over by the input cap); `force`
bypasses the cooldown and the back-off, never the "nothing to do" check.

After BACKOFF_AFTER_FAILURES consecutive failures (an endpoint down, a revoked key) automatic
runs wait a back-off from the last failure, doubling with each further failure up to
BACKOFF_CAP_SECONDS: the model is not called on every trigger while it is broken, and the
pipeline tries again by itself once the wait is over (a success resets the count).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from dsh_memory.consolidation.inputs import as_utc

BACKOFF_AFTER_FAILURES = 3
BACKOFF_BASE_SECONDS = 30 * 60
BACKOFF_CAP_SECONDS = 6 * 3600
RUN = "run"
SKIP_NOTHING = "skipped: nothing to consolidate"
SKIP_COOLDOWN = "skipped: cooldown"
SKIP_BACKOFF = "skipped: backing off after repeated failures"
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
    backoff_remaining_seconds: int = 0

    @property
    def run(self) -> bool:
        return self.outcome == RUN

    @property
    def wait_seconds(self) -> int:
        """How long until an automatic run may consolidate (the cooldown or the back-off)."""
        return max(self.cooldown_remaining_seconds, self.backoff_remaining_seconds)


def backoff_seconds(failures: int) -> int:
    """The wait after `failures` consecutive failures: none before BACKOFF_AFTER_FAILURES, then
    30 min, 1 h, 2 h, 4 h, 6 h (the cap) and 6 h from then on."""
    if failures < BACKOFF_AFTER_FAILURES:
        return 0
    return min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(failures - BACKOFF_AFTER_FAILURES, 8))


def backoff_until(meta: Any, now: datetime) -> datetime | None:
    """When automatic runs try again after repeated failures; None when they do not wait. A
    failure recorded later than `now` (the clock was ahead, then set back) holds no run: else
    runs would wait until the clock reached it, however far ahead that was."""
    failed = as_utc(getattr(meta, "last_phase2_failure_at", None))
    if failed is None or failed > as_utc(now):
        return None
    until = failed + timedelta(seconds=backoff_seconds(int(getattr(meta, "phase2_failures", 0) or 0)))
    return until if until > as_utc(now) else None


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
    if last is not None and cooldown_seconds > 0 and last <= as_utc(now):  # a future success holds no run
        remaining = max(0, int(cooldown_seconds - (as_utc(now) - last).total_seconds()))
    until = backoff_until(meta, now)  # None also when the failures predate their recorded time
    backoff = int((until - as_utc(now)).total_seconds()) if until else 0

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
        backoff_remaining_seconds=backoff,
    )
    if not (pending or notes or raw_blocks):
        return d(SKIP_NOTHING, "no pending flag, no ad hoc notes, no raw memories waiting")
    if backoff > 0 and not force:
        return d(
            SKIP_BACKOFF,
            f"{failures} consecutive failures; next automatic try in {_span(backoff)}"
            " (`dsh-memory consolidate --force` runs it now)",
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
    bypassed = force and (remaining or backoff)
    extra = " (forced: cooldown and back-off bypassed)" if bypassed else ""
    return d(RUN, "work: " + ", ".join(w for w in why if w) + extra)
