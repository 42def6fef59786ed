"""How the memory is doing, per project and per memory file: what `dsh-memory status` (and
`--json`) and the vault show (docs/agents.md, docs/architecture.md: Project scope). Per scope
(`global` or a project root) the COUNTS below; per memory file, MEMORY.md and memory_summary.md
(items, stale, aged, left out) and every rollout summary (scope, items, uses, last use, age,
stale items). Reads files and stat()s the working trees, never git; a status never fails on one
unreadable file.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import UTC, date, datetime
from typing import Any

from dsh_memory import scope as sc
from dsh_memory.readpath._common import read_text
from dsh_memory.readpath.freshness import stale_reasons
from dsh_memory.readpath.learned import BULLET, age_days, as_date, learned_dates
from dsh_memory.readpath.scoping import PROJECT, Where, compose_summary, scope_of
from dsh_memory.readpath.summary import NOT_SHOWN, freshness_check
from dsh_memory.storage.store_format import parse_front_matter

COUNTS = ("handbook_items", "sessions", "pending_raw", "stale", "aged", "uses", "never_used", "left_out")


def _name(scope: str) -> str:
    return scope[len(PROJECT) :] if scope.startswith(PROJECT) else sc.GLOBAL


def _is_item(line: str) -> bool:
    return bool(BULLET.match(line)) and not line.lstrip("-*+ ").startswith(("rollout_summaries/", "not shown here:"))


def _on_disk(name: str) -> bool:
    return name != sc.GLOBAL and os.path.isdir(name)


def _text(store: Any, name: str) -> str | None:
    """A top-level memory file's text; None when it is not a regular file."""
    path = os.path.join(str(store.root), name)
    return None if not os.path.isfile(path) or os.path.islink(path) else read_text(path) or ""


def _handbook(store: Any, rows: dict, today: date, stale_after_days: int) -> dict[str, Any]:
    """Count MEMORY.md's items per scope into `rows`; MEMORY.md's own file row."""
    row = {"path": "MEMORY.md", "scope": "mixed", "items": 0, "stale": 0, "aged": 0}
    text = _text(store, "MEMORY.md")
    if text is None:
        return row
    dates = learned_dates(store) if stale_after_days > 0 else {}
    memo: dict = {}  # each Makefile / package.json read once
    for i, line in enumerate(text.splitlines(), start=1):
        if not _is_item(line):
            continue
        name = _name(scope_of(store, "MEMORY.md", i))
        counts = rows[name]
        counts["handbook_items"] += 1
        row["items"] += 1
        if _on_disk(name) and stale_reasons(line, name, memo):
            counts["stale"] += 1
            row["stale"] += 1
        days = age_days(line, dates, today) if dates else None
        if days is not None and days > stale_after_days:
            counts["aged"] += 1
            row["aged"] += 1
    return row


def _summary_left_out(
    store: Any, rows: dict, max_summary_chars: int, today: date, stale_after_days: int
) -> dict[str, Any]:
    """Count what injection leaves out of each scope's part into `rows` (a project's lines with
    the notes its tree gives them, as injected at its root); the summary's file row."""
    row = {"path": "memory_summary.md", "scope": "mixed", "items": 0, "left_out": 0}
    full = _text(store, "memory_summary.md")
    if full is None:
        return row
    full = full.strip()
    row["items"] = sum(_is_item(ln) for ln in full.splitlines())
    glob, parts = sc.summary_parts(full)
    dates = learned_dates(store) if stale_after_days > 0 else None
    for where in [Where("", False), *(Where(p, True) for p in sorted(parts))]:
        check = freshness_check(where.root, dates, today, stale_after_days, max_summary_chars, {})
        content = compose_summary(full, where, max_summary_chars, check, (glob, parts))[0]
        scope = sc.GLOBAL
        for line in content.splitlines():
            if line.startswith(sc.SUMMARY_HEADING):
                scope = sc.part_project(line) or sc.GLOBAL
            elif m := NOT_SHOWN.match(line):
                if scope == sc.GLOBAL and where.root:
                    continue  # the global part's cut is counted once, with the global part alone
                rows[scope]["left_out"] += int(m.group(1))
                row["left_out"] += int(m.group(1))
    return row


def _rollout_row(store: Any, info: Any, usage: dict, today: date) -> dict[str, Any]:
    scope = scope_of(store, info.rel)
    prov = info.provenance or {}
    count, last = usage.get(info.rel, (0, None))
    _, body = parse_front_matter(read_text(os.path.join(str(store.root), info.rel)) or "")
    items = [ln for ln in body.splitlines() if _is_item(ln)]
    name, cwd = _name(scope), str(prov.get("cwd") or "")
    stale = 0
    if _on_disk(name):
        here = [cwd] if cwd and cwd != name and os.path.isdir(cwd) else []
        stale = sum(1 for ln in items if stale_reasons(ln, name) and all(stale_reasons(ln, c) for c in here))
    learned = as_date(prov.get("updated_at"))
    return {
        "path": info.rel,
        "scope": scope,
        "items": len(items),
        "uses": int(count or 0),
        "last_used": last.isoformat() if isinstance(last, datetime) else last,
        "never_used": not count,
        "age_days": (today - learned).days if learned else None,
        "stale": stale,
    }


def memory_health(
    store: Any,
    usage: dict | None = None,
    max_summary_chars: int = 10_000,
    stale_after_days: int = 0,
    now: datetime | None = None,
) -> dict[str, Any]:
    """{"projects": per-scope counts (`global` first), "memory_files": per-file rows, "totals"}
    (see the module docstring). `usage` is the state's `usage()` ({} before any use)."""
    usage = usage or {}
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    rows: defaultdict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
    files = [
        _handbook(store, rows, today, stale_after_days),
        _summary_left_out(store, rows, max_summary_chars, today, stale_after_days),
    ]
    for info in store.list_rollout_summaries():
        try:
            f = _rollout_row(store, info, usage, today)
        except (OSError, ValueError):
            continue
        files.append(f)
        counts = rows[_name(f["scope"])]
        counts["sessions"] += 1
        counts["uses"] += f["uses"]
        counts["never_used"] += f["never_used"]
    for block in store.read_raw_blocks():
        project = block.project or (sc.project_root(block.cwd) if block.cwd else None)
        rows[project or sc.GLOBAL]["pending_raw"] += 1
    projects = dict(sorted(rows.items(), key=lambda kv: (kv[0] != sc.GLOBAL, kv[0])))
    totals = {k: sum(r[k] for r in projects.values()) for k in COUNTS}
    return {"projects": projects, "memory_files": files, "totals": totals}
