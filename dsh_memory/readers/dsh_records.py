"""DSH session log body: storage records -> logical events -> transcript `Event`s.

`dsh.py` finds files, decodes bytes and validates the header; this module turns the body lines
into the one `Session` event model. It never raises on bad input: a record it cannot use is
skipped with a warning naming the file and line (see `Warnings`).

Rules (reference/dsh-session-format.md sections 4-7):
- v0/v1 packed rows (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`, with `seq0`) expand to
  N logical `assistant/chunk` events; they only matter for counting (transcripts use messages).
- Only append-origin surface events are content; replace nodes are compaction/prune output.
- Only `user/message` with `source.kind == "user"` is a human prompt; other user-role sources are
  injected context (marker only, text dropped). Reasoning is a marker only, text dropped.
- Events before the inherited cut (fork seed) are never emitted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

from dsh_memory.models import Event, EventKind

MAX_WARNINGS = 50

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
COMPACT_SOURCE_KINDS = frozenset({"compact", "compact-checkpoint", "plugin:compact"})


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
    ignorable: bool


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


# --- small defensive accessors: the body is untrusted JSON ------------------------------------


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list:
    return x if isinstance(x, list) else []


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _num(x: Any) -> float | None:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return x
    return None


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def ms_to_datetime(ms: float | None) -> datetime | None:
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def expand_seq_ranges(value: Any) -> list[int]:
    """Decode `sourceEventSeqs`: ints stay, `[start, end]` pairs expand inclusively."""
    out: list[int] = []
    for item in _list(value):
        if _int(item) is not None:
            out.append(item)
        elif isinstance(item, list) and len(item) == 2:
            lo, hi = _int(item[0]), _int(item[1])
            if lo is not None and hi is not None and 0 <= hi - lo <= 1_000_000:
                out.extend(range(lo, hi + 1))
    return out


def _is_append(op: Any) -> bool:
    return op is None or op == "append"


def _is_replace(op: Any) -> bool:
    return isinstance(op, dict) and op.get("op") == "replace"


# --- pass 1: lines -> records -------------------------------------------------------------------


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
        warn.add(f"not JSON, skipped: {text[:80]!r}", line)
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
            seq0 = _int(obj.get("seq0"))
            data = _dict(obj.get("data"))
            members = _list(data.get("args") if rtype == "tool-call-chunks" else data.get("texts"))
            if seq0 is None or seq0 < 0:
                warn.add(f"{rtype} row without a valid seq0, skipped", line)
                continue
            new = [s for s in range(seq0, seq0 + len(members)) if s not in seen]
            if len(new) != len(members):
                warn.add(f"{rtype} row repeats seqs already seen", line)
            seen.update(new)
            t0 = _num(obj.get("time0"))
            if t0 is not None:
                dts = [d for d in (_num(x) for x in _list(data.get("dt"))) if d is not None]
                t_last = t0 + sum(dts[: max(len(members) - 1, 0)])
                max_time = t_last if max_time is None else max(max_time, t_last)
            continue
        seq = _int(obj.get("seq"))
        if seq is None or seq < 0:
            warn.add(f"{rtype} record without a valid seq, skipped", line)
            continue
        if seq in seen:
            warn.add(f"duplicate seq {seq} ({rtype}), skipped", line)
            continue
        seen.add(seq)
        t = _num(obj.get("time"))
        if t is not None:
            max_time = t if max_time is None else max(max_time, t)
        ignorable = obj.get("ignorable") is True
        if rtype not in KNOWN_EVENT_TYPES and not rtype.startswith(KNOWN_EVENT_PREFIXES):
            if not ignorable:
                warn.add(f"unknown event type {rtype!r} (seq {seq}), skipped", line)
            continue  # counted as a logical event, never content
        records[seq] = Record(
            seq=seq,
            line=line,
            type=rtype,
            time=t,
            data=_dict(obj.get("data")),
            surface_op=obj.get("surfaceOp"),
            source_seqs=obj.get("sourceEventSeqs"),
            ignorable=ignorable,
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
    cut = None
    for r in records:
        if r.type == "session/end-seed" and r.data.get("inherited") is True:
            cut = r.seq + 1
    if cut is not None:
        return cut
    if seed_length:
        return seed_length
    if is_seeded is True:
        warn.add("header says isSeeded but no session/end-seed {inherited:true} was found; "
                 "treating every event as inherited")  # fmt: skip
        return last_seq + 1
    return 0


# --- pass 2: records -> transcript events -------------------------------------------------------


def _text_of(blocks: list) -> str:
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(b.get("text"), str))  # fmt: skip


def _count_images(blocks: list) -> int:
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "image")


def _message(data: dict) -> dict:
    """`user/message` data is the bare message; other surface events wrap it in `message`."""
    inner = data.get("message")
    if isinstance(inner, dict) and "content" not in data:
        return inner
    return data


def _parse_arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            return raw
        return parsed if isinstance(parsed, (dict, list)) else raw
    return raw


def _source_kind(msg: dict) -> str:
    src = msg.get("source")
    kind = _str(src.get("kind")) if isinstance(src, dict) else None
    return kind or "unknown"


class _Mapper:
    def __init__(self, records: list[Record], cut: int, warn: Warnings):
        self.records = records
        self.cut = cut
        self.warn = warn
        self.events: list[Event] = []
        self.turn: int | None = None
        self.turns: dict[int, str | None] = {}
        self.call_names: dict[str, str] = {}
        self.compaction_turn: dict[str, Any] = {}
        self.compactions: dict[str, dict] = {}
        self.title: str | None = None

    def run(self) -> None:
        for r in self.records:  # tool names first, so a result can always be paired
            if r.type == "tool/call":
                cid, name = _str(r.data.get("callId")), _str(r.data.get("name"))
                if cid and name:
                    self.call_names.setdefault(cid, name)
            elif r.type == "assistant/message":
                for b in _list(_dict(r.data.get("message")).get("content")):
                    if isinstance(b, dict) and b.get("type") == "tool-call":
                        cid, name = _str(b.get("id")), _str(b.get("name"))
                        if cid and name:
                            self.call_names.setdefault(cid, name)
        for r in self.records:
            try:
                self._one(r)
            except Exception as exc:  # noqa: BLE001 - a tolerant reader never dies on one record
                self.warn.add(f"could not interpret {r.type} (seq {r.seq}): {type(exc).__name__}", r.line)

    def _emit(self, r: Record, kind: EventKind, **kw: Any) -> None:
        turn = _int(r.data.get("turn"))
        self.events.append(
            Event(seq=r.seq, kind=kind, turn=turn if turn is not None else self.turn,
                  time=ms_to_datetime(r.time), **kw)  # fmt: skip
        )

    def _one(self, r: Record) -> None:
        t, d = r.type, r.data
        if t == "session/title":  # titles apply even when inherited (latest wins)
            title = _str(d.get("title"))
            if title:
                self.title = title
            return
        if t == "turn/start":
            self.turn = _int(d.get("turn"))
        if r.seq < self.cut:
            return
        handler = _HANDLERS.get(t)
        if handler is not None:
            handler(self, r)

    def turn_start(self, r: Record) -> None:
        if self.turn is not None:
            self.turns.setdefault(self.turn, None)

    def turn_end(self, r: Record) -> None:
        turn = _int(r.data.get("turn"))
        if turn is None:
            turn = self.turn
        reason = r.data.get("reason")
        if isinstance(reason, dict):
            kind = _str(reason.get("kind")) or "unknown"
        else:
            kind = _str(reason) or "unknown"
        if turn is not None:
            self.turns[turn] = kind
        if kind == "completed":
            return
        text = ""
        if isinstance(reason, dict):
            err = _dict(reason.get("error"))
            if err:
                text = " ".join(x for x in (_str(err.get("code")), _str(err.get("message"))) if x)[:500]
            elif isinstance(reason.get("reason"), dict):
                text = f"by {_str(reason['reason'].get('kind')) or 'unknown'}"
        self._emit(r, EventKind.STATUS, label=kind, text=text)

    def user_message(self, r: Record) -> None:
        msg = _message(r.data)
        if _is_replace(r.surface_op):
            if _source_kind(msg) in COMPACT_SOURCE_KINDS or _dict(msg.get("source")).get("plugin") == "compact":
                self._compaction(r, _str(_dict(msg.get("source")).get("compactionId")), replace=True)
            return
        if not _is_append(r.surface_op):
            return
        blocks = _list(msg.get("content"))
        self._check_blocks(blocks, r)
        kind = _source_kind(msg)
        if kind == "user":
            self._emit(r, EventKind.HUMAN, text=_text_of(blocks), images=_count_images(blocks))
        else:
            self._emit(r, EventKind.CONTEXT, label=kind)

    def assistant_message(self, r: Record) -> None:
        if not _is_append(r.surface_op):
            return
        blocks = _list(_dict(r.data.get("message")).get("content"))
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
                self._emit(r, EventKind.TOOL_CALL, tool_name=_str(b.get("name")),
                           tool_call_id=_str(b.get("id")), arguments=_parse_arguments(b.get("arguments")))  # fmt: skip
        flush()

    def tool_result(self, r: Record) -> None:
        if not _is_append(r.surface_op):
            return
        msg = _dict(r.data.get("message"))
        blocks = _list(msg.get("content"))
        call_id = _str(msg.get("toolCallId")) or _str(_dict(msg.get("source")).get("callId"))
        is_error = msg.get("isError") is True
        if msg.get("role") != "tool":  # v0-v3: the payload sits in a `tool-result` block
            inner = next((b for b in blocks if isinstance(b, dict) and b.get("type") == "tool-result"), None)
            if inner is not None:
                call_id = _str(inner.get("toolCallId")) or call_id
                is_error = is_error or inner.get("isError") is True
                blocks = _list(inner.get("content"))
        self._check_blocks(blocks, r)
        if r.data.get("error") is not None:
            is_error = True
        self._emit(r, EventKind.TOOL_RESULT, text=_text_of(blocks), images=_count_images(blocks),
                   tool_call_id=call_id, tool_name=self.call_names.get(call_id or ""), is_error=is_error)  # fmt: skip

    def compaction_start(self, r: Record) -> None:
        cid = _str(r.data.get("compactionId"))
        if cid:
            self.compaction_turn[cid] = r.data.get("turn")
            self.compactions.setdefault(cid, {"compaction_id": cid})["compaction_start_seq"] = r.seq

    def compaction_summary(self, r: Record) -> None:
        self._compaction(r, _str(r.data.get("compactionId")), replace=False)

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
