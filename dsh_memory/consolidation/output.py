"""Turn what the model answered into a `ConsolidationOutput`, leniently but never by guessing.

Sources, in order: the `memory_write` tool call arguments; a JSON object in the text answer;
clearly delimited file blocks in the text (`=== MEMORY.md ===` … / `BEGIN MEMORY.md` … `END
MEMORY.md`). A cut-off answer (finish_reason "length") is usable only when both files arrived
complete: the field being written when the output stopped is dropped (the last, incomplete item
of an optional list), and a cut inside `memory_md` / `memory_summary_md` makes it unusable.
Skills stay raw dicts here; `skills.py` validates each one and `apply.py` skips the invalid
ones. `stored` is what any text of the answer becomes before it is written or shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from dsh_memory.errors import LLMOutputError
from dsh_memory.llm.parse import extract_json_object, loads_truncated
from dsh_memory.readpath._common import CONTROL
from dsh_memory.transcript.private import drop_private

REQUIRED = ("memory_md", "memory_summary_md")
LISTS = ("skills", "remove_skills", "retire_summaries")
TOOL_NAME = "memory_write"
MAX_LIST_ITEMS = 200
MAX_FILE_CHARS = 1_000_000  # more than the longest answer max_tokens (131,072 at most) allows


@dataclass
class ModelReply:
    """Plain, serializable record of one model answer (complete, cut off, or unparseable)."""

    text: str = ""
    arguments: dict | None = None  # parsed tool arguments, when the client could parse them
    raw_arguments: str = ""  # the tool arguments as received (possibly cut off)
    finish_reason: str | None = None
    truncated: bool = False
    model: str = ""
    provider: str = ""
    reasoning_effort: str = ""
    notes: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    error: str = ""  # set when the client raised LLMOutputError (the text is still kept)

    @classmethod
    def from_completion(cls, c: Any, *, truncated: bool = False, error: str = "") -> ModelReply:
        calls = getattr(c, "tool_calls", None) or []
        call = next((t for t in calls if t.name == TOOL_NAME), calls[0] if calls else None)
        return cls(
            text=c.text or "",
            arguments=dict(call.arguments) if call and call.arguments else None,
            raw_arguments=(call.raw_arguments if call else "") or "",
            finish_reason=c.finish_reason,
            truncated=truncated,
            model=c.model,
            provider=c.provider,
            reasoning_effort=c.reasoning_effort,
            notes=list(c.notes),
            input_tokens=c.usage.input_tokens,
            output_tokens=c.usage.output_tokens,
            error=error,
        )

    def shown_output(self) -> str:
        """What the model produced, for run history (the caller redacts and truncates)."""
        args = self.raw_arguments or (
            json.dumps(self.arguments, ensure_ascii=False, indent=1) if self.arguments is not None else ""
        )
        return "\n\n".join(part for part in (args, self.text) if part)


@dataclass
class ConsolidationOutput:
    memory_md: str
    memory_summary_md: str
    skills: list[Any] = field(default_factory=list)  # raw items, validated in apply.py
    remove_skills: list[Any] = field(default_factory=list)
    retire_summaries: list[Any] = field(default_factory=list)
    source: str = "tool"  # tool | text-json | blocks (+ "-partial" when cut off)
    dropped: list[str] = field(default_factory=list)  # what a cut-off answer lost
    archive: list[Any] = field(default_factory=list)  # stale.Flagged items left out on purpose (the merge's cap)


_JSON_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)("?)|[{}\[\]:,]', re.S)  # a string (maybe cut off) or a delimiter
_ESCAPED = re.compile(r"\\(.)", re.S)


def cut_key(raw: str) -> tuple[bool, str | None]:
    """(complete, key) for a JSON object text: complete=False when it stops before its closing
    brace; key = the top-level key whose value was being written at the cut (None when the cut
    fell between members)."""
    depth = 0
    state = "key"  # at depth 1: expecting a key or a value
    pending = key = None
    done = True
    started = False
    for m in _JSON_TOKEN.finditer(raw):
        c = m.group(0)
        if c[0] == '"':
            if depth == 1 and state == "value":
                done = bool(m.group(2))  # a value string is written once it is closed
            elif depth == 1 and m.group(2):
                pending = _ESCAPED.sub(r"\1", m.group(1))
        elif c in "{[":
            depth += 1
            started = True
            if depth == 2 and state == "value":
                done = False
        elif c in "}]":
            depth -= 1
            if depth == 0 and started:
                return True, None
            if depth == 1 and state == "value":
                done = True
        elif depth == 1:
            if c == ":":
                key, state, done = pending, "value", False
            else:  # ","
                state, done = "key", True
    return False, (key if state == "value" and not done else None)


def _as_list(v: Any) -> list:
    if v is None:
        return []
    if isinstance(v, list):
        return v[:MAX_LIST_ITEMS]
    return [v]


def from_arguments(
    args: dict, *, source: str, cut: str | None = None, mode: str = "INCREMENTAL"
) -> ConsolidationOutput:
    """Validate the top-level shape. `cut` = the key whose value was cut off (truncated output)."""
    if isinstance(args.get("arguments"), dict) and args.get("name") == TOOL_NAME:
        args = args["arguments"]
    if cut in REQUIRED:
        raise LLMOutputError(f"output cut off inside {cut}")
    missing = [k for k in REQUIRED if not isinstance(args.get(k), str)]
    if missing:
        raise LLMOutputError(f"memory_write is missing {', '.join(missing)}")
    for k in REQUIRED:  # a broken endpoint: cleaning it line by line would hold the lock for hours
        if len(args[k]) > MAX_FILE_CHARS:
            raise LLMOutputError(f"{k} is {len(args[k]):,} characters, more than an answer within max_tokens holds")
    out = ConsolidationOutput(
        memory_md=args["memory_md"],
        memory_summary_md=args["memory_summary_md"],
        skills=_as_list(args.get("skills")),
        remove_skills=_as_list(args.get("remove_skills")),
        retire_summaries=_as_list(args.get("retire_summaries")),
        source=source,
    )
    if cut in LISTS:
        items = getattr(out, cut)
        if items:
            items.pop()  # the item being written when the output stopped is incomplete
            out.dropped.append(f"last item of {cut} (cut off)")
    if mode == "INIT" and not (out.memory_md.strip() and out.memory_summary_md.strip()):
        raise LLMOutputError("INIT needs both MEMORY.md and memory_summary.md, got an empty file")
    return out


_BLOCK_HEADER = re.compile(
    r"^[ \t]*(?:={3,}|-{3,}|<{3})[ \t]*(?:(?:BEGIN|FILE:?)[ \t]+)?`?(MEMORY\.md|memory_summary\.md)`?"
    r"[ \t]*(?:={3,}|-{3,}|>{3})[ \t]*$"
    r"|^[ \t]*BEGIN[ \t]+`?(MEMORY\.md|memory_summary\.md)`?[ \t]*$",
    re.M,
)
_BLOCK_END = re.compile(
    r"^[ \t]*(?:(?:={3,}|-{3,}|<{3})[ \t]*)?END(?:[ \t]+`?(?:MEMORY\.md|memory_summary\.md)`?)?"
    r"[ \t]*(?:={3,}|-{3,}|>{3})?[ \t]*$",
    re.M,
)
_WRAP_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n```\s*\Z", re.S)


def parse_blocks(text: str) -> tuple[dict[str, str], str | None]:
    """({'memory_md': …, 'memory_summary_md': …}, name of the last block when it had no end)."""
    found: dict[str, str] = {}
    heads = list(_BLOCK_HEADER.finditer(text or ""))
    open_last: str | None = None
    for i, m in enumerate(heads):
        name = m.group(1) or m.group(2)
        key = "memory_md" if name == "MEMORY.md" else "memory_summary_md"
        start = m.end() + 1
        stop = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        end = _BLOCK_END.search(text, start, stop)
        body = text[start : end.start() if end else stop]
        if end is None and i == len(heads) - 1:
            open_last = key
        w = _WRAP_FENCE.match(body)
        found.setdefault(key, (w.group(1) if w else body).strip("\n") + "\n")
    return found, open_last


def _partial(text: str) -> Any:
    try:
        return loads_truncated(text)
    except ValueError:
        return None


def parse_reply(reply: ModelReply, mode: str = "INCREMENTAL") -> ConsolidationOutput:
    """Best usable output from one reply, or LLMOutputError saying why there is none."""
    suffix = "-partial" if reply.truncated else ""
    errors: list[str] = []

    def attempt(what: str, args: dict, source: str, cut: str | None = None) -> ConsolidationOutput | None:
        try:
            return from_arguments(args, source=source + suffix, cut=cut, mode=mode)
        except LLMOutputError as exc:
            errors.append(f"{what}: {exc}")
            return None

    # 1. Tool arguments.
    raw = reply.raw_arguments.strip()
    if raw or reply.arguments:
        args = reply.arguments
        if raw and not (isinstance(args, dict) and args):
            args = _partial(reply.raw_arguments)
        if not (isinstance(args, dict) and args):
            errors.append("tool arguments: not parseable")
        elif out := attempt("tool arguments", args, "tool", cut_key(raw)[1] if raw and reply.truncated else None):
            return out
    text = reply.text or ""
    if text.strip():
        # 2. A JSON object in the text.
        obj = extract_json_object(text, accept=lambda o: any(k in o for k in REQUIRED) or "arguments" in o)
        cut = None
        if obj is None and reply.truncated and "{" in text:
            start = text.find("{")
            cut = cut_key(text[start:])[1]
            obj = _partial(text[start:].rstrip().rstrip("`"))
        if isinstance(obj, dict) and (out := attempt("text JSON", obj, "text-json", cut)):
            return out
        # 3. Delimited blocks.
        blocks, open_last = parse_blocks(text)
        if blocks and reply.truncated and open_last:
            errors.append(f"text blocks: output cut off inside {open_last}")
        elif blocks and (out := attempt("text blocks", blocks, "blocks")):
            return out
    if not errors:  # nothing here to parse: the client's reason (unparseable tool arguments…), else empty
        errors.append(reply.error or "empty answer")
    what = f"cut off ({reply.finish_reason}) and unusable" if reply.truncated else "unusable"
    raise LLMOutputError(f"consolidation output {what}: " + "; ".join(errors))


def stored(text: str) -> str:
    """`text` as Phase 2 stores it: without control characters (a NUL makes grep call the file
    binary, an escape sequence, C1's CSI U+009B included, drives the terminal it is printed on;
    tabs and line ends stay) and `<private>` spans, line by line (an unclosed tag drops the rest
    of its line, not of the file)."""
    return "\n".join(drop_private(CONTROL.sub("", line)) for line in (text or "").split("\n"))
