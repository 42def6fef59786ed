"""DSH session log body: body lines -> logical event records, counts and the inherited cut (pass
1), then records -> transcript `Event`s (pass 2, `parse_body`).

`dsh.py` finds files, decodes bytes and validates the header; this module parses body lines and
maps the records onto the one `Session` event model. Nothing here raises on bad input: a record
that cannot be used is skipped with a warning naming the file and line.

Pass 1:
- v0/v1 packed rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`, with `seq0`) expand to
  N logical `assistant/chunk` events; they only matter for counting (transcripts use messages).
- Unknown event types are counted as logical events but skipped (silently if `ignorable: true`).
- The inherited cut is `seedLength` in v0/v1, else one past the last `session/end-seed
  {inherited: true}`; an untagged `session/end-seed {}` is only a resume boundary.

Pass 2 (reference/dsh-session-format.md sections 5-7, fixtures/MANIFEST.md):
- Only append-origin surface events are content; replace nodes are compaction/prune output.
  A compaction becomes one COMPACTION marker.
- Only `user/message` with `source.kind == "user"` is a human prompt; other user-role sources are
  injected context: a CONTEXT marker labelled with the source kind, text dropped.
- Reasoning becomes at most one REASONING marker per message, text dropped. System and developer
  messages, `assistant/attempt`, `agent/inbox/spliced` and `session/title-llm-request` are not chat.
- Tool results pair with their call through the call id. Events before the inherited cut are never
  emitted. A turn that ends other than `completed` gets a STATUS event labelled with the reason kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsh_memory.models import Event, EventKind
from dsh_memory.readers._jsonl import Events, as_dict, as_int, as_list, as_num, as_str, parse_json_maybe

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


COMPACT_SOURCE_KINDS = frozenset({"compact", "compact-checkpoint", "plugin:compact"})


def _text_of(blocks: list) -> str:
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(b.get("text"), str))  # fmt: skip


def _count_images(blocks: list) -> int:
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "image")


def _message(data: dict) -> dict:
    """`user/message` data is the bare message; other surface events wrap it in `message`."""
    inner = data.get("message")
    return inner if isinstance(inner, dict) and "content" not in data else data


def _source_kind(msg: dict) -> str:
    return as_str(as_dict(msg.get("source")).get("kind")) or "unknown"


class _Mapper(Events):
    def __init__(self, records: list[Record], cut: int, warn: Warnings):
        super().__init__()
        self.records = records
        self.cut = cut
        self.warn = warn
        self.turns: dict[int, str | None] = {}
        self.compaction_turn: dict[str, Any] = {}
        self.compactions: dict[str, dict] = {}
        self.title: str | None = None

    def run(self) -> None:
        for r in self.records:  # tool names first, so a result can always be paired
            if r.type == "tool/call":
                cid, name = as_str(r.data.get("callId")), as_str(r.data.get("name"))
                if cid and name:
                    self.call_names.setdefault(cid, name)
            elif r.type == "assistant/message":
                for b in as_list(as_dict(r.data.get("message")).get("content")):
                    if isinstance(b, dict) and b.get("type") == "tool-call":
                        cid, name = as_str(b.get("id")), as_str(b.get("name"))
                        if cid and name:
                            self.call_names.setdefault(cid, name)
        for r in self.records:
            try:
                self._one(r)
            except Exception as exc:  # noqa: BLE001 - a tolerant reader never dies on one record
                self.warn.add(f"could not interpret {r.type} (seq {r.seq}): {type(exc).__name__}", r.line)

    def _emit(self, r: Record, kind: EventKind, **kw: Any) -> None:
        turn = as_int(r.data.get("turn"))
        self.add(r.seq, kind, ms_to_datetime(r.time), turn=self.turn if turn is None else turn, **kw)

    def _one(self, r: Record) -> None:
        t, d = r.type, r.data
        if t == "session/title":  # titles apply even when inherited (latest wins)
            title = as_str(d.get("title"))
            if title:
                self.title = title
            return
        if t == "turn/start":
            self.turn = as_int(d.get("turn"))
        if r.seq < self.cut:
            return
        handler = _HANDLERS.get(t)
        if handler is not None:
            handler(self, r)

    def turn_start(self, r: Record) -> None:
        if self.turn is not None:
            self.turns.setdefault(self.turn, None)

    def turn_end(self, r: Record) -> None:
        turn = as_int(r.data.get("turn"))
        if turn is None:
            turn = self.turn
        reason = r.data.get("reason")
        kind = as_str(reason.get("kind") if isinstance(reason, dict) else reason) or "unknown"
        if turn is not None:
            self.turns[turn] = kind
        if kind == "completed":
            return
        text = ""
        if isinstance(reason, dict):
            err = as_dict(reason.get("error"))
            if err:
                text = " ".join(x for x in (as_str(err.get("code")), as_str(err.get("message"))) if x)[:500]
            elif isinstance(reason.get("reason"), dict):
                text = f"by {as_str(reason['reason'].get('kind')) or 'unknown'}"
        self._emit(r, EventKind.STATUS, label=kind, text=text)

    def user_message(self, r: Record) -> None:
        msg = _message(r.data)
        if is_replace(r.surface_op):
            if _source_kind(msg) in COMPACT_SOURCE_KINDS or as_dict(msg.get("source")).get("plugin") == "compact":
                self._compaction(r, as_str(as_dict(msg.get("source")).get("compactionId")), replace=True)
            return
        if not is_append(r.surface_op):
            return
        blocks = as_list(msg.get("content"))
        self._check_blocks(blocks, r)
        kind = _source_kind(msg)
        if kind == "user":
            self._emit(r, EventKind.HUMAN, text=_text_of(blocks), images=_count_images(blocks))
        else:
            self._emit(r, EventKind.CONTEXT, label=kind)

    def assistant_message(self, r: Record) -> None:
        if not is_append(r.surface_op):
            return
        blocks = as_list(as_dict(r.data.get("message")).get("content"))
        self._check_blocks(blocks, r)
        interrupted = r.data.get("interrupted") is True
        reasoning_done = False
        texts: list[str] = []

        def flush() -> None:
            if texts:
                self._emit(r, EventKind.ASSISTANT, text="\n".join(texts),
                           label="interrupted" if interrupted else None)  # fmt: skip
                texts.clear()

        for b in blocks:
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif bt == "reasoning" and not reasoning_done:
                flush()
                reasoning_done = True
                self._emit(r, EventKind.REASONING)
            elif bt == "tool-call":
                flush()
                self._emit(r, EventKind.TOOL_CALL, tool_name=as_str(b.get("name")),
                           tool_call_id=as_str(b.get("id")), arguments=parse_json_maybe(b.get("arguments")))  # fmt: skip
        flush()

    def tool_result(self, r: Record) -> None:
        if not is_append(r.surface_op):
            return
        msg = as_dict(r.data.get("message"))
        blocks = as_list(msg.get("content"))
        call_id = as_str(msg.get("toolCallId")) or as_str(as_dict(msg.get("source")).get("callId"))
        is_error = msg.get("isError") is True
        if msg.get("role") != "tool":  # v0-v3: the payload sits in a `tool-result` block
            inner = next((b for b in blocks if isinstance(b, dict) and b.get("type") == "tool-result"), None)
            if inner is not None:
                call_id = as_str(inner.get("toolCallId")) or call_id
                is_error = is_error or inner.get("isError") is True
                blocks = as_list(inner.get("content"))
        self._check_blocks(blocks, r)
        if r.data.get("error") is not None:
            is_error = True
        self._emit(r, EventKind.TOOL_RESULT, text=_text_of(blocks), images=_count_images(blocks),
                   tool_call_id=call_id, tool_name=self.call_names.get(call_id or ""), is_error=is_error)  # fmt: skip

    def compaction_start(self, r: Record) -> None:
        cid = as_str(r.data.get("compactionId"))
        if cid:
            self.compaction_turn[cid] = r.data.get("turn")
            self.compactions.setdefault(cid, {"compaction_id": cid})["compaction_start_seq"] = r.seq

    def compaction_summary(self, r: Record) -> None:
        self._compaction(r, as_str(r.data.get("compactionId")), replace=False)

    def _compaction(self, r: Record, cid: str | None, replace: bool) -> None:
        key = cid or f"seq-{r.seq}"
        info = self.compactions.setdefault(key, {"compaction_id": cid})
        if replace:
            info["replace_seq"] = r.seq
            skip = {info.get("compaction_start_seq"), info.get("summary_seq")}
            info["shadowed_seqs"] = [s for s in expand_seq_ranges(r.source_seqs) if s not in skip]
        else:
            info["summary_seq"] = r.seq
        if info.get("marked"):
            return
        info["marked"] = True
        label = "compaction"
        if cid in self.compaction_turn:
            label = "manual" if self.compaction_turn[cid] is None else "auto"
        self._emit(r, EventKind.COMPACTION, label=label)

    def _check_blocks(self, blocks: list, r: Record) -> None:
        for b in blocks:
            bt = b.get("type") if isinstance(b, dict) else None
            if bt not in KNOWN_BLOCK_TYPES:
                self.warn.add(f"unknown content block type {bt!r} in {r.type} (seq {r.seq}), skipped", r.line)


_HANDLERS = {
    "turn/start": _Mapper.turn_start,
    "turn/end": _Mapper.turn_end,
    "user/message": _Mapper.user_message,
    "assistant/message": _Mapper.assistant_message,
    "tool/result": _Mapper.tool_result,
    "compaction/start": _Mapper.compaction_start,
    "compaction/summary": _Mapper.compaction_summary,
}


def parse_body(lines: Iterable[tuple[int, bytes]], *, version: int, seed_length: int | None,
               is_seeded: bool | None, warn: Warnings) -> Body:  # fmt: skip
    """Body lines (line number, raw bytes) -> counts, cut, title, turns and transcript events."""
    body = Body()
    records = collect_records(lines, warn, body)
    body.inherited_cut = find_cut(records, version, seed_length, is_seeded, body.last_seq, warn)
    mapper = _Mapper(records, body.inherited_cut, warn)
    mapper.run()
    body.events = mapper.events
    body.title = mapper.title
    body.turns = [{"turn": t, "end": end} for t, end in mapper.turns.items()]
    body.compactions = [{k: v for k, v in c.items() if k != "marked"} for c in mapper.compactions.values()]
    return body
