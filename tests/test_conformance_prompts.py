"""Conformance on real transcripts: every typed prompt found exactly once, nothing else counted.

tests/fixtures/conformance/ holds public Claude Code transcripts and Codex rollouts (MIT, copied
with their LICENSE) plus re-created sessions for shapes no public capture had (README.md there);
expected.json lists, per session, the human prompts a careful reader counts (first 60 characters,
in the order the model saw them).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from dsh_memory import readers
from dsh_memory.models import Session, SessionRef
from dsh_memory.transcript.redact import redact
from dsh_memory.transcript.render import render_transcript

CONFORMANCE = Path(__file__).resolve().parent / "fixtures" / "conformance"
EXPECTED: dict[str, dict] = json.loads((CONFORMANCE / "expected.json").read_text())
BOILERPLATE = "you should consider whether it would be considered malware"


@cache
def _load(key: str) -> Session:
    exp = EXPECTED[key]
    path = CONFORMANCE / key
    st = path.stat()
    ref = SessionRef(id=exp["session_id"], source=exp["source"], path=path, size=st.st_size, mtime_ns=st.st_mtime_ns)
    return readers.load(ref)


def test_the_corpus_has_real_sessions_from_three_public_sources():
    origins = {v["origin"].split()[0] for v in EXPECTED.values() if "re-created" not in v["origin"]}
    assert len(origins) >= 3
    for origin in origins:
        folder = CONFORMANCE / ("claude-code" if origin != "madshn/localpush" else "codex")
        assert any((d / "LICENSE").is_file() for d in folder.iterdir() if d.name.endswith(origin.split("/")[1]))
    assert all((CONFORMANCE / key).is_file() for key in EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_every_prompt_found_once_and_nothing_else(key: str):
    exp = EXPECTED[key]
    s = _load(key)
    assert s.warnings == [], key
    found = [e.text[:60] for e in s.human_prompts]
    assert found == exp["human_prompts"], key
    assert len(s.human_prompts) == exp["count"]
    assert s.is_root is exp["is_root"]


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_rendered_transcript_keeps_every_prompt_once_and_no_boilerplate(key: str):
    s = _load(key)
    text = render_transcript(s, budget_tokens=24_000).text
    for head in set(EXPECTED[key]["human_prompts"]):
        want = EXPECTED[key]["human_prompts"].count(head)
        assert text.count("[user] " + redact(head)) == want, (key, head)
    assert BOILERPLATE not in text


def test_codex_fork_cuts_the_copied_parent_history():
    fork = next(k for k, v in EXPECTED.items() if "a fork (forked_from_id)" in v["note"])
    parent = next(k for k, v in EXPECTED.items() if "the parent of the fork" in v["note"])
    child, mother = _load(fork), _load(parent)
    assert child.parent_id == mother.id and child.inherited_cut > 1
    assert not {e.text for e in child.human_prompts} & {e.text for e in mother.human_prompts}
