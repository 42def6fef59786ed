"""Harness boilerplate inside tool results, removed by rule (not by matching a sentence).

Coding agents append their own reminders to what a tool returned (Claude Code's
`<system-reminder>` after every `Read`, todo nudges, hook feedback): not the tool's output, repeated
up to dozens of times per session. Such an element standing on its own lines is replaced by a short
marker; one quoted inside the output itself (mid-line, escaped JSON) is data and stays.
"""

from __future__ import annotations

import re

BOILERPLATE_TAGS = ("system-reminder",)
MARKER = "[{tag} removed]"

_OPEN = r"(?ms)^[ \t]*<(?P<tag>" + "|".join(re.escape(t) for t in BOILERPLATE_TAGS) + r")>"
_ELEMENT = re.compile(_OPEN + r".*?</(?P=tag)>[ \t]*$")
_UNCLOSED = re.compile(_OPEN + r"(?:(?!</(?P=tag)>).)*\Z")  # cut off before its closing tag (a truncated result)


def _marker(m: re.Match) -> str:
    return MARKER.format(tag=m.group("tag"))


def strip_boilerplate(text: str) -> tuple[str, int]:
    """`text` without harness boilerplate elements, each replaced by a marker; (text, removed)."""
    if "<" not in text:
        return text, 0
    out, closed = _ELEMENT.subn(_marker, text)
    out, cut = _UNCLOSED.subn(_marker, out)
    removed = closed + cut
    if not removed:
        return text, 0
    out = re.sub(r"\n{3,}", "\n\n", out).strip("\n")
    return out, removed
