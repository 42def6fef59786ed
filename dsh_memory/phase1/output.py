"""What a model's extraction of one session is: the fields Phase 1 writes (already redacted).
Shared by the one-call path (extraction.py) and the local model's small steps (steps.py)."""

from __future__ import annotations

from pydantic import BaseModel


class ExtractionOutput(BaseModel):
    """What the model produced for one session (already redacted)."""

    raw_memory: str = ""
    rollout_summary: str = ""
    rollout_slug: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    provider: str = ""
    reasoning_effort: str = ""
    notes: list[str] = []

    @property
    def is_noop(self) -> bool:
        return not self.raw_memory.strip() or not self.rollout_summary.strip()
