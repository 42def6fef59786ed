"""Generate the settings tables of docs/configuration.md from the settings models (a test checks
they cannot drift): every field of the two blocks, the environment variables that set it (read
from the same environment layer the values come from), its default, bounds and meaning.

python tools/settings_reference.py          # rewrite the block in docs/configuration.md
python tools/settings_reference.py --check  # exit 1 when docs/configuration.md is stale
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a script beside its helper
from _doc_block import main, splice  # noqa: E402

START, END = "<!-- settings-reference:start -->", "<!-- settings-reference:end -->"
_BOUNDS = {"ge": "≥ {}", "gt": "> {}", "le": "≤ {}", "lt": "< {}"}


def _allowed(field: Any) -> str:
    if get_origin(field.annotation) is Literal:
        return ", ".join(f"`{c}`" for c in get_args(field.annotation))
    bounds = {attr: getattr(m, attr) for m in field.metadata for attr in _BOUNDS if getattr(m, attr, None) is not None}
    if "ge" in bounds and "le" in bounds:
        return f"{bounds['ge']}–{bounds['le']}"
    return ", ".join(_BOUNDS[attr].format(v) for attr, v in bounds.items())


def _default(model: Any, name: str) -> str:
    field = model.model_fields[name]
    if field.is_required() or field.default is None:
        return ""
    return f"`{field.default}`" if field.default != "" else "empty"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").rstrip(".")


def _rows(block: Any, model: Any, env_names: dict[str, tuple[str, ...]], defaults: dict[str, str]) -> list[str]:
    rows = ["| setting | environment | default | allowed | meaning |", "|---|---|---|---|---|"]
    for name, field in block.model_fields.items():
        env = ", ".join(f"`{v}`" for v in env_names[name])
        if name in model.model_fields:
            src = model.model_fields[name]
            default = defaults.get(name) or _default(model, name)
            meaning, allowed = src.description or "", _allowed(src)
        else:  # a source folder: the block's own field
            default, meaning, allowed = (
                defaults[name],
                field.description.split(". Empty:")[0],
                "a path; `off` in the block",
            )
        rows.append(f"| `{name}` | {env} | {default} | {allowed} | {_cell(meaning)} |")
    return rows


def generate() -> str:
    from dsh_memory.blocks.memory_settings import ENV_NAMES as MEMORY_ENV
    from dsh_memory.blocks.memory_settings import MemorySettingsBlock
    from dsh_memory.blocks.model_route import ModelRouteBlock
    from dsh_memory.settings import ROUTE_ENV_NAMES as ROUTE_ENV
    from dsh_memory.settings import MemorySettings, ModelRoute

    memory_defaults = {
        "memory_root": "`$DSH_HOME/memories`",
        "dsh_sessions_dir": "`$DSH_HOME/sessions` (`DSH_HOME`: `~/.dsh`)",
        "codex_sessions_dir": "`$CODEX_HOME/sessions` (`CODEX_HOME`: `~/.codex`)",
        "claude_projects_dir": "`$CLAUDE_CONFIG_DIR/projects` (`~/.claude`)",
    }
    route_defaults = {"model_path": "the bundled Qwen2.5-Coder-1.5B (when installed)", "api_key": "none"}
    parts = [
        START,
        "",
        f"### Pipeline settings (block `{MemorySettingsBlock.get_block_type_slug()}/default`)",
        "",
        *_rows(MemorySettingsBlock, MemorySettings, MEMORY_ENV, memory_defaults),
        "",
        f"### Model route (block `{ModelRouteBlock.get_block_type_slug()}/default`)",
        "",
        *_rows(ModelRouteBlock, ModelRoute, ROUTE_ENV, route_defaults),
        "",
        END,
    ]
    return "\n".join(parts)


def render(text: str) -> str:
    return splice(text, START, END, generate)


if __name__ == "__main__":
    raise SystemExit(main(render, "docs/configuration.md", "settings reference", "tools/settings_reference.py"))
