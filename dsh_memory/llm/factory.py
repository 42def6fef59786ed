"""The model that answers one pipeline phase, built once from a `ModelRoute` and the settings.

`phase_model(route, "phase1", settings)` is what the flows call: a `PhaseModel` with the LLM
and everything its calls need (output cap, reasoning effort, input budget fitted to the model's
context, retry base delay) and what names it in cache keys and run history (provider, model).
`make_llm` / `phase_options` are its building blocks.

Model inputs fit the model that answers: a local model's context is small. Remote endpoints keep
the configured budgets. A model that reports `max_input_tokens` (the local llama.cpp provider)
gets the Phase 1 transcript budget and the Phase 2 input caps scaled down so the whole prompt fits
its context window.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dsh_memory.errors import ConfigError, NoModelRouteError
from dsh_memory.llm.base import LLM, Writer, writer_for
from dsh_memory.llm.local import LocalLLM  # its runtime loads on the first call (local._runtime)
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.settings import MemorySettings, ModelRoute

PHASES = ("phase1", "phase2")

FIX_IT = (
    "No model endpoint is configured. Set DSH_MEMORY_API_KEY (or DEEPSEEK_API_KEY) for DeepSeek, "
    "or DSH_MEMORY_BASE_URL (plus DSH_MEMORY_MODEL, and DSH_MEMORY_API_KEY if the server needs one) "
    "for another OpenAI-compatible server such as OpenAI, Ollama, vLLM or llama.cpp."
)


def _phase(phase: str) -> str:
    p = str(phase).lower().replace("_", "").replace("-", "")
    p = {"1": "phase1", "2": "phase2"}.get(p, p)
    if p not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
    return p


def phase_options(route: ModelRoute, phase: str) -> dict:
    """The per-phase `complete()` keyword arguments: max_tokens and reasoning_effort."""
    p = _phase(phase)
    return {
        "max_tokens": getattr(route, f"{p}_max_tokens"),
        "reasoning_effort": getattr(route, f"{p}_reasoning_effort"),
    }


def make_llm(route: ModelRoute, phase: str) -> LLM:
    """The LLM answering `phase` ("phase1" / "phase2"). Raises NoModelRouteError with a fix-it text."""
    p = _phase(phase)
    model = getattr(route, f"{p}_model")
    provider = route.effective_provider  # 'auto' → the endpoint when configured, else local
    if provider == "openai":
        if not route.configured:
            raise NoModelRouteError(FIX_IT)
        return OpenAICompatLLM(
            route.base_url,
            model,
            route.api_key,
            timeout_seconds=route.timeout_seconds,
            deadline_seconds=route.call_deadline_seconds,
        )
    if provider == "local":
        try:
            return LocalLLM.from_route(route)
        except ConfigError as exc:  # e.g. the model file is missing: for the pipeline, no route
            if route.provider == "auto":
                raise NoModelRouteError(
                    f"{FIX_IT} Without an endpoint, dsh-memory uses the bundled local model, which is "
                    f"unavailable here: {exc}"
                ) from None
            if isinstance(exc, NoModelRouteError):
                raise
            raise NoModelRouteError(str(exc)) from exc
    raise NoModelRouteError(f"unknown provider {route.provider!r}; set DSH_MEMORY_PROVIDER to 'openai' or 'local'")


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


class PhaseModel(BaseModel):
    """One phase's model, resolved once: pass it to the tasks instead of loose options."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    phase: Literal["phase1", "phase2"]
    llm: LLM = Field(exclude=True, repr=False)
    provider: str
    model: str
    max_tokens: int = Field(description="Output cap of one call (a local model's answers are bounded)")
    reasoning_effort: str = Field(description="Requested effort; '' = the provider's default")
    budget_tokens: int = Field(
        description="Phase 1: transcript budget fitted to the model's context; Phase 2: 0 (see input_caps)"
    )
    input_caps: dict[str, int] = Field(
        default_factory=dict, description="Phase 2 input caps (chars) shrunk to fit the context; {} = as configured"
    )
    writer: Writer = Field("model", description="Who writes the memory (see `Writer`)")

    def with_budget(self, budget_tokens: int) -> PhaseModel:
        """The same model with a smaller transcript budget (retry after a cut-off answer)."""
        return self.model_copy(update={"budget_tokens": budget_tokens})

    def fit(self, settings: MemorySettings) -> MemorySettings:
        """`settings` with the input caps this model's context allows (unchanged for remote models)."""
        return settings.model_copy(update=self.input_caps) if self.input_caps else settings


def phase_model(route: ModelRoute, phase: str, settings: MemorySettings) -> PhaseModel:
    """THE way a flow gets its model. Raises NoModelRouteError with a fix-it text."""
    p = _phase(phase)
    llm = make_llm(route, p)
    opts = phase_options(route, p)
    caps: dict[str, int] = {}
    if p == "phase2":
        fitted = phase2_settings(settings, llm)
        if fitted is not settings:
            caps = {k: getattr(fitted, k) for k in (*PHASE2_CAPS, "max_summary_chars")}
    return PhaseModel(
        phase=p,
        llm=llm,
        provider=getattr(llm, "provider", ""),
        model=getattr(llm, "model", ""),
        max_tokens=output_tokens(llm, p, int(opts["max_tokens"])),
        reasoning_effort=opts["reasoning_effort"],
        budget_tokens=phase1_budget(settings, llm) if p == "phase1" else 0,
        input_caps=caps,
        writer=writer_for(llm),
    )
