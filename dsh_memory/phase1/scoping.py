"""The scope of each item of a raw memory: the session's project unless the user said otherwise.

An item is tagged `[scope: global]` when the user's own words behind it (the words it quotes, or
else the user's sentences sharing at least half of its content words) state it as general
(`dsh_memory.scope.stated_as_general`). A `[scope: global]` the model wrote is kept only when those
words back it: a rule the user gave for one repository never leaks into the others.
"""

from __future__ import annotations

import re

from dsh_memory.phase1.postprocess import BULLET, blocks, content_words
from dsh_memory.scope import is_tagged_global, stated_as_general, tag, untag

QUOTED = re.compile(r"\"([^\"\n]{6,})\"|“([^”\n]{6,})”")
MIN_SHARE = 0.5
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")


def _flat(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def _sentences(text: str) -> list[str]:
    parts = [s.strip() for s in _SENTENCE.split(text or "")]
    return [s for s in parts if len(s) >= 3]


def backing_words(item: str, user_sentences: list[str]) -> list[str]:
    """The user's sentences an item rests on: those it quotes, else those sharing ≥ half of its
    content words (at least two)."""
    quotes = [_flat(a or b) for a, b in QUOTED.findall(item)]
    said = [s for s in user_sentences if any(q in _flat(s) or _flat(s) in q for q in quotes)]
    if said:
        return said
    words = set(content_words(QUOTED.sub(" ", untag(item))))
    if len(words) < 2:
        return []
    out = []
    for s in user_sentences:
        shared = words & set(content_words(s))
        if len(shared) >= 2 and len(shared) / len(words) >= MIN_SHARE:
            out.append(s)
    return out


def scope_items(raw_memory: str, transcript_text: str) -> tuple[str, list[str]]:
    """(raw memory with `[scope: global]` on the items the user stated as general, notes)."""
    if not raw_memory.strip():
        return raw_memory, []
    users = [s for b in blocks(transcript_text) if b.tag == "user" for s in _sentences(b.text)]
    out, notes, tagged, refused = [], [], 0, 0
    for line in raw_memory.split("\n"):
        if not BULLET.match(line):
            out.append(untag(line) if is_tagged_global(line) else line)
            continue
        general = any(stated_as_general(s) for s in backing_words(line, users))
        if is_tagged_global(line) and not general:
            refused += 1
        tagged += general
        out.append(tag(line) if general else untag(line))
    if tagged:
        notes.append(f"scope: {tagged} item(s) global (the user's words)")
    if refused:
        notes.append(f"scope: {refused} global tag(s) of the model not backed by the user's words: kept in the project")
    return "\n".join(out), notes
