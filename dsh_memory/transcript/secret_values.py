"""What makes a value a secret, shared by the redaction stages (transcript/redact.py).

The word lists of stages 2 and 3 (secret key names, credential words, key qualifiers, digest
words); references and placeholders that are not values (`os.environ[…]`, `${VAR}`, `<your-key>`),
key names that say their value is secret (`SECRET_KEY_RE`, `kind_for_name`), random-looking tokens
(`looks_random`: Shannon entropy and short letter/digit runs) and values after a credential word
that are not plain words, numbers, paths or references (`secretish`).
"""

from __future__ import annotations

import math
import re
from collections import Counter

MARKER_PREFIX = "[REDACTED:"  # every marker starts so (secret_rules.marker)

# --- assignments -----------------------------------------------------------------------------
# Key names that make an assignment secret. The name must END with one of these (case
# insensitive), so `bot_token:` and `OPENAI_API_KEY=` match but `tokenizer:` does not.
SECRET_NAMES = (
    r"api[_-]?key|api[_-]?token|access[_-]?key(?:[_-]?secret)?|secret(?:[_-]?access)?(?:[_-]?key)?"
    r"|client[_-]?secret|private[_-]?key|token|password|passwd|pwd|passphrase|auth[_-]?key"
    r"|account[_-]?key|shared[_-]?access[_-]?key|(?:^|[_.-])pass|(?:^|[_.-])auth|authorization|credentials?"
)
# Names that are also ordinary words (`auth: required`, `credentials: include`): their value is
# redacted only when it looks like a secret (digits, symbols or randomness), not when it is a word.
WEAK_NAMES = re.compile(r"(?i)(?:^|[_.-])(?:pass|auth|authorization|credentials?)$")

# --- the context rule ------------------------------------------------------------------------
# Words (whole parts of an identifier: `aws_secret_access_key` → aws, secret, access, key) that make a
# nearby random-looking token a secret even without a known prefix. Plurals of key/token/password
# are left out (`max_tokens`, `input_tokens` are counts); "keys" and "passwords" count for random
# tokens only.
CREDENTIAL_WORDS = frozenset(
    "key apikey secret secrets token password passwd pwd passphrase credential credentials creds cred auth".split()
)
# A bare "key" is weak (cache key, primary key, artifact key) unless one of these qualifies it.
KEY_QUALIFIERS = frozenset(
    "api access secret private signing encryption license master account client deploy ssh gpg pgp"
    " service admin root session auth webhook app bot stripe openai aws".split()
)
# Words that say a nearby random-looking token is a digest or an identifier, not a secret.
DIGEST_WORDS = frozenset(
    "commit commits sha sha1 sha256 sha512 hash hashes digest checksum integrity fingerprint public"
    " publishable revision rev blob tree merge parent etag version cherry-pick rebase revert checkout"
    " bisect".split()
)

# Values that are references to a secret, not the secret itself.
NOT_A_VALUE = (
    r"(?!\[REDACTED|os\.environ|os\.getenv|getenv\(|process\.env|env\(|\$\{|\$\(|\$[A-Za-z_]|%[A-Za-z_]\w*%"
    r"|\{\{|<[A-Za-z_]|None\b|null\b|nil\b|true\b|false\b|undefined\b|\*{3,}"
    r"|[A-Za-z_][A-Za-z0-9_.]*[(\[]"  # a call or subscript: `get_token()`, `request.form[…]`
    r"|(?:self|cls|this|settings|config|cfg|conf|options|opts|args|kwargs|params|app|request|req|ctx|context"
    r"|secrets|credentials|creds|env)\.[A-Za-z_][\w.]*(?![\w.]*[^\w.\s\"'`,;)\]}]))"  # `settings.api_key`
)
# Example values in docs and templates: `<your-key>`, `sk-...`, `YOUR_API_KEY_HERE`, `xxxxxxxx`.
PLACEHOLDER = re.compile(
    r"(?i)(?:<[^>]*>?|x{4,}|[*]+|\.{3,}.*|.*(?:\.\.\.|…)"
    r"|your[-_a-z0-9]*|(?:[a-z]+[-_])*(?:here|placeholder|example|changeme|dummy|redacted|sample)(?:[-_][a-z]+)*)"
)
TRAILING_PUNCT = ".,;:)]}>"

SECRET_KEY_RE = re.compile(r"(?i)(?:" + SECRET_NAMES + r")$")
NOT_A_VALUE_RE = re.compile(NOT_A_VALUE)
ROOTS = re.compile(r"key|token|secret|pass|pwd|auth|cred")  # run on text.lower()
ROOTS_ANYCASE = re.compile(r"(?i)key|token|secret|pass|pwd|auth|cred")  # when lower() changes the length


def kind_for_name(name: str) -> str:
    name = name.lower()
    if name.endswith(("password", "passwd", "pwd", "passphrase", "pass")):
        return "password"
    if "secret" in name or "cred" in name:
        return "secret"
    return "api_key" if "key" in name else "token"


# --- randomness ----------------------------------------------------------------------------------
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
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
    if HEX.fullmatch(t):
        return _entropy(t) >= 3.0
    if "/" in t and _pathlike(t):
        return False
    lower = any(c.islower() for c in t)
    upper = any(c.isupper() for c in t)
    digit = any(c.isdigit() for c in t)
    if lower + upper + digit < 2:
        return False
    pieces = PIECES.findall(t)
    # camelCase identifiers have long runs; lower-case random text (no camelCase) may too
    if not pieces or sum(map(len, pieces)) / len(pieces) > (3.0 if upper else 4.0):
        return False
    if sum(len(seg) for seg in _SEPARATORS.split(t) if len(seg) > 1 and _WORDY_SEGMENT.fullmatch(seg)) * 2 >= len(t):
        return False  # mostly words: read_flow_run_graph_v1, IS_PYTHON_AT_LEAST_3_15, x86_64-apple-darwin17
    return _entropy(t) >= 3.5


PUBKEY_TYPES = ("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][\w.]+)?")
PLAIN_IDENT = re.compile(r"[A-Za-z]+\d*(?:[_.-][A-Za-z]*\d*)*")  # user_profile_v2_20240501, phase2-x
SYMBOLS = frozenset("!@#$%^&*+=?~")  # the symbols that make a value more than a word


def secretish(value: str) -> bool:
    """A value after "password is" / "auth:" that is not a plain word, number, path or reference."""
    v = value.rstrip(TRAILING_PUNCT)
    if len(v) < 8 or MARKER_PREFIX in v or "://" in v or not NOT_A_VALUE_RE.match(v):
        return False
    if v.startswith(PUBKEY_TYPES) or PLACEHOLDER.fullmatch(value) or PLACEHOLDER.fullmatch(v):
        return False
    if v.isdigit() or _VERSION.fullmatch(v) or PLAIN_IDENT.fullmatch(v):
        return False
    if "/" in v and _pathlike(v):
        return False
    has_alpha = any(c.isalpha() for c in v)
    return has_alpha and (any(c.isdigit() for c in v) or any(c in SYMBOLS for c in v) or looks_random(v))
