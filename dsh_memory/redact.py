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

Speed: one case-insensitive trigger scan decides which rules can apply; texts without any
trigger are returned unchanged after that single scan.
"""

from __future__ import annotations

import re
from typing import Any, Callable

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

# (kind, trigger group name, pattern, flags, replacement or None for the default marker)
_Rule = tuple[str, str, "re.Pattern[str]", "Callable[[re.Match[str]], str] | str"]


def _assignment_repl(m: re.Match[str]) -> str:
    value = m.group("value")
    stripped = value.rstrip(_TRAILING_PUNCT)
    if len(stripped) < 8:
        return m.group(0)
    return m.group("lead") + _marker(_kind_for_name(m.group("name"))) + value[len(stripped):]


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


def _c(p: str, flags: int = 0) -> "re.Pattern[str]":
    return re.compile(p, flags)


# Order matters: whole blocks first, then specific token shapes, then generic assignments (whose
# value may already have become a marker, which `_NOT_A_VALUE` skips).
_RULES: list[_Rule] = [
    ("pem_private_key", "pem",
     _c(_PEM_BEGIN + r"(?:[\s\S]{0,20000}?" + _PEM_END + r"|(?:[ \t]*\r?\n[ \t]*" + _LINENO + r"(?:[A-Za-z0-9+/=]{8,}[ \t]*|[A-Za-z-]+:[^\n]*))*)"), _marker("pem_private_key")),
    ("pem_private_key", "pem",
     _c(r"(?m)^(?:" + _B64LINE + r")+[ \t]*" + _LINENO + _PEM_END), _marker("pem_private_key")),
    ("aws_access_key_id", "aws",
     _c(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])(?P<mid>[^\n]{0,80}?)"
        r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), _aws_pair_repl),
    ("aws_access_key_id", "aws",
     _c(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"), _marker("aws_access_key_id")),
    ("jwt", "jwt",
     _c(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), _marker("jwt")),
    ("openai_key", "sk",
     _c(r"(?<![A-Za-z0-9_-])sk-(?:(?:proj|ant|svcacct|admin)-(?:api\d\d-)?[A-Za-z0-9_-]{20,}"
        r"|[A-Za-z0-9]{20,}[A-Za-z0-9_-]*)"), _marker("api_key")),
    ("github_token", "gh",
     _c(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), _marker("github_token")),
    ("slack_token", "slack",
     _c(r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}"), _marker("slack_token")),
    ("bearer", "bearer",
     _c(r"(?i)(?<![A-Za-z0-9_])(?P<lead>bearer[ \t]+)(?P<tok>[A-Za-z0-9._~+/-]{16,}=*)"), _keep_group("tok", "bearer_token")),
    ("basic_auth", "basic",
     _c(r"(?i)(?P<lead>authorization[\"']?\s*[:=]\s*[\"']?basic[ \t]+)(?P<tok>[A-Za-z0-9+/]{8,}=*)"),
     _keep_group("tok", "basic_auth")),
    ("url_password", "url",
     _c(r"(?<=://)(?P<user>[^\s/:@\[\]]{1,64}):(?P<tok>[^\s/@\[\]]{3,200})(?=@)"), _keep_group("tok", "password")),
    ("assignment", "assign",
     _c(r"(?i)(?P<lead>(?<![A-Za-z0-9])(?P<name>[A-Za-z0-9_.-]*?(?:" + _SECRET_NAMES + r"))(?![A-Za-z0-9])"
        r"\\?[\"']?[ \t]*(?:=|:(?!//))[ \t]*\\?[\"']?)" + _NOT_A_VALUE + r"(?P<value>[^\s\"'`\\]{8,})"),
     _assignment_repl),
]

# One cheap scan that finds which rule families could possibly match.
_TRIGGERS: dict[str, str] = {
    "pem": r"PRIVATE KEY",
    "aws": r"AKIA|ASIA",
    "jwt": r"eyJ",
    "sk": r"sk-",
    "gh": r"gh[pousr]_|github_pat_",
    "slack": r"xox[abposr]-",
    "bearer": r"(?i:bearer)",
    "basic": r"(?i:basic)",
    "url": r"://[^\s/@]*:",
    "assign": r"(?i:pass|pwd|secret|token|key)",
}
_TRIGGER_RE = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in _TRIGGERS.items()))


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`. Never raises on str."""
    if not text:
        return text
    found: set[str] = set()
    for m in _TRIGGER_RE.finditer(text):
        found.add(m.lastgroup or "")
        if len(found) == len(_TRIGGERS):
            break
    if not found:
        return text
    for _kind, trigger, pattern, repl in _RULES:
        if trigger in found:
            text = pattern.sub(repl, text)
    return text


_SECRET_KEY_RE = re.compile(r"(?i)(?:" + _SECRET_NAMES + r")$")
_NOT_A_VALUE_RE = re.compile(_NOT_A_VALUE)


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
