"""What a Codex rollout line means, apart from how a session is assembled from them (codex.py).

- `strip_injected`, `user_item_parts`: a response_item user message → the words kept, the labels of
  the injected parts removed (AGENTS.md, environment context, skills, …), its images.
- `typed_event`, `agent_item_text`: the event_msg kinds that record what the user typed
  (`user_message`, `item_completed` UserMessage) and the agent's answers (AgentMessage items).
- `message_parts`, `text_of`, `output_text`: message content and tool output in every historical
  shape (string or parts; `{content, success}`, JSON `{output, metadata.exit_code}`, exit lines).
- `source_kind`, `find_key`: the session_meta `source` (`"cli"`, `{"subagent": …}`) and its fields.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dsh_memory.readers._jsonl import as_dict, as_list, as_str, parse_json_maybe

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

_EXIT_RE = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)", re.MULTILINE)


def source_kind(source: Any) -> tuple[str, str | None]:
    """`"cli"` → ("cli", None); `{"subagent": "review"}` → ("subagent", "review"); unknown → ("unknown", None)."""
    if isinstance(source, str):
        return source.lower(), None
    if isinstance(source, dict) and len(source) == 1:
        ((key, value),) = source.items()
        detail = value if isinstance(value, str) else (next(iter(value), None) if isinstance(value, dict) else None)
        return str(key).lower(), detail
    return "unknown", None


def find_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        if value.get(key):
            return value[key]
        for v in value.values():
            found = find_key(v, key)
            if found:
                return found
    return None


def strip_injected(text: str) -> tuple[str, list[str]]:
    """Remove leading injected blocks from one user text part; return (rest, labels removed)."""
    labels: list[str] = []
    rest = text.lstrip()
    while part := next((p for p in INJECTED_PARTS if rest[: len(p[0])].lower() == p[0].lower()), None):
        _, closing, label = part
        end = re.search(re.escape(closing), rest, re.IGNORECASE)
        rest = rest[end.end() :].lstrip() if end else ""
        labels.append(label)
    return rest.strip(), labels


def user_item_parts(p: dict) -> tuple[str, list[str], int]:
    """(kept text, injected labels, images) of a response_item user message."""
    kept: list[str] = []
    labels: list[str] = []
    images = 0
    for part in message_parts(p):
        ptype = part.get("type")
        if ptype in ("input_text", "text") and isinstance(part.get("text"), str):
            rest, removed = strip_injected(part["text"])
            labels.extend(removed)
            if rest:
                kept.append(rest)
        elif ptype in ("input_image", "image"):
            images += 1
    return "\n\n".join(kept), labels, images


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


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(c.get("text", "") for c in value if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


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
