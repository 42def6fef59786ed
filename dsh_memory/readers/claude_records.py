"""What a Claude Code record means, apart from how a session is assembled from them.

- `classify_text`: a user-role text → the words the human typed, the harness blocks around them
  (labels only) or an interrupt. Claude Code writes many typed-looking strings itself: slash
  command wrappers, local command output, `!` shell echoes, background task notifications,
  `<system-reminder>` and IDE context blocks. A slash command's arguments are the human's words
  (`/compact and continue with …`, `/plugin:command do X with Y`): they are kept as the prompt.
- `flag_label`, `opens_with_prompt`, `typed_line`: a user record's flags (meta, compact summary,
  sidechain, non-human origin), whether it opens with typed words, a queued line as typed.
- `abandoned_records`: Claude Code rewinds (Esc Esc) by writing the new prompt as a sibling of the
  one rewound to; the transcript keeps the abandoned branch. The session is the `parentUuid`
  chain from the last message (across compaction boundaries through `logicalParentUuid`) plus
  what hangs off it without being a rewound branch: parallel tool calls also branch (the second
  `tool_use` line hangs off the first), and a prompt queued during a tool call can hang off the
  `tool_use` it interrupted. An abandoned branch is a side branch that opens with a typed prompt
  and holds an answer to it. A parent missing from the file (selected lines, a boundary naming a
  message that was never saved) continues at the previous record in file order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsh_memory.readers._jsonl import as_dict

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
_COMMAND_FIELD = re.compile(r"<(command-name|command-message|command-args)>(.*?)</\1>", re.S)
_LEADING_TAG = re.compile(r"\s*<([A-Za-z][\w-]*)>")
_TRAILING_REMINDER = re.compile(r"\s*<system-reminder>(?:(?!<system-reminder>).)*</system-reminder>\s*\Z", re.S)


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
    fields = {m.group(1): m.group(2).strip() for m in _COMMAND_FIELD.finditer(text)}
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
    rest = text
    while (m := _LEADING_TAG.match(rest)) and m.group(1) in PREFIX_TAGS:
        tag = m.group(1)
        labels.append(PREFIX_TAGS[tag])
        end = rest.find(f"</{tag}>", m.end())
        rest = "" if end == -1 else rest[end + len(tag) + 3 :]
    if (t := _TRAILING_REMINDER.search(rest)) is not None:
        labels.append(PREFIX_TAGS["system-reminder"])
        rest = rest[: t.start()]
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


def opens_with_prompt(obj: dict) -> bool:
    """A user record carrying typed words (a rewound branch starts with one)."""
    if obj.get("type") != "user" or flag_label(obj) is not None:
        return False
    content = as_dict(obj.get("message")).get("content")
    if isinstance(content, str):
        return bool(classify_text(content).human)
    if isinstance(content, list):
        blocks = [c for c in content if isinstance(c, dict)]
        if any(c.get("type") == "tool_result" for c in blocks):
            return False
        return any(c.get("type") == "text" and classify_text(str(c.get("text", ""))).human for c in blocks)
    return False


_RAW_COMMAND = re.compile(r"^(/[A-Za-z][\w:.-]*)(?:\s+(.*))?$", re.S)


def typed_line(text: str) -> TextClass:
    """A queued input line as typed: `/name args` is a slash command (its arguments the prompt)."""
    m = _RAW_COMMAND.match(text.strip())
    return classify_text(text) if m is None else _command(m.group(1), (m.group(2) or "").strip())


def _parent(obj: dict) -> object:
    parent = obj.get("parentUuid")
    return obj.get("logicalParentUuid") if parent is None else parent


def abandoned_records(records: list[tuple[int, dict]]) -> tuple[set[int], dict[int, int]]:
    """(seqs of records on abandoned branches, record seq → seq of its uuid-carrying anchor).

    Records without a uuid (queue operations, snapshots) are anchored to the previous record
    that has one, so they share its fate. Sidechain records are not part of the tree.
    """
    nodes: dict[str, tuple[int, dict]] = {}
    order: list[str] = []
    anchor: dict[int, int] = {}
    last_seq: int | None = None
    for seq, obj in records:
        uid = obj.get("uuid")
        if isinstance(uid, str) and uid and obj.get("isSidechain") is not True and uid not in nodes:
            nodes[uid] = (seq, obj)
            order.append(uid)
            last_seq = seq
        elif last_seq is not None:
            anchor[seq] = last_seq
    if not nodes:
        return set(), anchor
    parent: dict[str, str | None] = {}
    children: dict[str | None, list[str]] = {}
    previous: str | None = None
    for uid in order:
        p = _parent(nodes[uid][1])
        if p is not None and (not isinstance(p, str) or p not in nodes or p == uid):
            p = previous  # broken chain: continue at the previous record in file order
        parent[uid] = p
        children.setdefault(p, []).append(uid)
        previous = uid
    leaf = next((u for u in reversed(order) if nodes[u][1].get("type") in ("user", "assistant")), order[-1])
    live: list[str] = []
    seen: set[str] = set()
    cur: str | None = leaf
    while cur is not None and cur not in seen:
        seen.add(cur)
        live.append(cur)
        cur = parent[cur]
    abandoned: set[int] = set()
    for u in live:  # (separate roots are not compared: a chain may restart mid-file)
        for c in children.get(u, []):
            if c in seen or not opens_with_prompt(nodes[c][1]):
                continue
            branch = _subtree(c, children)
            if any(nodes[x][1].get("type") == "assistant" for x in branch):
                abandoned.update(nodes[x][0] for x in branch)
    return abandoned, anchor


def _subtree(root: str, children: dict[str | None, list[str]]) -> list[str]:
    out, stack = [], [root]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(children.get(x, []))
    return out
