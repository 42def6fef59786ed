"""Secret redaction for everything that leaves a session log (transcripts, model output, logs).

`redact(text)` replaces each secret with a `[REDACTED:<kind>]` marker; `redact_obj(obj)` does the
same for every string inside dicts/lists/tuples. Both are idempotent: a marker is never redacted
again, and markers never nest. Three stages, in this order:

1. token shapes (`secret_rules.RULES`, applied by redact_shapes.py): private keys, known token
   prefixes and formats, webhooks, headers, passwords in URLs and command lines;
2. assignments: `KEY=value`, `KEY: value`, `"key": "value"`, `--key value` whose key name
   ends in password/secret/token/api_key/… and whose value has 8+ characters and is not a
   reference (`os.environ[…]`, `${VAR}`) or a placeholder (`<your-key>`, `sk-...`);
3. context: a credential word (key, secret, token, password, … as a whole word or identifier
   part) makes nearby tokens secret without a known shape: the value after a linking word ("the
   admin password is Xk9…!q") when it is not a plain word, and random-looking tokens of 20+
   characters within five words either side, unless the window names a digest (commit, sha,
   hash, public key, …): far from such words git SHAs, UUIDs and digests survive.
What a secret value looks like, randomness included: secret_values.py.

Speed: plain substring checks decide which rules can apply; assignments and the context rule start
from the few places where a credential word occurs instead of scanning the whole text.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from dsh_memory.transcript.redact_shapes import ANY_TRIGGER, apply_rules, replace_spans
from dsh_memory.transcript.secret_rules import GATE, MARKER_PREFIX, marker
from dsh_memory.transcript.secret_values import (
    CREDENTIAL_WORDS,
    DIGEST_WORDS,
    HEX,
    KEY_QUALIFIERS,
    NOT_A_VALUE,
    NOT_A_VALUE_RE,
    PIECES,
    PLACEHOLDER,
    PLAIN_IDENT,
    PUBKEY_TYPES,
    ROOTS,
    ROOTS_ANYCASE,
    SECRET_KEY_RE,
    SYMBOLS,
    TRAILING_PUNCT,
    WEAK_NAMES,
    kind_for_name,
    looks_random,
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


def _roots(text: str, low: str):
    """Where a credential word's root (key, token, secret, pass, …) occurs: searched in `low`
    (`text.lower()`) unless lower-casing changed the length (some non-ASCII letters)."""
    return ROOTS.finditer(low) if len(low) == len(text) else ROOTS_ANYCASE.finditer(text)


# --- stage 2: assignments ----------------------------------------------------------------------------
def _redact_assignments(text: str, low: str) -> str:
    """`NAME=value`, `NAME: value`, `"name": "value"`, `--name value` where NAME ends in a secret name.

    Anchored on the few places where a secret word occurs: one case-insensitive regex over the
    whole text is ~30x slower in CPython's `re`. `low` is `text.lower()`."""
    spans: list[tuple[int, int, str]] = []
    done = 0  # the end of the last value found
    for root in _roots(text, low):
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
        done = m.start("value") + len(stripped)
        spans.append((m.start("value"), done, kind_for_name(name)))
    return replace_spans(text, spans) if spans else text


# --- stage 3: credential words in context ------------------------------------------------------------
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
    r"(?:is[ \t]+)?[\"'`*]*(?P<value>[^\s\"'`()\[\]{}<>,;]{3,200})"  # 8+ but for a password
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
    word = parts[-1]
    if word in _PASSWORD_WORDS and _password_value(v, code_link):
        return True  # "the sudo password is 1234", "password: s3cret!"
    if len(v) < 8:
        return False
    if code_link and SECRET_KEY_RE.search(ident):
        return False
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


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # `self.pw`, `args.password`: code
_VERSIONISH = re.compile(r"v?\d+(?:\.\d+)+")  # "1.2.3": a version, not a password (`-rc1` may be one)


def _password_value(v: str, code_link: bool) -> bool:
    """A value said to be a password, however short or plain: "is 1234", "is hunter2", ": s3cret!".
    Never a word ("is required"), a path (`pwd: /home/x`), a placeholder or an attribute read;
    after `=` or `:` (code as often as prose) only digits or a value with a symbol."""
    if len(v) < 3 or v.isalpha() or v.startswith(("/", "~", ".")) or "://" in v:
        return False
    if PLACEHOLDER.fullmatch(v) or _DOTTED.fullmatch(v) or _VERSIONISH.fullmatch(v):
        return False
    return not code_link or v.isdigit() or any(c in SYMBOLS for c in v)


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


def _redact_context(text: str, low: str) -> str:
    spans: list[tuple[int, int, str]] = []
    seen = -1
    for root in _roots(text, low):
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
        word = parts[-1] if parts else ""
        # The identifier ends in a credential word (`aws_secret_access_key`, `X-Auth-Token`; not
        # `secretName`, `token_refresh_handler`, `api_key_id`), or in a plural that counts for
        # random tokens only ("account keys list → …").
        loose_only = word not in CREDENTIAL_WORDS
        if loose_only and word not in _PLURAL_WORDS:
            continue
        kind = ("api_key" if word == "keys" else "password") if loose_only else kind_for_name(word)
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
    return replace_spans(text, sorted(spans)) if spans else text


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
        text = _redact_context(text, low)
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
