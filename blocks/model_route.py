"""`ModelRouteBlock`: which model answers each phase, and how; the API key as a Prefect secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator

from dsh_memory.blocks._fields import (
    SettingsBlock,
    check_path,
    expand,
    mirror,
    sources,
)
from dsh_memory.settings import DEEPSEEK_BASE_URL, DEFAULT_MODEL, ROUTE_ENV_NAMES, ModelRoute

SECRET_FIELDS = ("api_key",)
EFFORT_PATTERN = r"^[a-z]{0,16}$"


def _m(name: str) -> Any:
    return mirror(ModelRoute, name, "the default, {default}")


def _model(phase: int, what: str) -> Any:
    return Field(
        None,
        min_length=1,
        max_length=200,
        description=f"Model for Phase {phase} {what}. Empty: $DSH_MEMORY_MODEL, else {DEFAULT_MODEL!r}.",
    )


def _effort(phase: int) -> Any:
    return Field(
        None,
        pattern=EFFORT_PATTERN,
        description=f"Reasoning effort of Phase {phase} (off/low/high/max on DeepSeek; low/medium/high on "
        "OpenAI); checked against the model's metadata at run time. Empty: provider default.",
    )


class ModelRouteBlock(SettingsBlock):
    """Model endpoint of dsh-memory: provider (OpenAI-compatible or local llama.cpp), base URL,
    API key (stored as a secret), model, reasoning effort and output cap per phase. Empty fields
    use the DSH_MEMORY_* environment variables or the documented defaults."""

    _block_type_name: ClassVar[str] = "dsh-memory model route"
    _to_plain: ClassVar[str] = "to_route"

    provider: Literal["auto", "openai", "local"] | None = Field(
        None,
        description="'openai' (any OpenAI-compatible endpoint) or 'local' (llama.cpp in process). "
        "'auto': the endpoint when one is configured, else the local model. Empty: $DSH_MEMORY_PROVIDER, else 'auto'.",
    )
    base_url: str | None = Field(
        None,
        pattern=r"^https?://\S+$",
        max_length=2000,
        description=f"OpenAI-compatible base URL (http/https). Empty: $DSH_MEMORY_BASE_URL, else {DEEPSEEK_BASE_URL}.",
    )
    api_key: SecretStr | None = Field(
        None,
        description="API key, stored as a secret and never logged. Empty: $DSH_MEMORY_API_KEY, else "
        "$DEEPSEEK_API_KEY (none needed for local servers).",
    )
    phase1_model: str | None = _model(1, "extraction")
    phase2_model: str | None = _model(2, "consolidation")
    phase1_reasoning_effort: str | None = _effort(1)
    phase2_reasoning_effort: str | None = _effort(2)
    phase1_max_tokens: int | None = _m("phase1_max_tokens")
    phase2_max_tokens: int | None = _m("phase2_max_tokens")
    timeout_seconds: float | None = _m("timeout_seconds")
    call_deadline_seconds: float | None = _m("call_deadline_seconds")
    model_path: str | None = Field(
        None, description="Local GGUF model file, absolute or ~ (provider 'local'). Empty: $DSH_MEMORY_MODEL_PATH."
    )
    local_threads: int | None = _m("local_threads")

    @field_validator("model_path")
    @classmethod
    def _check_model_path(cls, v: str | None) -> str | None:
        return check_path(v)

    @field_validator("base_url", "phase1_model", "phase2_model")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        return (v.strip() or None) if isinstance(v, str) else v

    def to_route(self, env: Mapping[str, str] | None = None) -> ModelRoute:
        """The effective route: this block's values over the environment over the defaults."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        overrides = {k: expand(v, env) if k == "model_path" else v for k, v in values.items() if v is not None}
        return ModelRoute.from_env(env, **overrides)  # ConfigError for an invalid environment value


def route_values(route: ModelRoute) -> dict[str, Any]:
    """`route` flattened to block field names (the key stays a SecretStr)."""
    out = {name: getattr(route, name) for name in ModelRoute.model_fields}
    if out["model_path"] is not None:
        out["model_path"] = str(out["model_path"])
    return out


def route_sources(block: ModelRouteBlock | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Field → 'block' | 'env' | 'default' for the effective model route."""
    return sources(ModelRouteBlock.model_fields, block, ROUTE_ENV_NAMES, env)
