"""The shapes `redact` recognises: one row per token family.

Checklist: the rule families of gitleaks, detect-secrets and TruffleHog (cloud keys, VCS tokens,
chat tokens and webhooks, payment keys, AI API keys, package registries, SaaS tokens, JWTs,
private keys, credentials in URLs, headers and command lines). A row runs only when one of its
`triggers` (substrings) occurs in the text, and a gated row only when the text also has 16 token
characters in a row (`GATE`): most texts cost one regex search and a few substring tests. Rows are
applied in order: whole blocks first, then token shapes, then headers, URLs and command lines
(whose value may already be a marker, which no pattern matches: `[` is never a token character).

Patterns start with their literal prefix where they can, so that `re` finds it with a fast
substring search; the boundary before the prefix is checked by a look-behind after it.

Kinds (the `<kind>` of `[REDACTED:<kind>]`) are short, lower-case, and never nest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from dsh_memory.transcript.secret_values import MARKER_PREFIX, looks_random


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


@dataclass(frozen=True)
class Rule:
    """One token shape.

    `group`: only this group is replaced (the rest of the match stays). `inner`: within `group`,
    each match of `inner` has its `tok` group replaced (cookie values). `lower`: triggers are
    lower-case and the pattern is written for lower-case text: it runs on `text.lower()` and the
    spans it finds are replaced in `text`. `repl`: a `re.sub` template instead of the marker.
    `gated`: the rule needs 16 token characters in a row (see GATE). `prefix`: the triggers are
    where the token starts (`ghp_`), not somewhere inside it or near it (`-us1`, `discord`).
    `window` > 0: only this many characters around each trigger are searched (patterns that
    cannot start with a literal would otherwise test every position of the text). `shape`: a
    match counts only when `shape(match)` holds (what a regex cannot say, such as randomness)."""

    kind: str
    triggers: tuple[str, ...]
    pattern: str
    group: str | None = None
    inner: re.Pattern[str] | None = None
    lower: bool = False
    repl: str | None = None
    gated: bool = True
    prefix: bool = True
    window: int = 0
    shape: Callable[[re.Match[str]], bool] | None = None

    def spans(self, m: re.Match[str], text: str) -> Iterator[tuple[int, int]]:
        """The spans of `text` to replace for a match `m` (of `text`, or of `text.lower()`): its
        `group` (group 0: the whole match), or the `tok` of each match of `inner` within it."""
        start, end = m.span(self.group or 0)
        if start < 0 or (self.shape is not None and not self.shape(m)):  # no group, or not the shape
            return
        if self.inner is None:
            yield start, end
        else:
            for im in self.inner.finditer(text, start, end):
                yield im.span("tok")

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @cached_property
    def ignorecase(self) -> re.Pattern[str]:
        """The pattern for texts whose `lower()` changes their length (some non-ASCII letters)."""
        return re.compile(self.pattern, re.IGNORECASE)


# A text without 16 token characters in a row cannot hold a prefixed token: one fast regex search
# saves the substring tests of the gated rules on most short strings. On long texts the runs of 16+
# token characters are looked up by their first characters (RUN_TRIGGER) instead of testing every
# trigger against the whole text.
GATE = re.compile(r"[A-Za-z0-9_-]{16}")
RUN = re.compile(r"[A-Za-z0-9_-]{16,}")
RUN_TRIGGER = re.compile(r"[A-Za-z0-9_-]+")

# Token boundaries. A token may follow a JSON/shell escape (`\n`, `\t`) directly: tool arguments
# are often escaped JSON inside a JSON string.
_R = r"(?![A-Za-z0-9_])"
_RD = r"(?![A-Za-z0-9_-])"  # for bodies that may contain '-'
_WORDCH = "[A-Za-z0-9_]"
_TOKCH = "[A-Za-z0-9_-]"


def _start(lit: str, not_before: str = _WORDCH) -> str:
    """The literal `lit`, not preceded by a `not_before` character (an escape such as `\\n` may
    precede it). The literal comes first so that `re` searches for it quickly."""
    e = re.escape(lit)
    return e + rf"(?:(?<!{not_before}{e})|(?<=\\[nrt]{e}))"


def _tok(kind: str, triggers: tuple[str, ...], pattern: str, lower: bool = False) -> Rule:
    """A rule that replaces only its `tok` group, in any text (not gated)."""
    return Rule(kind, triggers, pattern, group="tok", lower=lower, gated=False)


def _prefixed(kind: str, prefix: str, body: str, right: str = _R) -> Rule:
    return Rule(kind, (prefix,), _start(prefix) + body + right)


def _joined(kind: str, lit: str, body: str) -> Rule:
    """`lit` and a `body` right after `-` or `_`, where the row of `lit` refuses to start: a DSH
    project folder named after a cwd that ends in a token (`-home-me-glpat-…`), `deploy_xoxb-…`.
    Words and identifiers end in a prefix's letters too (`task-sk-learn-…`, `slack_xoxb-token-…`),
    so here the token's `body` group must also look random (mixed alphabet, short runs, high
    entropy)."""
    e, shape = re.escape(lit), lambda m: looks_random(m.group("body"))
    return Rule(kind, (f"-{lit}", f"_{lit}"), e + rf"(?<=[_-]{e})" + body, prefix=False, shape=shape)


# --- private keys ----------------------------------------------------------------------------
# A base64 body line, optionally behind a `cat -n`/read-tool line-number prefix ("15:     MIIE…").
_LINENO = r"(?:\d{1,7}(?::|\t|→|\|)[ \t]*)?"
_NL = r"(?:\r?\n|(?:\\r)?\\n)"  # a real line break, or an escaped one inside a JSON string
_B64LINE = r"[ \t]*" + _LINENO + r"[A-Za-z0-9+/=]{16,}[ \t]*" + _NL
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

PEM_BLOCK = Rule(
    "pem_private_key",
    ("PRIVATE KEY",),
    _PEM_BEGIN
    # up to the END line, but not across another BEGIN line (each BEGIN scans its own block only)
    + r"(?:(?:(?!-----BEGIN)[\s\S]){0,20000}?"
    + _PEM_END
    # END line missing (cut output): the base64 lines and `Header: value` lines that follow
    + r"|(?:[ \t]*"
    + _NL
    + r"[ \t]*"
    + _LINENO
    + r"(?:[A-Za-z0-9+/=]{8,}[ \t]*|[A-Za-z-]+:[^\n\\]*))*)",
    gated=False,
)
# Base64 lines that end in an END line (the BEGIN line was cut off). Searched only in the 8,000
# characters before each END line that the block rule left (see redact_shapes._pem_tails): a
# 4096-bit RSA key is about 3,300 characters of base64.
PEM_TAIL = re.compile(r"(?:(?<=\n)|^|(?<=\\n))(?:" + _B64LINE + r")+[ \t]*" + _LINENO + _PEM_END)
PEM_END_LITERAL = "-----END"

# --- AWS -------------------------------------------------------------------------------------
_AKID = _start("A", "[A-Za-z0-9]") + r"(?:KIA|SIA|BIA|CCA)[0-9A-Z]{16}(?![A-Za-z0-9])"

_AWS_RULES = [
    # an access key id and, on the same line, the 40-character secret access key after it
    Rule(
        "aws_secret_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        _AKID + r"(?P<mid>[^\n]{0,80}?)(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        repl=marker("aws_access_key_id") + r"\g<mid>" + marker("aws_secret_access_key"),
    ),
    Rule("aws_access_key_id", ("AKIA", "ASIA", "ABIA", "ACCA"), _AKID),
]

# --- prefixed tokens -------------------------------------------------------------------------
_AN = "[A-Za-z0-9]"
_HEX = "[0-9a-f]"
# After `sk-`: a project / service / admin key's kind, then its body; or a legacy key's body
_SK_BODY = (
    r"(?:(?:proj|ant|svcacct|admin|or-v\d|lf|None)-(?:(?:api|admin)\d\d-)?(?P<body>[A-Za-z0-9_-]{20,})"
    r"|(?P<legacy>[A-Za-z0-9]{20,}[A-Za-z0-9_-]*))"
)

_TOKEN_RULES = [
    # JSON Web Tokens (header.payload.signature, both JSON parts base64url of '{"')
    Rule("jwt", ("eyJ",), _start("eyJ", _TOKCH) + r"[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    _joined("jwt", "eyJ", r"(?P<body>[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*)"),
    # OpenAI, Anthropic, OpenRouter, DeepSeek, Langfuse: sk-…
    Rule("api_key", ("sk-",), _start("sk-", _TOKCH) + _SK_BODY),
    # The same keys right after `-` or `_` (see _joined; a legacy key's body is its own group)
    Rule(
        "api_key",
        ("-sk-", "_sk-"),
        r"sk-(?<=[_-]sk-)" + _SK_BODY,
        prefix=False,
        shape=lambda m: looks_random(m.group("body") or m.group("legacy")),
    ),
    # GitHub: classic, OAuth, user-to-server, server-to-server (app), refresh, fine-grained
    Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _start("g") + r"(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,})",
    ),
    _joined("github_token", "gh", r"[pousr]_(?P<body>[A-Za-z0-9]{20,})"),
    _joined("github_token", "github_pat_", r"(?P<body>[A-Za-z0-9_]{20,})"),
    # GitLab: personal/project/group, deploy, runner, pipeline trigger, CI job, feed, incoming mail,
    # OAuth app secret, agent, SCIM, feature flags; runner registration tokens
    Rule(
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "gloas-", "glagent-", "glsoat-", "glffct-"),
        _start("gl", _TOKCH) + r"(?:pat|dt|rt|ptt|cbt|ft|imt|oas|agent|soat|ffct)-[A-Za-z0-9_.-]{20,}",
    ),
    _joined("gitlab_token", "gl", r"(?:pat|dt|rt|ptt|cbt|ft|imt|oas|agent|soat|ffct)-(?P<body>[A-Za-z0-9_.-]{20,})"),
    _prefixed("gitlab_token", "GR1348941", _TOKCH + "{20,}", _RD),
    # Bitbucket app passwords and Atlassian (Jira, Confluence, Bitbucket) API / access tokens
    _prefixed("bitbucket_token", "ATBB", _AN + "{32,}"),
    Rule("atlassian_token", ("ATATT3", "ATCTT3", "ATSTT3"), _start("AT") + r"[ACS]TT3[A-Za-z0-9_=-]{100,}"),
    # Slack: bot, user, workspace, refresh, config and app-level tokens; webhooks keep their host
    Rule("slack_token", ("xox",), _start("xox", _TOKCH) + r"[abposre]-[A-Za-z0-9-]{10,}"),
    Rule("slack_token", ("xapp-",), _start("xapp-", _TOKCH) + r"\d-[A-Za-z0-9-]{20,}"),
    # after `-`/`_`: the random part is what follows the team, user and app ids
    _joined("slack_token", "xox", r"[abposre]-(?:\d+-)*(?P<body>[A-Za-z0-9-]{10,})"),
    _joined("slack_token", "xapp-", r"\d-(?:[A-Z0-9]+-)*(?P<body>[A-Za-z0-9-]{20,})"),
    Rule(
        "slack_webhook",
        ("hooks.slack.com",),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<tok>[A-Za-z0-9_/+-]{20,})",
        group="tok",
    ),
    Rule(
        "discord_webhook",
        ("/api/webhooks/",),
        r"/api/webhooks/(?:(?<=discord\.com/api/webhooks/)|(?<=discordapp\.com/api/webhooks/))"
        r"\d+/(?P<tok>[A-Za-z0-9_-]{40,})",
        group="tok",
    ),
    Rule(
        "teams_webhook",
        ("webhook.office.com",),
        r"webhook\.office\.com/webhookb2/[^\s/]+/IncomingWebhook/(?P<tok>[A-Za-z0-9]{32})",
        group="tok",
    ),
    # Discord bot tokens: base64(user id) . timestamp . HMAC
    Rule(
        "discord_token",
        ("discord", "Discord", ".run("),
        r"[MNO](?<![A-Za-z0-9_.-][MNO])[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_.-])",
        prefix=False,
    ),
    # Telegram bot API tokens: <bot id>:AA<33>
    Rule(
        "telegram_token",
        (":AA",),
        r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])",
        prefix=False,
        window=48,
    ),
    # Stripe secret, restricted and webhook-signing keys (publishable pk_ keys are public)
    Rule("stripe_key", ("sk_live_", "sk_test_", "sk_prod_"), _start("sk_") + r"(?:live|test|prod)_" + _AN + "{10,}"),
    Rule("stripe_key", ("rk_live_", "rk_test_", "rk_prod_"), _start("rk_") + r"(?:live|test|prod)_" + _AN + "{10,}"),
    _prefixed("stripe_key", "whsec_", _AN + "{24,}"),
    # Square access tokens and OAuth secrets; Braintree/PayPal access tokens
    _prefixed("square_token", "EAAA", r"[A-Za-z0-9_-]{60}", _RD),
    Rule(
        "square_token", ("sq0atp-", "sq0csp-", "sq0idp-"), _start("sq0", _TOKCH) + r"(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}"
    ),
    _joined("square_token", "sq0", r"(?:atp|csp|idp)-(?P<body>[A-Za-z0-9_-]{22,})"),
    Rule("braintree_token", ("access_token$",), r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}"),
    # Google: API keys, OAuth client secrets, OAuth access and refresh tokens
    _prefixed("gcp_api_key", "AIza", r"[A-Za-z0-9_-]{35}", _RD),
    _prefixed("gcp_secret", "GOCSPX-", r"[A-Za-z0-9_-]{24,}", _RD),
    Rule("gcp_token", ("ya29.",), _start("ya29.", "[A-Za-z0-9_.-]") + r"[A-Za-z0-9_.-]{20,}"),
    _joined("gcp_token", "ya29.", r"(?P<body>[A-Za-z0-9_.-]{20,})"),
    Rule("gcp_token", ("1//0",), _start("1//0", "[A-Za-z0-9/]") + r"[A-Za-z0-9_-]{40,}"),
    # Azure: AD (Entra) client secrets; SAS signatures (account keys are assignments)
    Rule(
        "azure_secret",
        ("Q~",),
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        gated=False,
        window=48,
    ),
    _tok("azure_sas", ("sig=",), r"sig=(?<=[?&;]sig=)(?P<tok>[A-Za-z0-9%+/=]{16,})"),
    # AI APIs: Hugging Face (user, org), Groq, Replicate, Perplexity, xAI, LangSmith, Tavily
    _prefixed("huggingface_token", "hf_", "[A-Za-z]{30,}"),
    _prefixed("huggingface_token", "api_org_", "[A-Za-z]{30,}"),
    _prefixed("groq_key", "gsk_", _AN + "{40,}"),
    _prefixed("replicate_token", "r8_", _AN + "{30,}"),
    _prefixed("perplexity_key", "pplx-", _AN + "{40,}"),
    _prefixed("xai_key", "xai-", _AN + "{60,}"),
    Rule("langsmith_key", ("lsv2_",), _start("lsv2_") + r"(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{8,12}"),
    _prefixed("tavily_key", "tvly-", r"(?:dev-|prod-)?" + _AN + "{24,}"),
    # Package registries: npm, PyPI, NuGet, Docker Hub, RubyGems
    _prefixed("npm_token", "npm_", _AN + "{36}"),
    _prefixed("pypi_token", "pypi-Ag", r"[A-Za-z0-9_-]{50,}", _RD),
    _prefixed("nuget_key", "oy2", "[a-z0-9]{43}"),
    _prefixed("docker_token", "dckr_pat_", r"[A-Za-z0-9_-]{20,}", _RD),
    _prefixed("rubygems_key", "rubygems_", _HEX + "{48}"),
    # SaaS
    Rule("sendgrid_key", ("SG.",), _start("SG.", "[A-Za-z0-9_.-]") + r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    _joined("sendgrid_key", "SG.", r"(?P<body>[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64})"),
    _prefixed("twilio_key", "SK", "[0-9a-fA-F]{32}"),
    # `key-` + 32 hex only as a word of its own: after `-` it is a cache key named for a hash
    Rule("mailgun_key", ("key-",), _start("key-", _TOKCH) + _HEX + "{32}" + _R),
    Rule(
        "mailchimp_key",
        ("mailchimp", "Mailchimp", "MailChimp", "MAILCHIMP"),
        r"(?<![A-Za-z0-9_])[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9_])",
        prefix=False,
        window=400,
    ),
    Rule("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), _start("shp") + r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _prefixed("notion_token", "ntn_", r"[0-9]{11}" + _AN + "{35}"),
    _prefixed("notion_token", "secret_", _AN + "{43}"),
    Rule("linear_key", ("lin_api_", "lin_oauth_"), _start("lin_") + r"(?:api|oauth)_[A-Za-z0-9]{40,}"),
    Rule("sentry_token", ("sntryu_", "sntrys_"), _start("sntry") + r"[us]_[A-Za-z0-9+/=_]{40,}"),
    _prefixed("databricks_token", "dapi", _HEX + r"{32}(?:-\d)?"),
    Rule("prefect_key", ("pnu_", "pnb_"), _start("pn") + r"[ub]_[A-Za-z0-9]{36}"),
    Rule("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), _start("do") + r"[por]_v1_[a-f0-9]{64}"),
    _prefixed("heroku_key", "HRKU-", r"[A-Za-z0-9_-]{50,}", _RD),
    _prefixed("age_secret_key", "AGE-SECRET-KEY-1", "[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    Rule("doppler_token", ("dp.",), _start("dp.", "[A-Za-z0-9_.]") + r"(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    _prefixed("onepassword_token", "ops_eyJ", r"[A-Za-z0-9+/=_-]{100,}", _RD),
    _prefixed("mapbox_token", "sk.eyJ", r"[A-Za-z0-9_.-]{50,}", _RD),
    _prefixed("postman_key", "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}", _RD),
    Rule("terraform_token", (".atlasv1.",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    _prefixed("pulumi_token", "pul-", _HEX + "{40}"),
    Rule(
        "grafana_token",
        ("glsa_", "glc_"),
        _start("gl") + r"(?:sa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|c_[A-Za-z0-9+/]{32,}={0,2})",
    ),
    _prefixed("newrelic_key", "NRAK-", "[A-Z0-9]{27}"),
    _prefixed("flyio_token", "fo1_", r"[A-Za-z0-9_-]{39,}", _RD),
    _prefixed("supabase_token", "sbp_", _HEX + "{40}"),
    _prefixed("figma_token", "figd_", r"[A-Za-z0-9_-]{40,}", _RD),
]

# --- headers, URLs, command lines (the header patterns run on the lower-cased text) ----------
_HEADER_RULES = [
    _tok("bearer_token", ("bearer",), _start("bearer") + r"[ \t]+(?P<tok>[A-Za-z0-9._~+/-]{16,}=*)", lower=True),
    _tok(
        "basic_auth",
        ("authorization",),
        r"authorization[\"']?\s*[:=]\s*[\"']?basic[ \t]+(?P<tok>[A-Za-z0-9+/]{8,}=*)",
        lower=True,
    ),
    # Any other scheme (`token`, `Token`, `Bot`, `SSWS`, …) or a bare token after Authorization:
    _tok(
        "token",
        ("authorization",),
        r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:[A-Za-z][A-Za-z0-9-]{1,20}[ \t]+)?"
        r"(?P<tok>(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)",
        lower=True,
    ),
    # Cookie / Set-Cookie headers: every value of 16+ characters
    Rule(
        "cookie",
        ("cookie:",),
        r"cookie:[ \t]*(?P<rest>[^\n\\]*)",
        group="rest",
        inner=re.compile(r"(?P<name>[A-Za-z0-9_.-]+)=(?P<tok>[^;\s\"'\\\[\]]{16,})"),
        lower=True,
        gated=False,
    ),
]

# Passwords inside URLs: scheme://user:password@host (the user may be empty: redis://:pw@host).
_URL_RULES = [
    _tok("password", ("://",), r"://(?P<user>[^\s/:@\[\]\\]{0,64}):(?P<tok>[^\s/@\[\]\\]{3,200})(?=@)"),
    # A token as the whole user part: https://<key>@o1.ingest.sentry.io/2, https://<token>@host/repo.
    _tok("token", ("://",), r"://(?P<tok>(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{20,200})(?=@)"),
]

# Command-line credentials: curl -u user:pass, mysql -pPASS, sshpass -p PASS, .netrc password.
# No value class here includes `[` or `]`: a later stage's marker must never become part of a value.
_NOT_REF = r"(?!\[REDACTED|\$|%[A-Za-z_]|<[A-Za-z_])"
_CLI_RULES = [
    _tok(
        "password",
        ("-u", "--user"),
        r"-(?<![^\s]-)(?:u|-user)(?:[ \t]+|=)[\"']?[^\s:\"'@]{1,64}:" + _NOT_REF + r"(?P<tok>[^\s\"'@\[\]]{3,200})",
    ),
    _tok(
        "password",
        ("mysql",),
        _start("mysql")
        + r"(?:dump|admin|check|import|sh)?\b[^\n|;&]{0,200}?[ \t]-p(?P<tok>[^\s\"'\[\]-][^\s\"'\[\]]{2,})",
    ),
    _tok(
        "password",
        ("sshpass",),
        _start("sshpass")
        + r"[ \t]+(?:-[a-oq-zA-Z]\S{0,64}[ \t]+){0,8}-p[ \t]*[\"']?"
        + _NOT_REF
        + r"(?P<tok>[^\s\"'\[\]]{3,})",
    ),
    _tok(
        "password",
        ("machine",),
        _start("machine")
        + r"[ \t]+\S{1,255}(?:\s+login[ \t]+\S{1,255})?\s+password[ \t]+"
        + _NOT_REF
        + r"(?P<tok>[^\s\[\]]{3,})",
    ),
]

# A password said in Chinese or Japanese, typed in ASCII: "sudo 密码是 123456", "密碼：abc123!",
# "パスワードは hunter2 です" (a word said of it, "密码是必需的", is no value).
_CJK_RULES = [
    _tok(
        "password",
        ("密码", "密碼", "口令", "パスワード"),
        r"(?:密码|密碼|口令|パスワード)[ \t]*(?:是|为|為|は|：|:|=)[ \t]*"
        + _NOT_REF
        + r"(?P<tok>[A-Za-z0-9!@#$%^&*_+=~?/.-]{2,63}[A-Za-z0-9!@#$%^&*_+=~?])",
    ),
]

RULES: list[Rule] = [PEM_BLOCK, *_AWS_RULES, *_TOKEN_RULES, *_HEADER_RULES, *_URL_RULES, *_CLI_RULES, *_CJK_RULES]
