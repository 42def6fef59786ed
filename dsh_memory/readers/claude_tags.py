"""Claude Code's harness tags in a text, each found in one pass over it: a tool's output or a prompt
may open any number and close none (a search from each opener to the end would be quadratic).
Used by `claude_events` (what the tags mean is said there)."""

from __future__ import annotations

import re
from bisect import bisect_left

_COMMAND_FIELD = re.compile(r"<(command-name|command-message|command-args)>")

# Harness boilerplate in tool results: an element opening a line and closing at a line's end.
_OPEN = re.compile(r"(?m)^[ \t]*<system-reminder>")
_CLOSE = re.compile(r"(?m)</system-reminder>[ \t]*$")
_MARKER = "[system-reminder removed]"


def strip_boilerplate(text: str) -> tuple[str, int]:
    """`text` without harness boilerplate elements, each replaced by a marker, and one cut off
    before its closing tag (a truncated result) to the end; (text, removed). One pass over the
    text (a tool's output may hold any number of openers, none closed)."""
    if "<system-reminder>" not in text:
        return text, 0
    closes = [(m.start(), m.end()) for m in _CLOSE.finditer(text)]
    parts, pos, removed = [], 0, 0
    for m in _OPEN.finditer(text):
        if m.start() < pos:
            continue  # inside the element just removed
        i = bisect_left(closes, (m.end(), -1))  # the first line-ending closer after this opener
        if i == len(closes):
            break  # none: nor for any later opener
        parts += [text[pos : m.start()], _MARKER]
        pos, removed = closes[i][1], removed + 1
    out = "".join(parts) + text[pos:]
    last = out.rfind("</system-reminder>")  # an opener with no closer after it: cut off there
    if cut := _OPEN.search(out, last + 1 if last >= 0 else 0):
        out, removed = out[: cut.start()] + _MARKER, removed + 1
    if not removed:
        return text, 0
    return re.sub(r"\n{3,}", "\n\n", out).strip("\n"), removed


_REMINDER_OPEN, _REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"


def without_reminders(text: str) -> tuple[str, int]:
    """`text` without the reminders in it, and how many: hooks and the harness append several after
    a prompt, and one pasted from another session sits anywhere; each is theirs, none the user's
    words. One pass; a reminder never closed stays."""
    parts, pos, n = [], 0, 0
    while (start := text.find(_REMINDER_OPEN, pos)) != -1:
        end = text.find(_REMINDER_CLOSE, start + len(_REMINDER_OPEN))
        if end == -1:
            break
        parts.append(text[pos:start])
        pos, n = end + len(_REMINDER_CLOSE), n + 1
    return ("".join(parts) + text[pos:] if n else text), n


def command_fields(text: str) -> dict[str, str]:
    """Each `<command-…>value</command-…>` of a wrapper (the last of a name wins), in one pass: a
    tag never closed is looked for once (a prompt may open any number)."""
    fields: dict[str, str] = {}
    unclosed: set[str] = set()
    pos = 0
    while m := _COMMAND_FIELD.search(text, pos):
        tag = m.group(1)
        end = -1 if tag in unclosed else text.find(f"</{tag}>", m.end())
        if end == -1:
            unclosed.add(tag)
            pos = m.start() + 1
            continue
        fields[tag] = text[m.end() : end].strip()
        pos = end + len(tag) + 3
    return fields
