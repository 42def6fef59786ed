"""Phase 1 tasks: one model call (retried, cached, globally limited) and one session end to end.

`llm_extract`'s results (redacted model output) persist, committed as soon as the call returns,
and its cache key hits across runs: a re-run after a crash never pays twice for one extraction.
"""

from __future__ import annotations

from datetime import timedelta

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.tasks import exponential_backoff
from prefect.transactions import CommitMode, transaction

from dsh_memory import progress
from dsh_memory.context import MemoryContext
from dsh_memory.errors import LLMTruncatedError
from dsh_memory.llm.factory import PhaseModel
from dsh_memory.llm.limit import model_slot
from dsh_memory.phase1 import prompt as phase1
from dsh_memory.phase1.extraction import ExtractionOutput, Outcome, Phase1Input, call_model, prepare_input
from dsh_memory.phase1.remote import JobResult
from dsh_memory.phase1.selection import Decision
from dsh_memory.settings import MemorySettings
from dsh_memory.tasks._policy import RETRY_JITTER_FACTOR, transient_only
from dsh_memory.tasks._session import call_keys, finish, start
from dsh_memory.tasks.remote import from_workers


def cache_key(scope: str, session_id: str, watermark: int, to_seq: int, model: PhaseModel) -> str:
    """One extraction's identity: the same transcript slice through the same prompt, writer code
    and model."""
    version = f"{phase1.PROMPT_VERSION}+{phase1.writer_digest()}"
    # the model: a different model or budget is a different answer (the writer follows from the provider)
    parts = ("p1", scope, session_id, watermark, to_seq, version, model.provider, model.model, model.budget_tokens)
    return ":".join(str(x) for x in parts)


def _cache_key(context, parameters) -> str:
    p = parameters
    return cache_key(p["cache_scope"], p["session_id"], p["watermark"], p["to_seq"], p["model"])


@task(
    name="llm-extract",
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=1),  # 1, 2, 4 s
    retry_jitter_factor=RETRY_JITTER_FACTOR,
    retry_condition_fn=transient_only,
    cache_key_fn=_cache_key,
    cache_expiration=timedelta(days=30),
    persist_result=True,
    log_prints=False,
)
def llm_extract(
    model: PhaseModel,
    material: Phase1Input,
    *,
    session_id: str,
    watermark: int,
    to_seq: int,
    cwd: str | None,
    source: str,
    cache_scope: str = "",
) -> ExtractionOutput:
    return call_model(
        model.llm,
        material,
        writer=model.writer,
        cwd=cwd,
        source=source,
        delta_watermark=watermark if watermark >= 0 else None,
        max_tokens=model.max_tokens,
        reasoning_effort=model.reasoning_effort,
        slot=model_slot,  # held around the model's part of the call only
    )


@task(name="extract-session", task_run_name="extract-{decision.ref.id}", cache_policy=NO_CACHE)
def extract_session(
    decision: Decision,
    model: PhaseModel | None,
    settings: MemorySettings,
    progress_total: int = 0,
    sent: dict[str, JobResult | Outcome] | None = None,
) -> Outcome:
    """Claim → render/redact/budget → model → no-op gate → files → claim done/noop, or the claim
    failed (tasks/_session.py `finish`); the run claimed its sessions up front. Without a `model`
    (`extract_on_workers`), `sent` holds the batch's answers: this run applies the session's."""
    with MemoryContext.of(settings) as ctx:
        try:
            if model is None:
                return from_workers(ctx, settings, decision, sent or {})
            if not start(ctx, settings, decision, claimed=True):
                return Outcome.claimed_elsewhere(decision)
            try:
                answer = _call_with_budget_retry(decision, model, settings)
            except Exception as exc:  # isolate: this session's claim fails, the others go on
                answer = exc
            return finish(ctx, settings, decision, answer, (model.provider, model.model))
        finally:
            progress.report("phase1", 1, progress_total, decision.ref.id)


def _call_with_budget_retry(decision: Decision, model: PhaseModel, settings: MemorySettings):
    """The model call; a cut-off answer is retried once with half the transcript budget."""
    for attempt in (1, 2):
        material = prepare_input(decision, model.budget_tokens, model.writer)
        try:
            # Commit the cached answer as soon as the call returns: a task called inside a task
            # commits with its parent by default, i.e. after this session's files are written,
            # so a run killed while writing them paid for an answer the rerun could not reuse
            # (and a model's new slug put a second summary beside the first).
            with transaction(commit_mode=CommitMode.EAGER):
                return llm_extract(model, material, **call_keys(decision, settings))
        except LLMTruncatedError:
            if attempt == 2:
                raise
            model = model.with_budget(max(500, model.budget_tokens // 2))
            get_run_logger().warning(
                "session %s: output truncated; retrying once with budget %d", decision.ref.id, model.budget_tokens
            )
