"""Where a session worked, read from its header alone: the `exclude_projects` check.

A session of an excluded project must not be read beyond what says where it ran. This reads at
most `MAX_HEAD_BYTES` from the start of a log (decoded, for a `.zstd` DSH log) and keeps only the
working directory:
- DSH: the header line's `cwd`;
- Codex: the `session_meta` record's `cwd` (the first line);
- Claude Code: the first record that carries a top-level `cwd` (records before the first prompt,
  summaries and snapshots, carry none); when none is complete within the bound, the project
  folder's name mapped back to a path (`claude_folder_path`).

Nothing here raises: an unreadable head is `None` (the session is then read as usual and fails or
not on its own).
"""

from __future__ import annotations

import json
import os
import re
import stat
from functools import cache
from pathlib import Path

from dsh_memory.models import SessionRef

MAX_HEAD_BYTES = 64 * 1024
MAX_FOLDER_PARTS = 64  # a dashed name with more dashes is not mapped back
MAX_CANDIDATES = 20_000  # paths tried at most
_CWD = re.compile(rb'"cwd"\s*:\s*"((?:[^"\\]|\\.){1,4096})"')


FIRST_READ = 8 * 1024  # most headers fit; a Codex meta with long instructions needs the rest
_CACHE: dict[tuple[str, int, int], str | None] = {}  # (path, size, mtime) → cwd, for repeated scans


def session_cwd(ref: SessionRef) -> str | None:
    """The working directory a session's header names, or None (cached per file version)."""
    key = (str(ref.path), ref.size, ref.mtime_ns)
    if key not in _CACHE:
        if len(_CACHE) > 50_000:
            _CACHE.clear()
        _CACHE[key] = _find_cwd(ref, FIRST_READ) or _find_cwd(ref, MAX_HEAD_BYTES, fallback=True)
    return _CACHE[key]


def _find_cwd(ref: SessionRef, limit: int, fallback: bool = False) -> str | None:
    head = _head(Path(ref.path), limit)
    cwd: str | None = None
    lines = head.split(b"\n")  # an empty head is one empty line, which names no cwd
    for n, line in enumerate(lines[:-1] if len(head) >= limit else lines):
        cwd = _line_cwd(line, ref.source)
        if cwd or ref.source == "dsh" or (ref.source == "codex" and n >= 4):  # DSH: the header line
            break
    if cwd is None and ref.source == "claude" and fallback:
        m = _CWD.search(head)
        cwd = (_unquote(m.group(1)) if m else None) or claude_folder_path(Path(ref.path).parent.name)
    return cwd


def _line_cwd(line: bytes, source: str) -> str | None:
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if source == "codex" and isinstance(obj.get("payload"), dict):
        obj = obj["payload"]
    cwd = obj.get("cwd")
    return cwd if isinstance(cwd, str) and cwd.strip() else None


def _unquote(raw: bytes) -> str | None:
    try:
        value = json.loads(b'"' + raw + b'"')
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) and value.strip() else None


def _head(path: Path, limit: int = MAX_HEAD_BYTES) -> bytes:
    """The first `limit` bytes of a log's data (b"" when unreadable)."""
    try:  # non-blocking: a FIFO put in a log's place after discovery must not hang the open
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return b""
            if path.name.endswith((".zst", ".zstd")):
                import zstandard

                return zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read(limit)
            return fh.read(limit)
    except Exception:  # noqa: BLE001 — any unreadable head is "unknown", never a crash
        return b""


def claude_folder_path(name: str) -> str | None:
    """The directory a Claude Code project folder stands for, when exactly one existing directory
    fits: Claude Code names the folder after the cwd with every character other than a letter or
    digit replaced by `-`, so `-home-w-my-app` may be /home/w/my-app or /home/w/my/app. Each `-`
    is tried as `/` (while the folder so far exists), `-`, `.`, `_` or a space. None when no
    candidate, or more than one, exists (or the search would be too long)."""
    if not name.startswith("-") or name.count("-") > MAX_FOLDER_PARTS:
        return None
    parts = name[1:].split("-")
    found: set[str] = set()
    budget = [MAX_CANDIDATES]

    @cache
    def names(base: str) -> list[str]:  # a folder's entries, read once
        try:
            return os.listdir(base)[:10_000]
        except OSError:
            return []

    def walk(i: int, base: str, seg: str) -> None:
        budget[0] -= 1
        if budget[0] < 0 or len(found) > 1:
            return
        if i == len(parts):
            if seg and os.path.isdir(os.path.join(base, seg)):
                found.add(os.path.join(base, seg))
            return
        if seg and os.path.isdir(os.path.join(base, seg)):
            walk(i + 1, os.path.join(base, seg), parts[i])
        for sep in "-._ ":
            longer = seg + sep + parts[i]
            if any(n.startswith(longer) for n in names(base)):  # only names some entry starts with
                walk(i + 1, base, longer)

    walk(1, "/", parts[0])
    return found.pop() if len(found) == 1 and budget[0] >= 0 else None


def excluded_sessions(settings) -> dict[str, int]:
    """`exclude_projects` at a glance (`dsh-memory status`): how many patterns, and how many of
    the discovered sessions they exclude (headers read, nothing more)."""
    from dsh_memory import readers
    from dsh_memory.scope import excluded_by

    patterns = list(settings.exclude_projects or ())
    if not patterns:
        return {"patterns": 0, "sessions": 0}
    refs = readers.discover(settings.roots)
    return {"patterns": len(patterns), "sessions": sum(1 for r in refs if excluded_by(session_cwd(r), patterns))}
