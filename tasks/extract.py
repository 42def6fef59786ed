"""Phase 1 tasks: one model call (retried, cached, globally limited) and one session end to end.

Policy lives in the decorators:
- `llm_extract` retries transient model errors only (429/5xx/timeouts), with exponential
  backoff and jitter; its cache key is (session, watermark, target seq, prompt version,
  provider, model, budget), so a re-run after a crash never pays twice for one extraction.
- when a Prefect server is reachable, every model call holds a slot of the global
  concurrency limit `dsh-memory-llm`, shared by all runs (dsh_memory/llm/limit.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.tasks import exponential_backoff

from dsh_memory import progress
from dsh_memory.errors import LLMTruncatedError
from dsh_memory.llm.base import LLM
from dsh_memory.phase1 import prompt as phase1
from dsh_memory.phase1.extraction import ExtractionOutput, Outcome, apply_output, call_model, prepare_transcript
from dsh_memory.phase1.selection import Decision
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from dsh_memory.tasks._policy import transient_only
from dsh_memory.transcript.redact import redact


def _cache_key(context, parameters) -> str:
    p = parameters
    return ":".join(
        str(x)
        for x in (
            "p1",
            p["cache_scope"],
            p["session_id"],
            p["watermark"],
            p["to_seq"],
            phase1.PROMPT_VERSION,
            p["provider"],
            p["model"],
            p["budget_tokens"],
        )
    )


@task(
    name="llm-extract",
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_jitter_factor=0.5,
    retry_condition_fn=transient_only,
    cache_key_fn=_cache_key,
    cache_expiration=timedelta(days=30),
    persist_result=True,
    log_prints=False,
)
def llm_extract(
    llm: LLM,
    transcript_text: str,
    *,
    session_id: str,
    watermark: int,
    to_seq: int,
    provider: str,
    model: str,
    budget_tokens: int,
    cwd: str | None,
    source: str,
    max_tokens: int,
    reasoning_effort: str,
    global_limit=None,
    cache_scope: str = "",
) -> ExtractionOutput:
    kwargs = dict(
        cwd=cwd,
        source=source,
        delta_watermark=watermark if watermark >= 0 else None,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
    )
    if global_limit is not None:
        with global_limit.slot():
            return call_model(llm, transcript_text, **kwargs)
    return call_model(llm, transcript_text, **kwargs)


def _short_error(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}"
    return redact(msg)[:300]


@task(name="extract-session", task_run_name="extract-{decision.ref.id}", cache_policy=NO_CACHE)
def extract_session(
    decision: Decision,
    llm: LLM,
    settings: MemorySettings,
    max_tokens: int,
    reasoning_effort: str,
    budget_tokens: int,
    progress_total: int = 0,
    global_limit=None,
    llm_task=None,
) -> Outcome:
    """Claim → render/redact/budget → model → no-op gate → files → claim done/noop (or failed)."""
    from prefect import get_run_logger

    log = get_run_logger()
    store = MemoryStore(settings.memory_root)
    state = StateStore(settings.memory_root)
    ref = decision.ref
    now = datetime.now(UTC)
    if not state.try_start(ref.id, now, stale_after_s=settings.stale_claim_seconds):
        return Outcome(ref.id, ref.source, "skipped", decision.part, reason="claimed by another run")
    budget = budget_tokens
    call = llm_task or llm_extract
    try:
        for attempt in (1, 2):
            transcript = prepare_transcript(decision, budget)
            try:
                output = call(
                    llm,
                    transcript.text,
                    session_id=ref.id,
                    watermark=decision.watermark,
                    to_seq=decision.session.last_seq,
                    provider=getattr(llm, "provider", ""),
                    model=getattr(llm, "model", ""),
                    budget_tokens=budget,
                    cwd=decision.session.cwd,
                    source=ref.source,
                    max_tokens=max_tokens,
                    reasoning_effort=reasoning_effort,
                    global_limit=global_limit,
                    cache_scope=str(settings.memory_root),
                )
                break
            except LLMTruncatedError:
                if attempt == 2:
                    raise
                budget = max(500, budget // 2)
                log.warning("session %s: output truncated; retrying once with budget %d", ref.id, budget)
        outcome = apply_output(store, state, decision, output, datetime.now(UTC))
        log.info("session %s → %s %s", ref.id, outcome.outcome, outcome.slug)
        return outcome
    except Exception as exc:  # isolate: this session's claim fails, the batch goes on
        err = _short_error(exc)
        claim = state.fail(ref.id, err, datetime.now(UTC), settings.retry_base_seconds, settings.retry_limit)
        log.error(
            "session %s failed (attempt %d%s): %s", ref.id, claim.attempts, ", parked" if claim.parked else "", err
        )
        return Outcome(ref.id, ref.source, "failed", decision.part, error=err)
    finally:
        progress.report("phase1", 1, progress_total, ref.id)
