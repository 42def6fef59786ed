"""DSH session log body, pass 2: records -> transcript `Event`s (what a transcript may show), and
`parse_body`, which runs both passes. Separate from dsh_records.py (pass 1: lines -> records,
counts, the cut) because what a transcript may show is a rule set of its own.

Rules (reference/dsh-session-format.md sections 5-7, fixtures/MANIFEST.md):
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

from collections.abc import Iterable
from typing import Any

from dsh_memory.models import EventKind
from dsh_memory.readers._jsonl import Events, as_dict, as_int, as_list, as_str, count_images, parse_json_maybe, text_of
from dsh_memory.readers.dsh_records import (
    KNOWN_BLOCK_TYPES,
    Body,
    Record,
    Warnings,
    collect_records,
    expand_seq_ranges,
    find_cut,
    is_append,
    is_replace,
    ms_to_datetime,
)

COMPACT_SOURCE_KINDS = frozenset({"compact", "compact-checkpoint", "plugin:compact"})


def _text_of(blocks: list) -> str:
    return text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])


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
            self.title = as_str(d.get("title")) or self.title
            return
        if t == "turn/start":
            self.turn = as_int(d.get("turn"))
        if r.seq < self.cut:
            return
        if t == "turn/start" and self.turn is not None:
            self.turns.setdefault(self.turn, None)
        elif t == "turn/end":
            self.turn_end(r)
        elif t == "user/message":
            self.user_message(r)
        elif t == "assistant/message":
            self.assistant_message(r)
        elif t == "tool/result":
            self.tool_result(r)
        elif t == "compaction/start" and (cid := as_str(d.get("compactionId"))):
            self.compaction_turn[cid] = d.get("turn")
            self.compactions.setdefault(cid, {"compaction_id": cid})["compaction_start_seq"] = r.seq
        elif t == "compaction/summary":
            self._compaction(r, as_str(d.get("compactionId")), replace=False)

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
            self._emit(r, EventKind.HUMAN, text=_text_of(blocks), images=count_images(blocks))
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
        self._emit(r, EventKind.TOOL_RESULT, text=_text_of(blocks), images=count_images(blocks),
                   tool_call_id=call_id, tool_name=self.call_names.get(call_id or ""), is_error=is_error)  # fmt: skip

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
