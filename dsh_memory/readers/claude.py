"""Claude Code transcripts: `$CLAUDE_CONFIG_DIR/projects/<encoded-cwd>/<session-uuid>.jsonl`.

Records carry a top-level `type` (user, assistant, system, summary, file-history-snapshot, …).
A human prompt is a `user` record whose `message.content` is typed text: not `isMeta`, not the
`isCompactSummary` continuation, not a slash-command / local-command record, not a sidechain.
Tool results arrive as user records with `tool_result` blocks; one assistant API response is
split over several lines sharing `message.id`. Subagent transcripts
(`<sessionId>/subagents/agent-*.jsonl`, legacy `agent-<8hex>.jsonl`) are not sessions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from dsh_memory.models import Event, EventKind, Session, SessionRef
from dsh_memory.readers._input import regular_stat
from dsh_memory.readers._jsonl import UUID_RE, parse_time, read_jsonl, short_title

FILE_RE = re.compile(r"^(?P<id>" + UUID_RE + r")\.jsonl$")

# Typed-looking user strings that Claude Code writes itself (slash commands, `!` shell, hooks…).
_COMMAND_TAGS: tuple[tuple[str, str], ...] = (
    ("<command-name>", "slash_command"),
    ("<command-message>", "slash_command"),
    ("<command-args>", "slash_command"),
    ("<local-command-stdout>", "local_command_output"),
    ("<local-command-stderr>", "local_command_output"),
    ("<local-command-caveat>", "local_command_caveat"),
    ("<bash-input>", "bash_input"),
    ("<bash-stdout>", "bash_output"),
    ("<bash-stderr>", "bash_output"),
    ("<user-memory-input>", "memory_input"),
    ("<system-reminder>", "system_reminder"),
    ("<user-prompt-submit-hook>", "hook_output"),
)
_INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]$")
_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_CONVERSATION_TYPES = ("user", "assistant")


# ---------------------------------------------------------------- discovery (stat only)


def discover(root: Path) -> list[SessionRef]:
    refs: list[SessionRef] = []
    try:
        projects = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return refs
    for project in projects:
        try:
            entries = list(os.scandir(project.path))
        except OSError:
            continue
        for entry in entries:
            m = FILE_RE.match(entry.name)  # agent-*.jsonl never matches: not a uuid
            if not m:
                continue
            st = regular_stat(entry)
            if st is None:
                continue
            refs.append(
                SessionRef(
                    id=m.group("id").lower(),
                    source="claude",
                    path=Path(entry.path),
                    size=st.st_size,
                    mtime_ns=st.st_mtime_ns,
                    ignored=_subagent_files(Path(project.path) / m.group("id") / "subagents"),
                    hint_root=True,
                )
            )
    refs.sort(key=lambda r: str(r.path))
    return refs


def _subagent_files(folder: Path) -> list[Path]:
    """Subagent transcripts of a session: listed as informational `ignored` paths, never loaded."""
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.name.endswith(".jsonl"))
    except OSError:
        return []


# ---------------------------------------------------------------- load


def load(ref: SessionRef) -> Session:
    f = read_jsonl(ref.path)
    session = Session(id=ref.id, source="claude", path=ref.path, last_seq=f.last_seq, warnings=f.warnings)
    convo = [o for _, o in f.records if o.get("type") in _CONVERSATION_TYPES]
    sidechain_file = bool(convo) and all(o.get("isSidechain") is True for o in convo)
    if sidechain_file or ref.hint_root is False or "subagents" in ref.path.parts:
        session.is_root = False
        sidechain_file = True

    first = next((o for o in convo if isinstance(o.get("sessionId"), str)), None)
    recorded_id = first.get("sessionId") if first else None
    if recorded_id and not sidechain_file and recorded_id.lower() != ref.id.lower():
        session.warnings.append(f"{ref.path}: records name session {recorded_id}, the file name says {ref.id}")
    if recorded_id:
        session.meta["session_id"] = recorded_id  # for a subagent file: the parent's session id
    if sidechain_file:
        session.parent_id = recorded_id
        agent = next((o.get("agentId") for o in convo if o.get("agentId")), None)
        if agent:
            session.meta["agent_id"] = agent
    session.cwd = next((o["cwd"] for _, o in f.records if isinstance(o.get("cwd"), str) and o["cwd"]), None)
    for key, field in (("version", "version"), ("git_branch", "gitBranch")):
        value = next((o.get(field) for o in convo if o.get(field)), None)
        if value:
            session.meta[key] = value

    b = _Builder(session, skip_sidechain=not sidechain_file)
    for seq, obj in f.records:
        b.record(seq, obj)
    session.events = b.events
    times = [t for t in b.times if t is not None]
    session.created_at = min(times) if times else None
    session.updated_at = max(times) if times else ref.updated_at
    uuids = {o.get("uuid") for o in convo}
    session.title = (
        b.custom_title
        or _pick_summary(b.summaries, uuids)
        or short_title(next((e.text for e in session.human_prompts if e.text.strip()), None))
    )
    return session


def _pick_summary(summaries: list[tuple[str, Any]], uuids: set) -> str | None:
    """The summary labelling a leaf of this file, else the last one (it names the resumed work)."""
    for text, leaf in reversed(summaries):
        if leaf in uuids:
            return text
    return summaries[-1][0] if summaries else None


class _Builder:
    def __init__(self, session: Session, skip_sidechain: bool):
        self.session = session
        self.skip_sidechain = skip_sidechain
        self.events: list[Event] = []
        self.turn: int | None = None
        self.times: list = []
        self.summaries: list[tuple[str, Any]] = []
        self.custom_title: str | None = None
        self.seen_blocks: set[tuple] = set()  # (message.id, block key): replays of split responses
        self.call_names: dict[str, str] = {}

    def add(self, seq: int, kind: EventKind, time, **kw) -> None:
        self.events.append(Event(seq=seq, kind=kind, turn=self.turn, time=time, **kw))

    def record(self, seq: int, obj: dict) -> None:
        typ = obj.get("type")
        if typ == "summary":
            if isinstance(obj.get("summary"), str) and obj["summary"].strip():
                self.summaries.append((obj["summary"].strip(), obj.get("leafUuid")))
            return
        if typ == "custom-title":
            title = obj.get("customTitle") or obj.get("title")
            self.custom_title = title if isinstance(title, str) and title.strip() else self.custom_title
            return
        time = parse_time(obj.get("timestamp"))
        if typ in ("user", "assistant", "system"):
            self.times.append(time)
        if obj.get("isSidechain") is True and self.skip_sidechain:
            return  # a subagent's records inside a main transcript: not this session's conversation
        if typ == "user":
            self._user(seq, obj, time)
        elif typ == "assistant":
            self._assistant(seq, obj, time)
        elif typ == "system":
            self._system(seq, obj, time)
        # file-history-snapshot, queue-operation, progress, …: nothing to render

    def _system(self, seq: int, obj: dict, time) -> None:
        if obj.get("subtype") == "compact_boundary":
            meta = obj.get("compactMetadata") if isinstance(obj.get("compactMetadata"), dict) else {}
            self.add(seq, EventKind.COMPACTION, time, label=f"compact_boundary:{meta.get('trigger') or 'unknown'}")
        elif obj.get("level") == "error" or obj.get("subtype") == "api_error":
            self.add(seq, EventKind.STATUS, time, label=str(obj.get("subtype") or "error"), is_error=True)

    def _user(self, seq: int, obj: dict, time) -> None:
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        content = message.get("content")
        if isinstance(content, str):
            label = self._injected_label(obj, content)
            if label is not None:
                self.add(seq, EventKind.CONTEXT, time, label=label)
            elif _INTERRUPTED.match(content.strip()):
                self.add(seq, EventKind.STATUS, time, label="interrupted")
            else:
                self.turn = (self.turn or 0) + 1
                self.add(seq, EventKind.HUMAN, time, text=content)
            return
        if not isinstance(content, list):
            return
        blocks = [c for c in content if isinstance(c, dict)]
        for block in blocks:
            if block.get("type") == "tool_result":
                self._tool_result(seq, block, time)
        rest = [c for c in blocks if c.get("type") != "tool_result"]
        texts = [c.get("text", "") for c in rest if c.get("type") == "text" and isinstance(c.get("text"), str)]
        images = sum(1 for c in rest if c.get("type") == "image")
        text = "\n\n".join(t for t in texts if t)
        if not text and not images:
            return
        label = self._injected_label(obj, text)
        if label is not None:
            self.add(seq, EventKind.CONTEXT, time, label=label, images=images)
        elif _INTERRUPTED.match(text.strip()) and not images:
            self.add(seq, EventKind.STATUS, time, label="interrupted")
        elif len(rest) == len(blocks):  # a typed prompt with attachments (text + image blocks)
            self.turn = (self.turn or 0) + 1
            self.add(seq, EventKind.HUMAN, time, text=text, images=images)
        else:  # text riding along with tool results: injected by the harness (hooks, reminders)
            self.add(seq, EventKind.CONTEXT, time, label="tool_result_attachment", images=images)

    def _injected_label(self, obj: dict, text: str) -> str | None:
        """Why a user-role text is not a human prompt, or None when it is one."""
        if obj.get("isCompactSummary"):
            return "compact_summary"
        if obj.get("isMeta"):
            return "meta"
        if obj.get("isSidechain"):
            return "subagent_prompt"
        if obj.get("isVisibleInTranscriptOnly"):
            return "transcript_only"
        head = text.lstrip()[:64].lower()
        for tag, label in _COMMAND_TAGS:
            if head.startswith(tag):
                m = _COMMAND_NAME.search(text) if label == "slash_command" else None
                return f"slash_command:{m.group(1)}" if m else label
        return None

    def _tool_result(self, seq: int, block: dict, time) -> None:
        content = block.get("content")
        images = 0
        if isinstance(content, list):
            parts = [c for c in content if isinstance(c, dict)]
            images = sum(1 for c in parts if c.get("type") == "image")
            content = "\n".join(c.get("text", "") for c in parts if isinstance(c.get("text"), str))
        call_id = block.get("tool_use_id")
        self.add(
            seq,
            EventKind.TOOL_RESULT,
            time,
            text=content if isinstance(content, str) else "",
            is_error=block.get("is_error") is True,
            images=images,
            tool_call_id=call_id,
            tool_name=self.call_names.get(call_id) if isinstance(call_id, str) else None,
        )

    def _assistant(self, seq: int, obj: dict, time) -> None:
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        mid = message.get("id") or obj.get("uuid")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        if obj.get("isApiErrorMessage"):
            self.add(
                seq,
                EventKind.STATUS,
                time,
                label="api_error",
                is_error=True,
                text=" ".join(c.get("text", "") for c in content if isinstance(c, dict))[:500],
            )
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            key = (mid, btype, block.get("id") or block.get("text") or block.get("signature") or block.get("data"))
            if key in self.seen_blocks:
                continue  # the same block written again by a later line of the same response
            self.seen_blocks.add(key)
            if btype == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                self.add(seq, EventKind.ASSISTANT, time, text=block["text"])
            elif btype in ("thinking", "redacted_thinking"):
                self.add(seq, EventKind.REASONING, time)
            elif btype in ("tool_use", "server_tool_use"):
                name = block.get("name") if isinstance(block.get("name"), str) else "tool"
                if isinstance(block.get("id"), str):
                    self.call_names[block["id"]] = name
                self.add(
                    seq,
                    EventKind.TOOL_CALL,
                    time,
                    tool_name=name,
                    tool_call_id=block.get("id"),
                    arguments=block.get("input"),
                )
        if message.get("stop_reason") == "max_tokens":
            self.add(seq, EventKind.STATUS, time, label="max_tokens")
