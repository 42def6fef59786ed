"""DSH session log body, pass 1: body lines -> logical event records, counts and the inherited cut.

`dsh.py` finds files, decodes bytes and validates the header; this module parses body lines and
`dsh_events.py` maps the records onto the one `Session` event model. Nothing here raises on bad
input: a record that cannot be used is skipped with a warning naming the file and line.

- v0/v1 packed rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`, with `seq0`) expand to
  N logical `assistant/chunk` events; they only matter for counting (transcripts use messages).
- Unknown event types are counted as logical events but skipped (silently if `ignorable: true`).
- The inherited cut is `seedLength` in v0/v1, else one past the last `session/end-seed
  {inherited: true}`; an untagged `session/end-seed {}` is only a resume boundary.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsh_memory.models import Event
from dsh_memory.readers._jsonl import as_dict, as_int, as_list, as_num

MAX_WARNINGS = 50
MAX_EXPANDED_SEQS = 1_000_000  # a hostile file must not make us allocate billions of ints

PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
KNOWN_EVENT_TYPES = frozenset(
    {
        "turn/start", "turn/end", "step/start", "step/end",
        "user/message", "assistant/message", "tool/result", "system/message", "developer/message",
        "assistant/chunk", "assistant/attempt", "tool/call", "todo/write",
        "request/header", "request/context", "session/end-seed", "session/title",
        "session/title-llm-request", "agent/inbox/spliced",
        "approval/asked", "approval/decided", "approval/policy", "sandbox/mode",
        "permission/preset", "plan/mode", "command/run", "command/done",
        "compaction/start", "compaction/summary", "compaction/end", "compaction/prune",
        "hook/invoked", "hook/result", "llm/retry", "llm/retry-started",
        "subagent/descriptor", "subagent/catalog",
        "tool/code-dispatch-start", "tool/code-dispatch", "tool/ptc-dispatch-start",
        "tool/ptc-dispatch", "goal/change", "schedule/change", "feedback/record",
        "agent-preset/selected", "model/selection", "web/deepseek-search-llm-request",
        "session-log-deepseek/delivery-accepted", "deliverables/presented", "image/offload",
        "workspace/changes",
    }
)  # fmt: skip
KNOWN_EVENT_PREFIXES = ("tool-workflow/", "team/")
KNOWN_BLOCK_TYPES = frozenset(
    {"text", "reasoning", "image", "tool-call", "tool-result", "file", "tool-addition", "tool-removal"}
)


class Warnings:
    """Collects non-fatal problems, each prefixed with the file (and line when known)."""

    def __init__(self, label: str):
        self.label = label
        self.items: list[str] = []
        self.dropped = 0

    def add(self, problem: str, line: int | None = None) -> None:
        if len(self.items) >= MAX_WARNINGS:
            self.dropped += 1
            return
        where = f"{self.label}:{line}" if line is not None else self.label
        self.items.append(f"{where}: {problem}")

    def result(self) -> list[str]:
        if self.dropped:
            return [*self.items, f"{self.label}: {self.dropped} more warnings not shown"]
        return list(self.items)


@dataclass(slots=True)
class Record:
    """One logical (non-packed) event as read from a body line."""

    seq: int
    line: int
    type: str
    time: float | None
    data: dict
    surface_op: Any
    source_seqs: Any


@dataclass
class Body:
    events: list[Event] = field(default_factory=list)
    event_count: int = 0
    last_seq: int = -1
    max_time_ms: float | None = None
    inherited_cut: int = 0
    title: str | None = None
    turns: list[dict] = field(default_factory=list)
    compactions: list[dict] = field(default_factory=list)


def ms_to_datetime(ms: float | None) -> datetime | None:
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def expand_seq_ranges(value: Any) -> list[int]:
    """Decode `sourceEventSeqs`: ints stay, `[start, end]` pairs expand inclusively."""
    out: list[int] = []
    for item in as_list(value):
        if len(out) > MAX_EXPANDED_SEQS:
            break
        if as_int(item) is not None:
            out.append(item)
        elif isinstance(item, list) and len(item) == 2:
            lo, hi = as_int(item[0]), as_int(item[1])
            if lo is not None and hi is not None and 0 <= hi - lo <= MAX_EXPANDED_SEQS:
                out.extend(range(lo, hi + 1))
    return out


def is_append(op: Any) -> bool:
    return op is None or op == "append"


def is_replace(op: Any) -> bool:
    return isinstance(op, dict) and op.get("op") == "replace"


def decode_line(raw: bytes, line: int, warn: Warnings) -> dict | None:
    """One body line -> JSON object, or None (with a warning) when unusable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        warn.add("invalid UTF-8 (bad bytes replaced with U+FFFD)", line)
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        # never echo the line: it may hold secrets, and warnings end up in logs
        warn.add(f"not JSON ({len(raw)} bytes), skipped", line)
        return None
    if not isinstance(obj, dict):
        warn.add(f"not a JSON object ({type(obj).__name__}), skipped", line)
        return None
    return obj


def collect_records(lines: Iterable[tuple[int, bytes]], warn: Warnings, body: Body) -> list[Record]:
    """Parse body lines; count logical events (packed rows count N); return records by seq."""
    records: dict[int, Record] = {}
    seen: set[int] = set()
    max_time: float | None = None
    for line, raw in lines:
        obj = decode_line(raw, line, warn)
        if obj is None:
            continue
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            warn.add("record without a string 'type', skipped", line)
            continue
        if rtype in PACKED_ROW_TYPES and "seq0" in obj:
            seq0 = as_int(obj.get("seq0"))
            data = as_dict(obj.get("data"))
            members = as_list(data.get("args") if rtype == "tool-call-chunks" else data.get("texts"))
            if seq0 is None or seq0 < 0:
                warn.add(f"{rtype} row without a valid seq0, skipped", line)
                continue
            new = [s for s in range(seq0, seq0 + len(members)) if s not in seen]
            if len(new) != len(members):
                warn.add(f"{rtype} row repeats seqs already seen", line)
            seen.update(new)
            t0 = as_num(obj.get("time0"))
            if t0 is not None:
                dts = [d for d in (as_num(x) for x in as_list(data.get("dt"))) if d is not None]
                t_last = t0 + sum(dts[: max(len(members) - 1, 0)])
                max_time = t_last if max_time is None else max(max_time, t_last)
            continue
        seq = as_int(obj.get("seq"))
        if seq is None or seq < 0:
            warn.add(f"{rtype} record without a valid seq, skipped", line)
            continue
        if seq in seen:
            warn.add(f"duplicate seq {seq} ({rtype}), skipped", line)
            continue
        seen.add(seq)
        t = as_num(obj.get("time"))
        if t is not None:
            max_time = t if max_time is None else max(max_time, t)
        if rtype not in KNOWN_EVENT_TYPES and not rtype.startswith(KNOWN_EVENT_PREFIXES):
            if obj.get("ignorable") is not True:
                warn.add(f"unknown event type {rtype!r} (seq {seq}), skipped", line)
            continue  # counted as a logical event, never content
        records[seq] = Record(
            seq=seq,
            line=line,
            type=rtype,
            time=t,
            data=as_dict(obj.get("data")),
            surface_op=obj.get("surfaceOp"),
            source_seqs=obj.get("sourceEventSeqs"),
        )
    body.event_count = len(seen)
    body.last_seq = max(seen) if seen else -1
    body.max_time_ms = max_time
    if seen and len(seen) != body.last_seq + 1:
        warn.add(f"seqs are not dense: {body.last_seq + 1 - len(seen)} missing between 0 and {body.last_seq}")
    return [records[s] for s in sorted(records)]


def find_cut(records: list[Record], version: int, seed_length: int | None, is_seeded: bool | None,
             last_seq: int, warn: Warnings) -> int:  # fmt: skip
    """First seq that belongs to this session (events before it were copied from the parent)."""
    if version <= 1:
        return seed_length or 0
    seeds = [r.seq for r in records if r.type == "session/end-seed" and r.data.get("inherited") is True]
    if seeds:
        return seeds[-1] + 1  # records are in seq order
    if seed_length:
        return seed_length
    if is_seeded is True:
        warn.add("header says isSeeded but no session/end-seed {inherited:true} was found; "
                 "treating every event as inherited")  # fmt: skip
        return last_seq + 1
    return 0
