"""What one Phase 1 run did: the extract flow's result (printed by the CLI, dumped by `--json`,
kept by Prefect as the flow run's result)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.selection import DecisionRow


def _optional(description: str):
    """A field that only some runs have: None, and then left out of the dump (and the JSON)."""
    return Field(None, description=description, exclude_if=lambda value: value is None)


class Phase1Result(BaseModel):
    discovered: int = Field(description="Session logs found (stat only)")
    candidates: int = Field(description="Sessions selected for extraction")
    decisions: list[DecisionRow] = Field(description="One per session considered, with the reason")
    outcomes: list[Outcome] = Field(default_factory=list, description="One per session acted on")
    skipped_no_route: bool = Field(False, description="No model configured: nothing done, no state touched")
    unknown_ids: list[str] | None = _optional("Requested session ids that discovery did not find")
    error: str | None = _optional("Why Phase 1 was skipped")
    provider: str | None = _optional("The provider that answered (when sessions were sent)")
    model: str | None = _optional("The model that answered (when sessions were sent)")
    counts: dict[str, int] | None = _optional("Sessions per outcome (not in a dry run or a skipped run)")
    consolidation_requested: bool | None = _optional("extract-session flow: whether it started Phase 2")

    @property
    def extracted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outcome == "extracted"]

    def count_outcomes(self) -> dict[str, int]:
        return dict(Counter(o.outcome for o in self.outcomes))

    def table_rows(self) -> list[dict[str, Any]]:
        """The `phase1-batch` artifact: one row per outcome, or one saying there was nothing."""
        if self.outcomes:
            return [o.model_dump(mode="json") for o in self.outcomes]
        nothing = Outcome(session="-", source="-", outcome="skipped", part=0, error=self.error or "")
        return [{**nothing.model_dump(mode="json"), "outcome": "nothing to extract"}]

    def describe(self) -> str:
        via = f" via {self.provider}/{self.model}" if self.model else ""
        return f"Phase 1 batch: {self.candidates} candidates of {self.discovered} sessions{via}"
