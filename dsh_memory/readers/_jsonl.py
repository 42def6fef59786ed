"""What the session readers share: JSONL reading (Codex rollouts, Claude Code transcripts), time
stamps, titles, tool arguments, and `Events`, the event list each reader builds."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Event, EventKind, Session
from dsh_memory.readers._input import LogLines

ZSTD_SUFFIXES = (".zst", ".zstd")
UUID_RE = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


@dataclass
class JsonlFile:
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    last_seq: int = -1  # index of the last complete line (parsed or not)
    warnings: list[str] = field(default_factory=list)


def read_jsonl(path: Path) -> JsonlFile:
    """Every complete line of a JSONL (optionally zstd) file that parses as a JSON object, keyed by
    its 0-based line index (the record's `seq`), read a bounded line at a time (_input.py). Bad
    lines (invalid UTF-8, not JSON, not an object) are skipped with a warning naming the file and
    line; an unparseable last line without its newline is dropped; a torn last zstd frame keeps
    its complete lines. Raises SessionReadError if nothing usable is in it."""
    path = Path(path)
    result = JsonlFile()
    zstd = path.name.endswith(ZSTD_SUFFIXES)
    with LogLines(path, zstd=zstd, keep_torn_tail=True, warn=lambda w: result.warnings.append(f"{path}: {w}")) as log:
        if not log.file_size:
            raise SessionReadError(path, "empty file")
        if not log.size:
            raise SessionReadError(path, "zstd data decodes to nothing (" + "; ".join(result.warnings) + ")")
        for index, raw in enumerate(log):
            result.last_seq = index
            obj = _parse(path, index, raw, result.warnings)
            if obj is not None:
                result.records.append((index, obj))
        count, tail = log.count, log.tail
    if tail.strip():
        obj = _parse(path, count, tail, [])
        if obj is not None:  # complete record, the writer just omitted the final newline
            result.last_seq = count
            result.records.append((count, obj))
        else:
            result.warnings.append(f"{path}: line {count + 1}: dropped incomplete last line")
    if not result.records:
        reason = "no readable JSON records"
        if result.warnings:
            reason += f" ({len(result.warnings)} bad lines)"
        raise SessionReadError(path, reason)
    return result


def _parse(path: Path, index: int, raw: bytes, warnings: list[str]) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    where = f"{path}: line {index + 1}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        warnings.append(f"{where}: skipped line: invalid UTF-8")
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        warnings.append(f"{where}: skipped line: not valid JSON")
        return None
    if not isinstance(obj, dict):
        warnings.append(f"{where}: skipped line: not a JSON object")
        return None
    return obj


# Defensive accessors: log records are untrusted JSON.


def as_dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def as_list(x: Any) -> list:
    return x if isinstance(x, list) else []


def as_int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def as_num(x: Any) -> float | None:
    """A finite number a float can hold; None for anything else (a bool, NaN, a 400-digit integer)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return None
    try:
        return x if math.isfinite(x) else None
    except OverflowError:  # an int past a float's range
        return None


def as_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(c.get("text", "") for c in value if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def count_images(blocks: Any) -> int:
    return sum(1 for b in as_list(blocks) if isinstance(b, dict) and b.get("type") == "image")


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 timestamp (with `Z`) or epoch seconds/ms → aware datetime; None if unusable."""

    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        secs = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(secs, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def prompt_title(session: Session, limit: int = 60) -> str | None:
    """The first line of the session's first prompt, whitespace collapsed, cut on a word boundary."""
    text = next((e.text for e in session.human_prompts if e.text.strip()), "")
    line = re.sub(r"\s+", " ", next((ln for ln in text.splitlines() if ln.strip()), "")).strip()
    if len(line) <= limit:
        return line or None
    cut = line[:limit].rsplit(" ", 1)[0] or line[:limit]
    return cut.rstrip(" ,.;:") + "…"


def same_words(a: str, b: str) -> bool:
    """Equal but for white space."""
    return a.split() == b.split()


def parse_json_maybe(value: Any) -> Any:
    """Tool arguments: parsed JSON when the string is a JSON object/array, else the raw value."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "["):
            try:
                return json.loads(s)
            except (ValueError, RecursionError):
                return value
    return value


# The block Codex's memory feature has the agent end an answer with when it used a memory file
# ("<oai-mem-citation><citation_entries>MEMORY.md:10-12|note=[…]…"): bookkeeping for the UI, not
# something the agent said; left in, its entries read as facts of the project.
_MEMORY_CITATION = re.compile(r"\s*<oai-mem-citation>.*?(?:</oai-mem-citation>|\Z)", re.S)
# The Codex app's action cards, one per line at an answer's end ('::git-commit{cwd="…"}',
# '::git-create-pr{… url="…"}'): what the app draws, not what the agent said.
_APP_DIRECTIVE = re.compile(r"^[ \t]*::[a-z][\w-]*\{[^\n]*\}[ \t]*(?:\n|\Z)", re.M)


class Events:
    """A reader's transcript events in file order; a tool result carries its call's tool name.
    An answer's memory-citation block and app directives are not part of what the agent said."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.turn: int | None = None
        self.call_names: dict[str, str] = {}

    def add(self, seq: int, kind: EventKind, time, **kw) -> Event:
        text = kw.get("text") or ""
        if kind is EventKind.ASSISTANT and ("<oai-mem-citation>" in text or "::" in text):
            kw["text"] = _APP_DIRECTIVE.sub("", _MEMORY_CITATION.sub("", text)).rstrip()
        ev = Event(seq=seq, kind=kind, time=time, **{"turn": self.turn, **kw})
        self.events.append(ev)
        return ev

    def tool_call(self, seq: int, time, name: str, call_id: Any, arguments: Any, cwd: str | None = None) -> None:
        if isinstance(call_id, str):
            self.call_names[call_id] = name
        self.add(seq, EventKind.TOOL_CALL, time, tool_name=name, tool_call_id=call_id, arguments=arguments, cwd=cwd)

    def tool_result(self, seq: int, time, call_id: Any, text: str, is_error: bool, images: int) -> None:
        name = self.call_names.get(call_id) if isinstance(call_id, str) else None
        kw = {"text": text, "is_error": is_error, "images": images, "tool_call_id": call_id, "tool_name": name}
        self.add(seq, EventKind.TOOL_RESULT, time, **kw)
