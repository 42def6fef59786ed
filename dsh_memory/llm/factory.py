"""Build the `LLM` for one pipeline phase from a `ModelRoute`.

The caller still passes the phase's `max_tokens` and `reasoning_effort` to `complete()`
(`route.phase1_max_tokens`, `route.phase1_reasoning_effort`, …); `phase_options()` returns them.
"""

from __future__ import annotations

from dsh_memory.errors import ConfigError, NoModelRouteError
from dsh_memory.llm.base import LLM
from dsh_memory.settings import ModelRoute

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
    if route.provider == "auto" and provider == "local":
        try:
            return make_llm(route.model_copy(update={"provider": "local"}), p)
        except NoModelRouteError as exc:
            raise NoModelRouteError(
                f"{FIX_IT} Without an endpoint, dsh-memory uses the bundled local model, which is "
                f"unavailable here: {exc}"
            ) from None
    if provider == "openai":
        if not route.configured:
            raise NoModelRouteError(FIX_IT)
        from dsh_memory.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(
            route.base_url,
            model,
            route.api_key,
            timeout_seconds=route.timeout_seconds,
        )
    if provider == "local":
        route = route.model_copy(update={"provider": "local"})
        # ---- provider "local": in-process llama.cpp, owned by dsh_memory/llm/local.py ----
        try:
            from dsh_memory.llm import local  # lazy: optional dependency, another module's job
        except Exception as exc:  # ImportError, or the binding failing to load
            raise NoModelRouteError(
                f"provider 'local' is unavailable ({type(exc).__name__}: {exc}). Install the local-model "
                f"extra and set DSH_MEMORY_MODEL_PATH, or use an endpoint instead. {FIX_IT}"
            ) from None
        # Contract with local.py: `make_local_llm(route: ModelRoute, phase: str) -> LLM`.
        factory = getattr(local, "make_local_llm", None)
        if factory is None:
            raise NoModelRouteError("provider 'local' is unavailable: dsh_memory.llm.local has no make_local_llm")
        try:
            return factory(route, p)
        except NoModelRouteError:
            raise
        except ConfigError as exc:  # e.g. the model file is missing: for the pipeline, no route
            raise NoModelRouteError(str(exc)) from exc
        # ---- end provider "local" ----
    raise NoModelRouteError(f"unknown provider {route.provider!r}; set DSH_MEMORY_PROVIDER to 'openai' or 'local'")
