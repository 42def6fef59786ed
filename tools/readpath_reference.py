"""Generate the read-path parameter table of docs/agents.md from the request models (a test checks it cannot
drift): one row per parameter, the same name over the RPC, MCP and (spelled as an option) the CLI.

python tools/readpath_reference.py          # rewrite the block in docs/agents.md
python tools/readpath_reference.py --check  # exit 1 when docs/agents.md is stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a script beside its helper
from _doc_block import main, splice  # noqa: E402

START, END = "<!-- readpath-params:start -->", "<!-- readpath-params:end -->"


def _type(p: Any) -> str:
    if p.choices:
        return "one of " + ", ".join(f"`{c}`" for c in p.choices)
    names = {int: "integer", bool: "boolean", str: "string"}
    args = [a for a in get_args(p.annotation) if a is not type(None)]
    if get_origin(p.annotation) is list:
        return f"list of {names.get(args[0], 'values')}s"
    return names.get(p.annotation) or names.get(args[0] if len(args) == 1 else None, "value")


def _allowed(p: Any) -> str:
    out = []
    if p.ge is not None and p.le is not None:
        out.append(f"{p.ge}–{p.le}")
    elif p.ge is not None:
        out.append(f"≥ {p.ge}")
    unit = "items" if get_origin(p.annotation) is list else "characters"
    if p.max_length is not None:
        span = f"{p.min_length}–{p.max_length:,}" if p.min_length else f"≤ {p.max_length:,}"
        out.append(f"{span} {unit}")
    return ", ".join(out)


def _default(p: Any) -> str:
    if p.required:
        return "required"
    return f"`{json.dumps(p.default)}`"  # as the RPC and MCP see it


def _cli(commands: dict[str, Any], op: str, name: str) -> str:
    """How the CLI spells it, read from the CLI itself."""
    if op not in commands:
        return "(not in the CLI)"
    param = next(x for x in commands[op].params if x.name == name)
    return "argument" if param.param_type_name == "argument" else ", ".join(f"`{o}`" for o in param.opts)


def generate() -> str:
    from typer.main import get_command

    from dsh_memory.cli import app
    from dsh_memory.readpath import OPERATIONS
    from dsh_memory.readpath.params import fields

    commands = get_command(app).commands  # type: ignore[attr-defined]

    rows = [
        "| operation | parameter | CLI | type | default | allowed | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for op, (model, _) in OPERATIONS.items():
        params = fields(model)
        if not params:
            rows.append(f"| `{op}` | (none) | | | | | {(model.__doc__ or '').strip()} |")
        for p in params:
            cli = _cli(commands, op, p.name)
            meaning = p.description.replace("|", "\\|")
            rows.append(f"| `{op}` | `{p.name}` | {cli} | {_type(p)} | {_default(p)} | {_allowed(p)} | {meaning} |")
    return "\n".join([START, "", *rows, "", END])


def render(text: str) -> str:
    return splice(text, START, END, generate)


if __name__ == "__main__":
    raise SystemExit(main(render, "docs/agents.md", "read-path parameters", "tools/readpath_reference.py"))
