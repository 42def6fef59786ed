"""Generate the CLI reference of docs/cli.md from `--help` (tests check it cannot drift).

python tools/cli_reference.py          # rewrite the block in docs/cli.md
python tools/cli_reference.py --check  # exit 1 when docs/cli.md is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a script beside its helper
from _doc_block import main, splice  # noqa: E402

START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"
ENV = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}


def _help(args: list[str]) -> str:
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    result = CliRunner().invoke(app, args + ["--help"], env=ENV, terminal_width=100)
    text = "\n".join(line.rstrip() for line in result.output.splitlines())
    return text.strip("\n")


def commands() -> list[str]:
    """Every command in registration order, a group's own commands after it (`settings show`)."""
    from typer.main import get_command

    from dsh_memory.cli import app

    def walk(group, prefix: str) -> list[str]:
        out = []
        for name, cmd in group.commands.items():
            out.append(prefix + name)
            if hasattr(cmd, "commands"):
                out += walk(cmd, f"{prefix}{name} ")
        return out

    return walk(get_command(app), "")


def generate() -> str:
    parts = [START, "", "```text", "$ dsh-memory --help", _help([]), "```"]
    for name in commands():
        parts += ["", f"#### `dsh-memory {name}`", "", "```text", _help(name.split()), "```"]
    parts += ["", END]
    return "\n".join(parts)


def render(text: str) -> str:
    return splice(text, START, END, generate)


if __name__ == "__main__":
    raise SystemExit(main(render, "docs/cli.md", "CLI reference", "tools/cli_reference.py"))
