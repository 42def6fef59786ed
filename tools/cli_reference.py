"""Generate the README's CLI reference from `--help` (tests check it cannot drift).

python tools/cli_reference.py          # rewrite the block in README.md
python tools/cli_reference.py --check  # exit 1 when README.md is stale
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"
ENV = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}


def _help(args: list[str]) -> str:
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    result = CliRunner().invoke(app, args + ["--help"], env=ENV, terminal_width=100)
    text = "\n".join(line.rstrip() for line in result.output.splitlines())
    return text.strip("\n")


def commands() -> list[str]:
    from typer.main import get_command

    from dsh_memory.cli import app

    return list(get_command(app).commands)  # registration order


def generate() -> str:
    parts = [START, "", "```text", "$ dsh-memory --help", _help([]), "```"]
    for name in commands():
        parts += ["", f"#### `dsh-memory {name}`", "", "```text", _help([name]), "```"]
    parts += ["", END]
    return "\n".join(parts)


def render(readme: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"{README} has no {START} … {END} block")
    return pattern.sub(lambda _m: generate(), readme)


def main() -> int:
    current = README.read_text()
    updated = render(current)
    if "--check" in sys.argv:
        if updated != current:
            print("README.md CLI reference is stale: run python tools/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
