"""Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl[.zst]`.

Each line is `{timestamp, type, payload}`; `type` is session_meta, response_item, event_msg,
turn_context, compacted, … (see reference/codex-memories.md §5). codex_events.py maps the lines to
events; `source_kind` reads the session_meta `source`.

A fork (`forked_from_id`) opens with the parent's history copied in, every copied line stamped at
the fork instant: that burst is inherited (`inherited_cut`), like a DSH fork seed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Session, SessionRef
from dsh_memory.readers._input import is_dir, regular_stat, scandir
from dsh_memory.readers._jsonl import UUID_RE, as_str, parse_time, prompt_title, read_jsonl
from dsh_memory.readers.codex_events import events

FILE_RE = re.compile(
    r"^rollout-(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-(?P<id>" + UUID_RE + r")\.jsonl(?P<zst>\.zst)?$"
)
_MAX_DEPTH = 4  # YYYY/MM/DD plus one spare level

# Sources whose runs have no human at the keyboard (Codex itself never mines these).
NON_INTERACTIVE_SOURCES = {"exec", "mcp", "internal"}

_FORK_BURST_GAP_SECONDS = 1.0  # copied lines are written at once; the child's own turn comes later


def discover(root: Path) -> list[SessionRef]:
    found: dict[str, list[tuple[Path, os.stat_result]]] = {}
    _walk(Path(root), 0, found)
    refs: list[SessionRef] = []
    for sid, files in found.items():
        # Prefer the plain file (a .zst twin may still be being written), then the newest.
        path, st = max(files, key=lambda f: (f[0].name.endswith(".jsonl"), f[1].st_mtime_ns))
        refs.append(SessionRef(id=sid, source="codex", path=path, size=st.st_size, mtime_ns=st.st_mtime_ns))
    return sorted(refs, key=lambda r: str(r.path))


def _walk(folder: Path, depth: int, found: dict[str, list[tuple[Path, os.stat_result]]]) -> None:
    for entry in scandir(folder):
        m = FILE_RE.match(entry.name)
        if m is None:  # a folder (YYYY/MM/DD) to walk, or a file that is not a rollout
            if depth < _MAX_DEPTH and is_dir(entry, follow_symlinks=False):
                _walk(Path(entry.path), depth + 1, found)
        elif (st := regular_stat(entry)) is not None:  # named like a rollout: must be a regular file
            found.setdefault(m.group("id").lower(), []).append((Path(entry.path), st))


def load(ref: SessionRef) -> Session:
    f = read_jsonl(ref.path)
    meta_seq, meta = _session_meta(f.records)
    if meta is None:
        raise SessionReadError(ref.path, "no session_meta record")
    session = Session(id=ref.id, source="codex", path=ref.path, last_seq=f.last_seq, warnings=f.warnings)
    _apply_meta(session, meta, ref)
    session.inherited_cut = _fork_cut(f.records, meta_seq, meta, f.last_seq)
    lines = _items(f.records)
    items = [it for it in lines if it[0] >= session.inherited_cut]  # before it: copied from the parent
    session.events = events(items)
    session.updated_at = next((time for *_, time in reversed(lines) if time), None) or ref.updated_at
    session.title = prompt_title(session)
    return session


def _items(records: list[tuple[int, dict]]) -> list[tuple[int, str, dict, Any]]:
    """(seq, line type, payload, time) of every usable line, bare pre-envelope items included."""
    out = []
    for seq, obj in records:
        typ = obj.get("type")
        payload = obj.get("payload")
        if "payload" not in obj and typ not in ("session_meta", "event_msg", "turn_context", "compacted"):
            payload, typ = obj, "response_item"  # pre-envelope rollouts: bare response items
        if isinstance(payload, dict) and isinstance(typ, str):
            out.append((seq, typ, payload, parse_time(obj.get("timestamp"))))
    return out


def _fork_cut(records: list[tuple[int, dict]], meta_seq: int, meta: dict, last_seq: int) -> int:
    """First seq of a fork's own history: the end of the burst of copied lines after its meta."""
    if not meta.get("forked_from_id"):
        return 0
    prev = next((parse_time(o.get("timestamp")) for q, o in records if q == meta_seq), None)
    copied_meta = False
    for seq, obj in records:
        if seq <= meta_seq:
            continue
        t = parse_time(obj.get("timestamp"))
        if t is not None and prev is not None and (t - prev).total_seconds() > _FORK_BURST_GAP_SECONDS:
            return seq
        prev = t or prev
        copied_meta = copied_meta or obj.get("type") == "session_meta"
    return last_seq + 1 if copied_meta else 0  # only the copy, or nothing to tell copied lines apart


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
    session.cwd = as_str(meta.get("cwd"))
    session.created_at = parse_time(meta.get("timestamp"))
    source = meta.get("source")
    kind, detail = source_kind(source)
    session.meta["source"] = kind if detail is None else f"{kind}:{detail}"
    if kind == "subagent":
        session.is_root = False
        session.parent_id = meta.get("parent_thread_id") or find_key(source, "parent_thread_id")
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
        return value.get(key) or next(filter(None, (find_key(v, key) for v in value.values())), None)
    return None
