"""Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl[.zst]`.

Each line is `{timestamp, type, payload}`; `type` is session_meta, response_item, event_msg,
turn_context, compacted, … (see reference/codex-memories.md §5). We render response items:
user messages minus injected parts (AGENTS.md, environment context, skills), assistant text, tool
calls and their outputs. Developer messages and reasoning never reach an Event; event_msg records
only mark turns, aborts and errors (their text duplicates response items).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Event, EventKind, Session, SessionRef
from dsh_memory.readers._input import regular_stat
from dsh_memory.readers._jsonl import UUID_RE, parse_json_maybe, parse_time, read_jsonl, short_title

FILE_RE = re.compile(
    r"^rollout-(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-(?P<id>" + UUID_RE + r")\.jsonl(?P<zst>\.zst)?$"
)
_MAX_DEPTH = 4  # YYYY/MM/DD plus one spare level

# Sources whose runs have no human at the keyboard (Codex itself never mines these).
NON_INTERACTIVE_SOURCES = {"exec", "mcp", "internal"}

# Injected user-message parts: (opening text, closing text or None, label). Case-insensitive.
INJECTED_PARTS: tuple[tuple[str, str | None, str], ...] = (
    ("# AGENTS.md instructions", "</INSTRUCTIONS>", "agents_md"),
    ("<user_instructions>", "</user_instructions>", "agents_md"),
    ("<environment_context>", "</environment_context>", "environment_context"),
    ("<skill>", "</skill>", "skill"),
    ("<subagent_notification>", "</subagent_notification>", "subagent_notification"),
    ("<turn_aborted>", "</turn_aborted>", "turn_aborted"),
    ("<user_shell_command>", "</user_shell_command>", "user_shell_command"),
)

_TOOL_CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
_TOOL_OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "tool_search_output"}
_EXIT_RE = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)", re.MULTILINE)


# ---------------------------------------------------------------- discovery (stat only)


def discover(root: Path) -> list[SessionRef]:
    found: dict[str, list[tuple[Path, os.stat_result]]] = {}
    _walk(Path(root), 0, found)
    refs: list[SessionRef] = []
    for sid, files in found.items():
        # Prefer the plain file (a .zst twin may still be being written), then the newest.
        files.sort(key=lambda f: (f[0].name.endswith(".jsonl"), f[1].st_mtime_ns), reverse=True)
        (path, st), rest = files[0], files[1:]
        refs.append(
            SessionRef(
                id=sid,
                source="codex",
                path=path,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                ignored=[p for p, _ in rest],
            )
        )
    refs.sort(key=lambda r: str(r.path))
    return refs


def _walk(folder: Path, depth: int, found: dict[str, list[tuple[Path, os.stat_result]]]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        m = FILE_RE.match(entry.name)
        if not m:  # a folder (YYYY/MM/DD) to walk, or a file that is not a rollout
            try:
                if entry.is_dir(follow_symlinks=False) and depth < _MAX_DEPTH:
                    _walk(Path(entry.path), depth + 1, found)
            except OSError:
                pass
            continue
        st = regular_stat(entry)  # named like a rollout: must be a regular file
        if st is None:
            continue
        found.setdefault(m.group("id").lower(), []).append((Path(entry.path), st))


# ---------------------------------------------------------------- load


def load(ref: SessionRef) -> Session:
    f = read_jsonl(ref.path)
    _, meta = _session_meta(f.records)
    if meta is None:
        raise SessionReadError(ref.path, "no session_meta record")
    session = Session(id=ref.id, source="codex", path=ref.path, last_seq=f.last_seq, warnings=f.warnings)
    _apply_meta(session, meta, ref)

    b = _Builder(session)
    has_turn_markers = any(_event_type(o) in ("task_started", "turn_started") for _, o in f.records)
    last_time = None
    for seq, obj in f.records:
        typ = obj.get("type")
        payload = obj.get("payload")
        if "payload" not in obj and typ not in ("session_meta", "event_msg", "turn_context", "compacted"):
            payload, typ = obj, "response_item"  # pre-envelope rollouts: bare response items
        if not isinstance(payload, dict):
            continue
        time = parse_time(obj.get("timestamp"))
        last_time = time or last_time
        if typ == "response_item":
            b.response_item(seq, payload, time, count_turns=not has_turn_markers)
        elif typ == "event_msg":
            b.event_msg(seq, payload, time)
        elif typ == "compacted":
            b.compaction(seq, time, "compacted")
    session.events = b.events
    session.updated_at = last_time or ref.updated_at
    if session.title is None:
        first = next((e.text for e in session.human_prompts if e.text.strip()), None)
        session.title = short_title(first)
    return session


def _session_meta(records: list[tuple[int, dict]]) -> tuple[int, dict | None]:
    for seq, obj in records:
        if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
            return seq, obj["payload"]
        if "payload" not in obj and "type" not in obj and "id" in obj and "timestamp" in obj:
            return seq, obj  # pre-envelope rollouts: the first line is the bare meta
    return -1, None


def _apply_meta(session: Session, meta: dict, ref: SessionRef) -> None:
    meta_id = meta.get("id") or meta.get("session_id")
    if isinstance(meta_id, str) and meta_id.lower() != ref.id.lower():
        session.warnings.append(f"{ref.path}: session_meta.id {meta_id} differs from the file name id {ref.id}")
    session.cwd = meta.get("cwd") if isinstance(meta.get("cwd"), str) else None
    session.created_at = parse_time(meta.get("timestamp"))
    source = meta.get("source")
    kind, detail = _source_kind(source)
    session.meta["source"] = kind if detail is None else f"{kind}:{detail}"
    if kind == "subagent":
        session.is_root = False
        session.parent_id = meta.get("parent_thread_id") or _find_key(source, "parent_thread_id")
    elif kind in NON_INTERACTIVE_SOURCES:
        session.interactive = False
    if meta.get("forked_from_id"):
        session.meta["forked_from_id"] = meta["forked_from_id"]
        session.parent_id = session.parent_id or meta["forked_from_id"]
    for key in ("originator", "cli_version", "memory_mode", "model_provider", "agent_nickname", "agent_role"):
        if meta.get(key) is not None:
            session.meta[key] = meta[key]
    git = meta.get("git")
    if isinstance(git, dict) and git.get("branch"):
        session.meta["git_branch"] = git["branch"]


def _source_kind(source: Any) -> tuple[str, str | None]:
    """`"cli"` → ("cli", None); `{"subagent": "review"}` → ("subagent", "review"); unknown → ("unknown", None)."""
    if isinstance(source, str):
        return source.lower(), None
    if isinstance(source, dict) and len(source) == 1:
        ((key, value),) = source.items()
        detail = value if isinstance(value, str) else (next(iter(value), None) if isinstance(value, dict) else None)
        return str(key).lower(), detail
    return "unknown", None


def _find_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        if value.get(key):
            return value[key]
        for v in value.values():
            found = _find_key(v, key)
            if found:
                return found
    return None


def _event_type(obj: dict) -> str | None:
    p = obj.get("payload")
    return p.get("type") if obj.get("type") == "event_msg" and isinstance(p, dict) else None


def strip_injected(text: str) -> tuple[str, list[str]]:
    """Remove leading injected blocks from one user text part; return (rest, labels removed)."""
    labels: list[str] = []
    rest = text
    changed = True
    while changed:
        changed = False
        probe = rest.lstrip()
        for opening, closing, label in INJECTED_PARTS:
            if not probe[: len(opening)].lower() == opening.lower():
                continue
            end = re.search(re.escape(closing), probe, re.IGNORECASE) if closing else None
            rest = probe[end.end() :] if end else ""
            labels.append(label)
            changed = True
            break
    return rest.strip(), labels


class _Builder:
    def __init__(self, session: Session):
        self.session = session
        self.events: list[Event] = []
        self.turn: int | None = None
        self.call_names: dict[str, str] = {}

    def add(self, seq: int, kind: EventKind, time, **kw) -> Event:
        ev = Event(seq=seq, kind=kind, turn=self.turn, time=time, **kw)
        self.events.append(ev)
        return ev

    def compaction(self, seq: int, time, label: str) -> None:
        if self.events and self.events[-1].kind is EventKind.COMPACTION:
            return  # `compacted` line and compaction response item describe the same event
        self.add(seq, EventKind.COMPACTION, time, label=label)

    def event_msg(self, seq: int, p: dict, time) -> None:
        t = p.get("type")
        if t in ("task_started", "turn_started"):
            self.turn = (self.turn or 0) + 1
        elif t == "turn_aborted":
            self.add(seq, EventKind.STATUS, time, label=f"aborted:{p.get('reason') or 'unknown'}")
        elif t in ("error", "stream_error"):
            msg = p.get("message") if isinstance(p.get("message"), str) else ""
            self.add(seq, EventKind.STATUS, time, label=t, text=msg, is_error=True)
        elif t == "thread_rolled_back":
            self.add(seq, EventKind.STATUS, time, label="rolled_back", text=str(p.get("num_turns") or ""))
        elif t == "context_compacted":
            self.compaction(seq, time, "context_compacted")

    def response_item(self, seq: int, p: dict, time, count_turns: bool) -> None:
        t = p.get("type")
        if t == "message":
            role = p.get("role")
            if role == "user":
                self._user(seq, p, time, count_turns)
            elif role == "assistant":
                texts = [c.get("text", "") for c in _parts(p) if c.get("type") in ("output_text", "text")]
                text = "\n\n".join(x for x in texts if x)
                if text:
                    self.add(seq, EventKind.ASSISTANT, time, text=text, label=p.get("phase"))
            # developer / system messages: dropped entirely
        elif t == "reasoning":
            self.add(seq, EventKind.REASONING, time)
        elif t in _TOOL_CALL_TYPES:
            self._tool_call(seq, p, time)
        elif t in _TOOL_OUTPUT_TYPES:
            self._tool_output(seq, p, time)
        elif t in ("compaction", "context_compaction", "compaction_summary"):
            self.compaction(seq, time, t)
        elif t == "agent_message":
            text = _text_of(p.get("content"))
            if text:
                self.add(seq, EventKind.ASSISTANT, time, text=text, label=f"agent_message:{p.get('author') or '?'}")

    def _user(self, seq: int, p: dict, time, count_turns: bool) -> None:
        kept: list[str] = []
        labels: list[str] = []
        images = 0
        for part in _parts(p):
            ptype = part.get("type")
            if ptype in ("input_text", "text") and isinstance(part.get("text"), str):
                rest, removed = strip_injected(part["text"])
                labels.extend(removed)
                if rest:
                    kept.append(rest)
            elif ptype in ("input_image", "image"):
                images += 1
        if not kept and not images:
            label = "+".join(dict.fromkeys(labels)) or "empty_user_message"
            self.add(seq, EventKind.CONTEXT, time, label=label)
            return
        if count_turns:
            self.turn = (self.turn or 0) + 1
        self.add(seq, EventKind.HUMAN, time, text="\n\n".join(kept), images=images)

    def _tool_call(self, seq: int, p: dict, time) -> None:
        t = p["type"]
        call_id = p.get("call_id") or p.get("id")
        if t == "function_call":
            name, args = p.get("name"), parse_json_maybe(p.get("arguments"))
            if p.get("namespace"):
                name = f"{p['namespace']}.{name}"
        elif t == "custom_tool_call":
            name, args = p.get("name"), parse_json_maybe(p.get("input"))
        elif t == "local_shell_call":
            name, args = "local_shell", p.get("action")
        elif t == "web_search_call":
            name, args = "web_search", p.get("action")
        else:
            name, args = "tool_search", p.get("arguments", p.get("query"))
        name = name if isinstance(name, str) and name else t
        if isinstance(call_id, str):
            self.call_names[call_id] = name
        self.add(seq, EventKind.TOOL_CALL, time, tool_name=name, tool_call_id=call_id, arguments=args)

    def _tool_output(self, seq: int, p: dict, time) -> None:
        call_id = p.get("call_id")
        text, is_error, images = _output_text(p.get("output"))
        self.add(
            seq,
            EventKind.TOOL_RESULT,
            time,
            text=text,
            is_error=is_error,
            images=images,
            tool_call_id=call_id,
            tool_name=self.call_names.get(call_id) if isinstance(call_id, str) else None,
        )


def _parts(p: dict) -> list[dict]:
    content = p.get("content")
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [c for c in content or [] if isinstance(c, dict)] if isinstance(content, list) else []


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(c.get("text", "") for c in value if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def _output_text(output: Any) -> tuple[str, bool, int]:
    """(text, is_error, images) of a tool output in any of its historical shapes."""
    is_error = False
    images = 0
    if isinstance(output, dict):  # older {content, success}
        is_error = output.get("success") is False
        output = output.get("content", output.get("output", ""))
    if isinstance(output, list):
        images = sum(1 for c in output if isinstance(c, dict) and c.get("type") in ("input_image", "image"))
        output = _text_of(output)
    if not isinstance(output, str):
        output = "" if output is None else json.dumps(output, ensure_ascii=False)
    text = output
    if text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            text = obj["output"]
            code = (obj.get("metadata") or {}).get("exit_code") if isinstance(obj.get("metadata"), dict) else None
            if isinstance(code, int) and code != 0:
                is_error = True
    m = _EXIT_RE.search(text[:400])
    if m and int(m.group(1)) != 0:
        is_error = True
    return text, is_error, images
