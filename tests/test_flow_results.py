"""The flows return pydantic results (not dicts) that Prefect can persist and whose JSON dump
(the CLI's `--json`) keeps the shape it always had; Phase 1's claim bookkeeping is a task that
branches on the decision's ReasonKind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prefect.serializers import JSONSerializer, PickleSerializer

from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.result import Phase1Result
from dsh_memory.phase1.selection import Action, DecisionRow, ReasonKind
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.tasks.claims import finish_phase1, record_decisions

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DECISION_KEYS = ["session", "source", "action", "reason", "watermark", "part"]
OUTCOME_KEYS = ["session", "source", "outcome", "part", "slug", "tokens_in", "tokens_out", "error"]


def _row(sid: str, action: Action, kind: ReasonKind | None, reason: str = "why", watermark: int = -1) -> DecisionRow:
    return DecisionRow(session=sid, source="dsh", action=action, kind=kind, reason=reason, watermark=watermark, part=1)


def _result(**kw) -> Phase1Result:
    base = dict(discovered=3, candidates=1, decisions=[_row("a", Action.EXTRACT, ReasonKind.NEVER_PROCESSED)])
    return Phase1Result(**{**base, **kw})


def test_phase1_json_keeps_its_shape():
    dry = _result().model_dump(mode="json")
    assert list(dry) == ["discovered", "candidates", "decisions", "outcomes", "skipped_no_route"]
    assert list(dry["decisions"][0]) == DECISION_KEYS and dry["decisions"][0]["action"] == "extract"
    assert list(_result(unknown_ids=[]).model_dump(mode="json"))[-1] == "unknown_ids"  # given ids: always listed
    skipped = _result(skipped_no_route=True, error="no route").model_dump(mode="json")
    assert skipped["error"] == "no route" and "counts" not in skipped and "provider" not in skipped
    ran = _result(
        outcomes=[Outcome(session="a", source="dsh", outcome="extracted", slug="s", reason="internal")],
        provider="openai",
        model="m",
        counts={"extracted": 1},
    )
    dumped = ran.model_dump(mode="json")
    assert list(dumped)[-3:] == ["provider", "model", "counts"]
    assert list(dumped["outcomes"][0]) == OUTCOME_KEYS  # `reason` is for logs, not a column
    assert ran.extracted == ran.outcomes and ran.count_outcomes() == {"extracted": 1}


def test_phase1_artifact_rows():
    empty = _result(skipped_no_route=True, error="no route")
    (row,) = empty.table_rows()
    assert list(row) == OUTCOME_KEYS and row["outcome"] == "nothing to extract" and row["error"] == "no route"
    assert empty.describe() == "Phase 1 batch: 1 candidates of 3 sessions"
    assert "via openai/m" in _result(provider="openai", model="m").describe()


@pytest.mark.parametrize("serializer", [PickleSerializer(), JSONSerializer()], ids=["pickle", "json"])
def test_prefect_can_persist_the_results(serializer):
    result = _result(outcomes=[Outcome(session="a", source="dsh", outcome="noop")], counts={"noop": 1})
    back = serializer.loads(serializer.dumps(result))
    assert isinstance(back, Phase1Result)
    assert back.model_dump(mode="json") == result.model_dump(mode="json")


def test_record_decisions_branches_on_the_reason_kind(tmp_path):
    settings = MemorySettings(memory_root=tmp_path)
    state = StateStore(tmp_path)
    earlier = NOW - timedelta(hours=2)
    for sid in ("grew-little", "text-only"):
        state.baseline(sid, 5, earlier)
    rows = [
        _row("unreadable", Action.UNREADABLE, ReasonKind.UNREADABLE, reason="unreadable: truncated"),
        _row("legacy", Action.BASELINE, ReasonKind.LEGACY_DONE, watermark=9),
        _row("grew-little", Action.SKIP, ReasonKind.TOO_FEW_NEW_EVENTS, reason="grew by 2 events (< 8)"),
        # Same words, another kind (or a row reloaded from JSON, without its kind): not touched.
        _row("text-only", Action.SKIP, None, reason="grew by 2 events (< 8)"),
    ]
    outcomes = record_decisions.fn(rows, settings, NOW)
    assert [(o.session, o.outcome, o.error) for o in outcomes] == [
        ("unreadable", "unreadable", "unreadable: truncated")
    ]
    assert state.get_claim("unreadable").status == "failed"
    assert state.get_claim("legacy").last_seq == 9
    assert state.get_claim("grew-little").last_checked_at == NOW
    assert state.get_claim("text-only").last_checked_at == earlier


def test_finish_phase1_sets_pending_only_after_an_extraction(tmp_path):
    settings = MemorySettings(memory_root=tmp_path)
    finish_phase1.fn(settings, [Outcome(session="a", source="dsh", outcome="noop")], NOW)
    meta = StateStore(tmp_path).get_meta()
    assert not meta.pending_consolidation and meta.last_phase1_at == NOW
    finish_phase1.fn(settings, [Outcome(session="a", source="dsh", outcome="extracted")], NOW)
    assert StateStore(tmp_path).get_meta().pending_consolidation
