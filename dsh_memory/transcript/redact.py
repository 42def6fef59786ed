"""Secret redaction for everything that leaves a session log (transcripts, model output, logs).

`redact(text)` replaces each secret with a `[REDACTED:<kind>]` marker; `redact_obj(obj)` does the
same for every string inside dicts/lists/tuples. Both are idempotent: a marker is never
redacted again.

Covered (superset of the four Codex `redact_secrets` patterns: Bearer tokens, `sk-` keys, AWS
`AKIA` ids, `api_key/token/secret/password` assignments):

- PEM private key blocks (whole block; a block whose END line is missing loses its base64
  lines; base64 lines that end in an END line lose them too),
- OpenAI/Anthropic keys (`sk-…`, `sk-proj-…`, `sk-ant-api03-…`), AWS access key ids
  (`AKIA…`/`ASIA…`) and a 40-character secret access key that follows one on the same line,
- JWTs, GitHub tokens (`ghp_ gho_ ghu_ ghs_ ghr_ github_pat_`), Slack tokens (`xox[abposr]-`),
- `Bearer <token>` (16+ token characters on the same line, so "Bearer of good news" survives),
  `Authorization: Basic <base64>`, passwords inside URLs (`scheme://user:pass@host`),
- `KEY=value`, `KEY: value`, `"key": "value"` assignments whose key name ends in
  password/passwd/passphrase/secret/token/api_key/access_key/private_key/… and whose value has
  8+ characters (references such as `os.environ[…]`, `${VAR}`, `None` are left alone).

Speed: plain substring checks decide which rules can apply (texts without any trigger come
back unchanged after one `lower()` and a few `in` tests); assignments are found from the few
places where a secret word occurs instead of a case-insensitive scan of the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MARKER_PREFIX = "[REDACTED:"


def _marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


# A base64 body line, optionally behind a `cat -n`/read-tool line-number prefix ("15:     MIIE…").
_LINENO = r"(?:\d{1,7}(?::|\t|→|\|)[ \t]*)?"
_B64LINE = r"[ \t]*" + _LINENO + r"[A-Za-z0-9+/=]{16,}[ \t]*\r?\n"
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

# Key names that make an assignment secret. The name must END with one of these (case
# insensitive), so `bot_token:` and `OPENAI_API_KEY=` match but `tokenizer:` does not.
_SECRET_NAMES = (
    r"api[_-]?key|apikey|api[_-]?token|access[_-]?key(?:[_-]?secret)?|secret(?:[_-]?access)?(?:[_-]?key)?"
    r"|client[_-]?secret|private[_-]?key|token|password|passwd|pwd|passphrase|auth[_-]?key"
)
# Values that are references to a secret, not the secret itself.
_NOT_A_VALUE = (
    r"(?!\[REDACTED|os\.environ|os\.getenv|getenv\(|process\.env|env\(|\$\{|\$\(|\{\{|<[A-Za-z_]"
    r"|None\b|null\b|nil\b|true\b|false\b|undefined\b|\*{3,}"
    r"|[A-Za-z_][A-Za-z0-9_.]*[(\[])"  # a call or subscript: `get_token()`, `request.form[…]`
)
_TRAILING_PUNCT = ".,;:)]}>"


def _kind_for_name(name: str) -> str:
    name = name.lower()
    if any(name.endswith(k) for k in ("password", "passwd", "pwd", "passphrase")):
        return "password"
    if "secret" in name:
        return "secret"
    return "api_key" if "key" in name else "token"


def _aws_pair_repl(m: re.Match[str]) -> str:
    return _marker("aws_access_key_id") + m.group("mid") + _marker("aws_secret_access_key")


def _keep_group(group: str, kind: str) -> Callable[[re.Match[str]], str]:
    def repl(m: re.Match[str]) -> str:
        start, end = m.span(group)
        base = m.start(0)
        s = m.group(0)
        return s[: start - base] + _marker(kind) + s[end - base :]

    return repl


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


# Case-insensitive words are spelled with character classes ([Bb][Ee]…): several times faster
# than (?i) in CPython's `re`.
# Order matters: whole blocks first, then specific token shapes, then generic assignments (whose
# value may already have become a marker, which `_NOT_A_VALUE` skips). The second field names
# the cheap trigger (see `_triggers`) without which the rule cannot match.
_RULES: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str] | str]] = [
    (
        "pem",
        _c(
            _PEM_BEGIN
            + r"(?:[\s\S]{0,20000}?"
            + _PEM_END
            + r"|(?:[ \t]*\r?\n[ \t]*"
            + _LINENO
            + r"(?:[A-Za-z0-9+/=]{8,}[ \t]*|[A-Za-z-]+:[^\n]*))*)"
        ),
        _marker("pem_private_key"),
    ),
    ("pem", _c(r"(?m)^(?:" + _B64LINE + r")+[ \t]*" + _LINENO + _PEM_END), _marker("pem_private_key")),
    (
        "aws",
        _c(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])(?P<mid>[^\n]{0,80}?)"
            r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        _aws_pair_repl,
    ),
    ("aws", _c(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"), _marker("aws_access_key_id")),
    ("jwt", _c(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), _marker("jwt")),
    (
        "sk",
        _c(
            r"(?<![A-Za-z0-9_-])sk-(?:(?:proj|ant|svcacct|admin)-(?:api\d\d-)?[A-Za-z0-9_-]{20,}"
            r"|[A-Za-z0-9]{20,}[A-Za-z0-9_-]*)"
        ),
        _marker("api_key"),
    ),
    (
        "gh",
        _c(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        _marker("github_token"),
    ),
    ("slack", _c(r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}"), _marker("slack_token")),
    (
        "bearer",
        _c(r"(?P<lead>[Bb](?<![A-Za-z0-9_][Bb])[Ee][Aa][Rr][Ee][Rr][ \t]+)(?P<tok>[A-Za-z0-9._~+/-]{16,}=*)"),
        _keep_group("tok", "bearer_token"),
    ),
    (
        "basic",
        _c(
            r"(?P<lead>[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn][\"']?\s*[:=]\s*[\"']?[Bb][Aa][Ss][Ii][Cc][ \t]+)"
            r"(?P<tok>[A-Za-z0-9+/]{8,}=*)"
        ),
        _keep_group("tok", "basic_auth"),
    ),
    (
        "url",
        _c(r"(?<=://)(?P<user>[^\s/:@\[\]]{1,64}):(?P<tok>[^\s/@\[\]]{3,200})(?=@)"),
        _keep_group("tok", "password"),
    ),
]

_SECRET_KEY_RE = re.compile(r"(?i)(?:" + _SECRET_NAMES + r")$")
_NOT_A_VALUE_RE = re.compile(_NOT_A_VALUE)
# After a secret-looking key name: the separator, an optional quote, then the value.
_ASSIGN_TAIL = re.compile(r"\\?[\"']?[ \t]*(?:=|:(?!//))[ \t]*\\?[\"']?" + _NOT_A_VALUE + r"(?P<value>[^\s\"'`\\]{8,})")
_ROOTS = re.compile(r"key|token|secret|pass|pwd")  # run on text.lower()
_ROOTS_ANYCASE = re.compile(r"(?i)key|token|secret|pass|pwd")  # when lower() changes the length
_WORD_TAIL = re.compile(r"[A-Za-z0-9]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _redact_assignments(text: str) -> str:
    """`NAME=value`, `NAME: value`, `"name": "value"` where NAME ends in a secret name.

    Anchored on the few places where a secret word occurs: one case-insensitive regex over the
    whole text is ~30x slower in CPython's `re`."""
    low = text.lower()
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
        m = _ASSIGN_TAIL.match(text, end)
        if m is None:
            continue
        value = m.group("value")
        stripped = value.rstrip(_TRAILING_PUNCT)
        if len(stripped) < 8:
            continue
        out.append(text[done : m.start("value")])
        out.append(_marker(_kind_for_name(name)))
        done = m.start("value") + len(stripped)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _triggers(text: str) -> set[str]:
    """Rule families that could match: plain substring checks, much cheaper than the regexes."""
    low = text.lower()
    found = set()
    if "PRIVATE KEY" in text:
        found.add("pem")
    if "AKIA" in text or "ASIA" in text:
        found.add("aws")
    if "eyJ" in text:
        found.add("jwt")
    if "sk-" in text:
        found.add("sk")
    if "github_pat_" in text or any(p in text for p in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")):
        found.add("gh")
    if "xox" in text:
        found.add("slack")
    if "bearer" in low:
        found.add("bearer")
    if "authorization" in low:
        found.add("basic")
    if "://" in text:
        found.add("url")
    if any(w in low for w in ("key", "token", "secret", "pass", "pwd")):
        found.add("assign")
    return found


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`. Never raises on str."""
    if not text:
        return text
    found = _triggers(text)
    if not found:
        return text
    for trigger, pattern, repl in _RULES:
        if trigger in found:
            text = pattern.sub(repl, text)
    if "assign" in found:
        text = _redact_assignments(text)
    return text


def _redact_keyed_value(key: str, value: str) -> str:
    red = redact(value)
    v = value.strip()
    if red != value or len(v) < 4 or not _NOT_A_VALUE_RE.match(v):
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
