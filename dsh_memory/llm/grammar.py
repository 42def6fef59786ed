"""From a tool's JSON schema to a GBNF grammar that a small local model cannot ramble in.

The grammar is derived from the *same* schema the tool declares, only tightened (bounded
strings, slugs, arrays, no invented keys, one space between tokens) so that the model must close
every string and the object before `max_tokens`; the rules and their numbers:
docs/local-llm.md ("How a call runs"). The GBNF text comes from the runtime's converter,
imported lazily.
"""

from __future__ import annotations

import copy
import re
from typing import Any

SLUG_MAX_CHARS = 60

# Worst case, not average: digits and punctuation are often one token per character (measured:
# SmolLM2 rambling "00:00:00-00:00..." hit max_tokens with a 3 chars/token budget).
CHARS_PER_TOKEN = 1
MIN_STRING_CHARS = 16
DEFAULT_MAX_ITEMS = 8

_BOUNDED_FORMATS = {"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"}
_SLUG_NAME = re.compile(r"(^|_)slug$")
_SLUGS_NAME = re.compile(r"(^|_)slugs$")


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    return set(t) if isinstance(t, list) else ({t} if t else set())


def _is_free_string(schema: dict[str, Any]) -> bool:
    if {"enum", "const"} & schema.keys() or schema.get("format") in _BOUNDED_FORMATS:
        return False
    return "string" in _types(schema)


def _walk(schema: Any, visit, name: str = "", required: bool = True) -> None:
    """Call visit(node, property_name, required) on every sub-schema, depth first. `required`:
    reachable from the root through required properties only (not through arrays or unions)."""
    if not isinstance(schema, dict):
        return
    visit(schema, name, required)
    needed = set(schema.get("required") or ())
    for key, sub in (schema.get("properties") or {}).items():
        _walk(sub, visit, key, required and key in needed)
    items = schema.get("items")
    if isinstance(items, dict):
        _walk(items, visit, name[:-1] if _SLUGS_NAME.search(name) else f"{name}[]", False)
    elif isinstance(items, list):
        for sub in items:
            _walk(sub, visit, f"{name}[]", False)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or ():
            _walk(sub, visit, name, False)
    for key in ("$defs", "definitions"):
        for sub_name, sub in (schema.get(key) or {}).items():
            _walk(sub, visit, sub_name, False)
    if isinstance(schema.get("additionalProperties"), dict):
        _walk(schema["additionalProperties"], visit, "", False)


def _string_weight(schema: Any, max_items: int, name: str = "", required: bool = True) -> tuple[int, int, int]:
    """(required free strings, optional free strings, slug strings) the output can hold at most.
    "Required" = reachable from the root through required properties only; array items count
    maxItems times and are optional. Slugs have their own small bound."""
    if not isinstance(schema, dict):
        return 0, 0, 0
    req = opt = fixed = 0
    if _is_free_string(schema) and "pattern" not in schema:
        if _SLUG_NAME.search(name):
            fixed += 1
        elif required:
            req += 1
        else:
            opt += 1
    needed = set(schema.get("required") or ())
    parts = [
        (1, _string_weight(sub, max_items, key, required and key in needed))
        for key, sub in (schema.get("properties") or {}).items()
    ]
    items = schema.get("items")
    if isinstance(items, dict):
        times = min(int(schema.get("maxItems", max_items)), max_items)
        item_name = name[:-1] if _SLUGS_NAME.search(name) else ""
        parts.append((times, _string_weight(items, max_items, item_name, False)))
    elif isinstance(items, list):
        parts += [(1, _string_weight(sub, max_items, "", False)) for sub in items]
    for key in ("anyOf", "oneOf"):
        alts = [_string_weight(sub, max_items, name, False) for sub in schema.get(key) or ()]
        if alts:
            parts.append((1, max(alts)))
    for times, (r, o, f) in parts:
        req, opt, fixed = req + times * r, opt + times * o, fixed + times * f
    return req, opt, fixed


def string_caps(
    schema: dict[str, Any], max_tokens: int, *, max_string_chars: int, max_items: int = DEFAULT_MAX_ITEMS
) -> tuple[int, int, int]:
    """(cap for required strings, cap for optional / array-item strings, cap for slugs), in
    characters, such that all strings together fit in `max_tokens`. Slugs take at most an eighth
    of the budget; each required string gets one share of the rest and all optional strings
    together share one more, so that a long array cannot starve the main fields."""
    req, opt, slugs = _string_weight(schema, max_items)
    keys: list[str] = []
    _walk(schema, lambda node, _n, _r: keys.extend(node.get("properties", {}) or ()))
    skeleton = 8 + sum(len(k) // 2 + 4 for k in keys)  # rough token cost of keys, quotes and punctuation
    budget = max(0, max_tokens - skeleton) * CHARS_PER_TOKEN
    cap_slug = min(SLUG_MAX_CHARS, max(MIN_STRING_CHARS, budget // 8 // max(1, slugs)))
    budget -= slugs * cap_slug
    share = budget // max(1, req + (1 if opt else 0))
    cap_req = max(MIN_STRING_CHARS, min(max_string_chars, share))
    cap_opt = max(MIN_STRING_CHARS, min(max_string_chars, (share if req else budget) // max(1, opt)))
    return cap_req, cap_opt, cap_slug


def bound_schema(schema: dict[str, Any], *, max_tokens: int, max_string_chars: int = 4000) -> dict[str, Any]:
    """A tightened deep copy of `schema` (see the module docstring). The input is not modified."""
    out = copy.deepcopy(schema)
    cap_req, cap_opt, cap_slug = string_caps(out, max_tokens, max_string_chars=max_string_chars)

    def visit(node: dict[str, Any], name: str, required: bool) -> None:
        cap = cap_req if required else cap_opt
        types = _types(node)
        if "object" in types or "properties" in node:
            node.setdefault("additionalProperties", False)
        if "array" in types or "items" in node:
            node["maxItems"] = min(int(node.get("maxItems", DEFAULT_MAX_ITEMS)), DEFAULT_MAX_ITEMS)
            if int(node.get("minItems", 0)) > node["maxItems"]:
                node["minItems"] = node["maxItems"]
        if not _is_free_string(node):
            return
        if "pattern" in node:  # the converter wants `^...$`: an unanchored pattern is wrapped in a group
            pattern = node["pattern"]
            if not (pattern.startswith("^") and pattern.endswith("$")):
                node["pattern"] = f"^({pattern.lstrip('^').rstrip('$')})$"
        elif _SLUG_NAME.search(name):
            # Lowercase kebab-case (e.g. "fix-eur-invoice-rounding"): one character class with one
            # length bound keeps the length exactly bounded. Empty is allowed unless minLength >= 1
            # (tools use "" for "nothing worth keeping").
            limit = min(int(node.get("maxLength", SLUG_MAX_CHARS)), cap_slug)
            body = f"[a-z0-9][a-z0-9-]{{0,{max(0, limit - 1)}}}"
            node["pattern"] = f"^({body})?$" if int(node.get("minLength", 0)) < 1 else f"^{body}$"
        else:
            node["maxLength"] = min(int(node.get("maxLength", cap)), cap)
            if int(node.get("minLength", 0)) > node["maxLength"]:
                node["minLength"] = node["maxLength"]

    _walk(out, visit)
    return out


def _drop_patterns(schema: dict[str, Any], cap: int) -> dict[str, Any]:
    out = copy.deepcopy(schema)

    def visit(node: dict[str, Any], _name: str, _required: bool) -> None:
        if "pattern" in node:
            del node["pattern"]
            node["maxLength"] = min(int(node.get("maxLength", cap)), cap)

    _walk(out, visit)
    return out


def schema_to_gbnf(schema: dict[str, Any]) -> str:
    """GBNF for `schema` via the runtime's converter. Patterns it cannot translate fall back to
    bounded plain strings rather than failing the call."""
    from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar

    try:
        gbnf = json_schema_to_grammar(schema)
    except (AssertionError, ValueError, KeyError, TypeError, RecursionError):
        gbnf = json_schema_to_grammar(_drop_patterns(schema, SLUG_MAX_CHARS))
    return _COMPACT_SPACE.sub('space ::= " "?', gbnf)


_COMPACT_SPACE = re.compile(r"^space ::= .*$", re.MULTILINE)
