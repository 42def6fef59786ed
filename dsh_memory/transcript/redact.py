"""Secret redaction for everything that leaves a session log (transcripts, model output, logs).

`redact(text)` replaces each secret with a `[REDACTED:<kind>]` marker; `redact_obj(obj)` does the
same for every string inside dicts/lists/tuples. Both are idempotent: a marker is never redacted
again, and markers never nest. Three stages, in this order:

1. token shapes (`secret_rules.RULES`, applied by redact_shapes.py): private keys, known token
   prefixes and formats, webhooks, headers, passwords in URLs and command lines;
2. assignments (here): `KEY=value`, `KEY: value`, `"key": "value"`, `--key value` whose key name
   ends in password/secret/token/api_key/… and whose value has 8+ characters and is not a
   reference (`os.environ[…]`, `${VAR}`) or a placeholder (`<your-key>`, `sk-...`);
3. context (redact_context.py): a credential word makes nearby random-looking tokens secret even
   without a known shape; far from such words git SHAs, UUIDs and digests survive.
What a secret value looks like, randomness included: secret_values.py.

Speed: plain substring checks decide which rules can apply; assignments and the context rule start
from the few places where a credential word occurs instead of scanning the whole text.
"""

from __future__ import annotations

import re
from typing import Any

from dsh_memory.transcript.redact_context import redact_context
from dsh_memory.transcript.redact_shapes import ANY_TRIGGER, apply_rules
from dsh_memory.transcript.secret_rules import GATE, MARKER_PREFIX, WEAK_NAMES, marker
from dsh_memory.transcript.secret_values import (
    NOT_A_VALUE,
    NOT_A_VALUE_RE,
    PLACEHOLDER,
    ROOTS,
    ROOTS_ANYCASE,
    SECRET_KEY_RE,
    TRAILING_PUNCT,
    kind_for_name,
    secretish,
)

__all__ = ["MARKER_PREFIX", "contains_secret", "redact", "redact_obj"]

# A value ends at white space, a quote or a backslash, and at `;`/`&` that start the next
# `Name=` field (connection strings, query strings).
_VALUE = r"(?P<value>(?:[^\s\"'`\\;&]|[;&](?![A-Za-z][A-Za-z0-9_ .-]{0,40}=))+)"
# After a secret-looking key name: the separator, an optional quote, then the value.
_ASSIGN_TAIL = re.compile(r"\\?[\"']?[ \t]*(?:=|:(?!//))[ \t]*\\?[\"']?" + NOT_A_VALUE + _VALUE)
# `--password VALUE` (a command-line flag followed by its value).
_FLAG_TAIL = re.compile(r"[ \t]+[\"']?" + NOT_A_VALUE + r"(?!-)" + _VALUE)
_WORD_TAIL = re.compile(r"[A-Za-z0-9]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_SHORT = 4096  # texts shorter than this take the fast path when nothing could match


# --- stage 2: assignments ----------------------------------------------------------------------------
def _redact_assignments(text: str, low: str) -> str:
    """`NAME=value`, `NAME: value`, `"name": "value"`, `--name value` where NAME ends in a secret name.

    Anchored on the few places where a secret word occurs: one case-insensitive regex over the
    whole text is ~30x slower in CPython's `re`. `low` is `text.lower()`."""
    roots = ROOTS.finditer(low) if len(low) == len(text) else ROOTS_ANYCASE.finditer(text)
    out: list[str] = []
    done = 0  # text[:done] is already in `out`
    for root in roots:
        end = _WORD_TAIL.match(text, root.end()).end()  # type: ignore[union-attr]
        start = root.start()
        if start < done:
            continue
        while start > done and end - start < 64 and text[start - 1] in _NAME_CHARS:
            start -= 1
        name = text[start:end]
        if not SECRET_KEY_RE.search(name):
            continue
        m = _ASSIGN_TAIL.match(text, end)
        if m is None and name.startswith("--"):
            m = _FLAG_TAIL.match(text, end)
        if m is None:
            continue
        value = m.group("value")
        stripped = value.rstrip(TRAILING_PUNCT)
        if (
            len(stripped) < 8
            or MARKER_PREFIX in value
            or PLACEHOLDER.fullmatch(value)
            or PLACEHOLDER.fullmatch(stripped)
        ):
            continue
        if WEAK_NAMES.search(name) and not secretish(stripped):
            continue
        out.append(text[done : m.start("value")])
        out.append(marker(kind_for_name(name)))
        done = m.start("value") + len(stripped)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


# --- entry points -------------------------------------------------------------------------------
def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`. Never raises on str.

    Repeated until nothing changes (at most a few passes): a value cut at one secret's end can
    leave another secret-shaped tail that only a second pass sees ("password is X…sha256:X…").
    """
    for _ in range(4):
        red = _redact_once(text)
        if red == text:
            break
        text = red
    return text


def _redact_once(text: str) -> str:
    if not text:
        return text
    low = text.lower()
    if len(text) < _SHORT and GATE.search(text) is None and ANY_TRIGGER.search(low) is None:
        return text  # most short texts: nothing any stage could match
    red = apply_rules(text, low)
    if red != text:
        text, low = red, red.lower()
    if ROOTS.search(low) if len(low) == len(text) else ROOTS_ANYCASE.search(text):
        red = _redact_assignments(text, low)
        if red != text:
            text, low = red, red.lower()
        text = redact_context(text, low)
    return text


def _redact_keyed_value(key: str, value: str) -> str:
    red = redact(value)
    v = value.strip()
    if red != value or len(v) < 4 or not NOT_A_VALUE_RE.match(v) or PLACEHOLDER.fullmatch(v):
        return red
    if WEAK_NAMES.search(key) and not secretish(v):
        return red
    return marker(kind_for_name(key))


def redact_obj(obj: Any) -> Any:
    """A copy of `obj` with `redact` applied to every string (dict keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        out: dict = {}
        for k, v in obj.items():
            if isinstance(k, str) and isinstance(v, str) and SECRET_KEY_RE.search(k):
                # {"password": "hunter2…"}: the key alone says the value is secret.
                out[redact(k)] = _redact_keyed_value(k, v)
            else:
                out[redact_obj(k) if isinstance(k, str) else k] = redact_obj(v)
        return out
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v) for v in obj)
    return obj


def contains_secret(text: str) -> bool:
    """True when `redact` would change `text`."""
    return redact(text) != text
