"""Helpers shared by the reader tests."""

from __future__ import annotations

import json

from dsh_memory.models import Session


def event_strings(session: Session) -> list[str]:
    """Every string an Event carries that could reach a transcript (text, arguments, label)."""
    out = []
    for e in session.events:
        out.append(e.text)
        if e.arguments is not None:
            out.append(e.arguments if isinstance(e.arguments, str) else json.dumps(e.arguments, ensure_ascii=False))
        if e.label:
            out.append(e.label)
    return out
