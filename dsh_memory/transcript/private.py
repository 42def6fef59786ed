"""`<private>…</private>`: what the user marks private never leaves the session log.

A span the user typed between `<private>` and `</private>` is dropped from every human prompt (and
from a title, which is often the head of the first prompt) as the session is read
(`readers.load`), so no later stage — the transcript a model reads, the evidence writer, a
rollout summary, the handbook, a Prefect parameter, artifact, run name or log — ever holds it.
`render_transcript` drops spans again (idempotent) for a session built some other way.

Tags are matched case-insensitively and may hold spaces (`< Private >`, `</ private>`); spans
nest (the outermost closing tag ends them); an unclosed `<private>` drops the rest of that
message; a stray `</private>` is removed.
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
        if m.group(1):
            depth = max(0, depth - 1)
        else:
            depth += 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def without_private(session: Session) -> Session:
    """`session` with every private span dropped from its human prompts and its title (the same
    object when there is none)."""
    changed: dict[int, str] = {}
    for i, e in enumerate(session.events):
        if e.kind is EventKind.HUMAN:
            text = drop_private(e.text)
            if text != e.text:
                changed[i] = text
    title = drop_private(session.title) if session.title else session.title
    if not changed and title == session.title:
        return session
    events = [e.model_copy(update={"text": changed[i]}) if i in changed else e for i, e in enumerate(session.events)]
    title = " ".join(title.split()) if title else title
    return session.model_copy(update={"events": events, "title": title or None})
