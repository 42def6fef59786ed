"""Plain settings objects and their environment-variable resolution (precedence and every
variable: docs/configuration.md). `blocks/` wraps them as Prefect Blocks. Nothing here reads the
environment at import time: call `MemorySettings.from_env()`. `MEMORY_ENV_NAMES` and
`ROUTE_ENV_NAMES` are the one list of variables per field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, Field, SecretStr, ValidationError, ValidationInfo, field_validator

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
_SWITCH_WORDS = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}


def _switch(v: object) -> object:
    """Also the usual words of a switch (1 / true / yes / 0 / false / no, any case) and a bool:
    the same in the environment, a block and the Python API."""
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, str):
        v = v.strip().lower()
        return _SWITCH_WORDS.get(v, v)
    return v


SemanticSearch = Annotated[Literal["auto", "on", "off"], BeforeValidator(_switch)]


ENV_PREFIX = "DSH_MEMORY_"


def env_mapping(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _env_names(
    model: type[BaseModel], aliases: Mapping[str, tuple[str, ...]], skip: tuple[str, ...] = ()
) -> dict[str, tuple[str, ...]]:
    """Field → the environment variables that set it, in precedence order: those in `aliases`,
    else `DSH_MEMORY_<FIELD>`."""
    return {n: aliases.get(n, (f"{ENV_PREFIX}{n.upper()}",)) for n in model.model_fields if n not in skip}


def environment_values(names: Mapping[str, tuple[str, ...]], env: Mapping[str, str]) -> dict[str, str]:
    """The fields `env` sets, as raw strings the models validate: a field's first variable that is
    set (an empty value is unset; variable names match in any case, the name as written first)."""
    present = {key.lower(): value for key, value in env.items() if value != ""}
    out = {}
    for field, variables in names.items():
        found = [env.get(v) or present.get(v.lower()) for v in variables]
        if value := next((v for v in found if v), None):
            out[field] = value
    return out


def _home(variable: str, folder: str, env: Mapping[str, str] | None) -> Path:
    """`$variable`, else `~/<folder>` (with the HOME of `env`)."""
    e = env_mapping(env)
    return Path(e.get(variable) or Path(e.get("HOME", "~")) / folder).expanduser()


def dsh_home(env: Mapping[str, str] | None = None) -> Path:
    return _home("DSH_HOME", ".dsh", env)


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    return _home("CODEX_HOME", ".codex", env)


def claude_config_dir(env: Mapping[str, str] | None = None) -> Path:
    return _home("CLAUDE_CONFIG_DIR", ".claude", env)


def problems(model: type[BaseModel], exc: ValidationError, name: Callable[[str], str | None] = lambda f: None) -> str:
    """`model`'s ValidationError on one line: "where: message (got value)" per problem, the value
    cut at 80 characters and never a secret's; `name(field)` may name a field otherwise (the
    variable that set it), else its location."""
    secret = {n for n, f in model.model_fields.items() if "SecretStr" in str(f.annotation)}
    parts = []
    for err in exc.errors(include_url=False):
        field = str(err["loc"][0]) if err["loc"] else ""
        where = ".".join(str(p) for p in err["loc"])
        text = f"{name(where) or name(field) or where or 'value'}: {err['msg']}"
        if field not in secret and "input" in err and not isinstance(err["input"], dict):
            got = repr(str(err["input"]) if isinstance(err["input"], PurePath) else err["input"])
            text += f" (got {got[:80]}{'…' if len(got) > 80 else ''})"
        parts.append(text)
    return "; ".join(parts)


def _validated(model: type[BaseModel], values: dict, overrides: dict, what: str, names: Mapping[str, tuple[str, ...]]):
    """`model` from the environment's `values` and the caller's `overrides`; a bad value is one
    ConfigError naming the variable that set it (`problems`)."""
    try:
        return model(**{**values, **overrides})
    except ValidationError as exc:
        from dsh_memory.errors import ConfigError

        def variable(field: str) -> str | None:  # a source folder's (roots.codex_sessions) is named too
            if source := SOURCE_VARIABLES.get(field.removeprefix("roots.")):
                return source
            return " or ".join(names[field]) if field in values and field not in overrides and field in names else None

        raise ConfigError(f"invalid dsh-memory {what}: {problems(model, exc, variable)}") from None


class SourceRoots(BaseModel):
    """Where each agent keeps its session logs. `None` disables a source."""

    dsh_sessions: Path | None = Field(None, description="DSH sessions folder ($DSH_HOME/sessions)")
    codex_sessions: Path | None = Field(None, description="Codex rollouts ($CODEX_HOME/sessions)")
    claude_projects: Path | None = Field(None, description="Claude Code transcripts ($CLAUDE_CONFIG_DIR/projects)")

    @field_validator("dsh_sessions", "codex_sessions", "claude_projects")
    @classmethod
    def _absolute(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        """A relative folder would be read from each command's folder (a hook runs in the session's
        project, so each project would be searched for its own `.codex/sessions`)."""
        if v is not None and not v.is_absolute():
            variable = SOURCE_VARIABLES[info.field_name]
            raise ValueError(f"{v} is not an absolute path: set {variable} to one (or unset it)")
        return v

    @staticmethod
    def env_dirs(env: Mapping[str, str] | None = None) -> dict[str, Path]:
        """The source folders the environment names (unchecked: validated where they are used)."""
        return {
            "dsh_sessions": dsh_home(env) / "sessions",
            "codex_sessions": codex_home(env) / "sessions",
            "claude_projects": claude_config_dir(env) / "projects",
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SourceRoots:
        """The source folders from the environment; a relative one is a ConfigError."""
        return _validated(cls, cls.env_dirs(env), {}, "setting", {})


SOURCE_VARIABLES = {"dsh_sessions": "DSH_HOME", "codex_sessions": "CODEX_HOME", "claude_projects": "CLAUDE_CONFIG_DIR"}


class MemorySettings(BaseModel):
    """Pipeline settings. Units are in the names."""

    memory_root: Path = Field(description="Where memory files and bookkeeping live")
    roots: SourceRoots = Field(default_factory=SourceRoots)
    include_codex_exec: bool = Field(False, description="Also extract non-interactive `codex exec` runs")
    idle_seconds: int = Field(180, ge=0, description="A session must be quiet this long before extraction")
    debounce_seconds: int = Field(
        180, ge=1, description="A session is extracted once its newest turn end is this old (the debounce)"
    )
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
    stale_after_days: int = Field(
        90,
        ge=0,
        le=3650,
        description="An injected project line learned longer ago than this says how old it is ('learned 120 days "
        "ago'), and status counts it; 0 turns the age notes off",
    )
    transcript_budget_tokens: int = Field(24000, ge=500, description="Token budget of one Phase 1 transcript")
    max_raw_chars: int = Field(120_000, ge=1000, description="Cap on raw memories fed to Phase 2")
    max_memory_md_chars: int = Field(
        60_000,
        ge=1000,
        description="Cap on MEMORY.md, as fed to Phase 2 and as written by any model (what does not fit goes to "
        "MEMORY.archive.md)",
    )
    max_summary_chars: int = Field(10_000, ge=500, description="Cap on memory_summary.md (written and injected)")
    max_index_chars: int = Field(30_000, ge=1000, description="Cap on the rollout-summary index fed to Phase 2")
    max_notes_chars: int = Field(20_000, ge=500, description="Cap on ad hoc notes fed to Phase 2")
    stale_claim_seconds: int = Field(1800, ge=1, description="A running claim older than this recovers as failed")
    semantic_search: SemanticSearch = Field(
        "auto",
        description="Ranked search: 'auto' fuses lexical BM25 with a small embedding model's likeness when the "
        "model is installed (the semantic extra), else lexical only; 'on' fails clearly without the model; "
        "'off' is lexical only",
    )

    exclude_projects: list[str] = Field(
        [],
        description="Repositories whose sessions are never read beyond their header, extracted or sent to a model: "
        "repository roots (a folder excludes every repository inside it) or globs such as ~/work/client-*; "
        "in the environment a JSON list, or paths separated by commas or newlines",
    )

    @field_validator("exclude_projects", mode="before")
    @classmethod
    def _path_list(cls, v: object) -> object:
        """A list as the environment gives it: a JSON array, or paths separated by commas or
        newlines; blanks dropped (`~` is expanded where they are matched: `scope.excluded_by`)."""
        if isinstance(v, str):
            text = v.strip()
            if text.startswith("["):
                import json

                try:
                    v = json.loads(text)
                except ValueError:
                    raise ValueError("not a JSON list of paths") from None
            else:
                v = re.split(r"[,\n]", text)
        if isinstance(v, (list, tuple)):
            out = [str(p).strip() for p in v if str(p).strip()]
            relative = [p for p in out if not p.startswith(("/", "~", "*", "?", "["))]
            if relative:  # it would depend on the directory the worker runs in
                raise ValueError(f"{relative[0]!r} is relative: give an absolute path, ~/…, or a glob")
            return out
        return v

    @field_validator("memory_root")
    @classmethod
    def _a_folder(cls, v: Path) -> Path:
        """A file there would be shown as the memory (`list`, `read`) or fail deep inside a command;
        a relative path would be read from each command's folder (a hook runs in the session's)."""
        if not v.is_absolute():
            raise ValueError(
                f"{v} is not an absolute path: set DSH_MEMORY_ROOT (or DSH_HOME, its default's parent) to one"
            )
        shown = str(v).encode("utf-8", "backslashreplace").decode()
        if shown != str(v):  # the root is in what the read path answers (JSON, the injected text)
            raise ValueError(f"{shown} is no UTF-8 path: set DSH_MEMORY_ROOT (or DSH_HOME) to one that is")
        there = next((p for p in (v, *v.parents) if p.exists()), v)  # it, or the folder it would be made in
        if there.exists() and not there.is_dir():
            raise ValueError(f"{there} is not a directory: point it at a folder (one that is missing is created)")
        return v

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> MemorySettings:
        e = env_mapping(env)
        values: dict = environment_values(MEMORY_ENV_NAMES, e)
        root = values.get("memory_root") or (dsh_home(e) / "memories")
        values.update(memory_root=Path(root).expanduser(), roots=SourceRoots.env_dirs(e))
        return _validated(cls, values, overrides, "setting", MEMORY_ENV_NAMES)


# Every field but the source folders (DSH_HOME, CODEX_HOME, CLAUDE_CONFIG_DIR: SourceRoots.from_env)
# is read as DSH_MEMORY_<FIELD>; the memory root's variable is DSH_MEMORY_ROOT.
MEMORY_ENV_NAMES = _env_names(MemorySettings, {"memory_root": ("DSH_MEMORY_ROOT",)}, skip=("roots",))


class ModelRoute(BaseModel):
    """Which model answers, and how. `api_key` never reaches a log."""

    provider: Literal["auto", "openai", "local"] = Field(
        "auto",
        description="'openai' (any OpenAI-compatible endpoint), 'local' (in-process llama.cpp) or 'auto': "
        "the endpoint when one is configured (API key or base URL), else the local model",
    )
    base_url: str = Field(
        DEEPSEEK_BASE_URL,
        pattern=r"^https?://\S+$",
        max_length=2000,
        description="OpenAI-compatible base URL (http or https)",
    )
    api_key: SecretStr | None = Field(
        None, description="API key (DSH_MEMORY_API_KEY or DEEPSEEK_API_KEY); whitespace around it is not part of it"
    )
    phase1_model: str = Field(DEFAULT_MODEL, description="Model for Phase 1 extraction")
    phase2_model: str = Field(DEFAULT_MODEL, description="Model for Phase 2 consolidation")
    phase1_reasoning_effort: str = Field("", description="off/low/high/max on DeepSeek; empty = provider default")
    phase2_reasoning_effort: str = Field("", description="off/low/high/max on DeepSeek; empty = provider default")
    phase1_max_tokens: int = Field(4096, ge=256, le=131072, description="Output cap for one extraction")
    phase2_max_tokens: int = Field(32768, ge=1024, le=131072, description="Output cap for one consolidation")
    timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=86400,  # a larger wait overflows the socket's timeout (every call would fail)
        description="HTTP timeout of a model call: the longest wait to connect or for the next bytes of its answer "
        "(an endpoint that keeps the connection alive while it thinks, as DeepSeek does, may take longer in all: "
        "call_deadline_seconds bounds that)",
    )
    call_deadline_seconds: float = Field(
        3600.0,
        gt=0,
        description="The longest one model call may take in all, slow headers and keep-alive blank lines included; "
        "then it fails as a transient error, tried again in the run only when the deadline is within the "
        "task's retry delay (else by the claim's backoff, or Phase 2's next trigger)",
    )
    model_path: Path | None = Field(None, description="Local GGUF model file, absolute or ~ (provider 'local')")
    local_threads: int = Field(2, ge=1, le=64, description="CPU threads for the local model")

    @field_validator("base_url")
    @classmethod
    def _a_url(cls, v: str) -> str:
        """Host and port that parse: `http://[::1` failed every call with a traceback."""
        try:
            urlsplit(v).port  # noqa: B018 - reading it parses the host and the port
        except ValueError as exc:
            raise ValueError(f"not a URL ({exc})") from None
        return v

    @field_validator("api_key")
    @classmethod
    def _header_safe(cls, v: SecretStr | None) -> SecretStr | None:
        """Whitespace around a key (a pasted line break) is not part of it; what is left must fit an
        HTTP header (printable ASCII): httpx's refusal would show the key and fail every call."""
        if v is None:
            return None
        key = v.get_secret_value().strip()
        if not all(" " <= c <= "~" for c in key):
            raise ValueError("the key has a line break, a control or a non-ASCII character inside (not shown)")
        return SecretStr(key) if key else None

    @field_validator("model_path")
    @classmethod
    def _absolute_model(cls, v: Path | None) -> Path | None:
        """A relative file would be looked for in the directory each flow runs in."""
        if v is not None and not v.is_absolute():
            raise ValueError(f"{v} is not an absolute path: give one, or one starting with ~")
        return v

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> ModelRoute:
        values: dict = environment_values(ROUTE_ENV_NAMES, env_mapping(env))  # the key validates as a SecretStr
        if "model_path" in values:
            values["model_path"] = Path(values["model_path"]).expanduser()
        return _validated(cls, values, overrides, "model setting", ROUTE_ENV_NAMES)

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
        return self.effective_provider == "local" or self.endpoint_configured


# Every field as DSH_MEMORY_<FIELD>; besides: the key also as DEEPSEEK_API_KEY, and one model for
# both phases as DSH_MEMORY_MODEL (a phase's own variable wins).
ROUTE_ENV_NAMES = _env_names(
    ModelRoute,
    {
        "api_key": ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY"),
        "phase1_model": ("DSH_MEMORY_PHASE1_MODEL", "DSH_MEMORY_MODEL"),
        "phase2_model": ("DSH_MEMORY_PHASE2_MODEL", "DSH_MEMORY_MODEL"),
    },
)
