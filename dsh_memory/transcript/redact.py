"""Secret redaction for everything that leaves a session log (transcripts, model output, logs).

`redact(text)` replaces each secret with a `[REDACTED:<kind>]` marker; `redact_obj(obj)` does the
same for every string inside dicts/lists/tuples. Both are idempotent: a marker is never
redacted again, and markers never nest.

Three stages, in this order:

1. Token shapes (`secret_rules.RULES`): private key blocks (also cut or JSON-escaped), known
   prefixes and formats of cloud, VCS, chat, payment, AI, registry and SaaS tokens, JWTs,
   webhooks (the secret path, the host stays), `Authorization`/`Cookie` headers, passwords in
   URLs (`redis://:pw@host` too), `curl -u`, `mysql -p…`, `sshpass -p`, `.netrc`.
2. Assignments: `KEY=value`, `KEY: value`, `"key": "value"`, `--key value` whose key name ends
   in password/secret/token/api_key/… and whose value has 8+ characters (references such as
   `os.environ[…]`, `${VAR}`, `$VAR`, `None` and placeholders such as `<your-key>`, `sk-...`,
   `YOUR_API_KEY_HERE` are left alone).
3. Context: a credential word (key, secret, token, password, passwd, passphrase, credential,
   auth … as a whole word or identifier part) makes nearby tokens secret even without a known
   prefix: "the admin password is Xk9…!q" (a linking word, then a value that is not a plain
   word), and any random-looking token of 20+ characters within five words either side
   ("the aws secret is wJalr…", "wJalr… is the deploy user's secret key"). Random-looking:
   Shannon entropy over its alphabet (hex ≥ 3.0 bits, base64/alphanumeric ≥ 3.5) and short
   letter/digit runs (identifiers and paths have long ones). Far from such words nothing is
   redacted without a known shape, so git SHAs, UUIDs and digests survive; near them, a window
   that also names a digest (commit, sha, hash, digest, fingerprint, public key, …) is left
   alone, and so are UUIDs, `sha256:`/`sha512-` values and SSH public keys.

Speed: plain substring checks decide which rules can apply (texts without any trigger come back
unchanged after one `lower()` and a few `in` tests); assignments and the context rule start from
the few places where a credential word occurs instead of scanning the whole text.

detect-secrets (Yelp) was measured as an alternative on tests/fixtures/redaction (see
bench/bench_redact.py): with its entropy plugins it flagged half of the look-alikes (SHAs,
digests, UUIDs, public keys), without them it found a quarter of the secrets, and it scanned
about a hundred times slower; its settings are process-global. Its families are covered here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from dsh_memory.transcript.secret_rules import (
    CREDENTIAL_WORDS,
    DIGEST_WORDS,
    GATE,
    KEY_QUALIFIERS,
    MARKER_PREFIX,
    PEM_END_LITERAL,
    PEM_TAIL,
    RULES,
    RUN,
    RUN_TRIGGER,
    SECRET_NAMES,
    WEAK_NAMES,
    Rule,
    marker,
)

__all__ = ["MARKER_PREFIX", "contains_secret", "looks_random", "redact", "redact_obj"]

_marker = marker

# Values that are references to a secret, not the secret itself.
_NOT_A_VALUE = (
    r"(?!\[REDACTED|os\.environ|os\.getenv|getenv\(|process\.env|env\(|\$\{|\$\(|\$[A-Za-z_]|%[A-Za-z_]\w*%"
    r"|\{\{|<[A-Za-z_]|None\b|null\b|nil\b|true\b|false\b|undefined\b|\*{3,}"
    r"|[A-Za-z_][A-Za-z0-9_.]*[(\[]"  # a call or subscript: `get_token()`, `request.form[…]`
    r"|(?:self|cls|this|settings|config|cfg|conf|options|opts|args|kwargs|params|app|request|req|ctx|context"
    r"|secrets|credentials|creds|env)\.[A-Za-z_][\w.]*(?![\w.]*[^\w.\s\"'`,;)\]}]))"  # `settings.api_key`
)
# Example values in docs and templates: `<your-key>`, `sk-...`, `YOUR_API_KEY_HERE`, `xxxxxxxx`.
_PLACEHOLDER = re.compile(
    r"(?i)(?:<[^>]*>?|x{4,}|[*]+|\.{3,}.*|.*(?:\.\.\.|…)"
    r"|your[-_a-z0-9]*|(?:[a-z]+[-_])*(?:here|placeholder|example|changeme|dummy|redacted|sample)(?:[-_][a-z]+)*)"
)
_TRAILING_PUNCT = ".,;:)]}>"

_SECRET_KEY_RE = re.compile(r"(?i)(?:" + SECRET_NAMES + r")$")
_NOT_A_VALUE_RE = re.compile(_NOT_A_VALUE)
# A value ends at white space, a quote or a backslash, and at `;`/`&` that start the next
# `Name=` field (connection strings, query strings).
_VALUE = r"(?P<value>(?:[^\s\"'`\\;&]|[;&](?![A-Za-z][A-Za-z0-9_ .-]{0,40}=))+)"
# After a secret-looking key name: the separator, an optional quote, then the value.
_ASSIGN_TAIL = re.compile(r"\\?[\"']?[ \t]*(?:=|:(?!//))[ \t]*\\?[\"']?" + _NOT_A_VALUE + _VALUE)
# `--password VALUE` (a command-line flag followed by its value).
_FLAG_TAIL = re.compile(r"[ \t]+[\"']?" + _NOT_A_VALUE + r"(?!-)" + _VALUE)
_ROOTS = re.compile(r"key|token|secret|pass|pwd|auth|cred")  # run on text.lower()
_ROOTS_ANYCASE = re.compile(r"(?i)key|token|secret|pass|pwd|auth|cred")  # when lower() changes the length
_WORD_TAIL = re.compile(r"[A-Za-z0-9]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _kind_for_name(name: str) -> str:
    name = name.lower()
    if any(name.endswith(k) for k in ("password", "passwd", "pwd", "passphrase", "pass")):
        return "password"
    if "secret" in name or "cred" in name:
        return "secret"
    return "api_key" if "key" in name else "token"


# --- randomness ----------------------------------------------------------------------------------
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_WORDISH_SEGMENT = re.compile(r"[a-z][a-z_.-]+")
_SEPARATORS = re.compile(r"[-_/+.=]+")
# One identifier word: lower, Capitalized, UPPER or camelCase letters with a short version number,
# a number, or a short letter+digit code (v2, Q4, 8B).
_WORDY_SEGMENT = re.compile(
    r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]{2,}|[a-z]*(?:[A-Z][a-z]+)+[A-Z]?|[A-Z]+(?:[A-Z][a-z]+)+)\d{0,4}"
    r"|\d+|[A-Za-z]\d{1,4}|\d{1,4}[A-Za-z]{1,2}"
)


def _pathlike(t: str) -> bool:
    """src/auth/token_refresh/…, ./keys/dev.pem: two or more word segments, or a rooted path."""
    return t.startswith(("/", "./", "~/")) or sum(1 for seg in t.split("/") if _WORDISH_SEGMENT.fullmatch(seg)) >= 2


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def looks_random(token: str) -> bool:
    """True for a random-looking token of 20+ characters: a key, not a word, path or identifier.

    Hex needs ≥ 3.0 bits of entropy per character; other alphabets ≥ 3.5 bits, two of
    (lower, upper, digit), and short runs: split into words and numbers ("Token", "Refresh",
    "2024"), random text averages under 3 characters a run, identifiers and paths far more."""
    t = token.strip("/").rstrip("=")
    if len(t) < 20 or t.isdigit() or _UUID.fullmatch(t):
        return False
    if _HEX.fullmatch(t):
        return _entropy(t) >= 3.0
    if "/" in t and _pathlike(t):
        return False
    lower = any(c.islower() for c in t)
    upper = any(c.isupper() for c in t)
    digit = any(c.isdigit() for c in t)
    if lower + upper + digit < 2:
        return False
    pieces = _PIECES.findall(t)
    # camelCase identifiers have long runs; lower-case random text (no camelCase) may too
    if not pieces or sum(map(len, pieces)) / len(pieces) > (3.0 if upper else 4.0):
        return False
    if sum(len(seg) for seg in _SEPARATORS.split(t) if len(seg) > 1 and _WORDY_SEGMENT.fullmatch(seg)) * 2 >= len(t):
        return False  # mostly words: read_flow_run_graph_v1, IS_PYTHON_AT_LEAST_3_15, x86_64-apple-darwin17
    return _entropy(t) >= 3.5


_PUBKEY_TYPES = ("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][\w.]+)?")
_PLAIN_IDENT = re.compile(r"[A-Za-z]+\d*(?:[_.-][A-Za-z]*\d*)*")  # user_profile_v2_20240501, phase2-x
_SYMBOLS = frozenset("!@#$%^&*+=?~")


def _secretish(value: str) -> bool:
    """A value after "password is" / "auth:" that is not a plain word, number, path or reference."""
    v = value.rstrip(_TRAILING_PUNCT)
    if len(v) < 8 or MARKER_PREFIX in v or "://" in v or not _NOT_A_VALUE_RE.match(v):
        return False
    if v.startswith(_PUBKEY_TYPES) or _PLACEHOLDER.fullmatch(value) or _PLACEHOLDER.fullmatch(v):
        return False
    if v.isdigit() or _VERSION.fullmatch(v) or _PLAIN_IDENT.fullmatch(v):
        return False
    if "/" in v and _pathlike(v):
        return False
    has_alpha = any(c.isalpha() for c in v)
    return has_alpha and (any(c.isdigit() for c in v) or any(c in _SYMBOLS for c in v) or looks_random(v))


# --- stage 1: token shapes -------------------------------------------------------------------------
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
_RUN_START: dict[str, tuple[int, ...]] = {}
_OTHER: tuple[tuple[str, tuple[int, ...]], ...] = ()
for _t, _ix in _trigger_table(lower=False, gated=True):
    if all(RULES[i].prefix for i in _ix) and RUN_TRIGGER.fullmatch(_t):
        _RUN_START[_t] = _ix
    else:
        _OTHER += ((_t, _ix),)
_SUBSTRING = _FREE + _OTHER  # tested with `in` on every text that passes the fast path
_RUN_START_LENGTHS = tuple(sorted({len(t) for t in _RUN_START}))
_RUN_START_HEADS = frozenset(t[:2] for t in _RUN_START)
_SHORT = 4096  # texts shorter than this take the fast path when nothing could match


# Any trigger of an ungated rule, or a credential word, in the lower-cased text.
_ANY_TRIGGER = re.compile(
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


def _replace_spans(text: str, spans: list[tuple[int, int]], kind: str) -> str:
    out: list[str] = []
    done = 0
    for start, end in spans:
        if start < done:
            continue
        out.append(text[done:start])
        out.append(_marker(kind))
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
    if rule.window:
        assert not rule.lower and rule.repl is None
        found = {
            sp
            for lo, hi in _windows(rule, text)
            for m in rule.pattern.finditer(text, lo, hi)
            for sp in rule.spans(m, text)
        }
        return _replace_spans(text, sorted(found), rule.kind) if found else text
    if not rule.lower:
        if rule.repl is not None:
            return rule.pattern.sub(rule.repl, text)
        if rule.group is None:
            return rule.pattern.sub(_marker(rule.kind), text)
        spans = [sp for m in rule.pattern.finditer(text) for sp in rule.spans(m, text)]
    elif len(low) == len(text):  # the pattern runs on the lower-cased text, spans are the same
        spans = [sp for m in rule.pattern.finditer(low) for sp in rule.spans(m, text)]
    else:
        spans = [sp for m in rule.ignorecase.finditer(text) for sp in rule.spans(m, text)]
    return _replace_spans(text, spans, rule.kind) if spans else text


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
    return _replace_spans(text, sorted(spans), "pem_private_key") if spans else text


def _apply_rules(text: str, low: str) -> str:
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


# --- stage 2: assignments ----------------------------------------------------------------------------
def _assignment_value(text: str, name: str, end: int) -> re.Match[str] | None:
    m = _ASSIGN_TAIL.match(text, end)
    if m is None and name.startswith("--"):
        m = _FLAG_TAIL.match(text, end)
    return m


def _redact_assignments(text: str, low: str) -> str:
    """`NAME=value`, `NAME: value`, `"name": "value"`, `--name value` where NAME ends in a secret name.

    Anchored on the few places where a secret word occurs: one case-insensitive regex over the
    whole text is ~30x slower in CPython's `re`. `low` is `text.lower()`."""
    roots = _ROOTS.finditer(low) if len(low) == len(text) else _ROOTS_ANYCASE.finditer(text)
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
        if not _SECRET_KEY_RE.search(name):
            continue
        m = _assignment_value(text, name, end)
        if m is None:
            continue
        value = m.group("value")
        stripped = value.rstrip(_TRAILING_PUNCT)
        if (
            len(stripped) < 8
            or MARKER_PREFIX in value
            or _PLACEHOLDER.fullmatch(value)
            or _PLACEHOLDER.fullmatch(stripped)
        ):
            continue
        if WEAK_NAMES.search(name) and not _secretish(stripped):
            continue
        out.append(text[done : m.start("value")])
        out.append(_marker(_kind_for_name(name)))
        done = m.start("value") + len(stripped)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


# --- stage 3: credential words in context --------------------------------------------------------------
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
    parts = [p.lower() for p in _PIECES.findall(ident)]
    while len(parts) > 1 and parts[-1].isdigit():
        parts.pop()
    return parts


def _credential_kind(parts: list[str]) -> str | None:
    """The marker kind when the identifier ends in a credential word (`aws_secret_access_key`,
    `X-Auth-Token`), None otherwise (`secretName`, `token_refresh_handler`, `api_key_id`)."""
    p = parts[-1] if parts else ""
    if p not in CREDENTIAL_WORDS:
        return None
    if p.startswith(("pass", "pwd")):
        return "password"
    if p.startswith(("secret", "cred")):
        return "secret"
    return "api_key" if p.startswith(("key", "apikey")) else "token"


def _tight_value_ok(text: str, start: int, ident: str, parts: list[str], m: re.Match[str]) -> bool:
    """Passwords in prose may be words joined by separators ("correct-horse-9"); secrets and tokens
    must have digits, symbols or randomness; a bare "key"/"auth" (cache key, primary key) must be
    random unless a qualifier says which key ("api key", "secret_key"). `NAME = value` with a
    secret NAME was the assignment stage's decision, and calls, subscripts and attribute reads
    (`password.encode(…)`, `os.environ[…]`) are code, not values."""
    value = m.group("value")
    v = value.rstrip(_TRAILING_PUNCT)
    if MARKER_PREFIX in value or not _NOT_A_VALUE_RE.match(v) or text[m.end() : m.end() + 1] in ("(", "["):
        return False
    if _names_digest(v):
        return False  # "the key is sha256:…" names a digest (and stays a veto word for the window)
    code_link = m.group("link").strip() in ("=", ":")
    if code_link and _SECRET_KEY_RE.search(ident):
        return False
    word = parts[-1]
    if word in _PASSWORD_WORDS and not code_link:
        return _secretish(v) or (len(v) >= 8 and not v.isalpha() and _PLAIN_IDENT.fullmatch(v) is not None)
    if _HEX.fullmatch(v) and _window_vetoed(sum(_window(text, start, m.end()), [])):
        return False  # "cache key: <sha> (commit sha)"
    if word in _WEAK_WORDS:
        qualifier = parts[-2] if len(parts) > 1 else None
        if qualifier is None:
            prev = _PREV_WORD.search(text, max(0, start - 24), start)
            qualifier = prev.group(1).lower() if prev else None
        if qualifier not in KEY_QUALIFIERS:
            return looks_random(v)
    return _secretish(v)


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
    after = []
    for w in _WORD.finditer(text, end, hi):
        after.append(w)
        if len(after) == _WINDOW_WORDS:
            break
    return before, after


def _names_digest(word: str) -> bool:
    """`commit`, `sha256:…`, `fix/rebase-x`: a word that speaks of digests. Random-looking words
    never do (their letters may spell "sha" by chance), so redacting one never lifts a veto."""
    if word.lower().strip("():,.;") in DIGEST_WORDS:
        return True
    return any(p in DIGEST_WORDS for p in _split_ident(word)) and not any(
        looks_random(c.group(0)) for c in _CANDIDATE.finditer(word)
    )


def _window_vetoed(words: list[re.Match[str]]) -> bool:
    return any(w.group(0).startswith(_PUBKEY_TYPES) or _names_digest(w.group(0)) for w in words)


def _context_spans(text: str, low: str) -> list[tuple[int, int, str]]:
    roots = _ROOTS.finditer(low) if len(low) == len(text) else _ROOTS_ANYCASE.finditer(text)
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
        if kind is None:
            if parts and parts[-1] in _PLURAL_WORDS:  # "account keys list → …": random tokens only
                kind = "api_key" if parts[-1] == "keys" else "password"
                loose_only = True
            else:
                continue
        else:
            loose_only = False
        # "the password is Xk9…!q": a linking word right after the credential word.
        tight = None if loose_only else _TIGHT.match(text, e)
        if tight and _tight_value_ok(text, s, text[s:e], parts, tight):
            v = tight.group("value").rstrip(_TRAILING_PUNCT)
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


def _redact_context(text: str, low: str) -> str:
    spans = _context_spans(text, low)
    if not spans:
        return text
    out: list[str] = []
    done = 0
    for start, end, kind in sorted(spans):
        if start < done:
            continue
        out.append(text[done:start])
        out.append(_marker(kind))
        done = end
    out.append(text[done:])
    return "".join(out)


# --- entry points -------------------------------------------------------------------------------
def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`. Never raises on str."""
    if not text:
        return text
    low = text.lower()
    if len(text) < _SHORT and GATE.search(text) is None and _ANY_TRIGGER.search(low) is None:
        return text  # most short texts: nothing any stage could match
    red = _apply_rules(text, low)
    if red != text:
        text, low = red, red.lower()
    if _ROOTS.search(low) if len(low) == len(text) else _ROOTS_ANYCASE.search(text):
        red = _redact_assignments(text, low)
        if red != text:
            text, low = red, red.lower()
        text = _redact_context(text, low)
    return text


def _redact_keyed_value(key: str, value: str) -> str:
    red = redact(value)
    v = value.strip()
    if red != value or len(v) < 4 or not _NOT_A_VALUE_RE.match(v) or _PLACEHOLDER.fullmatch(v):
        return red
    if WEAK_NAMES.search(key) and not _secretish(v):
        return red
    return _marker(_kind_for_name(key))


def redact_obj(obj: Any) -> Any:
    """A copy of `obj` with `redact` applied to every string (dict keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        out: dict = {}
        for k, v in obj.items():
            if isinstance(k, str) and isinstance(v, str) and _SECRET_KEY_RE.search(k):
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
