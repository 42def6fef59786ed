"""What a session set out to do, in the agent's own words: its task lists (`TodoWrite`,
`TaskCreate`, Codex's `update_plan`), its plans (`ExitPlanMode`, `.claude/plans/*.md`) and the
tasks it handed to subagents. A session that ends without a summary says what it did nowhere else;
the recap keeps these items (searchable, not injected).
"""

from __future__ import annotations

import re
from typing import Any

from dsh_memory.phase1.commands import clip

MAX_PLAN_CHARS = 900
MAX_FROM_ONE = 3  # items taken from one plan or one subagent prompt
TODO_TOOLS = {"todowrite", "taskcreate", "update_plan"}
PLAN_TOOLS = {"exitplanmode"}
AGENT_TOOLS = {"task", "agent", "spawn_agent"}  # subagents: their prompt can name the command they run
_PLAN_FILE = re.compile(r"(^|/)\.claude/plans/[^/]+\.md$")
_NAMES = re.compile(r"`[^`\n]+`|[\w.-]+/[\w./-]+|\b[\w-]+\.[a-z]{1,4}\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ x]\]\s+)?(.{12,})$")


def plan_items(tool: str, arguments: Any) -> list[str]:
    """The items one tool call plans: a todo list's entries, a plan's list items that name
    something, a subagent task's description with its prompt's first items that name something."""
    if not isinstance(arguments, dict):
        return []
    if tool in TODO_TOOLS:
        todos = arguments.get("todos") or arguments.get("plan")
        if isinstance(todos, list):
            said = [str(t.get("content") or t.get("step") or "") for t in todos if isinstance(t, dict)]
            return [s.strip() for s in said if s.strip()]
        subject, about = str(arguments.get("subject") or ""), str(arguments.get("description") or "")
        return [f"{subject}: {about}" if subject and about else subject or about] if subject or about else []
    if tool in PLAN_TOOLS:
        return _named_items(str(arguments.get("plan") or ""))
    if tool == "write" and _PLAN_FILE.search(str(arguments.get("file_path") or "")):
        return _named_items(str(arguments.get("content") or ""))
    if tool in AGENT_TOOLS:
        what = str(arguments.get("description") or "").strip()
        items = _named_items(str(arguments.get("prompt") or arguments.get("message") or ""))
        return ([f"Subagent: {what}"] if what else []) + items
    return []


def _named_items(text: str) -> list[str]:
    """A plan's list items that name something (its first MAX_FROM_ONE)."""
    out = []
    for line in text.splitlines():
        m = _ITEM.match(line)
        if m and _NAMES.search(m.group(1)):
            out.append(m.group(1).strip().replace("**", ""))
            if len(out) >= MAX_FROM_ONE:
                break
    return out


def best_items(items: list[str]) -> list[str]:
    """The plan's items for the recap: those naming something first, each once, within
    MAX_PLAN_CHARS, in the session's order."""
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        item = clip(" ".join(item.split()), 220)
        if item.lower() not in (s.lower() for s in seen):
            seen[item] = n
    ranked = sorted(seen, key=lambda s: (not _NAMES.search(s), seen[s]))
    out, used = [], 0
    for item in ranked:
        if used + len(item) > MAX_PLAN_CHARS:
            continue
        out.append(item)
        used += len(item)
    return sorted(out, key=seen.__getitem__)
