"""DSH reader: every DSH fact in the fixture corpus's expected.json (the in-repo snapshot, and
../shared/fixtures when present), plus synthetic files in tmp_path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import zstandard

from dsh_memory.errors import SessionReadError
from dsh_memory.models import EventKind, Session, SessionRef
from dsh_memory.readers import dsh
from dsh_memory.readers.dsh_records import expand_seq_ranges

from .conftest import repo_keys

DSH_KEYS = repo_keys("dsh/")  # the in-repo snapshot's list; each corpus is checked against it


def _ref(path: Path) -> SessionRef:
    st = path.stat()
    return SessionRef(
        id=dsh.decode_segment(path.parent.name), source="dsh", path=path, size=st.st_size, mtime_ns=st.st_mtime_ns
    )


def _load(path: Path) -> Session:
    return dsh.load(_ref(path))


def _kind(s: Session, kind: EventKind) -> list:
    return [e for e in s.events if e.kind is kind]


def _rendered(s: Session) -> list[str]:
    """Every string a transcript could show: event text, labels and serialized arguments."""
    out = []
    for e in s.events:
        out.append(e.text)
        if e.arguments is not None:
            out.append(e.arguments if isinstance(e.arguments, str) else json.dumps(e.arguments, ensure_ascii=False))
    return out


# --- the fixture corpus --------------------------------------------------------------------------


def test_fixture_corpus_present(corpus):
    assert len(DSH_KEYS) >= 20
    assert corpus.keys("dsh/") == DSH_KEYS, (
        f"the {corpus.name} corpus at {corpus.dir} describes other DSH fixtures than the in-repo snapshot: "
        "refresh tests/fixtures/corpus (see tests/fixtures/README.md)"
    )


@pytest.mark.parametrize("root", ["dsh/plain/sessions", "dsh/zstd/sessions"])
def test_scan_picks_highest_generation(corpus, root):
    fixtures_dir = corpus.dir
    scan = corpus.expected["_scan"][root]
    refs = dsh.discover(fixtures_dir / root)
    rel = lambda p: str(Path(p).relative_to(fixtures_dir))  # noqa: E731
    assert len(refs) == scan["session_dirs"]
    assert sorted(rel(r.path) for r in refs) == sorted(scan["picked_files"])
    assert not {rel(r.path) for r in refs} & set(scan["ignored_files"])
    for r in refs:
        assert r.source == "dsh"
        assert r.id == r.path.parent.name  # fixture dirs are plain uuids
        st = r.path.stat()
        assert (r.size, r.mtime_ns) == (st.st_size, st.st_mtime_ns)

    loaded, unreadable = {}, []
    for r in refs:
        try:
            loaded[r.id] = dsh.load(r)
        except SessionReadError as exc:
            assert str(r.path) in str(exc)
            unreadable.append(rel(r.path))
    assert sorted(unreadable) == sorted(scan["unreadable"])
    assert sorted(i for i, s in loaded.items() if s.is_root) == sorted(scan["root_sessions"])
    default_extract = [i for i, s in loaded.items() if s.extractable and not s.meta.get("unknown_version")]
    assert sorted(default_extract) == sorted(scan["extract_session_ids"])


@pytest.mark.parametrize("key", DSH_KEYS)
def test_fixture_facts(corpus, key):
    fixtures_dir = corpus.dir
    e = corpus.fact(key)
    path = fixtures_dir / key
    if e["format"] == "decoy":
        refs = dsh.discover(fixtures_dir / "dsh/plain/sessions")
        assert path not in [r.path for r in refs]
        return
    if not e["header_valid"]:
        with pytest.raises(SessionReadError) as err:
            _load(path)
        assert err.value.path == str(path) and str(path) in str(err.value)
        assert err.value.reason
        return

    s = _load(path)
    damaged = {"L_body", "L_version", "F_cut", "F_torn"}  # their warnings are checked below
    assert s.warnings == [] or e["fixture_key"] in damaged
    assert not any("could not interpret" in w for w in s.warnings)
    assert s.id == e["session_id"]
    assert s.source == "dsh" and s.path == path
    assert s.cwd == e["cwd"]
    assert s.is_root is e["is_root"]
    assert s.parent_id == e["parent_session"]
    assert s.format_version == e["format_version"] == s.meta["format_version"]
    assert s.meta["origin"] == e["origin"]
    assert s.created_at is not None and round(s.created_at.timestamp() * 1000) == e["created_at"]

    humans = s.human_prompts
    assert len(humans) == e["human_prompts"]
    assert [h.text for h in humans] == e["human_prompt_texts"]
    assert [h.seq for h in humans] == e["human_prompt_seqs"]
    assert (humans[0].text if humans else None) == e["first_human_prompt"]
    assert sum(h.images for h in humans) == e["human_prompt_images"]

    calls = _kind(s, EventKind.TOOL_CALL)
    results = _kind(s, EventKind.TOOL_RESULT)
    assert len(calls) == e["tool_calls"]
    assert sorted({c.tool_name for c in calls}) == e["tool_call_names"]
    assert len(results) == e["tool_results"]
    assert sum(r.is_error for r in results) == e["tool_errors"]
    call_names = {c.tool_call_id: c.tool_name for c in calls}
    for r in results:  # every result pairs with its call
        assert r.tool_call_id in call_names and r.tool_name == call_names[r.tool_call_id]

    assert s.last_seq == (e["last_seq"] if e["last_seq"] is not None else -1)
    assert s.meta["event_count"] == e["events"]
    assert s.meta["turns"] == e["turns"]
    assert [t["turn"] for t in s.meta["turns"] if t["end"] is None] == e["open_turns"]
    assert s.title == e["title"]
    assert s.inherited_cut == e["inherited_events"]
    assert all(ev.seq >= s.inherited_cut for ev in s.events)

    seqs = [ev.seq for ev in s.events]
    assert seqs == sorted(seqs)
    replaced = set(e["replace_nodes"])
    context = [(c.seq, c.label) for c in _kind(s, EventKind.CONTEXT)]
    assert context == [(u["seq"], u["source_kind"]) for u in e["injected_user_messages"] if u["seq"] not in replaced]
    assert all(c.text == "" for c in _kind(s, EventKind.CONTEXT))
    assert all(r.text == "" for r in _kind(s, EventKind.REASONING))
    assert len({r.seq for r in _kind(s, EventKind.REASONING)}) == len(_kind(s, EventKind.REASONING))
    assert not {ev.seq for ev in s.events} & replaced
    assistant = _kind(s, EventKind.ASSISTANT)
    assert (assistant[-1].text if assistant else None) == e["last_assistant_text"]
    assert [a.seq for a in assistant if a.label == "interrupted"] == e["interrupted_assistant_seqs"]

    rendered = _rendered(s)
    for item in e["must_not_render"]:
        assert not any(item["text"] in text for text in rendered), item
    for prompt in e.get("must_render_once", []):
        assert sum(text.count(prompt) for text in rendered) == 1, prompt

    compactions = _kind(s, EventKind.COMPACTION)
    if "compaction" in e:
        c = e["compaction"]
        assert [m.seq for m in compactions] == [c["summary_seq"]]
        (info,) = s.meta["compactions"]
        assert info["compaction_start_seq"] == c["compaction_start_seq"]
        assert info["replace_seq"] == c["replace_seq"]
        assert info["shadowed_seqs"] == c["shadowed_seqs"]  # range-encoded sourceEventSeqs decoded
    else:
        assert compactions == []

    if s.events:
        last_time = max(ev.time for ev in s.events if ev.time is not None)
        assert s.updated_at is not None and s.updated_at >= last_time


# --- specific fixtures -------------------------------------------------------------------------

L_BODY = "dsh/plain/sessions/--home-alice-src-invoice-api--/7a0d4f2b-5e9c-4b6a-9d8f-2c4b0e6a9f75/session.v4.jsonl"
L_VERSION = "dsh/plain/sessions/--home-alice-src-invoice-api--/a3c5e7f9-1b2d-4f6a-8c0e-5d7f9b1d3f86/session.v6.jsonl"
L_HEADER = "dsh/plain/sessions/--home-alice-src-invoice-api--/9b2e5d7f-6a1c-4e8b-8f3d-4a6c2e8b0d97/session.v4.jsonl"
L_EMPTY = "dsh/plain/sessions/--home-alice-src-invoice-api--/c5e7a9b1-3d4f-4b8c-8e2a-7f9b1d3f5b08/session.v4.jsonl"
D4 = "dsh/plain/sessions/--home-alice-src-invoice-api--/0f6c3a9e-7d21-4b5a-8e4f-1a2b3c4d5e6f/session.v4.jsonl"
F = "dsh/zstd/sessions/--home-alice-src-ledger-sync--/6a9d2f4b-3e8c-4b1a-9d7f-5c2e8b4a1f06/session.v4.jsonl.zstd"
F_TORN = "dsh/zstd/sessions/--home-alice-src-ledger-sync--/7b0e3a5c-4f9d-4c2b-8e1a-6d3f9c5b2a17/session.v4.jsonl.zstd"
F_CUT = "dsh/plain/sessions/--home-alice-src-ledger-sync--/8c1f4b6d-5a0e-4d3c-9f2b-7e4a0d6c3b28/session.v4.jsonl"


def test_damaged_body_lines_warn_and_keep_the_rest(corpus):
    path = corpus.dir / L_BODY
    s = _load(path)
    expected_lines = {w["line"] for w in corpus.fact(L_BODY)["expected_warnings"]}
    warned = {int(w.split(f"{path}:", 1)[1].split(":", 1)[0]) for w in s.warnings if w.startswith(f"{path}:")}
    # line 14 is an unknown type flagged ignorable:true -> skipped silently
    assert warned == expected_lines - {14} == {15, 16, 18}
    assert any(":15: not JSON" in w for w in s.warnings)
    assert any(":16: invalid UTF-8" in w for w in s.warnings)
    assert any(":18: unknown event type 'dsh-codex-connect/bridge-state'" in w for w in s.warnings)
    (result,) = _kind(s, EventKind.TOOL_RESULT)
    assert result.seq == 13 and "\ufffd" in result.text  # decoded with errors="replace", kept
    assert not {12, 15} & {ev.seq for ev in s.events}


def test_unknown_version_is_flagged_and_read_best_effort(corpus):
    s = _load(corpus.dir / L_VERSION)
    assert s.meta["unknown_version"] is True
    assert any("unknown format version 6" in w for w in s.warnings)
    assert [(st.seq, st.label) for st in _kind(s, EventKind.STATUS)] == [(27, "max-steps")]
    assert len(s.human_prompts) == 2


def test_bad_header_reason_names_each_problem(corpus):
    with pytest.raises(SessionReadError) as err:
        _load(corpus.dir / L_HEADER)
    reason = err.value.reason
    assert "missing id" in reason and "version is a string" in reason and "createdAt is not epoch ms" in reason
    with pytest.raises(SessionReadError, match="empty file"):
        _load(corpus.dir / L_EMPTY)


def test_status_events_for_unfinished_turns(corpus):
    s = _load(corpus.dir / D4)
    statuses = [(st.seq, st.turn, st.label) for st in _kind(s, EventKind.STATUS)]
    assert statuses == [(49, 2, "interrupted"), (77, 3, "aborted"), (91, 4, "error")]
    error = _kind(s, EventKind.STATUS)[-1]
    assert "SERVER" in error.text
    # three failed assistant/attempt streams (seq 83, 86, 89) are not content
    assert not {83, 86, 89} & {ev.seq for ev in s.events}
    # developer/message and system/message are never rendered
    assert not {4, 56} & {ev.seq for ev in s.events}


def test_torn_zstd_tail_keeps_every_complete_frame(corpus):
    fixtures_dir = corpus.dir
    torn = _load(fixtures_dir / F_TORN)
    full = _load(fixtures_dir / F)
    assert any("torn zstd tail" in w and str(fixtures_dir / F_TORN) in w for w in torn.warnings)
    assert full.warnings == []
    # (the copy has its own call ids and times)
    # one-shot decompress() only yields the header frame; we read all 14 complete frames
    one_shot = zstandard.ZstdDecompressor().decompress((fixtures_dir / F).read_bytes())
    assert one_shot.count(b"\n") == 1
    assert torn.last_seq == 46 and torn.meta["event_count"] == 47
    strip = lambda evs: [ev.model_dump(exclude={"time", "tool_call_id"}) for ev in evs]  # noqa: E731
    assert strip(torn.events) == strip([ev for ev in full.events if ev.seq <= 46])


def test_cut_last_line_is_dropped_with_warning(corpus):
    s = _load(corpus.dir / F_CUT)
    assert s.last_seq == 48
    assert any("incomplete last line" in w and str(corpus.dir / F_CUT) in w for w in s.warnings)


# --- synthetic sessions in tmp_path ------------------------------------------------------------

SID = "11111111-2222-4333-8444-555555555555"
HEADER = {"type": "session", "version": 4, "id": SID, "createdAt": 1790000000000, "cwd": "/w", "isSeeded": False,
          "delegationDepth": 0}  # fmt: skip


def _ev(seq: int, type_: str, data: dict, t: int | None = None, **extra) -> dict:
    return {"type": type_, "seq": seq, "time": 1790000000000 + (t if t is not None else seq), "data": data, **extra}


def _human(seq: int, text: str, kind: str = "user", t: int | None = None) -> dict:
    msg = {"id": f"m{seq}", "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": kind}}
    return _ev(seq, "user/message", msg, t=t, surfaceOp="append")


def _assistant(seq: int, *blocks: dict) -> dict:
    msg = {"id": f"a{seq}", "role": "assistant", "content": list(blocks), "source": {"kind": "model"}}
    return _ev(seq, "assistant/message", {"turn": 1, "step": 1, "message": msg, "stream": []}, surfaceOp="append")


def _tool_result(seq: int, call_id: str, text: str, is_error: bool = False) -> dict:
    msg = {"id": f"r{seq}", "role": "tool", "source": {"kind": "tool", "callId": call_id}, "toolCallId": call_id,
           "isError": is_error, "content": [{"type": "text", "text": text}]}  # fmt: skip
    return _ev(
        seq, "tool/result", {"turn": 1, "step": 1, "message": msg}, surfaceOp="append", sourceEventSeqs=[seq - 1]
    )


def _basic_events() -> list[dict]:
    return [
        _ev(0, "turn/start", {"turn": 1}),
        _human(1, "please fix the build"),
        _assistant(
            2,
            {"type": "reasoning", "text": "SECRET THOUGHT"},
            {"type": "text", "text": "Looking."},
            {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "make"}'},
        ),  # fmt: skip
        _ev(3, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": '{"command": "make"}'}),
        _tool_result(4, "c1", "build ok"),
        _assistant(5, {"type": "text", "text": "Fixed."}),
        _ev(6, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def _lines(header: dict, events: list[dict]) -> list[bytes]:
    return [json.dumps(header).encode()] + [json.dumps(ev, ensure_ascii=False).encode() for ev in events]


def _write(tmp_path: Path, raw: bytes, name: str = "session.v4.jsonl", sid: str = SID) -> Path:
    d = tmp_path / "sessions" / "--w--" / sid
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_bytes(raw)
    return p


def test_synthetic_basic_mapping(tmp_path):
    p = _write(tmp_path, b"\n".join(_lines(HEADER, _basic_events())) + b"\n")
    (ref,) = dsh.discover(tmp_path / "sessions")
    s = dsh.load(ref)
    assert [(e.seq, e.kind) for e in s.events] == [
        (1, EventKind.HUMAN), (2, EventKind.REASONING), (2, EventKind.ASSISTANT), (2, EventKind.TOOL_CALL),
        (4, EventKind.TOOL_RESULT), (5, EventKind.ASSISTANT),
    ]  # fmt: skip
    call = _kind(s, EventKind.TOOL_CALL)[0]
    assert call.arguments == {"command": "make"} and call.tool_call_id == "c1" and call.turn == 1
    result = _kind(s, EventKind.TOOL_RESULT)[0]
    assert (result.text, result.tool_name, result.is_error) == ("build ok", "bash", False)
    assert "SECRET THOUGHT" not in " ".join(_rendered(s))
    assert s.warnings == [] and s.path == p and s.last_seq == 6 and s.meta["event_count"] == 7
    assert s.updated_at is not None and round(s.updated_at.timestamp() * 1000) == 1790000000006


def test_synthetic_zstd_frames_with_torn_last_frame(tmp_path):
    lines = _lines(HEADER, _basic_events())
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    frames = [cctx.compress(lines[0] + b"\n"), cctx.compress(b"\n".join(lines[1:4]) + b"\n"),
              cctx.compress(b"\n".join(lines[4:6]) + b"\n"), cctx.compress(b"\n".join(lines[6:]) + b"\n")]  # fmt: skip
    whole = _write(tmp_path, b"".join(frames), "session.v4.jsonl.zstd")
    s = _load(whole)
    assert s.last_seq == 6 and s.warnings == [] and len(s.human_prompts) == 1

    torn = _write(tmp_path, b"".join(frames[:3]) + frames[3][: len(frames[3]) // 2], "session.v4.jsonl.zstd", "torn")
    t = _load(torn)
    assert t.last_seq == 4  # frames 1-3 complete: header + seqs 0..4
    assert [e.seq for e in t.events] == [1, 2, 2, 2, 4]
    assert any(w.startswith(str(torn)) and "torn zstd tail" in w for w in t.warnings)

    garbage = _write(tmp_path, b"definitely not zstd\n", "session.v4.jsonl.zstd", "garbage")
    with pytest.raises(SessionReadError) as err:
        _load(garbage)
    assert str(garbage) in str(err.value)


def test_synthetic_cut_last_line(tmp_path):
    raw = b"\n".join(_lines(HEADER, _basic_events()))  # no trailing newline: last line incomplete
    p = _write(tmp_path, raw[:-10])
    s = _load(p)
    assert s.last_seq == 5
    assert s.meta["turns"] == [{"turn": 1, "end": None}]
    assert any(w.startswith(f"{p}:8:") and "incomplete last line" in w for w in s.warnings)


def test_synthetic_invalid_utf8_and_non_json_lines(tmp_path):
    lines = _lines(HEADER, _basic_events())
    lines[2] = lines[2].replace(b"please fix", b"please \xff\xfe fix")  # human prompt, seq 1
    lines.insert(4, b"{this is not json sk-FAKEsecret0123456789")
    lines.insert(5, b"[1, 2, 3]")
    p = _write(tmp_path, b"\n".join(lines) + b"\n")
    s = _load(p)
    assert s.human_prompts[0].text == "please \ufffd\ufffd fix the build"
    assert [e.seq for e in _kind(s, EventKind.TOOL_RESULT)] == [4]
    assert s.last_seq == 6 and s.meta["event_count"] == 7
    assert any(w.startswith(f"{p}:3:") and "invalid UTF-8" in w for w in s.warnings)
    assert any(w.startswith(f"{p}:5:") and "not JSON" in w for w in s.warnings)
    assert not any("sk-FAKE" in w for w in s.warnings)  # warnings never echo line content
    assert any(w.startswith(f"{p}:6:") and "not a JSON object" in w for w in s.warnings)


def test_synthetic_unknown_block_and_event_types(tmp_path):
    events = _basic_events()
    events[2]["data"]["message"]["content"].append({"type": "hologram", "text": "??"})
    events.insert(3, _ev(7, "acme/thing", {"x": 1}))  # unknown, not ignorable
    events.insert(3, _ev(8, "acme/quiet", {"x": 1}, ignorable=True))
    p = _write(tmp_path, b"\n".join(_lines(HEADER, events)) + b"\n")
    s = _load(p)
    assert any("unknown content block type 'hologram'" in w for w in s.warnings)
    assert any("unknown event type 'acme/thing'" in w for w in s.warnings)
    assert not any("acme/quiet" in w for w in s.warnings)
    assert s.meta["event_count"] == 9 and s.last_seq == 8
    assert len(_kind(s, EventKind.TOOL_CALL)) == 1 and "??" not in _rendered(s)


@pytest.mark.parametrize(
    "header_line, reason",
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"type":"session","version":4,"createdAt":1}', "missing id"),
        (b'{"type":"session","id":"x","version":-1,"createdAt":1}', "version"),
        (b'{"type":"session","id":"x","version":true,"createdAt":1}', "version"),
        (b'{"type":"session","id":"x","version":4,"createdAt":"2026-01-01"}', "createdAt is not epoch ms"),
        (b'{"type":"session","id":"x","version":4,"createdAt":1e300}', "createdAt is not epoch ms"),
        (b'{"type":"other","id":"x","version":4,"createdAt":1}', "expected 'session'"),
        (b"\n", "no complete header line"),
        (b'{"type":"session","id":"x","version":4,"createdAt":1}', "no complete header line"),  # no newline
    ],
)
def test_invalid_headers_raise_naming_the_file(tmp_path, header_line, reason):
    raw = header_line if reason == "no complete header line" else header_line + b"\n"
    p = _write(tmp_path, raw)
    with pytest.raises(SessionReadError) as err:
        _load(p)
    assert err.value.path == str(p) and reason in err.value.reason


def test_v0_packed_rows_and_seed_length(tmp_path):
    header = {"type": "session", "version": 0, "id": SID, "createdAt": 1, "parentSession": "parent", "seedLength": 3}
    events = [
        _ev(0, "turn/start", {"turn": 1}),
        _human(1, "inherited prompt"),
        _ev(2, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        _ev(3, "session/end-seed", {}),
        _ev(4, "turn/start", {"turn": 2}),
        _human(5, "own prompt"),
        {
            "type": "text-chunks",
            "seq0": 6,
            "time0": 50,
            "data": {"turn": 2, "step": 1, "index": 0, "dt": [1, 2], "texts": ["a", "b", "c"]},
        },  # fmt: skip
        {
            "type": "tool-call-chunks",
            "seq0": 9,
            "time0": 60,
            "data": {"id": "c", "name": "bash", "dt": [0], "args": ["{", "}"]},
        },  # fmt: skip
        _assistant(11, {"type": "text", "text": "abc"}),
        _ev(12, "turn/end", {"turn": 2, "reason": {"kind": "max-tokens"}}),
    ]
    s = _load(_write(tmp_path, b"\n".join(_lines(header, events)) + b"\n", "session.jsonl"))
    assert s.inherited_cut == 3 and s.parent_id == "parent" and s.is_root
    assert [h.text for h in s.human_prompts] == ["own prompt"]
    assert s.meta["event_count"] == 13 and s.last_seq == 12
    assert s.meta["turns"] == [{"turn": 2, "end": "max-tokens"}]
    assert [(e.kind, e.label) for e in s.events][-1] == (EventKind.STATUS, "max-tokens")


def test_v2_inherited_cut_is_last_tagged_end_seed(tmp_path):
    header = dict(HEADER, version=2, isSeeded=True, parentSession="p")
    events = [_human(0, "parent 1"), _ev(1, "session/end-seed", {"inherited": True}), _human(2, "parent 2"),
              _ev(3, "session/end-seed", {"inherited": True}), _human(4, "mine"), _ev(5, "session/end-seed", {}),
              _human(6, "after resume")]  # fmt: skip
    s = _load(_write(tmp_path, b"\n".join(_lines(header, events)) + b"\n", "session.v2.jsonl"))
    assert s.inherited_cut == 4
    assert [h.text for h in s.human_prompts] == ["mine", "after resume"]

    lost = _load(_write(tmp_path, b"\n".join(_lines(header, events[:1])) + b"\n", "session.v2.jsonl", "lost"))
    assert lost.human_prompts == [] and any("isSeeded" in w for w in lost.warnings)


def test_order_is_by_seq_not_time_nor_line_order(tmp_path):
    events = [_human(2, "second", t=5), _human(0, "first", t=100), _human(1, "middle", t=1)]
    s = _load(_write(tmp_path, b"\n".join(_lines(HEADER, events)) + b"\n"))
    assert [h.text for h in s.human_prompts] == ["first", "middle", "second"]
    assert s.warnings == []
    assert round(s.updated_at.timestamp() * 1000) == 1790000000100  # latest time, not last seq


def test_subagent_header_is_not_root(tmp_path):
    header = dict(HEADER, origin="subagent", delegationDepth=1, parentSession="p")
    s = _load(_write(tmp_path, b"\n".join(_lines(header, [_human(0, "delegated task")])) + b"\n"))
    assert not s.is_root and s.parent_id == "p" and not s.extractable


def test_injected_user_messages_keep_no_text(tmp_path):
    events = [_human(0, "AGENTS.md secret rules", kind="agent-instructions"), _human(1, "hi"),
              _ev(2, "agent/inbox/spliced", {"inserted": [{"content": [{"type": "text", "text": "hi"}]}]}),
              _ev(3, "session/title-llm-request", {"system": "make a title", "messages": ["hi"]})]  # fmt: skip
    s = _load(_write(tmp_path, b"\n".join(_lines(HEADER, events)) + b"\n"))
    assert [(e.kind, e.label, e.text) for e in s.events] == [
        (EventKind.CONTEXT, "agent-instructions", ""), (EventKind.HUMAN, None, "hi")]  # fmt: skip


def test_expand_seq_ranges():
    assert expand_seq_ranges([74, 75, [5, 7], 11, [23, 25]]) == [74, 75, 5, 6, 7, 11, 23, 24, 25]
    assert expand_seq_ranges([[3, 1], [1], "x", True, [0, 10**12], 4]) == [4]
    assert expand_seq_ranges("nope") == []


def test_dispatcher_routes_dsh(corpus):
    from dsh_memory import readers
    from dsh_memory.settings import SourceRoots

    refs = readers.discover(SourceRoots(dsh_sessions=corpus.dir / "dsh/zstd/sessions"), sources=["dsh"])
    assert [r.id for r in refs] == ["6a9d2f4b-3e8c-4b1a-9d7f-5c2e8b4a1f06", "7b0e3a5c-4f9d-4c2b-8e1a-6d3f9c5b2a17"]
    assert readers.load(refs[0]).last_seq == 49


# --- discovery ---------------------------------------------------------------------------------


def test_discover_picks_numeric_highest_and_lists_decoys(tmp_path):
    root = tmp_path / "sessions"
    d = root / "--p--" / "abc"
    d.mkdir(parents=True)
    for name in ["session.jsonl", "session.v9.jsonl", "session.v10.jsonl", "session.v11.jsonl.bak", "notes.txt"]:
        (d / name).write_text("x")
    (d / "session.v12.jsonl").mkdir()  # a directory with a generation name is not a log
    (d / "session.v13.jsonl").symlink_to(d / "missing")  # dangling symlink
    (root / "stray-file").write_text("x")  # file where a project dir is expected
    (root / "--p--" / "stray").write_text("x")  # file where a session dir is expected
    (root / "--p--" / "empty").mkdir()
    (ref,) = dsh.discover(root)
    assert ref.path.name == "session.v10.jsonl"  # not session.jsonl, v9, the .bak decoy or the folder v12
    assert dsh.discover(tmp_path / "missing") == []
    assert dsh.discover(root / "stray-file") == []


def test_discover_decodes_session_dir_names(tmp_path):
    root = tmp_path / "sessions"
    for name in ["~002E~002E", "a~007Eb", "emoji-~D83D~DE00", "--x--"]:
        (root / "_no-cwd" / name).mkdir(parents=True)
        (root / "_no-cwd" / name / "session.v4.jsonl.zstd").write_bytes(b"")
    assert sorted(r.id for r in dsh.discover(root)) == sorted(["..", "a~b", "emoji-\U0001f600", "--x--"])


def test_discover_skips_unreadable_directories(tmp_path):
    root = tmp_path / "sessions"
    ok = root / "--p--" / "ok"
    locked = root / "--p--" / "locked"
    ok.mkdir(parents=True)
    locked.mkdir(parents=True)
    (ok / "session.v4.jsonl").write_text("x")
    (locked / "session.v4.jsonl").write_text("x")
    locked.chmod(0)
    try:
        ids = [r.id for r in dsh.discover(root)]
    finally:
        locked.chmod(0o755)
    assert "ok" in ids
    if os.geteuid() != 0:  # root can read anything
        assert "locked" not in ids


def test_discover_many_sessions_picks_one_generation_each(tmp_path):
    # Speed is measured by bench/bench_ingest.py (10,000 sessions), never asserted here.
    root = tmp_path / "sessions"
    for p in range(20):
        proj = root / f"--proj-{p}--"
        for i in range(50):
            d = proj / f"{p:04d}-{i:04d}"
            d.mkdir(parents=True)
            (d / "session.v4.jsonl").touch()
            if i % 10 == 0:
                (d / "session.v3.jsonl").touch()
    refs = dsh.discover(root)
    assert len(refs) == 1_000
    assert all(r.path.name == "session.v4.jsonl" for r in refs)
