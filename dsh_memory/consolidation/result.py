"""What one Phase 2 attempt did: the consolidate flow's result (printed by the CLI, dumped by
`--json`, kept by Prefect as the flow run's result), and its markdown run report for Prefect run
history (`render_markdown`): counts, decisions and the model's answer, never a transcript; the
model output is redacted BEFORE it is truncated (so a cut cannot leave half a key behind), and
the whole document is redacted once more at the end."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.consolidation.apply import ApplyResult
from dsh_memory.consolidation.gate import GateDecision
from dsh_memory.consolidation.output import ModelReply, stored
from dsh_memory.transcript.redact import redact

MAX_OUTPUT_CHARS = 20_000
ARTIFACT_KEY = "phase2-consolidation"


class Phase2ModelReport(BaseModel):
    """The model side of one attempt, summed over its calls (a cut-off answer is retried)."""

    provider: str
    model: str
    reasoning_effort_requested: str
    reasoning_effort: str = Field("", description="The effort the provider applied ('' = its default)")
    max_tokens_tried: list[int] = Field(default_factory=list, description="One entry per call")
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    notes: list[str] = Field(default_factory=list, description="Client notes, e.g. an unsupported effort")
    output_source: str | None = Field(None, description="tool | text-json | blocks (+ -partial)")
    dropped: list[str] = Field(default_factory=list, description="What a cut-off answer lost")
    parse_errors: list[str] = Field(default_factory=list)

    def add(self, reply: ModelReply) -> None:
        """Account one call's answer."""
        self.provider = reply.provider or self.provider
        self.model = reply.model or self.model
        self.reasoning_effort = reply.reasoning_effort
        self.finish_reason = reply.finish_reason
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.notes += [n for n in reply.notes if n not in self.notes]


class Phase2Result(BaseModel):
    outcome: str | None = Field(None, description="consolidated | error | skipped: … (gate.py)")
    reason: str = ""
    error: str | None = Field(None, description="Redacted, when the outcome is error")
    force: bool = False
    mode: str | None = Field(None, description="INIT | INCREMENTAL, once inputs were read")
    memory_root: str = ""
    prompt_version: str = ""
    gate: GateDecision | None = None
    inputs: dict[str, Any] | None = Field(None, description="What went into the prompt (counts, chars)")
    model: Phase2ModelReport | None = None
    changes: ApplyResult | None = None
    flow_run_id: str | None = None
    duration_seconds: float | None = None


class Phase2NotRun(BaseModel):
    """Phase 2 was not attempted (e.g. the catch-up found no model route)."""

    outcome: str = "skipped"
    reason: str


def _cell(v: Any) -> str:
    if v is None or v == "" or v == []:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        v = ", ".join(str(x) for x in v)
    return re.sub(r"\s+", " ", str(v)).replace("|", "\\|")[:500]


def render_markdown(summary: dict, model_output: str = "") -> str:
    gate = summary.get("gate") or {}
    model = summary.get("model") or {}
    inputs = summary.get("inputs") or {}
    changes = summary.get("changes") or {}
    rows = [
        ("outcome", summary.get("outcome")),
        ("reason", summary.get("reason")),
        ("error", summary.get("error")),
        ("mode", summary.get("mode")),
        ("forced", summary.get("force")),
        ("pending flag", gate.get("pending")),
        ("consecutive failures before run", gate.get("failures")),
        ("last success", gate.get("last_phase2_at")),
        (
            "cooldown",
            f"{gate.get('cooldown_seconds')} s, {gate.get('cooldown_remaining_seconds')} s remaining" if gate else None,
        ),
        ("back-off after failures", f"{gate.get('backoff_remaining_seconds')} s remaining" if gate else None),
        ("provider / model", f"{model.get('provider') or '?'} / {model.get('model') or '?'}" if model else None),
        ("reasoning effort", (model.get("reasoning_effort") or "provider default") if model else None),
        ("max_tokens per attempt", model.get("max_tokens_tried")),
        ("finish reason", model.get("finish_reason")),
        ("tokens in / out", f"{model.get('input_tokens', 0)} / {model.get('output_tokens', 0)}" if model else None),
        ("output parsed from", model.get("output_source")),
        ("client notes", model.get("notes")),
        ("prompt version", summary.get("prompt_version")),
        ("duration", f"{summary.get('duration_seconds')} s" if summary.get("duration_seconds") is not None else None),
    ]
    out = [f"# Phase 2 consolidation: {_cell(summary.get('outcome'))}", "", "| field | value |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in rows if v not in (None, "", [])]
    for title, columns, table in (("Inputs", "input | count", inputs), ("Changes", "change | value", changes)):
        if table:
            out += ["", f"## {title}", "", f"| {columns} |", "|---|---|"]
            out += [f"| {k} | {_cell(v)} |" for k, v in table.items()]
    if model_output:
        text = redact(stored(model_output))  # before the cut, so a cut cannot leave half a key behind
        if len(text) > MAX_OUTPUT_CHARS:
            text = text[:MAX_OUTPUT_CHARS] + f"\n[… {len(text) - MAX_OUTPUT_CHARS} more characters not shown]"
        fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", text)), default=0))  # longer than any run in it
        out += ["", f"## Model output (redacted, first {MAX_OUTPUT_CHARS} characters)", "", fence + "text", text, fence]
    return redact("\n".join(out) + "\n")
