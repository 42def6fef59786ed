"""The Phase 1 no-op gate: a session with nothing durable in it (no tool used, no rule, preference
or project fact from the user, little user text: a greeting, a general question) produces no
memory and costs no model call, whatever the writer. It reads the session's evidence only.
"""

from __future__ import annotations

from dsh_memory.phase1.evidence import Evidence

MAX_TRIVIAL_USER_CHARS = 400


def trivial_reason(evidence: Evidence) -> str | None:
    """Why the session holds nothing durable, or None when it may."""
    if evidence.tool_calls or evidence.rules or evidence.user_facts:
        return None
    if evidence.user_chars > MAX_TRIVIAL_USER_CHARS:
        return None
    if not evidence.user_chars:
        return "no human prompt"
    return "no tool use and no rule or preference from the user"
