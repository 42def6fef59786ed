"""`MemorySettingsBlock`: the pipeline settings as a Prefect Block, editable in the UI; a block
only pins the fields set in it (block > DSH_MEMORY_<FIELD>, DSH_MEMORY_ROOT, DSH_HOME… > default)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from dsh_memory.blocks._fields import (
    OFF,
    SettingsBlock,
    check_path,
    env_mapping,
    expand,
    mirror,
    sources,
)
from dsh_memory.settings import MEMORY_ENV_NAMES, SOURCE_VARIABLES, MemorySettings, SemanticSearch, SourceRoots

# Block field → SourceRoots field (the environment variable that moves it: SOURCE_VARIABLES).
ROOT_FIELDS: dict[str, str] = {f"{name}_dir": name for name in SourceRoots.model_fields}
# Every MemorySettings field except the two structured ones is mirrored under its own name.
SCALAR_FIELDS: tuple[str, ...] = tuple(n for n in MemorySettings.model_fields if n not in ("memory_root", "roots"))


def _m(name: str) -> Any:
    return mirror(MemorySettings, name, f"$DSH_MEMORY_{name.upper()}, else {{default}}")


class MemorySettingsBlock(SettingsBlock):
    """Settings of the dsh-memory pipeline: memory root, session sources, idle/debounce/cooldown
    times, concurrency, retries, budgets and caps. Empty fields use the DSH_MEMORY_* environment
    variables or the documented defaults; values saved here win over both."""

    _block_type_name: ClassVar[str] = "dsh-memory settings"
    _to_plain: ClassVar[str] = "to_settings"

    memory_root: str | None = Field(
        None, description="Memory root folder (absolute or ~). Empty: $DSH_MEMORY_ROOT, else $DSH_HOME/memories."
    )
    dsh_sessions_dir: str | None = Field(
        None, description=f"DSH sessions folder, or '{OFF}' to skip DSH. Empty: $DSH_HOME/sessions (~/.dsh/sessions)."
    )
    codex_sessions_dir: str | None = Field(
        None,
        description=f"Codex rollouts folder, or '{OFF}' to skip Codex. Empty: $CODEX_HOME/sessions (~/.codex/sessions).",
    )
    claude_projects_dir: str | None = Field(
        None,
        description=f"Claude Code transcripts folder, or '{OFF}' to skip Claude Code. "
        "Empty: $CLAUDE_CONFIG_DIR/projects (~/.claude/projects).",
    )
    include_codex_exec: bool | None = _m("include_codex_exec")
    idle_seconds: int | None = _m("idle_seconds")
    debounce_seconds: int | None = _m("debounce_seconds")
    catch_up_interval_seconds: int | None = _m("catch_up_interval_seconds")
    consolidate_interval_seconds: int | None = _m("consolidate_interval_seconds")
    extract_on_workers: bool | None = _m("extract_on_workers")
    phase2_cooldown_seconds: int | None = _m("phase2_cooldown_seconds")
    concurrency: int | None = _m("concurrency")
    flow_run_limit: int | None = _m("flow_run_limit")
    retry_limit: int | None = _m("retry_limit")
    retry_base_seconds: int | None = _m("retry_base_seconds")
    min_delta_events: int | None = _m("min_delta_events")
    recheck_interval_seconds: int | None = _m("recheck_interval_seconds")
    max_rollout_age_days: int | None = _m("max_rollout_age_days")
    max_unused_days: int | None = _m("max_unused_days")
    stale_after_days: int | None = _m("stale_after_days")
    transcript_budget_tokens: int | None = _m("transcript_budget_tokens")
    max_raw_chars: int | None = _m("max_raw_chars")
    max_memory_md_chars: int | None = _m("max_memory_md_chars")
    max_summary_chars: int | None = _m("max_summary_chars")
    max_index_chars: int | None = _m("max_index_chars")
    max_notes_chars: int | None = _m("max_notes_chars")
    stale_claim_seconds: int | None = _m("stale_claim_seconds")
    semantic_search: SemanticSearch | None = _m("semantic_search")
    exclude_projects: list[str] | None = _m("exclude_projects")

    @field_validator("memory_root", "dsh_sessions_dir", "codex_sessions_dir", "claude_projects_dir")
    @classmethod
    def _check_path(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_path(v, allow_off=info.field_name != "memory_root")  # a source may be 'off'

    @field_validator("exclude_projects")
    @classmethod
    def _check_excluded(cls, v: list[str] | None) -> list[str] | None:
        """A list the UI cleared ([] or blanks) is unset: the environment applies, as for a path."""
        kept = [p.strip() for p in v or () if p and p.strip()]
        if any("\0" in p for p in kept):
            raise ValueError("a path cannot contain a NUL character")
        return kept or None

    def to_settings(self, env: Mapping[str, str] | None = None) -> MemorySettings:
        """The effective settings: this block's values over the environment over the defaults
        (ConfigError for an invalid environment value)."""
        e = env_mapping(env)
        overrides: dict[str, Any] = {n: getattr(self, n) for n in SCALAR_FIELDS if getattr(self, n) is not None}
        if self.memory_root is not None:
            overrides["memory_root"] = expand(self.memory_root, e)
        pinned = {roots_field: getattr(self, field) for field, roots_field in ROOT_FIELDS.items()}
        roots = {k: None if v == OFF else expand(v, e) for k, v in pinned.items() if v is not None}
        if roots:
            overrides["roots"] = {**SourceRoots.env_dirs(e), **roots}
        return MemorySettings.from_env(e, **overrides)


def settings_values(settings: MemorySettings) -> dict[str, Any]:
    """`settings` flattened to block field names (paths as strings, disabled sources as 'off')."""
    out: dict[str, Any] = {"memory_root": str(settings.memory_root)}
    for field, roots_field in ROOT_FIELDS.items():
        path = getattr(settings.roots, roots_field)
        out[field] = OFF if path is None else str(path)
    return out | {name: getattr(settings, name) for name in SCALAR_FIELDS}


ENV_NAMES: dict[str, tuple[str, ...]] = {
    **MEMORY_ENV_NAMES,
    "memory_root": (*MEMORY_ENV_NAMES["memory_root"], "DSH_HOME"),  # its default is under DSH_HOME
    **{field: (SOURCE_VARIABLES[roots_field],) for field, roots_field in ROOT_FIELDS.items()},
}


def settings_sources(block: MemorySettingsBlock | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Field → 'block' | 'env' | 'default' for the effective memory settings."""
    return sources(MemorySettingsBlock.model_fields, block, ENV_NAMES, env)
