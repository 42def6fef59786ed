"""What one Phase 2 attempt did: the consolidate flow's result (printed by the CLI, dumped by
`--json`, rendered into the run's markdown artifact, kept by Prefect as the flow run's result)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.consolidation.apply import ApplyResult
from dsh_memory.consolidation.gate import GateDecision
from dsh_memory.consolidation.output import ModelReply


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
