"""The flows return pydantic results (not dicts) that Prefect can persist and whose JSON dump
(the CLI's `--json`) keeps the shape it always had; Phase 1's claim bookkeeping is a task that
branches on the decision's ReasonKind."""

from __future__ import annotations

from dataclasses import asdict
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
OUTCOME_KEYS = [
    "session",
    "source",
    "outcome",
    "part",
    "slug",
    "tokens_in",
    "tokens_out",
    "error",
    "attempts",
    "parked",
]


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


PHASE2_KEYS = [
    "outcome",
    "reason",
    "error",
    "force",
    "mode",
    "memory_root",
    "prompt_version",
    "gate",
    "inputs",
    "model",
    "changes",
    "flow_run_id",
    "duration_seconds",
]
MODEL_KEYS = [
    "provider",
    "model",
    "reasoning_effort_requested",
    "reasoning_effort",
    "max_tokens_tried",
    "input_tokens",
    "output_tokens",
    "finish_reason",
    "notes",
    "output_source",
    "dropped",
    "parse_errors",
]


def test_phase2_json_keeps_its_shape():
    from dsh_memory.consolidation.apply import ApplyResult
    from dsh_memory.consolidation.gate import decide
    from dsh_memory.consolidation.output import ModelReply
    from dsh_memory.consolidation.result import Phase2ModelReport, Phase2NotRun, Phase2Result
    from dsh_memory.flows.catch_up import CatchUpResult

    gate = decide(None, notes=1, raw_blocks=0, now=NOW, cooldown_seconds=0, force=False)
    report = Phase2ModelReport(provider="openai", model="m", reasoning_effort_requested="high")
    report.add(ModelReply(provider="openai", model="m2", input_tokens=5, output_tokens=7, notes=["n"]))
    report.add(ModelReply(input_tokens=1, output_tokens=1, notes=["n"], finish_reason="stop"))
    result = Phase2Result(outcome="consolidated", gate=gate, model=report, changes=ApplyResult(raw_archived=2))
    dumped = result.model_dump(mode="json")
    assert list(dumped) == PHASE2_KEYS and list(dumped["model"]) == MODEL_KEYS
    assert dumped["gate"] == asdict(gate) and dumped["changes"] == asdict(ApplyResult(raw_archived=2))
    assert (report.model, report.input_tokens, report.output_tokens, report.notes) == ("m2", 6, 8, ["n"])
    for serializer in (PickleSerializer(), JSONSerializer()):
        assert serializer.loads(serializer.dumps(result)).model_dump(mode="json") == dumped

    # The catch-up's "not attempted" keeps its two keys, and survives a JSON round trip as itself.
    p1 = _result()
    skipped = CatchUpResult(phase1=p1, phase2=Phase2NotRun(reason="no model route"))
    assert skipped.model_dump(mode="json")["phase2"] == {"outcome": "skipped", "reason": "no model route"}
    back = JSONSerializer().loads(JSONSerializer().dumps(skipped))
    assert isinstance(back.phase2, Phase2NotRun)
    assert isinstance(
        JSONSerializer().loads(JSONSerializer().dumps(CatchUpResult(phase1=p1, phase2=result))).phase2, Phase2Result
    )


def test_phase2_bookkeeping_tasks(tmp_path):
    from dsh_memory.consolidation.gate import SKIP_COOLDOWN, SKIP_NOTHING
    from dsh_memory.tasks.consolidate import clear_pending, record_phase2_failure, record_phase2_outcome

    settings = MemorySettings(memory_root=tmp_path)
    StateStore(tmp_path).set_pending(True)
    record_phase2_outcome.fn(settings, SKIP_COOLDOWN)
    meta = StateStore(tmp_path).get_meta()
    assert meta.last_phase2_outcome == SKIP_COOLDOWN and meta.pending_consolidation
    record_phase2_failure.fn(settings, "LLMFatalError: 401", NOW)
    meta = StateStore(tmp_path).get_meta()
    assert meta.phase2_failures == 1 and "401" in meta.phase2_error and meta.pending_consolidation
    clear_pending.fn(settings)
    meta = StateStore(tmp_path).get_meta()
    assert not meta.pending_consolidation and meta.last_phase2_outcome == SKIP_NOTHING
