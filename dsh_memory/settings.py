"""Plain settings objects and their environment-variable resolution.

These are the values every flow and task receives. `blocks/` wraps them as Prefect Blocks
(editable in the UI); without a saved block the defaults here and the environment apply.
Nothing here reads the environment at import time: call `MemorySettings.from_env()`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
SemanticSearch = Literal["auto", "on", "off"]
_SWITCH_WORDS = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def dsh_home(env: Mapping[str, str] | None = None) -> Path:
    e = _env(env)
    return Path(e.get("DSH_HOME") or Path(e.get("HOME", "~")) / ".dsh").expanduser()


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    e = _env(env)
    return Path(e.get("CODEX_HOME") or Path(e.get("HOME", "~")) / ".codex").expanduser()


def claude_config_dir(env: Mapping[str, str] | None = None) -> Path:
    e = _env(env)
    return Path(e.get("CLAUDE_CONFIG_DIR") or Path(e.get("HOME", "~")) / ".claude").expanduser()


class SourceRoots(BaseModel):
    """Where each agent keeps its session logs. `None` disables a source."""

    dsh_sessions: Path | None = Field(None, description="DSH sessions folder ($DSH_HOME/sessions)")
    codex_sessions: Path | None = Field(None, description="Codex rollouts ($CODEX_HOME/sessions)")
    claude_projects: Path | None = Field(None, description="Claude Code transcripts ($CLAUDE_CONFIG_DIR/projects)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SourceRoots:
        return cls(
            dsh_sessions=dsh_home(env) / "sessions",
            codex_sessions=codex_home(env) / "sessions",
            claude_projects=claude_config_dir(env) / "projects",
        )


class MemorySettings(BaseModel):
    """Pipeline settings. Units are in the names."""

    memory_root: Path = Field(description="Where memory files and bookkeeping live")
    roots: SourceRoots = Field(default_factory=SourceRoots)
    include_codex_exec: bool = Field(False, description="Also extract non-interactive `codex exec` runs")
    idle_seconds: int = Field(180, ge=0, description="A session must be quiet this long before extraction")
    debounce_seconds: int = Field(180, ge=1, description="Turn-end trigger debounce per session")
    catch_up_interval_seconds: int = Field(3600, ge=60, description="Schedule of the catch-up deployment")
    consolidate_interval_seconds: int = Field(6 * 3600, ge=60, description="Schedule of the consolidate deployment")
    extract_on_workers: bool = Field(
        False,
        description="Phase 1 model calls run as extract-transcripts flow runs on the extract work pool's "
        "workers (any machine); this host only claims, renders and writes",
    )
    phase2_cooldown_seconds: int = Field(6 * 3600, ge=0, description="Minimum gap between consolidations")
    concurrency: int = Field(4, ge=1, le=64, description="Parallel Phase 1 extractions")
    flow_run_limit: int = Field(
        4,
        ge=1,
        le=64,
        description="Flow runs (one process each) `serve` executes at once; more wait their turn. Sized for 2 "
        "cores; on a work pool set the same number as its concurrency limit",
    )
    retry_limit: int = Field(3, ge=1, le=20, description="Failed extraction attempts before a session is parked")
    retry_base_seconds: int = Field(60, ge=1, description="Backoff base for failed claims (doubles each attempt)")
    min_delta_events: int = Field(
        8,
        ge=1,
        description="New rendered events needed to re-extract a grown session in a scan, or a named session still "
        "being written; a named session quiet for half the debounce needs 1",
    )
    recheck_interval_seconds: int = Field(
        1800,
        ge=0,
        description="Minimum gap between a scan's rechecks of a processed session (a turn-end trigger is not held back)",
    )
    max_rollout_age_days: int = Field(30, ge=0, le=3650, description="Ignore sessions older than this (0 = no limit)")
    max_unused_days: int = Field(
        30, ge=0, le=3650, description="Rollout summaries unused this long become forgetting candidates (0 disables)"
    )
    transcript_budget_tokens: int = Field(24000, ge=500, description="Token budget of one Phase 1 transcript")
    max_raw_chars: int = Field(120_000, ge=1000, description="Cap on raw memories fed to Phase 2")
    max_memory_md_chars: int = Field(60_000, ge=1000, description="Cap on current MEMORY.md fed to Phase 2")
    max_summary_chars: int = Field(10_000, ge=500, description="Cap on memory_summary.md (written and injected)")
    max_index_chars: int = Field(30_000, ge=1000, description="Cap on the rollout-summary index fed to Phase 2")
    max_notes_chars: int = Field(20_000, ge=500, description="Cap on ad hoc notes fed to Phase 2")
    stale_claim_seconds: int = Field(1800, ge=1, description="A running claim older than this recovers as failed")
    llm_retry_delay_seconds: float = Field(
        5.0, ge=0, description="Base delay of model-call retries (exponential, jittered)"
    )
    semantic_search: SemanticSearch = Field(
        "auto",
        description="Ranked search: 'auto' fuses lexical BM25 with a small embedding model's likeness when the "
        "model is installed (the semantic extra), else lexical only; 'on' fails clearly without the model; "
        "'off' is lexical only",
    )

    @field_validator("semantic_search", mode="before")
    @classmethod
    def _switch_words(cls, v: object) -> object:
        """Also the usual words of a switch (DSH_MEMORY_SEMANTIC_SEARCH=1 / true / 0 / false)."""
        if isinstance(v, str):
            v = v.strip().lower()
            return _SWITCH_WORDS.get(v, v)
        return v

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> MemorySettings:
        e = _env(env)
        root = e.get("DSH_MEMORY_ROOT") or (dsh_home(e) / "memories")
        values: dict = {"memory_root": Path(root).expanduser(), "roots": SourceRoots.from_env(e)}
        # Every scalar field can be overridden as DSH_MEMORY_<FIELD> (e.g. DSH_MEMORY_IDLE_SECONDS).
        for name in cls.model_fields:
            if name in ("memory_root", "roots"):
                continue
            raw = e.get(f"DSH_MEMORY_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update(overrides)
        try:
            return cls(**values)
        except ValidationError as exc:
            from dsh_memory.errors import ConfigError

            raise ConfigError(f"invalid dsh-memory setting from the environment: {exc}") from None


class ModelRoute(BaseModel):
    """Which model answers, and how. `api_key` never reaches a log."""

    provider: Literal["auto", "openai", "local"] = Field(
        "auto",
        description="'openai' (any OpenAI-compatible endpoint), 'local' (in-process llama.cpp) or 'auto': "
        "the endpoint when one is configured (API key or base URL), else the local model",
    )
    base_url: str = Field(DEEPSEEK_BASE_URL, description="OpenAI-compatible base URL")
    api_key: SecretStr | None = Field(None, description="API key (DSH_MEMORY_API_KEY or DEEPSEEK_API_KEY)")
    phase1_model: str = Field(DEFAULT_MODEL, description="Model for Phase 1 extraction")
    phase2_model: str = Field(DEFAULT_MODEL, description="Model for Phase 2 consolidation")
    phase1_reasoning_effort: str = Field("", description="off/low/high/max on DeepSeek; empty = provider default")
    phase2_reasoning_effort: str = Field("", description="off/low/high/max on DeepSeek; empty = provider default")
    phase1_max_tokens: int = Field(4096, ge=256, le=131072, description="Output cap for one extraction")
    phase2_max_tokens: int = Field(32768, ge=1024, le=131072, description="Output cap for one consolidation")
    timeout_seconds: float = Field(120.0, gt=0, description="HTTP timeout per model call")
    model_path: Path | None = Field(None, description="Local GGUF model file (provider 'local')")
    local_threads: int = Field(2, ge=1, le=64, description="CPU threads for the local model")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> ModelRoute:
        e = _env(env)
        values: dict = {}
        if e.get("DSH_MEMORY_BASE_URL"):
            values["base_url"] = e["DSH_MEMORY_BASE_URL"]
        key = e.get("DSH_MEMORY_API_KEY") or e.get("DEEPSEEK_API_KEY")
        if key:
            values["api_key"] = SecretStr(key)
        if e.get("DSH_MEMORY_MODEL"):
            values["phase1_model"] = values["phase2_model"] = e["DSH_MEMORY_MODEL"]
        if e.get("DSH_MEMORY_MODEL_PATH"):
            values["model_path"] = Path(e["DSH_MEMORY_MODEL_PATH"]).expanduser()
        if e.get("DSH_MEMORY_PROVIDER"):
            values["provider"] = e["DSH_MEMORY_PROVIDER"]
        # The other scalar fields as DSH_MEMORY_<FIELD> (e.g. DSH_MEMORY_PHASE1_MAX_TOKENS).
        for name in (
            "phase1_model",
            "phase2_model",
            "phase1_reasoning_effort",
            "phase2_reasoning_effort",
            "phase1_max_tokens",
            "phase2_max_tokens",
            "timeout_seconds",
            "local_threads",
        ):
            raw = e.get(f"DSH_MEMORY_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update(overrides)
        try:
            return cls(**values)
        except ValidationError as exc:
            from dsh_memory.errors import ConfigError

            raise ConfigError(f"invalid dsh-memory model setting from the environment: {exc}") from None

    @property
    def endpoint_configured(self) -> bool:
        """An OpenAI-compatible endpoint is set up: a key, or a base URL that is not DeepSeek's."""
        return self.api_key is not None or self.base_url.rstrip("/") != DEEPSEEK_BASE_URL

    @property
    def effective_provider(self) -> str:
        if self.provider != "auto":
            return self.provider
        return "openai" if self.endpoint_configured else "local"

    @property
    def configured(self) -> bool:
        """An endpoint is usable: a key, or a base URL that is not DeepSeek's (local servers need none)."""
        if self.effective_provider == "local":
            return True
        return self.endpoint_configured
