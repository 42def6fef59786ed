"""extract-session flow: the debounced Phase 1 run, one at a time, over every quiet session.

The debounce is data (dsh_memory/storage/turn_ends.py): a round extracts every session quiet for
`debounce_seconds` whose newest turn end is not handled yet (plus `session`, when named: the
vault's "extract now") and marks those turn ends handled; then the run asks Prefect for its next
run at the next due time (keyed by that time, so asking twice creates one run), or waits for it
when it is within LINGER_SECONDS. What starts it, what it writes and how it is named:
docs/running.md ("The debounce is data"). Returns a Phase1Result with `consolidation_requested`.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

from prefect import flow, get_run_logger
from prefect.deployments import run_deployment
from prefect.runtime import deployment, flow_run

from dsh_memory.consolidation import gate
from dsh_memory.context import memory_context
from dsh_memory.flows.extract import extract_flow, short_id
from dsh_memory.hooks.events import RESOURCE_PREFIX
from dsh_memory.phase1.result import Phase1Result
from dsh_memory.serve.deployments import CONSOLIDATE, in_this_mode
from dsh_memory.storage.state_schema import PipelineMeta
from dsh_memory.storage.turn_ends import TurnEnds

MAX_SESSIONS = 256  # per round: bounds its duration; the rest are due at once, so the next round runs
# A run whose next session is due within this (at most half the debounce) waits for it and runs
# another round instead of asking for a new run: a run costs a process (≈ 3 s of CPU to import
# Prefect), and one asked for while this one runs waits for its slot.
LINGER_SECONDS = 10.0
MAX_ROUNDS = 20  # bounds a run's duration; then it asks for its next run as usual


def session_id_from(resource: str) -> str:
    """`dsh.session.<id>` (the event resource) or a bare id → the id."""
    return (resource or "").strip().removeprefix(RESOURCE_PREFIX)


def _run_name() -> str:
    """`extract-session/<short id>` when a session is named, `extract-session/due` otherwise."""
    sid = session_id_from(str(flow_run.parameters.get("session") or ""))
    return f"extract-session/{short_id(sid) if sid else 'due'}"


@flow(name="extract-session", flow_run_name=_run_name)
def extract_session_flow(session: str = "", consolidate: bool = True) -> Phase1Result:
    log = get_run_logger()
    sid = session_id_from(session)
    result = Phase1Result(discovered=0, candidates=0, decisions=[])
    with memory_context(writes=True) as ctx:
        debounce = ctx.settings.debounce_seconds
        ends = TurnEnds(ctx.state)
        try:
            for _ in range(MAX_ROUNDS):
                due = ends.due(datetime.now(UTC), debounce, MAX_SESSIONS)
                ids = list(dict.fromkeys([sid, *due] if sid else due))
                sid = ""  # a named session is extracted in the first round only
                try:
                    if ids:
                        log.info("extracting %d sessions quiet for %s s", len(ids), debounce)
                        # Named sessions: the request is the reason to look (no idle check, no recheck wait).
                        _merge(result, extract_flow.fn(session_ids=ids, respect_idle=False))
                finally:
                    ends.handled(due)  # a failed session retries through its claim's backoff (catch-up)
                # Due soon: wait here rather than start another process (queued behind this one).
                if (wait := _until_next(ends, debounce)) is None:
                    break
                time.sleep(wait)
        finally:
            ask_for_next_run(ends.next_due(debounce), debounce)
    result.consolidation_requested = bool(consolidate and result.extracted) and request_consolidation()
    return result


def _until_next(ends: TurnEnds, debounce: float) -> float | None:
    """Seconds until the next session's run time when that is within LINGER_SECONDS (at most
    half the debounce); None otherwise."""
    nxt = ends.next_due(debounce)
    if nxt is None:
        return None
    now = datetime.now(UTC)
    wait = (next_run_time(nxt, debounce, now) - now).total_seconds()
    return max(0.0, wait) if wait <= min(LINGER_SECONDS, debounce / 2) else None


def _merge(into: Phase1Result, more: Phase1Result) -> None:
    """One result for a run's rounds."""
    if not into.decisions and not into.outcomes:
        into.__dict__.update(more.__dict__)
        return
    into.candidates += more.candidates
    into.decisions += more.decisions
    into.outcomes += more.outcomes
    into.unknown_ids = [*(into.unknown_ids or []), *(more.unknown_ids or [])] or None
    into.counts = into.count_outcomes()


def next_run_time(due: datetime, debounce: float, now: datetime) -> datetime:
    """When to run for a session due at `due`: after a short window (a tenth of the debounce, at
    most 2 s, at least 1 s) that gathers the sessions due just after, on a grid of that window —
    runs asking for nearby times ask for the same one (the same idempotency key)."""
    window = max(1.0, min(2.0, debounce / 10))
    at = max(due, now).timestamp() + window
    return datetime.fromtimestamp(math.ceil(at / window) * window, UTC)


def ask_for_next_run(due: datetime | None, debounce: float) -> str | None:
    """A scheduled run of this run's deployment at the next due time (idempotent: the time is its
    key). Returns its name; None when nothing is pending or this is no deployment run."""
    log = get_run_logger()
    if due is None or not deployment.id:
        return None
    at = next_run_time(due, debounce, datetime.now(UTC))
    key = f"{deployment.id}:due:{int(at.timestamp())}"
    try:
        run = run_deployment(deployment.id, scheduled_time=at, idempotency_key=key, timeout=0, as_subflow=False)
    except Exception as exc:  # the schedule and the next turn end start a run anyway
        log.warning("next run not scheduled (%s: %s); the schedule will start one", type(exc).__name__, exc)
        return None
    log.info("next run at %s: %s", f"{at:%H:%M:%S}Z", run.name)
    return run.name


def consolidation_key(name: str, meta: PipelineMeta) -> str:
    """The idempotency key of the consolidate run that follows this memory's last consolidation
    (`meta`): the same for every extraction that asks meanwhile, another for
    another memory on the same Prefect server (its `memory_id`), or once it consolidated or failed."""
    return f"{name}:{meta.memory_id}:after:{meta.last_phase2_at}:{meta.phase2_failures}"


def request_consolidation() -> bool:
    """Ask for the `consolidate` run that follows the last consolidation (at the end of its
    cooldown, or of the back-off after repeated failures): one run however many extractions ask — its idempotency key names the last
    consolidation and the failures since, in this memory (its `memory_id`). True when one is asked for."""
    log = get_run_logger()
    now = datetime.now(UTC)
    with memory_context(writes=True) as ctx:
        meta, cooldown = ctx.state.get_meta(), ctx.settings.phase2_cooldown_seconds
    decision = gate.decide(meta, notes=0, raw_blocks=0, now=now, cooldown_seconds=cooldown, force=False)
    if not decision.pending:
        log.info("consolidation not requested: nothing pending")
        return False
    # A pool's run (`dsh-memory deploy`) asks for the pool's consolidate, never serve's.
    name = in_this_mode(CONSOLIDATE)
    start = now + timedelta(seconds=decision.wait_seconds)
    key = consolidation_key(name, meta)
    try:
        run = run_deployment(name, scheduled_time=start, idempotency_key=key, timeout=0, as_subflow=False)
    except Exception as exc:  # no such deployment (plain in-process run): the schedule picks it up
        log.info("consolidation not requested (%s); the schedule will pick it up", type(exc).__name__)
        return False
    log.info("consolidation requested: run %s at %s", run.name, f"{start:%H:%M:%S}Z")
    return True
