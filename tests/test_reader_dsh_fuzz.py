"""Property tests: the DSH reader never fails on garbage except with SessionReadError."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_memory.errors import SessionReadError
from dsh_memory.models import EventKind, Session, SessionRef
from dsh_memory.readers import dsh
from dsh_memory.readers.dsh_events import parse_body
from dsh_memory.readers.dsh_records import KNOWN_EVENT_TYPES, Warnings

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = b'{"type":"session","version":4,"id":"s","createdAt":1790000000000,"isSeeded":false,"delegationDepth":0}'

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.integers(10**300, 10**500)
    | st.floats()
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "reasoning", "image", "tool-call", "tool-result", "weird", 3])},
    optional={"text": json_values, "id": json_values, "name": json_values, "arguments": json_values,
              "toolCallId": json_values, "isError": json_values, "content": st.lists(json_values, max_size=3)},
)  # fmt: skip
message = st.fixed_dictionaries(
    {},
    optional={"role": st.sampled_from(["user", "assistant", "tool", "system", 1]),
              "content": st.lists(block, max_size=4) | json_values,
              "source": st.fixed_dictionaries({}, optional={"kind": json_values, "callId": json_values,
                                                            "plugin": json_values, "compactionId": json_values}),
              "toolCallId": json_values, "isError": json_values},
)  # fmt: skip
data = st.fixed_dictionaries(
    {},
    optional={"turn": json_values, "message": message | json_values, "content": st.lists(block, max_size=3),
              "source": json_values, "reason": json_values, "title": json_values, "inherited": json_values,
              "callId": json_values, "name": json_values, "compactionId": json_values, "interrupted": json_values,
              "error": json_values, "texts": json_values, "args": json_values, "dt": json_values},
)  # fmt: skip
record = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(KNOWN_EVENT_TYPES) + ["text-chunks", "tool-call-chunks", "x/unknown"]) | json_values},
    optional={"seq": st.integers(-2, 40) | json_values, "seq0": st.integers(-2, 40) | json_values,
              "time": json_values, "time0": json_values, "data": data | json_values,
              "surfaceOp": st.sampled_from(["append", {"op": "replace", "start": 1, "end": 2}]) | json_values,
              "sourceEventSeqs": st.lists(st.integers(0, 50) | st.lists(st.integers(0, 50), max_size=3), max_size=5)
              | json_values, "ignorable": json_values},
)  # fmt: skip


def _check_invariants(events, cut: int) -> None:
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)
    assert all(s >= cut for s in seqs)
    for e in events:
        if e.kind in (EventKind.CONTEXT, EventKind.REASONING, EventKind.COMPACTION):
            assert e.text == ""


@SETTINGS
@given(lines=st.lists(st.binary(max_size=200), max_size=30), version=st.integers(0, 7),
       seed=st.none() | st.integers(0, 50), seeded=st.none() | st.booleans())  # fmt: skip
def test_record_parser_survives_arbitrary_bytes(lines, version, seed, seeded):
    warn = Warnings("fuzz.jsonl")
    body = parse_body(enumerate(lines, start=2), version=version, seed_length=seed, is_seeded=seeded, warn=warn)
    _check_invariants(body.events, body.inherited_cut)
    assert body.event_count <= body.last_seq + 1
    assert all(w.startswith("fuzz.jsonl") for w in warn.result())


@SETTINGS
@given(records=st.lists(record, max_size=25), version=st.integers(0, 6), seeded=st.none() | st.booleans())
def test_record_parser_survives_hostile_json(records, version, seeded):
    lines = [json.dumps(r).encode() for r in records]
    warn = Warnings("fuzz.jsonl")
    body = parse_body(enumerate(lines, start=2), version=version, seed_length=None, is_seeded=seeded, warn=warn)
    _check_invariants(body.events, body.inherited_cut)
    assert all(isinstance(t["turn"], int) for t in body.turns)
    assert len(warn.result()) <= 51  # capped, with one summary line


def _load_bytes(raw: bytes, name: str) -> Session | None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(raw)
        ref = SessionRef(id="s", source="dsh", path=path, size=len(raw), mtime_ns=0)
        try:
            return dsh.load(ref)
        except SessionReadError as exc:
            assert exc.path == str(path) and exc.reason
            return None


@SETTINGS
@given(body=st.lists(st.binary(max_size=120) | record.map(lambda r: json.dumps(r).encode()), max_size=20),
       prefix=st.sampled_from([HEADER + b"\n", b""]), tail=st.binary(max_size=30))  # fmt: skip
def test_load_plain_file_only_raises_session_read_error(body, prefix, tail):
    raw = prefix + b"\n".join(body) + tail
    session = _load_bytes(raw, "session.v4.jsonl")
    if session is not None:
        _check_invariants(session.events, session.inherited_cut)


@SETTINGS
@given(body=st.lists(record.map(lambda r: json.dumps(r).encode()), max_size=12), cut=st.integers(0, 400),
       noise=st.binary(max_size=40))  # fmt: skip
def test_load_zstd_file_only_raises_session_read_error(body, cut, noise):
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    frames = cctx.compress(HEADER + b"\n") + b"".join(cctx.compress(line + b"\n") for line in body)
    for raw in (frames[: max(len(frames) - cut, 0)], frames + noise, noise):
        session = _load_bytes(raw, "session.v4.jsonl.zstd")
        if session is not None:
            _check_invariants(session.events, session.inherited_cut)


names = st.sampled_from(["session.jsonl", "session.v4.jsonl", "session.v12.jsonl.zstd", "session.v5.jsonl.bak",
                         "session", "~002E", "a~", "~ZZZZ", "~D83D", "x"]) | st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"), min_size=1, max_size=12
).filter(lambda n: n not in (".", ".."))  # fmt: skip
tree = st.lists(
    st.tuples(st.lists(names, min_size=1, max_size=3), st.sampled_from(["file", "dir", "symlink", "loop"])),
    max_size=25,
)


@SETTINGS
@given(entries=tree)
def test_discover_never_crashes_on_random_trees(entries):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "sessions"
        root.mkdir()
        for parts, kind in entries:
            path = root.joinpath(*parts)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if kind == "file":
                    path.write_bytes(b"x")
                elif kind == "dir":
                    path.mkdir(exist_ok=True)
                elif kind == "symlink":
                    os.symlink(Path(d) / "nowhere", path)
                else:
                    os.symlink(path, path)  # self-loop
            except OSError:
                continue  # the tree generator asked for something impossible (e.g. file as parent)
        refs = dsh.discover(root)
        assert len({r.path for r in refs}) == len(refs)
        for ref in refs:
            assert dsh.GENERATION_RE.match(ref.path.name)
            assert ref.path.parent.parent.parent == root and ref.path.is_file()
            assert ref.size == ref.path.stat().st_size


def test_a_number_too_large_for_a_float_is_no_number():
    """A record's `time` of 400 digits made `math.isfinite` raise OverflowError, which `load` let
    through (it turns only TypeError/ValueError… into SessionReadError): one such log ended a
    whole `replay` in a traceback. Such a number is no number: the session reads."""
    big = 10**400
    records = [
        {"type": "user/message", "seq": 1, "time": big, "data": {"message": {"role": "user", "content": "hi"}}},
        {"type": "text-chunks", "seq0": 2, "time0": -big, "data": {"texts": ["a", "b"], "dt": [big, 1]}},
    ]
    raw = HEADER + b"\n" + b"\n".join(json.dumps(r).encode() for r in records) + b"\n"
    session = _load_bytes(raw, "session.v4.jsonl")
    assert session is not None and session.meta["event_count"] == 3
