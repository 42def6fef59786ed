"""Strict validation of turn-end notifications into one `TurnEnd` model. Three senders, three
shapes (the `_*Body` models below; reference/dsh-session-format.md §10, codex-memories.md §5/§7):
  * dsh    — our DSH plugin: `{sessionId, turn, reason: {kind, …}, seq, header?, transcriptPath?}`
  * codex  — Codex `notify` (JSON as the last argv argument): `{type: "agent-turn-complete", thread-id, …}`
  * claude — Claude Code hook stdin: `{session_id, transcript_path, cwd, hook_event_name, stop_hook_active}`
             (DSH's Claude-Code hook bridge sends it too, with a transcript under $DSH_HOME/sessions:
             accepted as kind 'dsh')

A payload is rejected (`PayloadError` with an HTTP status: 413 too large, 400 otherwise) or
accepted as a `TurnEnd` that says whether it should trigger extraction and, if not, why.
Transcript paths are checked lexically and through symlinks to lie inside the agent's root, never
opened. Error messages name fields and rules, never echo submitted values.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from dsh_memory.errors import ConfigError
from dsh_memory.serve.guard import MAX_BODY_BYTES
from dsh_memory.settings import SourceRoots
from dsh_memory.transcript.redact import redact

MAX_DEPTH = 32
MAX_ID_CHARS = 128
MAX_PATH_CHARS = 4096
SESSION_ID_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_-]{{0,{MAX_ID_CHARS - 1}}}$")
KINDS = ("dsh", "codex", "claude")
Kind = Literal["dsh", "codex", "claude"]
SECRET_HEADER = "X-DSH-Memory-Secret"  # shared-secret header, checked when SECRET_ENV is set
SECRET_ENV = "DSH_MEMORY_HOOK_SECRET"
CODEX_TURN_COMPLETE = "agent-turn-complete"
CLAUDE_KNOWN_EVENTS = ("Stop", "SubagentStop", "SessionEnd")


def hook_secret() -> str | None:
    """SECRET_ENV as a header carries it, None when unset or blank: HTTP drops the whitespace
    around a header value, so it is no part of the secret. One with a line break or another control
    character inside can never be sent: ConfigError."""
    secret = os.environ.get(SECRET_ENV, "").strip()
    if any(c < " " and c != "\t" or c == "\x7f" for c in secret):
        raise ConfigError(f"{SECRET_ENV} holds a line break or another control character: no HTTP header can carry it")
    return secret or None


class PayloadError(ValueError):
    """The notification was refused; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class TurnEnd(BaseModel):
    """One accepted turn-end notification, whatever the sender."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    session_id: str = Field(description="Session / thread id (safe charset, ≤128 chars); '' only when ignored")
    turn: int | str | None = Field(None, description="DSH turn number or Codex turn-id")
    reason: str | None = Field(None, description="DSH reason kind, Codex notify type or Claude hook event")
    seq: int | None = Field(None, description="DSH seq of the turn/end event")
    cwd: str | None = None
    transcript_path: str | None = Field(None, description="Checked to lie inside the agent's root; never opened here")
    why_not: str = Field("", description="Why it does not trigger extraction ('' when it does)")

    @field_validator("turn", "reason")
    @classmethod
    def _redacted(cls, value: Any) -> Any:
        """Free text a broken hook may fill with a key: forwarded to Prefect, so redacted."""
        return redact(value) if isinstance(value, str) else value

    @property
    def should_trigger(self) -> bool:
        return not self.why_not


# ---------------------------------------------------------------- raw wire shapes (strict)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=False)


class _DshReason(_Strict):
    kind: StrictStr = Field(min_length=1, max_length=64)


class _DshHeader(_Strict):
    id: StrictStr | None = None
    cwd: StrictStr | None = Field(None, max_length=MAX_PATH_CHARS)
    origin: StrictStr | None = None
    delegationDepth: StrictInt | None = Field(None, ge=0)
    parentSession: StrictStr | None = None


class _DshBody(_Strict):
    sessionId: StrictStr
    turn: StrictInt = Field(ge=0)
    reason: _DshReason
    seq: StrictInt | None = Field(None, ge=0)
    header: _DshHeader | None = None
    transcriptPath: StrictStr | None = Field(None, max_length=MAX_PATH_CHARS)


class _CodexAny(_Strict):
    type: StrictStr = Field(max_length=128)


class _CodexBody(_CodexAny):
    thread_id: StrictStr = Field(alias="thread-id")
    turn_id: StrictStr | None = Field(None, alias="turn-id", max_length=MAX_ID_CHARS)
    cwd: StrictStr | None = Field(None, max_length=MAX_PATH_CHARS)
    input_messages: list[StrictStr] | None = Field(None, alias="input-messages")
    last_assistant_message: StrictStr | None = Field(None, alias="last-assistant-message")


class _ClaudeBody(_Strict):
    session_id: StrictStr
    transcript_path: StrictStr = Field(max_length=MAX_PATH_CHARS)
    hook_event_name: StrictStr = Field(max_length=128)
    cwd: StrictStr | None = Field(None, max_length=MAX_PATH_CHARS)
    stop_hook_active: StrictBool | None = None


# ---------------------------------------------------------------- parsing


def _depth_ok(value: Any) -> bool:
    """Iterative nesting check (no recursion, so no RecursionError of our own)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children)
    return True


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words: `null`, `true`, `an array`, `a string`…"""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), ((int, float), "a number"))
    return next((name for t, name in kinds if isinstance(value, t)), type(value).__name__)


def parse_json(body: bytes | str, max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """Size cap (413) before parsing, then a safe parse into a JSON object (400 otherwise)."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if len(raw) > max_bytes:
        raise PayloadError(f"body larger than {max_bytes} bytes", status=413)
    if not raw.strip():
        raise PayloadError("empty body")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise PayloadError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):
        raise PayloadError("body is not valid JSON") from None
    if not isinstance(data, dict):
        raise PayloadError(f"expected a JSON object, got {json_kind(data)}")
    if not _depth_ok(data):
        raise PayloadError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return data


def detect_kind(data: dict[str, Any]) -> Kind:
    if "hook_event_name" in data or "session_id" in data or "transcript_path" in data:
        return "claude"
    if "thread-id" in data or "turn-id" in data or "last-assistant-message" in data or "input-messages" in data:
        return "codex"
    if "sessionId" in data or "transcriptPath" in data or ("turn" in data and "reason" in data):
        return "dsh"
    if isinstance(data.get("type"), str) and "sessionId" not in data:
        return "codex"
    raise PayloadError("unrecognised payload: not a DSH turn-end, Codex notify or Claude Code hook body")


def _parse(shape: type[_Strict], kind: str, data: dict[str, Any]) -> Any:
    """`data` as the wire shape `shape`, or a PayloadError naming the fields (never their values)."""
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)[:8]
        parts = [f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in errors]
        raise PayloadError(f"invalid {kind} payload: " + "; ".join(parts)) from None


def check_session_id(value: str, field: str = "session id") -> str:
    if not SESSION_ID_RE.fullmatch(value):
        raise PayloadError(
            f"{field} must be 1-{MAX_ID_CHARS} characters of [A-Za-z0-9_-], starting with a letter or digit"
        )
    if redact(value) != value:  # stored, and named in the event's resource: never redacted there
        raise PayloadError(f"{field} has the shape of a secret: refused, never stored or forwarded")
    return value


def _root_path(root: os.PathLike | str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(root))))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_transcript_path(value: str, root: os.PathLike | str | None, field: str) -> str:
    """`value` must be an absolute path inside `root`, both as written (after collapsing `..`)
    and after resolving symlinks. Returns the normalized path. Never opens the file."""
    if root is None:
        raise PayloadError(f"{field}: this agent's session root is not configured")
    if "\x00" in value or not value.strip():
        raise PayloadError(f"{field} must be a non-empty path")
    if not os.path.isabs(value):
        raise PayloadError(f"{field} must be an absolute path")
    root_s = _root_path(root)
    lexical = os.path.normpath(value)
    if not _inside(lexical, root_s) or lexical == root_s:
        raise PayloadError(f"{field} must lie inside the configured session root")
    if not _inside(os.path.realpath(lexical), os.path.realpath(root_s)):
        raise PayloadError(f"{field} must lie inside the configured session root (symlink escapes it)")
    return lexical


def _validate_dsh(data: dict[str, Any], roots: SourceRoots) -> TurnEnd:
    body = _parse(_DshBody, "dsh", data)
    sid = check_session_id(body.sessionId, "sessionId")
    path = None
    if body.transcriptPath is not None:
        path = check_transcript_path(body.transcriptPath, roots.dsh_sessions, "transcriptPath")
    header = body.header
    why = ""
    if header is not None and (header.origin == "subagent" or (header.delegationDepth or 0) > 0):
        why = "subagent session (header.origin 'subagent' or delegationDepth > 0): not extracted"
    return TurnEnd(
        kind="dsh",
        session_id=sid,
        turn=body.turn,
        reason=body.reason.kind,
        seq=body.seq,
        cwd=header.cwd if header is not None else None,
        transcript_path=path,
        why_not=why,
    )


def _validate_codex(data: dict[str, Any], roots: SourceRoots) -> TurnEnd:
    head = _parse(_CodexAny, "codex", data)
    if head.type != CODEX_TURN_COMPLETE:
        tid = data.get("thread-id")
        sid = tid if isinstance(tid, str) and SESSION_ID_RE.fullmatch(tid) else ""
        return TurnEnd(
            kind="codex",
            session_id=sid,
            reason=head.type[:64],
            why_not=f"Codex notify type is not {CODEX_TURN_COMPLETE!r}",
        )
    body = _parse(_CodexBody, "codex", data)
    sid = check_session_id(body.thread_id, "thread-id")
    return TurnEnd(kind="codex", session_id=sid, turn=body.turn_id, reason=body.type, cwd=body.cwd)


def _validate_claude(data: dict[str, Any], roots: SourceRoots, bridge: bool | None = None) -> TurnEnd:
    """Claude Code hook stdin. DSH's Claude-Code hook bridge (@deepseek-ai/dsh-hooks-claude-code)
    sends the same shape with a transcript under $DSH_HOME/sessions: `bridge=True` (kind 'dsh'),
    or `None` to decide by where the transcript path points."""
    body = _parse(_ClaudeBody, "claude", data)
    sid = check_session_id(body.session_id, "session_id")
    if bridge is None:
        dsh_root = roots.dsh_sessions
        bridge = dsh_root is not None and _inside(os.path.normpath(body.transcript_path), _root_path(dsh_root))
    root = roots.dsh_sessions if bridge else roots.claude_projects
    path = check_transcript_path(body.transcript_path, root, "transcript_path")
    event = body.hook_event_name
    if event == "SubagentStop":
        why = "SubagentStop: subagent turns are not extracted"
    elif event not in CLAUDE_KNOWN_EVENTS:
        why = "hook_event_name is not Stop, SubagentStop or SessionEnd"
    elif body.stop_hook_active:
        why = "stop_hook_active is true: a Stop hook already continued this turn (loop guard)"
    else:
        why = ""
    return TurnEnd(
        kind="dsh" if bridge else "claude",
        session_id=sid,
        reason=event[:64],
        cwd=body.cwd,
        transcript_path=path,
        why_not=why,
    )


_VALIDATORS = {"dsh": _validate_dsh, "codex": _validate_codex, "claude": _validate_claude}


def parse_turn_end(
    body: bytes | str, kind: str = "auto", roots: SourceRoots | None = None, max_bytes: int = MAX_BODY_BYTES
) -> TurnEnd:
    """Bytes in, `TurnEnd` out, or `PayloadError` (413 / 400). The one entry point for every adapter.
    `kind` is 'auto' or one of KINDS."""
    data = parse_json(body, max_bytes=max_bytes)
    if kind not in ("auto", *KINDS):
        raise PayloadError(f"unknown kind {kind[:32]!r}; one of: auto, {', '.join(KINDS)}")
    roots = roots if roots is not None else SourceRoots.from_env()
    shape = detect_kind(data)
    if shape == "claude" and kind in ("auto", "dsh", "claude"):
        # a Claude-Code-shaped body: Claude Code itself, or DSH's Claude-Code hook bridge
        return _validate_claude(data, roots, bridge={"auto": None, "dsh": True, "claude": False}[kind])
    return _VALIDATORS[shape if kind == "auto" else kind](data, roots)
