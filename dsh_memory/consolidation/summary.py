"""memory_summary.md from the merged handbook: what is injected into every session, one `# Scope:`
part per project and the global one (docs/architecture.md, Project scope). Used by the mechanical
merge (`mechanical.py`); whatever does not fit is named, never dropped silently."""

from __future__ import annotations

import re
from typing import Any

from dsh_memory.phase1.clean import CODE, is_marker
from dsh_memory.phase1.postprocess import cap_lines
from dsh_memory.phase1.steps import CHECKS
from dsh_memory.readpath.learned import SOURCE
from dsh_memory.scope import GLOBAL, SUMMARY_HEADING, group_project

Group = Any  # mechanical.Group (a task group's name, scope lines and sections): imported there, not here

MAX_KEYWORD_CHARS = 60
MAX_KEYWORDS = 8
MAX_SUMMARY_COMMANDS = 3
MAX_PREF_CHARS = 500  # a rule's line in the summary; a longer one (a whole note) is cut at a word
THE_REST = " … (the rest: MEMORY.md)"


# A name rather than a word: a path, a file, an identifier (`build-context-tree.ts`, `@agentv/core`,
# `in_progress`, `ContextTreeNode`) finds its lines; `check` or `runs` finds everything.
_NAMEY = re.compile(r"[./_:@<>#-]|[a-z][A-Z]|\d")
# … but a flag alone (`-t`, `--force`), an escape (`\U`) or an extension alone (`.md`) is in every
# command's help or file list: it finds nothing.
_NO_NAME = re.compile(
    r"-{1,2}\w[\w-]*|\\\w|\.(?:mdx?|[jt]sx?|py|go|rs|rb|java|json|ya?ml|toml|txt|html?|css|sh|lock)"  # not `.env`
)


def _keywords(group: Group) -> list[str]:
    """Names to search for: the code spans of the group's facts and shields that are names (files,
    identifiers, tools), not command lines, names before plain words, most cited first."""
    counts: dict[str, int] = {}
    for section in ("Project facts", "Agent findings", "Failure shields"):
        for b in group.sections.get(section, []):
            for c in CODE.findall(SOURCE.sub("", b)):
                if (
                    2 <= len(c) <= MAX_KEYWORD_CHARS
                    and " " not in c.strip()
                    and not is_marker(c)
                    and not _NO_NAME.fullmatch(c)
                ):
                    counts[c] = counts.get(c, 0) + 1
    return sorted(counts, key=lambda c: (not _NAMEY.search(c), -counts[c]))[:MAX_KEYWORDS]


def _short(line: str) -> str:
    """`line`, or its head within MAX_PREF_CHARS cut at a word, saying where the rest is."""
    if len(line) <= MAX_PREF_CHARS:
        return line
    head = line[:MAX_PREF_CHARS]
    return (head[: head.rfind(" ")] if " " in head[2:] else head).rstrip(" ,;:") + THE_REST


def _within(lines: list[str], cap: int) -> list[str]:
    text = cap_lines(lines, cap)
    return text.split("\n") if text else []


def _part(gs: list[Group], project: str | None, skills: list[dict], cap: int) -> list[str]:
    """One `# Scope:` part of memory_summary.md: the user's rules, where to look, the skills."""
    head = [f"{SUMMARY_HEADING}{'project ' + project if project else 'global'}"]
    prefs = [
        _short(SOURCE.sub("", b).rstrip())
        for g in gs
        for s in ("User notes", "User preferences")
        for b in g.sections.get(s, [])
    ]
    # each group's checks, then its newest build/run lines, as written (the injected part's how-to)
    checks_first = (
        sorted(g.sections.get("Reusable knowledge", []), key=lambda b: not b.startswith(CHECKS)) for g in gs
    )
    how = [SOURCE.sub("", b).rstrip() for lines in checks_first for b in lines[:MAX_SUMMARY_COMMANDS]]
    routing = ["## What's in memory"] if gs else []
    for g in gs:
        kw = ", ".join(f"`{k}`" for k in _keywords(g))
        routing.append(f'- {g.name}: MEMORY.md "# Task Group: {g.name}"' + (f"; keywords: {kw}" if kw else ""))
    skill_lines = ["## Skills", *(f"- skills/{s['name']}/SKILL.md: {s['task']}" for s in skills)] if skills else []
    body = (["## Build and test", *how] if how else []) + routing + skill_lines
    rest = cap - sum(len(x) + 1 for x in head + body) - 2
    kept = _within(["## User preferences", *prefs], rest) if prefs else []
    if prefs and len(kept) - 1 < len(prefs):  # what does not fit is named, never dropped silently
        note = "- not shown here: {n} more preferences" + f" (MEMORY.md {where_of(gs)})"
        kept = _within(["## User preferences", *prefs], rest - len(note) - 8)
        kept.append(note.replace("{n}", str(len(prefs) - max(0, len(kept) - 1))))  # a path may hold braces
    lines = head + kept + body
    if len(lines) <= 1:
        return []
    out = _within(lines, cap)
    if len(out) < len(lines):  # routing or skills over the cap: named, never cut silently
        note = "- not shown here: {n} more lines of this part" + f" (MEMORY.md {where_of(gs)}, skills/)"
        out = _within(lines, cap - len(note) - 8)
        if not out:  # not even its heading fits: no part (a note without it would join the part before)
            return []
        out.append(note.replace("{n}", str(sum(1 for ln in lines[len(out) :] if ln.startswith("- ")))))
    return out


def where_of(gs: list[Group]) -> str:
    return ", ".join(f'"# Task Group: {g.name}"' for g in gs) or "MEMORY.md"


def scope_of_group(g: Group) -> str | None:
    """The project of a task group; None for `global` and for groups written before scopes whose
    `applies_to` is a pattern (they were injected everywhere, so they stay global)."""
    return None if g.name == GLOBAL else group_project(g.name, g.scope_lines())


def render_summary(groups: dict[str, Group], skills: list[dict], cap: int) -> str:
    """memory_summary.md, the merge's second file: `v1`, then a `# Scope: global` part and one
    `# Scope: project <root>` part per project (docs/architecture.md, Project scope), each with the
    user's rules, how to build and test, where to look (the names the group's facts and shields
    cite) and its skills; what does not fit is named. The global part plus any one project part
    fit in `cap`; whole lines."""
    parts: dict[str | None, list[Group]] = {None: []}
    for g in groups.values():
        parts.setdefault(scope_of_group(g), []).append(g)
    for s in skills:  # a project's skill routes from its project's part, with or without bullets
        parts.setdefault(s.get("project") or None, [])
    projects = sorted(p for p in parts if p is not None)
    global_cap = cap - 4 if not projects else (cap - 4) // 2
    out = ["v1", ""]
    part = _part(parts[None], None, [s for s in skills if not s.get("project")], global_cap)
    out += part + [""] if part else []
    room = cap - 4 - sum(len(x) + 1 for x in part) - 1
    for project in projects:
        p = _part(parts[project], project, [s for s in skills if s.get("project") == project], room)
        out += p + [""] if p else []
    return "\n".join(out).rstrip() + "\n"
