"""Claude Code records -> transcript `Event`s, in file order (the session is assembled in claude.py).

Human prompts come from every record kind Claude Code writes them in, each counted once:
- a `user` record with typed text (not `isMeta`, not the `isCompactSummary` continuation, not a
  sidechain, `origin.kind` human when present) — harness blocks around the words are dropped;
- a slash command's arguments (`user` wrapper or `system` `local_command` record; the pair is one);
- a prompt typed while the agent worked: a `queue-operation` `enqueue`, delivered later as a
  `queued_command` attachment, as a `user` record (`promptSource: "queued"`), or only by the
  queue's own `remove`/`dequeue` (older versions); `popAll` took it back unsent.
Notifications, reminders, command wrappers and output, interrupts and compaction summaries are
context. Tool results arrive as user records with `tool_result` blocks, harness boilerplate
removed (`strip_boilerplate`); one assistant API response is split over lines sharing
`message.id` and is read once. `finish` drops the second record of one prompt and numbers turns.

Harness boilerplate is removed by rule (not by matching a sentence): Claude Code appends its own
reminders to what a tool returned (`<system-reminder>` after every `Read`, todo nudges, hook
feedback), not the tool's output and repeated up to dozens of times per session. Such an element
standing on its own lines is replaced by a short marker; one quoted inside the output itself
(mid-line, escaped JSON) is data and stays.

What a user-role text means (`classify_text`): the words the human typed, the harness blocks
around them (labels only) or an interrupt. Claude Code writes many typed-looking strings itself:
slash command wrappers, local command output, `!` shell echoes, background task notifications,
`<system-reminder>` and IDE context blocks. A slash command's arguments are the human's words
(`/compact and continue with …`, `/plugin:command do X with Y`): they are kept as the prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dsh_memory.models import Event, EventKind
from dsh_memory.readers._jsonl import Events, as_dict, as_str, count_images, parse_time, same_words, text_of
from dsh_memory.readers.claude_tags import command_fields, strip_boilerplate, without_reminders

# A user text opening with one of these is harness output as a whole.
WHOLE_TAGS: dict[str, str] = {
    "local-command-stdout": "local_command_output",
    "local-command-stderr": "local_command_output",
    "local-command-caveat": "local_command_caveat",
    "bash-input": "bash_input",
    "bash-stdout": "bash_output",
    "bash-stderr": "bash_output",
    "user-memory-input": "memory_input",
    "user-prompt-submit-hook": "hook_output",
    "task-notification": "task_notification",
    "agent-notification": "task_notification",  # a subagent's completion, as earlier versions wrote it
}
# Blocks the harness puts before (or, for reminders, after) a typed prompt in the same message.
PREFIX_TAGS: dict[str, str] = {
    "system-reminder": "system_reminder",
    "ide_opened_file": "ide_opened_file",
    "ide_selection": "ide_selection",
    "ide_diagnostics": "ide_diagnostics",
}
COMMAND_OPENERS = ("<command-name>", "<command-message>", "<command-args>")
INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]$")
_LEADING_TAG = re.compile(r"\s*<([A-Za-z][\w-]*)>")


@dataclass
class TextClass:
    """A user-role text split into what the human typed and what the harness added."""

    human: str = ""  # the typed words ("" when none)
    labels: list[str] = field(default_factory=list)  # harness blocks (markers only)
    status: str | None = None  # "interrupted"
    label: str | None = None  # label of the human part: slash_command:/name


def slash_command(text: str) -> tuple[str, str] | None:
    """(name, arguments) of a slash command wrapper, or None when `text` is not one."""
    if not text.lstrip().startswith(COMMAND_OPENERS):
        return None
    fields = command_fields(text)
    name = fields.get("command-name", "")
    if not name and fields.get("command-message"):
        name = "/" + fields["command-message"].lstrip("/")
    return " ".join(name.split()), fields.get("command-args", "")


def _command(name: str, args: str) -> TextClass:
    """A slash command: its arguments are the human's words; without any it is a marker."""
    label = f"slash_command:{name}" if name else "slash_command"
    return TextClass(human=f"{name} {args}".strip(), label=label) if args else TextClass(labels=[label])


def classify_text(text: str) -> TextClass:
    command = slash_command(text)
    if command is not None:
        return _command(*command)
    m = _LEADING_TAG.match(text)
    if m and m.group(1) in WHOLE_TAGS:
        return TextClass(labels=[WHOLE_TAGS[m.group(1)]])
    labels: list[str] = []
    pos = 0  # read on, never copied per block: a prompt may come with any number of them
    while (m := _LEADING_TAG.match(text, pos)) and m.group(1) in PREFIX_TAGS:
        tag = m.group(1)
        labels.append(PREFIX_TAGS[tag])
        end = text.find(f"</{tag}>", m.end())
        pos = len(text) if end == -1 else end + len(tag) + 3
    rest, inside = without_reminders(text[pos:])
    labels += [PREFIX_TAGS["system-reminder"]] * inside
    if labels:
        rest = rest.strip()
    if not rest.strip():
        return TextClass(labels=labels or ["empty"])
    if INTERRUPTED.match(rest.strip()):
        return TextClass(labels=labels, status="interrupted")
    return TextClass(human=rest, labels=labels)


def flag_label(obj: dict) -> str | None:
    """Why a user-role record is not the human's, from its flags alone (None: read its text)."""
    if obj.get("isCompactSummary"):
        return "compact_summary"
    if obj.get("isMeta"):
        return "meta"
    if obj.get("isSidechain"):
        return "subagent_prompt"
    if obj.get("isVisibleInTranscriptOnly"):
        return "transcript_only"
    origin = obj.get("origin")
    if isinstance(origin, dict) and isinstance(origin.get("kind"), str) and origin["kind"] != "human":
        return f"origin:{origin['kind']}"
    return None


_RAW_COMMAND = re.compile(r"^(/[A-Za-z][\w:.-]*)(?:\s+(.*))?$", re.S)


def typed_line(text: str) -> TextClass:
    """A queued input line as typed: `/name args` is a slash command (its arguments the prompt)."""
    m = _RAW_COMMAND.match(text.strip())
    return classify_text(text) if m is None else _command(m.group(1), (m.group(2) or "").strip())


_ACP_BUILTIN = re.compile(r"^mcp__acp__(?=(?:Bash|BashOutput|KillShell|Read|Edit|MultiEdit|Write)$)")
_TWIN_WINDOW = 12  # lines between a slash command's user wrapper and its system local_command twin


class _Queued:
    """A prompt typed while the agent worked (`queue-operation` enqueue) until it leaves the queue."""

    def __init__(self, seq: int, text: str, label: str | None):
        self.seq, self.text, self.label = seq, text, label
        self.event: Event | None = None  # emitted where it left the queue, if no record delivers it


class EventBuilder(Events):
    """Events in file order; human prompts from every record kind, de-duplicated in `finish`."""

    def __init__(self, skip_sidechain: bool):
        super().__init__()
        self.skip_sidechain = skip_sidechain
        self.times: list = []  # of the conversation records that carry a time
        self.summaries: list[tuple[str, Any]] = []
        self.custom_title: str | None = None
        self.seen_blocks: set[tuple] = set()  # (message.id, block key): replays of split responses
        self.pending: list[_Queued] = []  # still in the queue
        self.left: list[_Queued] = []  # left the queue for the model
        self.source: dict[int, tuple[str, dict]] = {}  # id(each human event) -> (record kind, record)
        self.cwd: str | None = None  # the session's folder: the first record's `cwd`

    def human(self, seq: int, time, text: str, kind: str, obj: dict, **kw) -> Event:
        ev = self.add(seq, EventKind.HUMAN, time, text=text, **kw)
        self.source[id(ev)] = (kind, obj)
        return ev

    def record(self, seq: int, obj: dict) -> None:
        typ = obj.get("type")
        if self.cwd is None and isinstance(obj.get("cwd"), str) and obj["cwd"]:
            self.cwd = obj["cwd"]
        if typ == "summary":
            if isinstance(obj.get("summary"), str) and obj["summary"].strip():
                self.summaries.append((obj["summary"].strip(), obj.get("leafUuid")))
            return
        if typ == "custom-title":
            title = obj.get("customTitle") or obj.get("title")
            self.custom_title = title if isinstance(title, str) and title.strip() else self.custom_title
            return
        time = parse_time(obj.get("timestamp"))
        if typ in ("user", "assistant", "system") and time is not None:
            self.times.append(time)
        if obj.get("isSidechain") is True and self.skip_sidechain:
            return  # a subagent's records inside a main transcript: not this session's conversation
        if typ == "user":
            self._user(seq, obj, time)
        elif typ == "assistant":
            self._assistant(seq, obj, time)
        elif typ == "system":
            self._system(seq, obj, time)
        elif typ == "queue-operation":
            self._queue(seq, obj, time)
        elif typ == "attachment":
            self._attachment(seq, obj, time)
        # file-history-snapshot, progress, …: nothing to render

    def _system(self, seq: int, obj: dict, time) -> None:
        if obj.get("subtype") == "compact_boundary":
            meta = as_dict(obj.get("compactMetadata"))
            self.add(seq, EventKind.COMPACTION, time, label=f"compact_boundary:{meta.get('trigger') or 'unknown'}")
        elif obj.get("subtype") == "local_command" and isinstance(obj.get("content"), str):
            c = classify_text(obj["content"])  # often the twin of a user command record (see finish)
            if c.human and c.label:
                self.human(seq, time, c.human, "system_command", obj, label=c.label)
        elif obj.get("level") == "error" or obj.get("subtype") == "api_error":
            self.add(seq, EventKind.STATUS, time, label=str(obj.get("subtype") or "error"), is_error=True)

    def _text(self, seq: int, obj: dict, time, texts: list[str], images: int, kind: str) -> None:
        """User-role texts of one record → context marker, status and/or the human prompt."""
        flag = flag_label(obj)
        if flag is not None:
            self.add(seq, EventKind.CONTEXT, time, label=flag, images=images)
            return
        said = [classify_text(text) for text in texts]
        labels = [lab for c in said for lab in c.labels]
        status = next((c.status for c in said if c.status), None)
        human = [c.human for c in said if c.human]
        label = next((c.label for c in said if c.human and c.label), None)
        if labels and (human or images or status is None):
            self.add(seq, EventKind.CONTEXT, time, label="+".join(dict.fromkeys(labels)), images=0 if human else images)
        if status is not None:
            self.add(seq, EventKind.STATUS, time, label=status)
        if human or (images and not labels and status is None):
            self.human(seq, time, "\n\n".join(human), kind, obj, images=images, label=label)

    def _user(self, seq: int, obj: dict, time) -> None:
        content = as_dict(obj.get("message")).get("content")
        if isinstance(content, str):
            self._text(seq, obj, time, [content], 0, "user")
            return
        if not isinstance(content, list):
            return
        blocks = [c for c in content if isinstance(c, dict)]
        for block in blocks:
            if block.get("type") == "tool_result":
                self._tool_result(seq, block, time)
        rest = [c for c in blocks if c.get("type") != "tool_result"]
        texts = [c["text"] for c in rest if c.get("type") == "text" and isinstance(c.get("text"), str) and c["text"]]
        images = count_images(rest)
        if not texts and not images:
            return
        if len(rest) < len(blocks):  # text riding along with tool results: injected by the harness
            if not flag_label(obj) and len(texts) == 1 and INTERRUPTED.match(texts[0].strip()) and not images:
                self.add(seq, EventKind.STATUS, time, label="interrupted")
            else:
                self.add(seq, EventKind.CONTEXT, time, label="tool_result_attachment", images=images)
            return
        self._text(seq, obj, time, texts, images, "user")

    def _attachment(self, seq: int, obj: dict, time) -> None:
        att = obj.get("attachment")
        if not isinstance(att, dict) or att.get("type") != "queued_command" or not isinstance(att.get("prompt"), str):
            return  # hook output, file mentions, …: not rendered
        mode = att.get("commandMode")
        flag = flag_label({"origin": att.get("origin")}) or flag_label(obj)
        if flag is None and mode not in (None, "prompt"):
            flag = f"queued_command:{mode}"
        if flag is not None:
            self.add(seq, EventKind.CONTEXT, time, label=flag)
            return
        self._text(seq, {}, time, [att["prompt"]], 0, "attachment")

    def _queue(self, seq: int, obj: dict, time) -> None:
        op = obj.get("operation")
        content = obj.get("content")
        if isinstance(content, list):  # text blocks, as some writers store the queued input
            content = "\n\n".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
        text = content if isinstance(content, str) else None
        if op == "enqueue":
            c = typed_line(text or "")
            if c.human:  # notifications, bare commands and blanks ride the queue too: never a prompt
                self.pending.append(_Queued(seq, c.human, c.label))
            return
        if op not in ("remove", "dequeue", "popAll"):
            return
        if text is not None:
            wanted = typed_line(text).human
            item = next((q for q in self.pending if same_words(q.text, wanted)), None)
        else:
            item = self.pending[0] if self.pending else None  # no content (older versions): first in, first out
        if item is None:
            return
        self.pending.remove(item)
        if op == "popAll":
            return  # taken back to the input box, unsent
        self.left.append(item)
        item.event = self.human(seq, time, item.text, "queue", obj, label=item.label)

    def finish(self) -> list[Event]:
        """Drop the second record of one prompt; number the turns."""
        drop: set[int] = set()
        humans = [e for e in self.events if e.kind is EventKind.HUMAN]
        claimed: set[int] = set()
        for q in self.left:  # a queued prompt delivered by a later record is that record's
            for e in humans:
                kind, obj = self.source[id(e)]
                if kind in ("queue", "system_command") or id(e) in claimed or e.seq <= q.seq:
                    continue
                if kind == "user" and obj.get("promptSource") == "typed":
                    continue
                if same_words(e.text, q.text):
                    claimed.add(id(e))
                    drop.add(id(q.event))
                    break
        for e in humans:  # a slash command written twice (user wrapper + system local_command)
            kind, _ = self.source[id(e)]
            if kind == "system_command" and any(
                self.source[id(o)][0] == "user" and abs(o.seq - e.seq) <= _TWIN_WINDOW and o.text == e.text
                for o in humans
            ):
                drop.add(id(e))
        events = [e for e in self.events if id(e) not in drop]
        turn: int | None = None
        for e in events:
            if e.kind is EventKind.HUMAN:
                turn = (turn or 0) + 1
            e.turn = turn
        return events

    def _tool_result(self, seq: int, block: dict, time) -> None:
        content = block.get("content")
        text, _ = strip_boilerplate(text_of(content))
        is_error = block.get("is_error") is True
        self.tool_result(seq, time, block.get("tool_use_id"), text, is_error, count_images(content))

    def _assistant(self, seq: int, obj: dict, time) -> None:
        message = as_dict(obj.get("message"))
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
                # Zed's Claude Code (ACP) calls the built-ins through its own MCP server: the same tools
                name = _ACP_BUILTIN.sub("", as_str(block.get("name")) or "tool")
                # Claude's shell keeps the folder a `cd` took it to; each record says where it stood
                where = obj.get("cwd")
                where = where if isinstance(where, str) and where != self.cwd and 0 < len(where) <= 4096 else None
                self.tool_call(seq, time, name, block.get("id"), block.get("input"), cwd=where)
        if message.get("stop_reason") == "max_tokens":
            self.add(seq, EventKind.STATUS, time, label="max_tokens")
