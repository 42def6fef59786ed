"""Phase 2 tasks, one verb each; policy in the decorators. No task caches: Phase 2 must always
see the current files. A cut-off answer is returned as a truncated `ModelReply`, not raised, so
the flow can parse what arrived and decide whether to retry with a larger max_tokens."""

from __future__ import annotations

from datetime import datetime

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dsh_memory.consolidation import apply as apply_mod
from dsh_memory.consolidation import gate as gate_mod
from dsh_memory.consolidation import inputs as inputs_mod
from dsh_memory.consolidation import mechanical
from dsh_memory.consolidation.output import ConsolidationOutput, ModelReply
from dsh_memory.consolidation.prompt import MEMORY_WRITE_TOOL
from dsh_memory.context import MemoryContext
from dsh_memory.errors import LLMOutputError, LLMTruncatedError
from dsh_memory.llm.factory import PhaseModel
from dsh_memory.serve import preflight
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.store import MemoryStore
from dsh_memory.tasks._policy import RETRY_JITTER_FACTOR, transient_only
from dsh_memory.transcript.redact import redact


@task(name="phase2-check-gate", cache_policy=NO_CACHE)
def check_gate(settings: MemorySettings, now: datetime, force: bool) -> gate_mod.GateDecision:
    """`gate.decide` over the state meta, notes and raw blocks (the same gate the CLI asks before
    it starts any flow: dsh_memory/serve/preflight.py)."""
    return preflight.phase2_gate(settings, now, force)


@task(name="phase2-gather-inputs", cache_policy=NO_CACHE)
def gather_inputs(settings: MemorySettings, now: datetime) -> inputs_mod.Phase2Inputs:
    with MemoryContext.of(settings) as ctx:
        inputs = inputs_mod.gather_inputs(ctx.store, ctx.state, settings, now)
    capped = f"; capped: {', '.join(inputs.truncated)}" if inputs.truncated else ""
    get_run_logger().info(
        "mode %(mode)s: %(raw_blocks)d/%(raw_blocks_total)d raw blocks, %(notes)d/%(notes_total)d notes, "
        "%(summaries)d/%(summaries_total)d summaries (%(forgetting_candidates)d forgetting candidates), "
        "%(skills)d skills, %(input_chars)d input chars%(capped)s",
        {**inputs.counts(), "mode": inputs.mode, "capped": capped},
    )
    return inputs


@task(
    name="phase2-call-model",
    retries=3,
    retry_delay_seconds=[5, 20, 60],
    retry_jitter_factor=RETRY_JITTER_FACTOR,
    retry_condition_fn=transient_only,
    cache_policy=NO_CACHE,
)
def call_consolidation_model(model: PhaseModel, messages: list[dict], max_tokens: int) -> ModelReply:
    """One forced `memory_write` call. Raises LLMTransientError (retried) / LLMFatalError."""
    log = get_run_logger()
    llm, reasoning_effort = model.llm, model.reasoning_effort
    effort = reasoning_effort or "provider default"
    log.info("calling %s/%s (max_tokens %d, effort %s)", llm.provider, llm.model, max_tokens, effort)
    try:
        completion = llm.complete(
            messages, tool=MEMORY_WRITE_TOOL, max_tokens=max_tokens, reasoning_effort=reasoning_effort
        )
    except LLMTruncatedError as exc:
        log.warning("answer cut off at max_tokens %d", max_tokens)
        return ModelReply.from_completion(exc.partial, truncated=True)  # both providers send what arrived
    except LLMOutputError as exc:  # answered, but not through the tool: keep the text for fallbacks
        completion = getattr(exc, "completion", None)
        if completion is None:
            raise
        log.warning("no usable tool call (%s); trying the text fallbacks", exc)
        withheld = completion.finish_reason == "content_filter"  # the rest withheld: cut, as at max_tokens
        return ModelReply.from_completion(completion, truncated=withheld, error=str(exc))
    return ModelReply.from_completion(completion)


@task(name="phase2-merge-mechanically", cache_policy=NO_CACHE)
def merge_mechanically(settings: MemorySettings, inputs: inputs_mod.Phase2Inputs) -> ConsolidationOutput:
    """The local path: raw blocks merged into MEMORY.md by kind, skills from procedures, no model call."""
    output = mechanical.consolidate(MemoryStore(settings.memory_root), inputs, settings)
    get_run_logger().info(
        "merged %d raw blocks mechanically: MEMORY.md %d chars, summary %d chars, %d skills",
        len(inputs.raw_ids),
        len(output.memory_md),
        len(output.memory_summary_md),
        len(output.skills),
    )
    return output


@task(name="phase2-apply", cache_policy=NO_CACHE)
def apply_consolidation(
    settings: MemorySettings, inputs: inputs_mod.Phase2Inputs, output: ConsolidationOutput, now: datetime
) -> apply_mod.ApplyResult:
    """Write the consolidation, then record the success (pending cleared, error cleared)."""
    log = get_run_logger()
    with MemoryContext.of(settings) as ctx:
        store, state = ctx.store, ctx.state
        result = apply_mod.apply_output(store, state, inputs, output, settings, now)
        state.record_phase2_success(now, gate_mod.CONSOLIDATED)
        if inputs.raw_total > len(inputs.raw_ids):  # the input cap left blocks for the next run
            state.set_pending(True)
    log.info(
        "wrote %s; skills +%d -%d (%d errors); retired %d summaries; archived %d raw blocks, %d notes",
        ", ".join(result.files_written) or "nothing",
        len(result.skills_written),
        len(result.skills_removed),
        len(result.skill_errors),
        len(result.retired),
        result.raw_archived,
        result.notes_archived,
    )
    for err in result.skill_errors:
        log.warning("skill skipped: %s", redact(err))
    return result


@task(name="phase2-record-outcome", cache_policy=NO_CACHE)
def record_phase2_outcome(settings: MemorySettings, outcome: str) -> None:
    with MemoryContext.of(settings) as ctx:
        ctx.state.record_phase2_outcome(outcome)


@task(name="phase2-clear-pending", cache_policy=NO_CACHE)
def clear_pending(settings: MemorySettings) -> None:
    """Nothing to consolidate after all (e.g. a stale pending flag): clear it, record the skip."""
    with MemoryContext.of(settings) as ctx:
        ctx.state.set_pending(False)
        ctx.state.record_phase2_outcome(gate_mod.SKIP_NOTHING)


@task(name="phase2-record-failure", cache_policy=NO_CACHE)
def record_phase2_failure(settings: MemorySettings, error: str, now: datetime) -> None:
    """Count the failure and keep its message (raw memories, notes and the pending flag stay)."""
    with MemoryContext.of(settings) as ctx:
        ctx.state.record_phase2_failure(error, now)
