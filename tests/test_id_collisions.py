"""One session id, two logs: never one session's memory overwritten by another's (issue 12).

A DSH session, a copy of its folder under another project, and a Claude Code transcript that
happens to carry the same id: the DSH original keeps the id, the Claude session is namespaced
`claude:<id>`, the copy is reported and never extracted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time

import pytest

from dsh_memory import readers
from dsh_memory.settings import SourceRoots
from dsh_memory.storage.store import MemoryStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer
from tests.flow_helpers import copy_tree_aged, memory_reply
from tests.test_cli_behaviour import SAMPLES, WEATHER, cli, pipeline_env

CLAUDE_SAMPLE = "3c5e7a9b-1d2f-4a6c-8e0b-2d4f6a8c0e1b"


def _colliding_roots(tmp_path):
    dsh = copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")
    (original,) = (dsh / "sessions").glob(f"*/{WEATHER}")
    shutil.copytree(original, dsh / "sessions" / "--home-demo-copy--" / WEATHER)
    claude = copy_tree_aged(SAMPLES / "claude", tmp_path / "claude")
    (transcript,) = (claude / "projects").glob(f"*/{CLAUDE_SAMPLE}.jsonl")
    text = transcript.read_text().replace(CLAUDE_SAMPLE, WEATHER)
    transcript.unlink()
    renamed = transcript.parent / f"{WEATHER}.jsonl"
    renamed.write_text(text)
    os.utime(renamed, (time.time() - 3600,) * 2)  # ended an hour ago: idle
    return dsh, claude, original


def test_discovery_keeps_ids_apart_and_reports_collisions(tmp_path, caplog):
    dsh, claude, _ = _colliding_roots(tmp_path)
    roots = SourceRoots(dsh_sessions=dsh / "sessions", claude_projects=claude / "projects")
    with caplog.at_level(logging.WARNING, logger="dsh_memory.readers"):
        refs = readers.discover(roots)
    mine = [r for r in refs if WEATHER in r.id]
    by_key = {(r.source, r.id, r.collision_with is not None): r for r in mine}
    assert set(by_key) == {("dsh", WEATHER, False), ("dsh", WEATHER, True), ("claude", f"claude:{WEATHER}", False)}
    dsh_paths = sorted(str(r.path) for r in mine if r.source == "dsh")
    assert str(by_key[("dsh", WEATHER, False)].path) == dsh_paths[0]  # the first path keeps the id
    assert by_key[("dsh", WEATHER, True)].collision_with == by_key[("dsh", WEATHER, False)].path
    assert readers.load(by_key[("claude", f"claude:{WEATHER}", False)]).id == f"claude:{WEATHER}"
    log = caplog.text
    assert "not extracted" in log and f"claude:{WEATHER}" in log
    assert readers.discover(roots) == refs  # deterministic


@pytest.mark.e2e
def test_both_sessions_keep_their_memory_and_the_copy_is_skipped(tmp_path, prefect_api):
    dsh, claude, _ = _colliding_roots(tmp_path)
    with FakeOpenAIServer(handler=memory_reply) as fake:
        env = pipeline_env(tmp_path, prefect_api, fake.base_url, DSH_HOME=str(dsh), CLAUDE_CONFIG_DIR=str(claude))
        r = cli(["extract", "--all", "--json"], env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    outcomes = {o["session"]: o["outcome"] for o in data["outcomes"]}
    assert outcomes[WEATHER] == "extracted" and outcomes[f"claude:{WEATHER}"] == "extracted"
    skipped = [d for d in data["decisions"] if d["session"] == WEATHER and d["action"] == "skip"]
    assert len(skipped) == 1 and "same session id" in skipped[0]["reason"]
    store = MemoryStore(tmp_path / "mem")
    owners = sorted(b.session_id for b in store.read_raw_blocks())
    assert WEATHER in owners and f"claude:{WEATHER}" in owners
    sources = sorted(i.provenance.get("source") for i in store.list_rollout_summaries())
    assert "claude" in sources and "dsh" in sources
