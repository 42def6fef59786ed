"""`<private>…</private>`: what the user marks private never leaves the session log
(docs/security.md, "What the user marks private is never read").

`without_private` runs as a session is read (`readers.load`), so no later stage ever holds a
private span; `render_transcript` drops spans again (idempotent) for a session built some other
way, and notes are written without them. Tags match in any case and may hold spaces; spans nest
(the outermost closing tag ends them); an unclosed `<private>` drops the rest of the message.
"""

from __future__ import annotations

import re

from dsh_memory.models import EventKind, Session

_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.I)


def drop_private(text: str) -> str:
    """`text` without its private spans (unchanged when it has no `private` tag)."""
    if not text or "private" not in text.lower():
        return text
    out: list[str] = []
    depth, pos = 0, 0
    for m in _TAG.finditer(text):
        if depth == 0:
            out.append(text[pos : m.start()])
        depth = max(0, depth - 1) if m.group(1) else depth + 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def without_private(session: Session) -> Session:
    """`session` with every private span dropped from its human prompts and its title (the same
    object when there is none)."""
    texts = [drop_private(e.text) if e.kind is EventKind.HUMAN else e.text for e in session.events]
    title = drop_private(session.title) if session.title else session.title
    if texts == [e.text for e in session.events] and title == session.title:
        return session
    events = [
        e if text == e.text else e.model_copy(update={"text": text})
        for e, text in zip(session.events, texts, strict=True)
    ]
    title = " ".join(title.split()) if title else title
    return session.model_copy(update={"events": events, "title": title or None})
