"""Consolidation's answer to memory the working tree contradicts: set it aside, never delete it.

Injection flags a line that cites a path, make target or package script its project's tree no
longer has (`readpath.freshness`). Consolidation acts on the same check for the handbook: in each
project group whose repository is on this machine, such a bullet leaves its section for the
group's `Possibly stale` section, with the reason — out of what the summary injects and what its
keywords route to, still in MEMORY.md to read, search or correct. When the tree has the cited
thing again, the bullet goes back to `Project facts`. A newer session that learns the same thing
anew writes a fresh bullet in its own section (the refresh); nothing is deleted here.
"""

from __future__ import annotations

import os
import re
from typing import Any

from dsh_memory.readpath.freshness import stale_reasons

SECTION = "Possibly stale"
RETURNED_TO = "Project facts"
KEPT = ("Tasks", "User notes", "User preferences", SECTION)  # the user's words are theirs to retire
_FLAG = re.compile(r" \(may be stale: [^)]*\)(?= \[source:|$)")


def set_aside(groups: dict[str, Any], project_of) -> int:
    """Move stale bullets of every on-machine project group to `SECTION` (and back when no longer
    stale); `project_of(group)` is the group's project root or None. Returns how many moved out."""
    moved = 0
    for g in groups.values():
        root = project_of(g)
        if not root or not os.path.isdir(root):
            continue
        earlier = g.sections.get(SECTION, [])
        back = [b for b in earlier if not stale_reasons(_FLAG.sub("", b), root)]
        aside = [b for b in earlier if b not in back]
        for name, items in list(g.sections.items()):
            if name in KEPT:
                continue
            keep = []
            for b in items:
                reasons = stale_reasons(b, root)
                if reasons:
                    aside.append(_flagged(b, reasons))
                    moved += 1
                else:
                    keep.append(b)
            g.sections[name] = keep
        g.sections[SECTION] = aside
        if back:  # each bullet is checked once: what came back is not stale
            g.sections.setdefault(RETURNED_TO, []).extend(_FLAG.sub("", b) for b in back)
    return moved


def _flagged(bullet: str, reasons: list[str]) -> str:
    note = f" (may be stale: {'; '.join(reasons[:2])})"
    m = re.search(r" \[source: [^\]]*\]$", bullet)
    return bullet[: m.start()] + note + m.group(0) if m else bullet + note
