"""Redaction stage 3: credential words in context (see transcript/redact.py).

A credential word (key, secret, token, password, … as a whole word or identifier part) makes
nearby tokens secret without a known prefix: the value after a linking word ("the admin password
is Xk9…!q") when it is not a plain word, and random-looking tokens of 20+ characters within five
words either side, unless the window names a digest (commit, sha, hash, public key, …).
"""

from __future__ import annotations

import re
from itertools import islice

from dsh_memory.transcript.redact_shapes import replace_spans
from dsh_memory.transcript.secret_rules import (
    CREDENTIAL_WORDS,
    DIGEST_WORDS,
    KEY_QUALIFIERS,
    MARKER_PREFIX,
)
from dsh_memory.transcript.secret_values import (
    HEX,
    NOT_A_VALUE_RE,
    PIECES,
    PLAIN_IDENT,
    PUBKEY_TYPES,
    ROOTS,
    ROOTS_ANYCASE,
    SECRET_KEY_RE,
    TRAILING_PUNCT,
    kind_for_name,
    looks_random,
    secretish,
)

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_WINDOW_WORDS = 5  # words either side of a credential word
# A word: split at white space and at the punctuation of JSON, code and tables, so that minified
# JSON is not one giant word.
_WORD = re.compile(
    r"(?:[^\s\"'`,;{}\[\]()<>|]|(?<=[A-Za-z])'(?=[A-Za-z]))*[A-Za-z0-9](?:[^\s\"'`,;{}\[\]()<>|]|(?<=[A-Za-z])'(?=[A-Za-z]))*"
)
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
_DIGEST_PREFIX = re.compile(r"(?i)(?:sha\d*|md5|h1|base64|0x)[:=,-]?$")
_TIGHT = re.compile(
    r"s?[\"'`]?(?P<link>[ \t]*(?:(?:is|was|are|now|becomes|equals|to|set to)[ \t]+|[:=→][ \t]*|->[ \t]*))"
    r"(?:is[ \t]+)?[\"'`*]*(?P<value>[^\s\"'`()\[\]{}<>,;]{8,200})"
)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_WEAK_WORDS = frozenset({"key", "auth"})
_PLURAL_WORDS = frozenset({"keys", "passwords"})
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase"})
_PREV_WORD = re.compile(r"([A-Za-z]+)[ \t_-]*$")


def _split_ident(ident: str) -> list[str]:
    """`aws_secret_access_key` → aws, secret, access, key; a trailing number goes (`key1`)."""
    parts = [p.lower() for p in PIECES.findall(ident)]
    while len(parts) > 1 and parts[-1].isdigit():
        parts.pop()
    return parts


def _credential_kind(parts: list[str]) -> str | None:
    """The marker kind when the identifier ends in a credential word (`aws_secret_access_key`,
    `X-Auth-Token`), None otherwise (`secretName`, `token_refresh_handler`, `api_key_id`)."""
    return kind_for_name(parts[-1]) if parts and parts[-1] in CREDENTIAL_WORDS else None


def _tight_value_ok(text: str, start: int, ident: str, parts: list[str], m: re.Match[str]) -> bool:
    """Passwords in prose may be words joined by separators ("correct-horse-9"); secrets and tokens
    must have digits, symbols or randomness; a bare "key"/"auth" (cache key, primary key) must be
    random unless a qualifier says which key ("api key", "secret_key"). `NAME = value` with a
    secret NAME was the assignment stage's decision, and calls, subscripts and attribute reads
    (`password.encode(…)`, `os.environ[…]`) are code, not values."""
    value = m.group("value")
    v = value.rstrip(TRAILING_PUNCT)
    if MARKER_PREFIX in value or not NOT_A_VALUE_RE.match(v) or text[m.end() : m.end() + 1] in ("(", "["):
        return False
    if _names_digest(v):
        return False  # "the key is sha256:…" names a digest (and stays a veto word for the window)
    code_link = m.group("link").strip() in ("=", ":")
    if code_link and SECRET_KEY_RE.search(ident):
        return False
    word = parts[-1]
    if word in _PASSWORD_WORDS and not code_link:
        return secretish(v) or (len(v) >= 8 and not v.isalpha() and PLAIN_IDENT.fullmatch(v) is not None)
    if HEX.fullmatch(v) and _window_vetoed(sum(_window(text, start, m.end()), [])):
        return False  # "cache key: <sha> (commit sha)"
    if word in _WEAK_WORDS:
        qualifier = parts[-2] if len(parts) > 1 else None
        if qualifier is None:
            prev = _PREV_WORD.search(text, max(0, start - 24), start)
            qualifier = prev.group(1).lower() if prev else None
        if qualifier not in KEY_QUALIFIERS:
            return looks_random(v)
    return secretish(v)


def _in_marker(text: str, start: int, end: int) -> bool:
    i = text.rfind(MARKER_PREFIX, max(0, start - 64), end)
    return i != -1 and text.find("]", i) >= start


def _window(text: str, start: int, end: int) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """Up to _WINDOW_WORDS words before `start` on its line, and after `end` in its paragraph."""
    lo = max(0, start - 400)
    nl, esc = text.rfind("\n", lo, start), text.rfind("\\n", lo, start)  # a line break, or an escaped one
    lo = max(lo, nl + 1, esc + 2 if esc != -1 else 0)
    hi = min(len(text), end + 400)
    nxt = _BLANK_LINE.search(text, end, hi)
    hi = nxt.start() if nxt else hi
    before = list(_WORD.finditer(text, lo, start))[-_WINDOW_WORDS:]
    return before, list(islice(_WORD.finditer(text, end, hi), _WINDOW_WORDS))


def _names_digest(word: str) -> bool:
    """`commit`, `sha256:…`, `fix/rebase-x`: a word that speaks of digests. Random-looking words
    never do (their letters may spell "sha" by chance), so redacting one never lifts a veto."""
    if word.lower().strip("():,.;") in DIGEST_WORDS:
        return True
    return any(p in DIGEST_WORDS for p in _split_ident(word)) and not any(
        looks_random(c.group(0)) for c in _CANDIDATE.finditer(word)
    )


def _window_vetoed(words: list[re.Match[str]]) -> bool:
    return any(w.group(0).startswith(PUBKEY_TYPES) or _names_digest(w.group(0)) for w in words)


def _context_spans(text: str, low: str) -> list[tuple[int, int, str]]:
    roots = ROOTS.finditer(low) if len(low) == len(text) else ROOTS_ANYCASE.finditer(text)
    spans: list[tuple[int, int, str]] = []
    seen = -1
    for root in roots:
        s, e = root.start(), root.end()
        if s < seen:
            continue
        while s > 0 and text[s - 1] in _IDENT_CHARS:
            s -= 1
        while e < len(text) and text[e] in _IDENT_CHARS:
            e += 1
        seen = e
        if _in_marker(text, s, e):
            continue
        parts = _split_ident(text[s:e])
        kind = _credential_kind(parts)
        loose_only = kind is None  # "account keys list → …": a plural counts for random tokens only
        if loose_only:
            if not parts or parts[-1] not in _PLURAL_WORDS:
                continue
            kind = "api_key" if parts[-1] == "keys" else "password"
        # "the password is Xk9…!q": a linking word right after the credential word.
        tight = None if loose_only else _TIGHT.match(text, e)
        if tight and _tight_value_ok(text, s, text[s:e], parts, tight):
            v = tight.group("value").rstrip(TRAILING_PUNCT)
            spans.append((tight.start("value"), tight.start("value") + len(v), kind))
        # Random-looking tokens within a few words, unless the window speaks of digests.
        if _CANDIDATE.search(text, max(0, s - 400), e + 400) is None:
            continue  # no token of 20+ characters anywhere near: skip the word window
        before, after = _window(text, s, e)
        if not before and not after:
            continue
        lo = before[0].start() if before else s
        hi = after[-1].end() if after else e
        words = before + after
        cands = []
        for c in _CANDIDATE.finditer(text, lo, hi):
            cs, ce = c.span()
            if cs < e and ce > s:  # `key/<uuid>`: only what follows the credential word counts
                cs = e
                while cs < ce and text[cs] in "/+=_-":
                    cs += 1
            if ce - cs >= 20:
                cands.append((cs, ce))
        if not cands or _window_vetoed(words):
            continue
        urls = [w.span() for w in words if "://" in w.group(0)]
        for cs, ce in cands:
            if any(a <= cs < b for a, b in urls):
                continue  # a path or host inside a URL (webhook and userinfo tokens have their rules)
            if not looks_random(text[cs:ce]) or _in_marker(text, cs, ce):
                continue
            if _DIGEST_PREFIX.search(text, max(0, cs - 8), cs):
                continue
            spans.append((cs, ce, kind))
    return spans


def redact_context(text: str, low: str) -> str:
    spans = _context_spans(text, low)
    return replace_spans(text, sorted(spans)) if spans else text
