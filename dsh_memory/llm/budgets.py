"""Fit model inputs to the model that answers: a local model's context is small.

Remote endpoints keep the configured budgets. A model that reports `max_input_tokens` (the local
llama.cpp provider) gets the Phase 1 transcript budget and the Phase 2 input caps scaled down so
the whole prompt fits its context window.
"""

from __future__ import annotations

from dsh_memory.llm.base import writer_for
from dsh_memory.settings import MemorySettings

PROMPT_OVERHEAD_TOKENS = 1500  # system prompt + tool schema + framing, with room to spare
CHARS_PER_TOKEN = 3  # conservative for code-heavy markdown
PHASE2_CAPS = ("max_memory_md_chars", "max_raw_chars", "max_index_chars", "max_notes_chars")


def input_tokens_available(llm) -> int | None:
    limit = getattr(llm, "max_input_tokens", None)
    if not isinstance(limit, int) or limit <= 0:
        return None
    return max(500, limit - PROMPT_OVERHEAD_TOKENS)


def phase1_budget(settings: MemorySettings, llm) -> int:
    room = input_tokens_available(llm)
    return settings.transcript_budget_tokens if room is None else min(settings.transcript_budget_tokens, room)


def phase2_settings(settings: MemorySettings, llm) -> MemorySettings:
    """Settings whose Phase 2 input caps together fit the model's context (unchanged for remote models)."""
    room = input_tokens_available(llm)
    if room is None:
        return settings
    total = sum(getattr(settings, k) for k in PHASE2_CAPS) + settings.max_summary_chars
    budget = room * CHARS_PER_TOKEN
    if total <= budget:
        return settings
    scale = budget / total
    update = {k: max(1000, int(getattr(settings, k) * scale)) for k in PHASE2_CAPS}
    update["max_summary_chars"] = max(500, int(settings.max_summary_chars * scale))
    return settings.model_copy(update=update)


# A small model decodes ~5-10 tokens/s on a laptop CPU and, given room, rambles up to the
# grammar's string caps: bound its answers. (The evidence writer asks one short recap step,
# <= 224 tokens, phase1/steps.py; its Phase 2 is a mechanical merge with no model call.)
EVIDENCE_WRITER_MAX_OUTPUT_TOKENS = {"phase1": 2048, "phase2": 3072}


def output_tokens(llm, phase: str, requested: int) -> int:
    cap = EVIDENCE_WRITER_MAX_OUTPUT_TOKENS.get(phase) if writer_for(llm) == "evidence" else None
    return min(requested, cap) if cap else requested
