"""Scripted endpoint answers for `bench_scope.py --provider fake`.

Phase 1 (`memory_save`) answers like an over-eager model: every rule-like sentence the user wrote
becomes a bullet quoting them, and EVERY one is tagged `[scope: global]`; the deterministic rule
(`phase1/postprocess.py`, `scope_items`) must keep the project-only ones in their project. Phase 2
(`memory_write`) answers like a model that follows the consolidation prompt's format: one task
group per `project=` of the raw blocks plus `global` for the tagged bullets and those found in two
projects, and a memory_summary.md in `# Scope:` parts. `naive_handler` (`--naive-phase2`)
answers Phase 2 like a model that ignores scopes: one group, one summary, every bullet in it.
"""

from __future__ import annotations

import re

from quality.fake_answers import _user_text, answer

from dsh_memory.testing.fake_openai import Reply

RULE = re.compile(r"\b(always|never|use|prefer|make sure)\b", re.I)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
RAW_HEAD = re.compile(r"^### raw block \d+ .*· project=([^·]+?) ·")
TAG = " [scope: global]"


def phase1(request: dict) -> Reply:
    text = _user_text(request)
    users = [ln[len("[user] ") :] for ln in text.splitlines() if ln.startswith("[user] ")]
    rules = [s for u in users for s in SENTENCE.split(u) if RULE.search(s)]
    raw = "\n".join(f'- The user said: "{r}"{TAG}' for r in rules)
    said = [ln[len("[assistant] ") :] for ln in text.splitlines() if ln.startswith("[assistant] ")]
    summary = f"## Task\n{users[0] if users else 'a task'}\n\n## Outcome\n{said[-1] if said else 'unknown'}"
    return Reply.tool({"raw_memory": raw, "rollout_summary": summary, "rollout_slug": "scope-bench-session"})


def phase2(request: dict) -> Reply:
    groups: dict[str, list[str]] = {}
    project = None
    for line in _user_text(request).splitlines():
        m = RAW_HEAD.match(line)
        if m:
            project = m.group(1).strip()
        elif line.startswith("<<<END"):
            project = None
        elif project and line.startswith("- "):
            key = "global" if line.endswith(TAG) else project
            groups.setdefault(key, []).append(line.removesuffix(TAG))
    seen: dict[str, set[str]] = {}
    for name, items in groups.items():
        for b in items:
            seen.setdefault(b, set()).add(name)
    for b, where in seen.items():  # found in two projects: global
        if len(where - {"global"}) >= 2:
            for name in where:
                groups[name].remove(b)
            groups.setdefault("global", []).append(b)
    order = sorted(groups, key=lambda n: (n != "global", n))
    md, summary = [], ["v1", ""]
    for name in order:
        head = (
            ["scope: global (every project)", "applies_to: cwd=*; reuse_rule=every project"]
            if name == "global"
            else [f"scope: project {name}", f"applies_to: cwd={name}; reuse_rule=this project only"]
        )
        items = list(dict.fromkeys(groups[name]))
        md += [f"# Task Group: {name}", *head, "", "## User preferences", *items, ""]
        part = "global" if name == "global" else f"project {name}"
        summary += [f"# Scope: {part}", "## User preferences", *items, ""]
    return Reply.tool({"memory_md": "\n".join(md), "memory_summary_md": "\n".join(summary)})


def naive_phase2(request: dict) -> Reply:
    """A model that ignores scopes: one group, one summary, every bullet in it (what
    `consolidation/scope_guard.py` must repair before the summary is written)."""
    bullets = [ln.removesuffix(TAG) for ln in _user_text(request).splitlines() if ln.startswith('- The user said: "')]
    bullets = list(dict.fromkeys(bullets))
    memory = ["# Task Group: all", "scope: everything", "applies_to: cwd=.*", "", "## User preferences", *bullets]
    summary = ["v1", "", "## User preferences", *bullets]
    return Reply.tool({"memory_md": "\n".join(memory), "memory_summary_md": "\n".join(summary)})


def naive_handler(request: dict) -> Reply | None:
    return answer(request, phase1, naive_phase2)


def fake_handler(request: dict) -> Reply | None:
    return answer(request, phase1, phase2)
