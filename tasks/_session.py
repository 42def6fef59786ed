"""The two ends of one session's Phase 1, shared by both modes (this host's model, or the extract
pool's workers): `start` takes its claim, `finish` ends it — the answer applied (files, then
claim done/noop), or, when rendering, the model, the worker or applying failed, the claim failed
against the route that answered (retried after a backoff, parked after `retry_limit`). This is
the one failure path of Phase 1: a session's failure never stops the others."""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import get_run_logger

from dsh_memory.context import MemoryContext
from dsh_memory.phase1.extraction import ExtractionOutput, Outcome, apply_output
from dsh_memory.phase1.remote import MAX_ERROR_CHARS
from dsh_memory.phase1.selection import Decision
from dsh_memory.settings import MemorySettings
from dsh_memory.transcript.redact import redact


def short_error(exc: BaseException) -> str:
    """An error as a claim and the run history show it: redacted, one short line."""
    return redact(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]


def call_keys(decision: Decision, settings: MemorySettings) -> dict:
    """What `llm_extract` is told of a session besides its material, in both modes (a TranscriptJob
    carries the same): the slice its cache key names (with the memory root), the prompt's cwd and
    source."""
    session, ref = decision.session, decision.ref
    return dict(
        session_id=ref.id,
        source=ref.source,
        cwd=session.cwd,
        watermark=decision.watermark,
        to_seq=session.last_seq,
        cache_scope=str(settings.memory_root),
    )


def start(ctx: MemoryContext, settings: MemorySettings, decision: Decision, claimed: bool) -> bool:
    """Take the session's claim. `claimed`: the run claimed its batch up front; the claim is taken
    again if still this process's (another run's takeover of a stale one still wins). The claim
    says which log it reads (`forget --project` asks where a running session works)."""
    ref = decision.ref
    now = datetime.now(UTC)
    return ctx.state.try_start(
        ref.id, now, settings.stale_claim_seconds, source=ref.source, path=str(ref.path), reclaim=claimed
    )


def finish(
    ctx: MemoryContext,
    settings: MemorySettings,
    decision: Decision,
    answer: ExtractionOutput | BaseException | str,
    route: tuple[str, str] = ("", ""),
) -> Outcome:
    """The session's outcome from its `answer`: an extraction (applied), or why there is none (an
    exception, or a worker's error text), which fails its claim against `route` (provider, model)."""
    log = get_run_logger()
    ref = decision.ref
    if isinstance(answer, ExtractionOutput):
        try:
            outcome = apply_output(ctx.store, ctx.state, decision, answer, datetime.now(UTC))
            log.info("session %s → %s %s", ref.id, outcome.outcome, outcome.slug)
            return outcome
        except Exception as exc:  # this session alone
            answer = exc
    error = answer if isinstance(answer, str) else short_error(answer)
    claim = ctx.state.fail(
        ref.id,
        error,
        datetime.now(UTC),
        settings.retry_base_seconds,
        settings.retry_limit,
        provider=route[0],
        model=route[1],
    )
    log.error("session %s failed (attempt %d%s): %s", ref.id, claim.attempts, ", parked" if claim.parked else "", error)
    return Outcome.of(decision, "failed", error=error, attempts=claim.attempts, parked=claim.parked)
