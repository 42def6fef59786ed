"""Forgetting candidates: freshness starts no earlier than the extraction, so a backfilled
summary of an old session gets a full `max_unused_days` before it can be retired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsh_memory.consolidation.inputs import build_index
from dsh_memory.storage.store import MemoryStore

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _summary(store: MemoryStore, slug: str, updated: datetime, extracted: datetime | None) -> None:
    prov = {"session_id": slug, "source": "dsh", "cwd": "/w", "updated_at": updated.isoformat(), "part": 1}
    if extracted is not None:
        prov["extracted_at"] = extracted.isoformat()
    store.write_rollout_summary(slug, prov, f"# {slug}\n- a fact\n")


def test_backfilled_summary_is_not_a_forgetting_candidate(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    old = NOW - timedelta(days=400)
    _summary(store, "backfilled", updated=old, extracted=NOW - timedelta(days=1))
    _summary(store, "stale", updated=old, extracted=NOW - timedelta(days=200))
    _summary(store, "legacy", updated=old, extracted=None)  # written before extracted_at existed
    index = {e.slug: e for e in build_index(store, {}, NOW, max_unused_days=90)}
    assert not index["backfilled"].candidate
    assert index["stale"].candidate and index["legacy"].candidate


def test_use_keeps_a_summary_fresh(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    old = NOW - timedelta(days=400)
    _summary(store, "used", updated=old, extracted=old)
    usage = {"rollout_summaries/used.md": (3, NOW - timedelta(days=2))}
    (entry,) = build_index(store, usage, NOW, max_unused_days=90)
    assert not entry.candidate


def test_forget_with_a_file_where_the_retired_folder_goes_changes_nothing(tmp_path):
    """`rollout_summaries/.retired` a regular file: `forget SESSION` excluded the session and
    dropped its claim, then failed moving its recap (FileExistsError), so the session was
    excluded with its recap still active. It fails first now: one clear error, nothing changed;
    `forget --project` too."""
    import pytest

    from dsh_memory.consolidation.forget import forget_project, retire_session
    from dsh_memory.errors import UserInputError
    from dsh_memory.settings import SourceRoots
    from dsh_memory.storage.state import StateStore

    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    _summary(store, "s1", NOW, NOW)
    store.retired_dir.rmdir()
    store.retired_dir.write_text("not a folder\n")
    state = StateStore(store.root)
    state.baseline("s1", 5, NOW)
    with pytest.raises(UserInputError, match=r"\.retired is not a folder"):
        retire_session(store, state, "s1", NOW)
    with pytest.raises(UserInputError, match=r"\.retired is not a folder"):
        forget_project(store, state, "/w", NOW, SourceRoots())
    assert state.overrides() == {} and state.get_claim("s1") is not None
    assert [i.slug for i in store.list_rollout_summaries()] == ["s1"]


def test_forget_says_a_consolidation_keeps_what_the_session_taught(tmp_path):
    """`forget SESSION`'s help and the vault's confirm step said the handbook content it taught
    "stays until the next consolidation", as if that one removed it: the merge keeps an item whose
    recap was forgotten. Both now say it stays, and how to drop it."""
    from typer.testing import CliRunner

    from dsh_memory.cli import app
    from dsh_memory.consolidation import mechanical
    from dsh_memory.consolidation.forget import retire_session
    from dsh_memory.context import MemoryContext
    from dsh_memory.serve.vault.actions import plan
    from dsh_memory.settings import MemorySettings
    from tests.test_quality_local import _inputs, _settings

    item = "- Load the deploy key before `scripts/deploy.sh staging`. [source: s1]"
    with MemoryContext.of(MemorySettings(memory_root=tmp_path / "mem")) as ctx:
        ctx.store.ensure_layout()
        _summary(ctx.store, "s1", NOW, NOW)
        said = " ".join(plan(ctx, "forget", {"session": "s1"}).steps)
        retire_session(ctx.store, ctx.state, "s1", NOW)
        handbook = f"# Task Group: /w\n\n## Project facts\n{item}\n"
        out = mechanical.consolidate(ctx.store, _inputs(ctx.store, memory_md=handbook), _settings())
    assert item in out.memory_md  # what the session taught outlives a consolidation
    help_text = " ".join(CliRunner().invoke(app, ["forget", "--help"], env={"COLUMNS": "200"}).output.split())
    for text in (said, help_text):
        assert "until the next consolidation" not in text and "a consolidation keeps it): edit them" in text, text


def test_forget_project_finds_a_running_sessions_log_by_its_id(tmp_path, fixtures_dir):
    """A claim keeps its log's path redacted (a key in a folder name) or none at all (a run claims
    its batch up front), so `forget --project` finds a running session's log through the readers:
    it refuses while one of the project's sessions is being extracted, and only then."""
    import pytest

    from dsh_memory import readers
    from dsh_memory.consolidation.forget import forget_project
    from dsh_memory.errors import NotFoundError
    from dsh_memory.settings import SourceRoots
    from dsh_memory.storage.locks import AlreadyRunning
    from dsh_memory.storage.state import StateStore
    from tests.flow_helpers import copy_tree_aged

    roots = SourceRoots(dsh_sessions=copy_tree_aged(fixtures_dir / "dsh" / "plain", tmp_path / "dsh") / "sessions")
    sid = "9d4e6a2b-1c3f-4b8e-a5d7-2f1e0c9b8a64"
    cwd = readers.load(readers.find(roots, sid)).cwd
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    state = StateStore(store.root)
    assert state.try_start_many([sid], NOW) == [sid] and state.get_claim(sid).path is None
    with pytest.raises(AlreadyRunning, match=sid):
        forget_project(store, state, cwd, NOW, roots)
    with pytest.raises(NotFoundError):  # another project: nothing running there, nothing in memory
        forget_project(store, state, "/home/alice/src/ledger-sync", NOW, roots)
