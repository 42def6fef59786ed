"""A generated block of a Markdown page between two marker comments: splice it in, or check it."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def splice(text: str, start: str, end: str, generate: Callable[[], str]) -> str:
    """`text` with the block from `start` to `end` replaced by `generate()` (markers included)."""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"no {start} … {end} block")
    return pattern.sub(lambda _m: generate(), text)


def main(render: Callable[[str], str], page: str, what: str, script: str) -> int:
    """Rewrite `page` (relative to the repo), or with --check exit 1 when its block is stale."""
    path = REPO / page
    current = path.read_text()
    updated = render(current)
    if "--check" in sys.argv:
        if updated != current:
            print(f"{page} {what} is stale: run python {script}", file=sys.stderr)
            return 1
        return 0
    path.write_text(updated)
    return 0
