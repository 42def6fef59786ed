"""Lenient JSON recovery for model output, shared by every provider: models that ignore the tool
channel (or get its arguments slightly wrong) still tend to emit JSON, in a ```json fence, after
prose, with trailing commas, raw newlines in strings, or cut off at max_tokens. What cannot be
recovered gives None or ValueError, never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_VALID_ESCAPES = set('"\\/bfnrtu')
_MAX_CANDIDATES = 64  # object starts tried in prose before giving up


# A JSON string: to its closing quote, or to the end of a cut-off text.
_STRING = r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)'
# What _repair rewrites, left to right: a string, a // or /* */ comment, a comma before a closing
# bracket (trailing).
_REPAIRED = re.compile(_STRING + r"|//[^\n]*|/\*.*?(?:\*/|\Z)|,(?=[ \t\r\n]*[}\]])", re.DOTALL)
_BRACKET = re.compile(_STRING + r"|[{}\[\]]", re.DOTALL)  # a bracket, outside strings
# Inside a string: a backslash with what follows it (nothing at the end), or a raw control character.
_IN_STRING = re.compile(r"\\(.?)|[\x00-\x1f]", re.DOTALL)


def _repair(text: str) -> str:
    """One pass outside/inside strings: drop comments and trailing commas, fix bad escapes,
    escape raw control characters (a backslash that ends a cut-off text is dropped)."""

    def repaired(m: re.Match[str]) -> str:  # a string with its characters fixed; a comment or comma dropped
        return _IN_STRING.sub(_string_char, m[0]) if m[0].startswith('"') else ""

    return _REPAIRED.sub(repaired, text)


def _string_char(m: re.Match[str]) -> str:
    escaped = m[1]
    if escaped is None:  # a raw control character
        return json.dumps(m[0])[1:-1]
    if not escaped:  # a backslash that ends a cut-off text
        return ""
    if escaped in _VALID_ESCAPES:
        return m[0]
    # a lone backslash becomes a literal one; what followed it is a string character of its own
    return "\\\\" + (json.dumps(escaped)[1:-1] if escaped < " " else escaped)


def loads_lenient(text: str) -> Any:
    """`json.loads` plus repairs (raw control characters in strings, trailing commas, // and /* */
    comments, invalid backslash escapes, a leading BOM); ValueError when even that does not parse."""
    if not isinstance(text, str):
        raise ValueError("not a string")
    s = text.strip().lstrip("\ufeff")
    try:
        with suppress(ValueError):
            return json.loads(s, strict=False)  # strict=False: raw newlines/tabs inside strings
        return json.loads(_repair(s), strict=False)
    except ValueError as exc:
        raise ValueError(f"not valid JSON even after repair: {exc}") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deep") from None


def _balanced_ends(text: str, start: int, ends: dict[int, int | None]) -> None:
    """Record in `ends`, for the '{' at text[start] and the next braces its scan opens (at most
    _MAX_CANDIDATES), the index just past the bracket that closes each (None: never closed),
    honouring strings. One scan serves the starts inside it: a text of unclosed braces is read
    once, not once per start."""
    depth, braces, kept = 0, [], 0  # braces: (position, depth inside it), innermost last
    for m in _BRACKET.finditer(text, start):
        if m[0] in ("{", "["):
            depth += 1
            if m[0] == "{" and kept < _MAX_CANDIDATES:
                braces.append((m.start(), depth))
                kept += 1
        elif m[0] in ("}", "]"):
            if braces and braces[-1][1] == depth:
                ends[braces.pop()[0]] = m.end()
            depth -= 1
            if depth == 0:
                return
    ends.update(dict.fromkeys(p for p, _ in braces))


def _objects_in(text: str) -> Iterator[dict]:
    """Every JSON object in `text`: the whole text, then balanced {...} spans left to right."""
    with suppress(ValueError):
        whole = loads_lenient(text)
        if isinstance(whole, dict):
            yield whole
    pos = 0
    ends: dict[int, int | None] = {}
    for _ in range(_MAX_CANDIDATES):
        start = text.find("{", pos)
        if start < 0:
            return
        if start not in ends:
            _balanced_ends(text, start, ends)
        end = ends[start]
        pos = start + 1
        if end is None:
            continue
        try:  # a span that parses is an object: it starts with "{" (also after _repair)
            obj = loads_lenient(text[start:end])
        except ValueError:
            continue
        yield obj
        pos = end


def extract_json_object(text: str, accept: Callable[[dict], bool] | None = None) -> dict | None:
    """The first JSON object in `text` that `accept` likes: in fenced blocks (json-tagged first),
    then in prose. None when there is none; never raises on bad input."""
    text = text or ""
    fences = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    bodies = [body for tag, body in fences if tag == "json"] + [body for tag, body in fences if tag != "json"]
    try:
        for body in [*bodies, text]:
            for obj in _objects_in(body):
                if accept is None or accept(obj):
                    return obj
    except RecursionError:
        return None
    return None


def loads_truncated(text: str) -> Any:
    """`loads_lenient` on a document cut off at max_tokens: pydantic's partial JSON parsing keeps
    what is complete, a cut string included. ValueError when nothing parses."""
    try:
        return loads_lenient(text)
    except ValueError:
        from pydantic_core import from_json

        try:
            return from_json(_repair(text.strip().lstrip("\ufeff")), allow_partial="trailing-strings")
        except RecursionError:
            raise ValueError("not valid JSON: nested too deep") from None
