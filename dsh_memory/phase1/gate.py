"""The Phase 1 no-op gate: sessions with nothing durable in them produce no memory, whatever the
writer, and cost no model call.

A session is trivial when the agent used no tool, the user stated no rule, preference or project
fact (see `evidence.gather`), and the user wrote little: a greeting, a thank-you, a general question
answered from knowledge. Anything else goes to the writer, whose answer can still be empty.
Deterministic and cheap: it reads the session's evidence only.
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
