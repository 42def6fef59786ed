"""Phase 2 flow: consolidate raw memories, ad hoc notes and forgetting candidates into the handbook.

When it runs, what it writes and how it is named: docs/running.md ("The flows"). Single-flight
through `<root>/.state/phase2.lock` (kernel-released: a killed run never locks Phase 2 out). A
failure keeps the raw memories, the notes and the pending flag and records `phase2_error`. With
the local model the merge is mechanical (consolidation/mechanical.py).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from dsh_memory.consolidation import gate as gate_mod
from dsh_memory.consolidation.inputs import Phase2Inputs
from dsh_memory.consolidation.output import ConsolidationOutput, parse_reply
from dsh_memory.consolidation.prompt import PROMPT_VERSION
from dsh_memory.consolidation.result import ARTIFACT_KEY, Phase2ModelReport, Phase2Result, render_markdown
from dsh_memory.context import MemoryContext, memory_context
from dsh_memory.errors import LLMOutputError, NoModelRouteError
from dsh_memory.llm.factory import PhaseModel, phase_model
from dsh_memory.replay.result import in_replay_run
from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.storage.locks import AlreadyRunning, phase_lock
from dsh_memory.tasks.consolidate import (
    apply_consolidation,
    call_consolidation_model,
    check_gate,
    clear_pending,
    gather_inputs,
    merge_mechanically,
    record_phase2_failure,
    record_phase2_outcome,
)
from dsh_memory.transcript.redact import redact

MAX_TOKENS_CAP = 131072


@flow(name="consolidate", flow_run_name="consolidate/check", log_prints=False)
def consolidate_flow(force: bool = False, memory_root: str | None = None) -> Phase2Result:
    """Phase 2, single-flight. The result is also published as an artifact."""
    # THE memory context (saved block > environment > default), held open for the run: the
    # tasks share its state store. `memory_root` (a flow parameter) overrides the root.
    with memory_context(memory_root=memory_root, writes=True).for_run() as ctx:
        return consolidate_step(ctx, force)


def consolidate_step(ctx: MemoryContext, force: bool = False) -> Phase2Result:
    """This flow's body, also a step of the calling flow run, on a context the caller holds open
    (`for_run`): the replay consolidates before each session it checks, and a flow run each would
    cost several times the mechanical merge. A replay's run is neither renamed nor given the live
    artifact (`in_replay_run`)."""
    log = get_run_logger()
    started = time.monotonic()
    settings, route = ctx.settings, ctx.route
    now = datetime.now(UTC)
    result = Phase2Result(
        force=force,
        memory_root=str(settings.memory_root),
        prompt_version=PROMPT_VERSION,
        flow_run_id=flow_run.get_id() or None,
    )
    model_output = ""
    try:
        with phase_lock(settings.memory_root, "phase2"):
            model_output = _run_locked(settings, route, now, force, result)
    except AlreadyRunning:
        result.outcome, result.reason = gate_mod.SKIP_RUNNING, "another consolidation holds .state/phase2.lock"
    result.duration_seconds = round(time.monotonic() - started, 2)
    if not in_replay_run():  # a replay's consolidation is not the live pipeline's latest
        _publish(result, model_output)
    level = log.error if str(result.outcome).startswith("error") else log.info
    level("Phase 2 %s: %s", result.outcome, redact(result.error or result.reason or ""))
    return result


def _run_locked(settings: MemorySettings, route: ModelRoute, now: datetime, force: bool, result: Phase2Result) -> str:
    """Everything under the lock. Fills `result`; returns the model output for the artifact."""
    decision = check_gate(settings, now, force)
    result.gate, result.reason = decision, decision.reason
    if not decision.run:
        result.outcome = decision.outcome
        record_phase2_outcome(settings, decision.outcome)
        return ""
    try:
        model = phase_model(route, "phase2", settings)
    except NoModelRouteError as exc:  # no state change: retried on the next trigger
        result.outcome, result.reason = gate_mod.SKIP_NO_ROUTE, str(exc)
        return ""
    mechanical = model.writer == "evidence"  # the model writes no memory: merge mechanically
    if not mechanical:
        settings = model.fit(settings)  # a model's context may be small: caps shrink to fit
    result.model = Phase2ModelReport(
        provider=model.provider, model=model.model, reasoning_effort_requested=model.reasoning_effort
    )
    outputs: list[str] = []
    try:
        inputs = gather_inputs(settings, now)
        result.mode, result.inputs = inputs.mode, inputs.counts()
        if not inputs.has_evidence:  # e.g. a stale pending flag: no model call for nothing
            result.outcome, result.reason = gate_mod.SKIP_NOTHING, "no raw memories, notes or forgetting candidates"
            clear_pending(settings)
            return ""
        if not in_replay_run():
            _name_run(f"consolidate/{str(inputs.mode).lower()}")  # was consolidate/check: it consolidates
        if mechanical:
            output = merge_mechanically(settings, inputs)
            result.model.output_source = output.source
        else:
            output = _ask_model(model, inputs, result.model, outputs)
        result.changes = apply_consolidation(settings, inputs, output, now)
        result.outcome = gate_mod.CONSOLIDATED
    except Exception as exc:  # any failure: raw memories stay, error recorded, pending kept
        error = f"{type(exc).__name__}: {exc}"
        result.outcome, result.error = "error", redact(error)[:2000]
        record_phase2_failure(settings, error, datetime.now(UTC))
    return "\n\n---- next attempt ----\n\n".join(outputs)


def _ask_model(
    model: PhaseModel, inputs: Phase2Inputs, report: Phase2ModelReport, outputs: list[str]
) -> ConsolidationOutput:
    """Call the model until its answer parses; a cut-off answer is retried with a doubled max_tokens.
    Each answer's text is appended to `outputs` (for the artifact)."""
    messages = inputs.messages()
    max_tokens = min(model.max_tokens, MAX_TOKENS_CAP)
    while True:
        report.max_tokens_tried.append(max_tokens)
        reply = call_consolidation_model(model, messages, max_tokens)
        outputs.append(reply.shown_output())
        report.add(reply)
        try:
            output = parse_reply(reply, inputs.mode)
        except LLMOutputError as exc:
            report.parse_errors.append(str(exc))
            if reply.finish_reason != "length" or max_tokens >= MAX_TOKENS_CAP:  # a content filter's cut: no
                raise
            max_tokens = min(MAX_TOKENS_CAP, max_tokens * 2)
            get_run_logger().warning("answer unusable after a cut-off; retrying with max_tokens %d", max_tokens)
            continue
        report.output_source, report.dropped = output.source, output.dropped
        return output


def _name_run(name: str) -> None:
    """Rename this flow run once its mode is known (best effort: the name is for people)."""
    run_id = flow_run.get_id()
    if not run_id:
        return
    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_name(run_id, name)
    except Exception as exc:
        get_run_logger().debug("could not rename the run to %s: %s", name, type(exc).__name__)


def _publish(result: Phase2Result, model_output: str) -> None:
    """One markdown artifact per attempt (skipped / error / consolidated) in run history."""
    try:
        create_markdown_artifact(
            key=ARTIFACT_KEY,
            markdown=render_markdown(result.model_dump(mode="json"), model_output),
            description=f"Phase 2 consolidation: {result.outcome}",
        )
    except Exception as exc:  # run history is best effort; the outcome is already recorded
        get_run_logger().warning("could not publish the run artifact: %s", type(exc).__name__)
