"""Codex rollout lines -> transcript `Event`s, in file order (the session is assembled in codex.py).

We render response items: user messages minus injected parts (AGENTS.md, environment context,
skills, the IDE extension's context around a request), assistant text, tool calls and their outputs. Developer messages and reasoning never reach
an Event. Turns undone by `thread_rolled_back` are dropped, like a Claude Code rewind.

Human prompts: what the user typed is recorded apart from what Codex sends the model, as an
event_msg `user_message` (kind plain) or, in paginated rollouts (0.148+), an event_msg
`item_completed` UserMessage. When a rollout has those, they are the prompts — a response_item user
message is then the same prompt (counted once, where the model saw it) or injected context,
whatever its text. Without them (older rollouts) the response items are the prompts, with known
injected parts stripped. Assistant text comes from response items, else from AgentMessage items,
else from event_msg agent_message. What each line kind holds, in every historical shape:
`user_item_parts` (a response_item user message minus its injected parts), `typed_event` /
`agent_item_text` (what the user typed, the agent's answers), `message_parts` / `text_of` /
`output_text` (message content, tool output).
"""

from __future__ import annotations

import json
import re
from typing import Any

from dsh_memory.models import Event, EventKind
from dsh_memory.readers._jsonl import Events, as_dict, as_list, as_str, parse_json_maybe, same_words, text_of

_TOOL_CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
_TOOL_OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "tool_search_output"}
_PREFER_EARLIER = 40  # a prompt's response item and its typed-event twin are this close (lines)
# Injected user-message parts: (opening text, closing text, label). Case-insensitive.
INJECTED_PARTS: tuple[tuple[str, str, str], ...] = (
    ("# AGENTS.md instructions", "</INSTRUCTIONS>", "agents_md"),
    ("<user_instructions>", "</user_instructions>", "agents_md"),
    ("<environment_context>", "</environment_context>", "environment_context"),
    ("<skill>", "</skill>", "skill"),
    ("<subagent_notification>", "</subagent_notification>", "subagent_notification"),
    ("<turn_aborted>", "</turn_aborted>", "turn_aborted"),
    ("<user_shell_command>", "</user_shell_command>", "user_shell_command"),
)

# The IDE extension and Desktop send a prompt inside their own context (the open file, the selected
# code, the tabs, the files mentioned): the request is what follows its last line of this mark.
_IDE_WRAPPERS = ("# context from my ide setup:", "# files mentioned by the user:")
_REQUEST_MARK = re.compile(r"(?m)^## My request for Codex:")

_EXIT_RE = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)", re.MULTILINE)


def events(items: list[tuple[int, str, dict, Any]]) -> list[Event]:
    """The events of a rollout's lines (seq, line type, payload, time), in file order."""
    b = _Builder(_Prompts(items))
    for seq, typ, payload, time in items:
        if typ == "response_item":
            b.response_item(seq, payload, time)
        elif typ == "event_msg":
            b.event_msg(seq, payload, time)
        elif typ == "compacted":
            b.compaction(seq, time, "compacted")
    return b.events


class _Prompts:
    """Which record carries each human prompt, decided over the whole rollout before building."""

    def __init__(self, items: list[tuple[int, str, dict, Any]]):
        typed = [(q, te) for q, t, p, _ in items if t == "event_msg" and (te := typed_event(p)) is not None]
        users = [
            (q, user_item_parts(p))
            for q, t, p, _ in items
            if t == "response_item" and p.get("type") == "message" and p.get("role") == "user"
        ]
        self.authoritative = bool(typed)  # the typed events are the prompts
        self.twin: dict[int, int] = {}  # response item seq <-> typed event seq of one prompt
        self.images = {q: te[1] for q, te in typed}
        for tq, (text, _) in typed:
            best = None
            for uq, (kept, _, _) in users:
                if uq in self.twin or not same_words(kept, text) or not tq - _PREFER_EARLIER <= uq <= tq + 8:
                    continue
                if best is None or abs(tq - uq) < abs(tq - best):
                    best = uq
            if best is not None:
                self.twin[best], self.twin[tq] = tq, best
        assistants = {p.get("type") for _, t, p, _ in items if t == "response_item" and p.get("role") == "assistant"}
        self.response_answers = "message" in assistants
        self.item_answers = any(t == "event_msg" and agent_item_text(p) is not None for _, t, p, _ in items)
        markers = ("task_started", "turn_started")
        self.count_turns = not any(t == "event_msg" and p.get("type") in markers for _, t, p, _ in items)


class _Builder(Events):
    def __init__(self, prompts: _Prompts):
        super().__init__()
        self.prompts = prompts

    def compaction(self, seq: int, time, label: str) -> None:
        if self.events and self.events[-1].kind is EventKind.COMPACTION:
            return  # `compacted` line and compaction response item describe the same event
        self.add(seq, EventKind.COMPACTION, time, label=label)

    def human(self, seq: int, time, text: str, images: int) -> None:
        if self.prompts.count_turns:  # else task_started / turn_started events count them
            self.turn = (self.turn or 0) + 1
        self.add(seq, EventKind.HUMAN, time, text=text, images=images)

    def event_msg(self, seq: int, p: dict, time) -> None:
        t = p.get("type")
        typed = typed_event(p)
        if typed is not None:
            twin = self.prompts.twin.get(seq)
            if twin is None or twin > seq:  # else its response item, earlier, carries the prompt
                self.human(seq, time, *typed)
            return
        if t == "user_message":  # an older kind (user_instructions, environment_context): injected
            self.add(seq, EventKind.CONTEXT, time, label=str(p.get("kind") or "user_message"))
        elif (answer := agent_item_text(p)) is not None or t == "agent_message":
            if answer is None:
                answer = as_str(p.get("message")) or ""
                if self.prompts.item_answers:
                    return
            if answer and not self.prompts.response_answers:  # else the response items hold them
                self.add(seq, EventKind.ASSISTANT, time, text=answer)
        elif t in ("task_started", "turn_started"):
            self.turn = (self.turn or 0) + 1
        elif t == "turn_aborted":
            self.add(seq, EventKind.STATUS, time, label=f"aborted:{p.get('reason') or 'unknown'}")
        elif t in ("error", "stream_error"):
            self.add(seq, EventKind.STATUS, time, label=t, text=as_str(p.get("message")) or "", is_error=True)
        elif t == "thread_rolled_back":
            self._roll_back(p.get("num_turns"))
            self.add(seq, EventKind.STATUS, time, label="rolled_back", text=str(p.get("num_turns") or ""))
        elif t == "context_compacted":
            self.compaction(seq, time, "context_compacted")

    def _roll_back(self, num_turns: Any) -> None:
        """The last `num_turns` turns were undone: they are no longer the conversation."""
        if not isinstance(num_turns, int) or isinstance(num_turns, bool) or num_turns < 1 or self.turn is None:
            return
        keep = self.turn - num_turns
        self.events = [e for e in self.events if e.turn is None or e.turn <= keep]
        self.turn = keep if keep > 0 else None

    def response_item(self, seq: int, p: dict, time) -> None:
        t = p.get("type")
        if t == "message":
            role = p.get("role")
            if role == "user":
                self._user(seq, p, time)
            elif role == "assistant":
                texts = [c.get("text", "") for c in message_parts(p) if c.get("type") in ("output_text", "text")]
                text = "\n\n".join(x for x in texts if x)
                if text:
                    self.add(seq, EventKind.ASSISTANT, time, text=text, label=p.get("phase"))
            # developer / system messages: dropped entirely
        elif t == "reasoning":
            self.add(seq, EventKind.REASONING, time)
        elif t in _TOOL_CALL_TYPES:
            self._tool_call(seq, p, time)
        elif t in _TOOL_OUTPUT_TYPES:
            self.tool_result(seq, time, p.get("call_id"), *output_text(p.get("output")))
        elif t in ("compaction", "context_compaction", "compaction_summary"):
            self.compaction(seq, time, t)
        elif t == "agent_message":
            text = text_of(p.get("content"))
            if text:
                self.add(seq, EventKind.ASSISTANT, time, text=text, label=f"agent_message:{p.get('author') or '?'}")

    def _user(self, seq: int, p: dict, time) -> None:
        text, labels, images = user_item_parts(p)
        twin = self.prompts.twin.get(seq)
        injected = self.prompts.authoritative and twin is None  # not typed: injected, whatever its text
        if injected or (not text and not images):
            fallback = "injected_user_message" if injected else "empty_user_message"
            self.add(seq, EventKind.CONTEXT, time, label="+".join(dict.fromkeys(labels)) or fallback)
        elif twin is None or twin > seq:
            self.human(seq, time, text, max(images, self.prompts.images.get(twin, 0)))

    def _tool_call(self, seq: int, p: dict, time) -> None:
        t = p["type"]
        call_id = p.get("call_id") or p.get("id")
        if t == "function_call":
            name, args = p.get("name"), parse_json_maybe(p.get("arguments"))
            if p.get("namespace"):
                name = f"{p['namespace']}.{name}"
        elif t == "custom_tool_call":
            name, args = p.get("name"), parse_json_maybe(p.get("input"))
        elif t in ("local_shell_call", "web_search_call"):
            name, args = t.removesuffix("_call"), p.get("action")
        else:  # tool_search_call
            name, args = "tool_search", p.get("arguments", p.get("query"))
        self.tool_call(seq, time, name if isinstance(name, str) and name else t, call_id, args)


def strip_injected(text: str) -> tuple[str, list[str]]:
    """Remove leading injected blocks from one user text part; return (rest, labels removed)."""
    labels: list[str] = []
    pos = len(text) - len(text.lstrip())  # read on, never copied per block: a message may hold any number
    while part := next((p for p in INJECTED_PARTS if text[pos : pos + len(p[0])].lower() == p[0].lower()), None):
        _, closing, label = part
        end = re.compile(re.escape(closing), re.IGNORECASE).search(text, pos)
        pos = end.end() if end else len(text)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        labels.append(label)
    rest = text[pos:].strip()
    if rest[:40].lower().startswith(_IDE_WRAPPERS) and (asked := [m.end() for m in _REQUEST_MARK.finditer(rest)]):
        return rest[asked[-1] :].strip(), [*labels, "ide_context"]
    return rest, labels


def user_item_parts(p: dict) -> tuple[str, list[str], int]:
    """(kept text, injected labels, images) of a response_item user message."""
    parts = message_parts(p)
    texts = [c["text"] for c in parts if c.get("type") in ("input_text", "text") and isinstance(c.get("text"), str)]
    said = [strip_injected(text) for text in texts]
    labels = [label for _, removed in said for label in removed]
    images = sum(1 for c in parts if c.get("type") in ("input_image", "image"))
    return "\n\n".join(rest for rest, _ in said if rest), labels, images


def typed_event(p: dict) -> tuple[str, int] | None:
    """(text, images) of an event recording what the user typed, or None for any other event."""
    t = p.get("type")
    if t == "user_message" and p.get("kind") in (None, "plain"):
        images = sum(len(p[k]) for k in ("images", "local_images") if isinstance(p.get(k), list))
        return strip_injected(as_str(p.get("message")) or "")[0], images
    item = p.get("item") if t == "item_completed" else None
    if isinstance(item, dict) and item.get("type") in ("UserMessage", "userMessage"):
        parts = [c for c in as_list(item.get("content")) if isinstance(c, dict)]
        texts = [c["text"] for c in parts if c.get("type") in ("text", "Text") and isinstance(c.get("text"), str)]
        if not parts and isinstance(item.get("text"), str):
            texts = [item["text"]]
        images = sum(1 for c in parts if c.get("type") in ("image", "local_image", "input_image"))
        return strip_injected("\n\n".join(texts))[0], images
    return None


def agent_item_text(p: dict) -> str | None:
    item = p.get("item") if p.get("type") == "item_completed" else None
    if isinstance(item, dict) and item.get("type") in ("AgentMessage", "agentMessage"):
        return text_of(item.get("content")) or (as_str(item.get("text")) or "")
    return None


def message_parts(p: dict) -> list[dict]:
    content = p.get("content")
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [c for c in content or [] if isinstance(c, dict)] if isinstance(content, list) else []


def output_text(output: Any) -> tuple[str, bool, int]:
    """(text, is_error, images) of a tool output in any of its historical shapes."""
    is_error = False
    images = 0
    if isinstance(output, dict):  # older {content, success}
        is_error = output.get("success") is False
        output = output.get("content", output.get("output", ""))
    if isinstance(output, list):
        images = sum(1 for c in output if isinstance(c, dict) and c.get("type") in ("input_image", "image"))
        output = text_of(output)
    if not isinstance(output, str):
        output = "" if output is None else json.dumps(output, ensure_ascii=False)
    text, obj = output, parse_json_maybe(output)
    if isinstance(obj, dict) and isinstance(obj.get("output"), str):
        text = obj["output"]
        code = as_dict(obj.get("metadata")).get("exit_code")
        if isinstance(code, int) and code != 0:
            is_error = True
    m = _EXIT_RE.search(text[:400])
    if m and int(m.group(1)) != 0:
        is_error = True
    return text, is_error, images
