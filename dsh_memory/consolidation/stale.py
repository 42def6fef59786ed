"""Consolidation's answer to memory the working tree contradicts: set it aside, refresh it or
retire it into the archive — never delete it silently (docs/agents.md says what users see).

A bullet the tree contradicts (`readpath.freshness`) moves to its group's `Possibly stale`
section, and back when the tree has the cited thing again (`set_aside`); an item both
contradicted and older than `stale_after_days` is retired (`flagged`, `retire`). The model sees
the flagged items as an input section; the mechanical merge leaves the retire-marked ones out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from dsh_memory.readpath.freshness import stale_reasons
from dsh_memory.readpath.learned import SOURCE, age_days, item_key, sources_of, with_sources

SECTION = "Possibly stale"
RETURNED_TO = "Project facts"
USERS = ("Tasks", "User notes", "User preferences")  # the user's words are theirs to retire
KEPT = (*USERS, SECTION)
_FLAG = re.compile(r" \(may be stale: [^)]*\)(?= \[source:|$)")


@dataclass(frozen=True)
class Flagged:
    """A handbook item injection would flag: its project, the bullet as written, why."""

    project: str
    bullet: str
    note: str  # "may be stale: conf/app.toml no longer exists; learned 120 days ago"
    retire: bool  # contradicted by the tree and not confirmed for stale_after_days


def set_aside(groups: dict[str, Any], project_of) -> int:
    """Move stale bullets of every on-machine project group to `SECTION` (and back when no longer
    stale); `project_of(group)` is the group's project root or None. Returns how many moved out."""
    moved = 0
    for g in groups.values():
        root = project_of(g)
        if not root or not os.path.isdir(root):
            continue
        memo: dict = {}  # each Makefile / package.json read once per group
        earlier = g.sections.get(SECTION, [])
        back = [b for b in earlier if not stale_reasons(_FLAG.sub("", b), root, memo)]
        aside = [b for b in earlier if b not in back]
        for name, items in list(g.sections.items()):
            if name in KEPT:
                continue
            checked = [(b, stale_reasons(b, root, memo)) for b in items]
            aside += [_flagged(b, reasons) for b, reasons in checked if reasons]
            g.sections[name] = [b for b, reasons in checked if not reasons]
            moved += len(items) - len(g.sections[name])
        g.sections[SECTION] = _merged(aside)
        if back:  # each bullet is checked once: what came back is not stale
            g.sections.setdefault(RETURNED_TO, []).extend(_FLAG.sub("", b) for b in back)
    return moved


def _merged(bullets: list[str]) -> list[str]:
    """One bullet per item (same words), the sources of its copies joined."""
    out: dict[str, str] = {}
    for b in bullets:
        key = item_key(b)
        out[key] = with_sources(out[key], sources_of(b)) if key in out else b
    return list(out.values())


def _flagged(bullet: str, reasons: list[str]) -> str:
    note = f" (may be stale: {'; '.join(reasons[:2])})"
    m = SOURCE.search(bullet)
    return bullet[: m.start()] + note + m.group(0) if m else bullet + note


def flagged(groups: dict[str, Any], project_of, dates: dict, today: date, stale_after_days: int) -> list[Flagged]:
    """The project items (not the user's own words) the tree contradicts or that were learned
    more than `stale_after_days` ago (`dates`: `readpath.learned.dates_of`), with their notes."""
    out: list[Flagged] = []
    for g in groups.values():
        root = project_of(g)
        if not root:
            continue
        on_disk, memo = os.path.isdir(root), {}
        for name, items in g.sections.items():
            if name in USERS:
                continue
            for b in items:
                clean = _FLAG.sub("", b)
                reasons = stale_reasons(clean, root, memo) if on_disk else []
                days = age_days(clean, dates, today) if stale_after_days > 0 else None
                old = days is not None and days > stale_after_days
                notes = [f"may be stale: {'; '.join(reasons[:2])}"] if reasons else []
                notes += [f"learned {days} days ago"] if old else []
                if notes:
                    out.append(Flagged(root, b, "; ".join(notes), bool(reasons) and old))
    return out


def retire(groups: dict[str, Any], project_of, dates: dict, today: date, stale_after_days: int) -> None:
    """Leave out of each group's `SECTION` the items marked `retire` (see `flagged`); apply
    archives them."""
    gone = {(f.project, f.bullet) for f in flagged(groups, project_of, dates, today, stale_after_days) if f.retire}
    for g in groups.values():
        items = g.sections.get(SECTION)
        if items:
            root = project_of(g)
            g.sections[SECTION] = [b for b in items if (root, b) not in gone]
