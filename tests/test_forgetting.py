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
