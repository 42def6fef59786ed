"""Phase 2 flow: consolidate raw memories, ad hoc notes and forgetting candidates into the handbook.

Run it:   dsh-memory consolidate [--force] [--json]
          or the `consolidate` deployment (prefect.yaml), after extraction when pending.
Runs when: the pending flag is set, unconsumed ad hoc notes exist or raw blocks wait, AND the
          cooldown (`phase2_cooldown_seconds`, default 6 h) has elapsed AND fewer than 3
          consecutive failures happened. `force=True` bypasses the cooldown and the pause.
Single-flight: `<root>/.state/phase2.lock` (kernel-released file lock) across threads,
          processes and deployment runs; a second run returns "skipped: already running".
Writes:   MEMORY.md, memory_summary.md (first line `v1`), skills/<name>/…, moves forgetting
          candidates the model retired to rollout_summaries/.retired/, consumed raw blocks to
          raw_memories.archive.md, consumed notes to extensions/ad_hoc/archive/, bookkeeping in
          .state/state.sqlite3, and one markdown artifact `phase2-consolidation` per attempt in
          the Prefect run history (mode, inputs, cooldown, redacted model output, changes).
Failures: raw memories and notes stay, `phase2_error` is recorded, the pending flag is kept;
          a cut-off answer is retried with a doubled max_tokens (cap 131072).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from dsh_memory.consolidation import gate as gate_mod
from dsh_memory.consolidation.output import ConsolidationOutput, parse_reply
from dsh_memory.consolidation.prompt import PROMPT_VERSION
from dsh_memory.consolidation.report import ARTIFACT_KEY, render_markdown
from dsh_memory.errors import LLMOutputError, NoModelRouteError
from dsh_memory.llm.factory import phase_model
from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.storage.locks import AlreadyRunning, phase_lock
from dsh_memory.storage.state import StateStore
from dsh_memory.tasks.consolidate import apply_consolidation, call_consolidation_model, check_gate, gather_inputs
from dsh_memory.transcript.redact import redact

MAX_TOKENS_CAP = 131072
LOCK_NAME = "phase2"


def load_settings(memory_root: str | None = None) -> tuple[MemorySettings, ModelRoute]:
    """THE settings entry point of this flow (Blocks → env → defaults, via settings_loader)."""
    from dsh_memory.settings_loader import load_settings as load

    settings, route = load()
    if memory_root:
        settings = settings.model_copy(update={"memory_root": Path(memory_root).expanduser()})
    return settings, route


def next_max_tokens(current: int, cap: int = MAX_TOKENS_CAP) -> int | None:
    """The output cap for a retry after a cut-off answer, or None when already at the cap."""
    return None if current >= cap else min(cap, current * 2)


@flow(name="consolidate", log_prints=False)
def consolidate_flow(force: bool = False, memory_root: str | None = None) -> dict:
    """Phase 2, single-flight. Returns an outcome summary (also published as an artifact)."""
    log = get_run_logger()
    started = time.monotonic()
    settings, route = load_settings(memory_root)
    now = datetime.now(UTC)
    summary: dict = {
        "outcome": None,
        "reason": "",
        "error": None,
        "force": force,
        "mode": None,
        "memory_root": str(settings.memory_root),
        "prompt_version": PROMPT_VERSION,
        "gate": None,
        "inputs": None,
        "model": None,
        "changes": None,
        "flow_run_id": _flow_run_id(),
    }
    model_output = ""
    try:
        with phase_lock(settings.memory_root, LOCK_NAME):
            model_output = _run_locked(settings, route, now, force, summary)
    except AlreadyRunning:
        summary.update(outcome=gate_mod.SKIP_RUNNING, reason="another consolidation holds .state/phase2.lock")
    summary["duration_seconds"] = round(time.monotonic() - started, 2)
    _publish(summary, model_output)
    level = log.error if str(summary["outcome"]).startswith("error") else log.info
    level("Phase 2 %s: %s", summary["outcome"], redact(summary["error"] or summary["reason"] or ""))
    return summary


def _run_locked(settings: MemorySettings, route: ModelRoute, now: datetime, force: bool, summary: dict) -> str:
    """Everything under the lock. Fills `summary`; returns the model output for the artifact."""
    log = get_run_logger()
    decision = check_gate(settings, now, force)
    summary.update(gate=decision.as_dict(), reason=decision.reason)
    if not decision.run:
        summary["outcome"] = decision.outcome
        _record_outcome(settings, decision.outcome)
        return ""
    try:
        pm = phase_model(route, "phase2", settings)
    except NoModelRouteError as exc:  # no state change: retried on the next trigger
        summary.update(outcome=gate_mod.SKIP_NO_ROUTE, reason=str(exc))
        return ""
    settings = pm.fit(settings)  # a local model's context is small: caps shrink to fit
    model: dict = {
        "provider": pm.provider,
        "model": pm.model,
        "reasoning_effort_requested": pm.reasoning_effort,
        "reasoning_effort": "",
        "max_tokens_tried": [],
        "input_tokens": 0,
        "output_tokens": 0,
        "finish_reason": None,
        "notes": [],
        "output_source": None,
        "dropped": [],
        "parse_errors": [],
    }
    summary["model"] = model
    outputs: list[str] = []
    try:
        inputs = gather_inputs(settings, now)
        summary.update(mode=inputs.mode, inputs=inputs.counts())
        if not inputs.has_evidence:  # e.g. a stale pending flag: no model call for nothing
            summary.update(outcome=gate_mod.SKIP_NOTHING, reason="no raw memories, notes or forgetting candidates")
            _clear_pending(settings)
            return ""
        messages = inputs.messages()
        max_tokens: int | None = min(pm.max_tokens, MAX_TOKENS_CAP)
        output: ConsolidationOutput | None = None
        while output is None:
            model["max_tokens_tried"].append(max_tokens)
            reply = call_consolidation_model(pm, messages, max_tokens)
            outputs.append(reply.shown_output())
            model.update(
                provider=reply.provider or pm.provider,
                model=reply.model or pm.model,
                reasoning_effort=reply.reasoning_effort,
                finish_reason=reply.finish_reason,
            )
            model["input_tokens"] += reply.input_tokens
            model["output_tokens"] += reply.output_tokens
            model["notes"] += [n for n in reply.notes if n not in model["notes"]]
            try:
                output = parse_reply(reply, inputs.mode)
            except LLMOutputError as exc:
                model["parse_errors"].append(str(exc))
                max_tokens = next_max_tokens(max_tokens) if reply.truncated else None
                if max_tokens is None:
                    raise
                log.warning("answer unusable after a cut-off; retrying with max_tokens %d", max_tokens)
        model.update(output_source=output.source, dropped=output.dropped)
        result = apply_consolidation(settings, inputs, output, now)
        summary.update(outcome=gate_mod.CONSOLIDATED, changes=result.as_dict())
    except Exception as exc:  # any failure: raw memories stay, error recorded, pending kept
        error = f"{type(exc).__name__}: {exc}"
        summary.update(outcome="error", error=redact(error)[:2000])
        state = StateStore(settings.memory_root)
        try:
            state.record_phase2_failure(error, datetime.now(UTC))
        finally:
            state.close()
    return "\n\n---- next attempt ----\n\n".join(outputs)


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    run_id = flow_run.get_id()
    return str(run_id) if run_id else None


def _clear_pending(settings: MemorySettings) -> None:
    state = StateStore(settings.memory_root)
    try:
        state.set_pending(False)
        state.record_phase2_outcome(gate_mod.SKIP_NOTHING)
    finally:
        state.close()


def _record_outcome(settings: MemorySettings, outcome: str) -> None:
    state = StateStore(settings.memory_root)
    try:
        state.record_phase2_outcome(outcome)
    finally:
        state.close()


def _publish(summary: dict, model_output: str) -> None:
    """One markdown artifact per attempt (skipped / error / consolidated) in run history."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(
            key=ARTIFACT_KEY,
            markdown=render_markdown(summary, model_output),
            description=f"Phase 2 consolidation: {summary['outcome']}",
        )
    except Exception as exc:  # run history is best effort; the outcome is already recorded
        get_run_logger().warning("could not publish the run artifact: %s", type(exc).__name__)
