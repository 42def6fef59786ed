"""A generated block of README.md between two marker comments: splice it in, or check it."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def splice(readme: str, start: str, end: str, generate: Callable[[], str]) -> str:
    """`readme` with the block from `start` to `end` replaced by `generate()` (markers included)."""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"{README} has no {start} … {end} block")
    return pattern.sub(lambda _m: generate(), readme)


def main(render: Callable[[str], str], what: str, script: str) -> int:
    """Rewrite README.md, or with --check exit 1 when the block is stale."""
    current = README.read_text()
    updated = render(current)
    if "--check" in sys.argv:
        if updated != current:
            print(f"README.md {what} is stale: run python {script}", file=sys.stderr)
            return 1
        return 0
    README.write_text(updated)
    return 0
