"""Redaction stage 1: the token-shape rules of `secret_rules.RULES`, applied where they can match.

Plain substring checks decide which rules can apply: each rule's triggers are looked up once per
text (`in` tests), and the prefixes of gated rules only at the start of runs of token characters.
A rule with a `window` runs only around its triggers. `ANY_TRIGGER` is the fast path of `redact`:
no trigger of an ungated rule and no credential word in the lower-cased text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dsh_memory.transcript.secret_rules import GATE, PEM_END_LITERAL, PEM_TAIL, RULES, RUN, RUN_TRIGGER, Rule, marker


def _trigger_table(lower: bool, gated: bool) -> tuple[tuple[str, tuple[int, ...]], ...]:
    table: dict[str, list[int]] = {}
    for i, rule in enumerate(RULES):
        if rule.lower == lower and rule.gated == gated:
            for t in rule.triggers:
                table.setdefault(t, []).append(i)
    return tuple((t, tuple(ix)) for t, ix in table.items())


_FREE = _trigger_table(lower=False, gated=False)
_LOWER = _trigger_table(lower=True, gated=False)
assert not _trigger_table(lower=True, gated=True), "lower-case rules are never gated"
# Triggers that start a run of token characters are looked up per run (only when the text has
# such a run); the rest are substring tests like the ungated rules' triggers.
_GATED = _trigger_table(lower=False, gated=True)
_RUN_START = {t: ix for t, ix in _GATED if all(RULES[i].prefix for i in ix) and RUN_TRIGGER.fullmatch(t)}
_OTHER = tuple((t, ix) for t, ix in _GATED if t not in _RUN_START)
_SUBSTRING = _FREE + _OTHER  # tested with `in` on every text that passes the fast path
_RUN_START_LENGTHS = tuple(sorted({len(t) for t in _RUN_START}))
_RUN_START_HEADS = frozenset(t[:2] for t in _RUN_START)


# Any trigger of an ungated rule, or a credential word, in the lower-cased text.
ANY_TRIGGER = re.compile(
    "|".join(
        re.escape(t)
        for t in sorted(
            {t.lower() for t, _ in _FREE + _LOWER} | {"key", "token", "secret", "pass", "pwd", "auth", "cred"}
        )
    )
)


def _run_start_hits(text: str) -> set[int]:
    """Rules whose prefix starts a run of 16+ token characters: at the run's start, after a `-`
    inside it (`-----BEGIN…-----sk_live_…`, `x-ghp_…`) or after an escape (`\\nghp_…`)."""
    hits: set[int] = set()
    heads, get = _RUN_START_HEADS, _RUN_START.get
    for m in RUN.finditer(text):
        s, e = m.span()
        starts = [s + 1] if s and text[s - 1] == "\\" and text[s] in "ntr" else []
        starts.append(s)
        d = text.find("-", s, e)
        while d != -1:
            starts.append(d + 1)
            d = text.find("-", d + 1, e)
        for p in starts:
            if text[p : p + 2] in heads:
                for n in _RUN_START_LENGTHS:
                    ix = get(text[p : p + n])
                    if ix:
                        hits.update(ix)
    return hits


def replace_spans(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, kind) span, in order, replaced by the marker of its kind; a span
    that starts inside the one before is skipped."""
    out: list[str] = []
    done = 0
    for start, end, kind in spans:
        if start < done:
            continue
        out += [text[done:start], marker(kind)]
        done = end
    out.append(text[done:])
    return "".join(out)


def _windows(rule: Rule, text: str) -> list[tuple[int, int]]:
    """Merged spans of `rule.window` characters around each occurrence of its triggers."""
    spans = []
    for t in rule.triggers:
        i = text.find(t)
        while i != -1:
            spans.append((max(0, i - rule.window), min(len(text), i + len(t) + rule.window)))
            i = text.find(t, i + 1)
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _apply_rule(rule: Rule, text: str, low: str) -> str:
    if rule.repl is not None:
        return rule.regex.sub(rule.repl, text)
    if rule.window:
        assert not rule.lower
        matches = (m for lo, hi in _windows(rule, text) for m in rule.regex.finditer(text, lo, hi))
    elif not rule.lower:
        matches = rule.regex.finditer(text)
    elif len(low) == len(text):  # the pattern runs on the lower-cased text, spans are the same
        matches = rule.regex.finditer(low)
    else:
        matches = rule.ignorecase.finditer(text)
    # in text order, each once (windows are merged, so no match is found twice)
    spans = sorted({sp for m in matches for sp in rule.spans(m, text)})
    return replace_spans(text, [(s, e, rule.kind) for s, e in spans]) if spans else text


def _pem_tails(text: str) -> str:
    """Base64 lines ending in an END line whose BEGIN line was cut off: searched only in the
    8,000 characters before each END line (a search over the whole text tries every position)."""
    spans = []
    end = text.find(PEM_END_LITERAL)
    while end != -1:
        m = PEM_TAIL.search(text, max(0, end - 8000), end + 80)
        if m:
            spans.append(m.span())
        end = text.find(PEM_END_LITERAL, end + 1)
    return replace_spans(text, [(s, e, "pem_private_key") for s, e in sorted(spans)]) if spans else text


def apply_rules(text: str, low: str) -> str:
    """Each rule whose trigger occurs, in table order (`low` is `text.lower()`)."""
    hits = {i for t, ix in _SUBSTRING if t in text for i in ix}
    if GATE.search(text) is not None:
        hits.update(_run_start_hits(text))
    hits.update(i for t, ix in _LOWER if t in low for i in ix)
    stale = False
    for i in sorted(hits):
        rule = RULES[i]
        if rule.lower and stale:
            low, stale = text.lower(), False
        new = _apply_rule(rule, text, low)
        if new != text:
            text, stale = new, True
    if PEM_END_LITERAL in text:
        text = _pem_tails(text)
    return text
