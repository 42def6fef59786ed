"""One model for sessions from every supported agent (DSH, Codex, Claude Code).

Readers turn a log file into a `Session`; everything downstream (render, budget, extraction)
reads only this model. `Event.seq` is monotonic within a session and is the extraction
watermark: a delta is "events with seq > watermark".
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

SourceKind = Literal["dsh", "codex", "claude"]
SOURCES: tuple[SourceKind, ...] = ("dsh", "codex", "claude")


class EventKind(str, Enum):
    HUMAN = "human"  # a prompt the human typed (verbatim)
    ASSISTANT = "assistant"  # visible assistant text
    TOOL_CALL = "tool_call"  # tool name + arguments
    TOOL_RESULT = "tool_result"  # tool output (may be an error)
    CONTEXT = "context"  # injected context (AGENTS.md, runtime snapshot, hook output…): marker only
    REASONING = "reasoning"  # model-private reasoning: marker only, text never kept
    COMPACTION = "compaction"  # the agent compacted its context here: marker
    STATUS = "status"  # turn ended with error / aborted / interrupted / max-tokens …


class Event(BaseModel):
    """One rendered-relevant event, in seq order."""

    seq: int
    kind: EventKind
    text: str = ""
    turn: int | None = None
    time: datetime | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    arguments: Any = None  # parsed JSON arguments (dict/list) or the raw string
    is_error: bool = False
    images: int = 0  # number of image attachments (rendered as a marker)
    label: str | None = None  # context source kind, status reason, compaction kind…
    cwd: str | None = None  # the folder a tool call ran in, when the log says and it is not the session's


class SessionRef(BaseModel):
    """What stat-only discovery knows about a session log (no file content read)."""

    id: str
    source: SourceKind
    path: Path
    size: int
    mtime_ns: int
    hint_root: bool | None = None  # known from the path alone (e.g. Claude subagent files)
    # Another log of the same source already carries this id (a copied session folder): this one
    # is never extracted, so it cannot overwrite that session's memory (readers.discover).
    collision_with: Path | None = None

    @property
    def updated_at(self) -> datetime:
        return datetime.fromtimestamp(self.mtime_ns / 1e9, tz=UTC)


class Session(BaseModel):
    """A fully read session."""

    id: str
    source: SourceKind
    path: Path
    cwd: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    is_root: bool = True
    # False for non-interactive runs (e.g. `codex exec`): skipped by default.
    interactive: bool = True
    parent_id: str | None = None
    title: str | None = None
    format_version: int | None = None
    events: list[Event] = Field(default_factory=list)
    # Highest seq present in the log (rendered or not); the watermark after a full extraction.
    last_seq: int = -1
    # Events before this seq were inherited from a parent (fork seed) and are never rendered.
    inherited_cut: int = 0
    # Non-fatal problems (skipped lines, torn tails, unknown version…), each naming the file.
    warnings: list[str] = Field(default_factory=list)
    # Extra per-source facts (e.g. codex "source": "cli"; dsh "origin").
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def human_prompts(self) -> list[Event]:
        return [e for e in self.events if e.kind is EventKind.HUMAN]

    @property
    def extractable(self) -> bool:
        """An interactive root session with at least one human prompt (the default filter)."""
        return self.is_root and self.interactive and any(e.kind is EventKind.HUMAN for e in self.events)

    def events_after(self, watermark: int) -> list[Event]:
        return [e for e in self.events if e.seq > watermark]


def extract_command(session_id: str) -> str:
    """The command that extracts one session now, as a user pastes it: the id shell-quoted (a DSH
    session id is a folder name: "$(…)", ";" must not run) and after `--` when it starts with "-"."""
    return f"dsh-memory extract {'-- ' if session_id.startswith('-') else ''}{shlex.quote(session_id)}"
