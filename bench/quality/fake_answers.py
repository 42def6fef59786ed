"""Scripted answers for `bench_quality.py --provider fake`: what a small model tends to write.

Built from the request itself (so most facts are there to find), with the failure modes the
issue saw on the offline model: boilerplate, a line repeated, the agent's actions attributed to
the user, a memory for a greeting, a last line cut mid-word. Phase 1 (memory_save) and Phase 2
(memory_write) are both answered.
"""

from __future__ import annotations

import re

from dsh_memory.testing.fake_openai import Reply


def _user_text(request: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "user")


def _tool(request: dict) -> str:
    choice = request.get("tool_choice") or {}
    if isinstance(choice, dict) and choice.get("function"):
        return choice["function"].get("name", "")
    tools = request.get("tools") or []
    return tools[0]["function"]["name"] if tools else ""


def _tagged(text: str, tag: str) -> list[str]:
    return [ln[len(tag) + 3 :].strip() for ln in text.splitlines() if ln.startswith(f"[{tag}] ")]


def phase1(request: dict) -> Reply:
    text = _user_text(request)
    users, said = _tagged(text, "user"), _tagged(text, "assistant")
    bullets = ["- I am a coding agent, and I am here to assist you."]
    bullets += [f"- The user said: {u}" for u in users]
    bullets += [f"- The user fixed it: {a}" for a in said]
    if users:
        bullets += [f"- The user said: {users[0]}"] * 2  # a loop
    bullets.append("- Always use the `--units` flag to change the uni")  # cut mid-word, not in the source
    first = users[0] if users else "a task"
    last = said[-1] if said else "nothing"
    summary = f"## Task\n{first}\n\n## Outcome\n{last}\n{last}\nThe session ended with the agent repor"
    slug = re.sub(r"[^a-z0-9]+", "-", first.lower()).strip("-")[:40] or "session"
    return Reply.tool({"raw_memory": "\n".join(bullets), "rollout_summary": summary, "rollout_slug": slug})


def phase2(request: dict) -> Reply:
    text = _user_text(request)
    found = [ln for ln in text.splitlines() if ln.startswith("- ") and "rollout_summaries/" not in ln]
    memory = ["# Task Group: all", "", "## Notes", *found[:60], *found[:2], "- ## User prefe"]
    summary = ["v1", "", "## User preferences", *found[:8], "- I am a coding agent, and I am here to assist you."]
    return Reply.tool({"memory_md": "\n".join(memory), "memory_summary_md": "\n".join(summary)})


def answer(request: dict, on_save, on_write) -> Reply | None:
    """`on_save(request)` for a Phase 1 call (memory_save), `on_write` for Phase 2 (memory_write)."""
    handler = {"memory_save": on_save, "memory_write": on_write}.get(_tool(request))
    return handler(request) if handler else None


def fake_handler(request: dict) -> Reply | None:
    return answer(request, phase1, phase2)
