"""Helpers shared by the read-path operations: validation, cursors, the file corpus, a small
content cache, and usage telemetry (the forgetting input)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat as stat_mod
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError

M = TypeVar("M", bound=BaseModel)

ROLLOUT_DIR = "rollout_summaries"


def validate(model: type[M], **values: Any) -> M:
    """Build a request model; pydantic's complaint becomes a UserInputError naming the fields."""
    try:
        return model(**values)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "request"
            parts.append(f"{loc}: {err['msg']}")
        raise UserInputError("invalid arguments: " + "; ".join(parts)) from None


# ---- cursors: opaque, and bound to the request they continue -------------------------------


def fingerprint(*parts: Any) -> str:
    raw = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def encode_cursor(offset: int, fp: str) -> str:
    raw = json.dumps({"o": offset, "f": fp}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, fp: str) -> int:
    if not cursor:
        return 0
    try:
        pad = "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(cursor + pad))
        offset, got = int(data["o"]), data["f"]
    except Exception:
        raise UserInputError("invalid cursor (pass next_cursor from the previous page unchanged)") from None
    if got != fp or offset < 0:
        raise UserInputError("cursor belongs to a different request; repeat the same arguments")
    return offset


# ---- paths --------------------------------------------------------------------------------


def root_of(store: Any) -> Path:
    return Path(store.root)


def rel_of(store: Any, path: Path) -> str:
    """Canonical root-relative POSIX path of an already-guarded absolute path."""
    root = root_of(store)
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    s = rel.as_posix()
    return "" if s == "." else s


def guard(store: Any, rel: str) -> Path:
    """Every path an agent names goes through the store's guard first; '' is the root."""
    if rel is None:
        rel = ""
    if not isinstance(rel, str):
        raise UserInputError("path must be a string")
    if "\x00" in rel:
        raise PathGuardError("path contains a NUL byte")
    stripped = rel.strip()
    if stripped in ("", ".", "./"):
        return root_of(store)
    return Path(store.resolve(stripped))


def is_active_rollout(rel: str) -> bool:
    """rollout_summaries/<slug>.md — not .retired, not nested, not hidden."""
    parts = rel.split("/")
    return len(parts) == 2 and parts[0] == ROLLOUT_DIR and parts[1].endswith(".md") and not parts[1].startswith(".")


def _visible_files(base: Path, recursive: bool) -> Iterator[tuple[Path, os.stat_result]]:
    """Regular, non-hidden, non-symlink files under `base` (sorted for stable output)."""
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if recursive:
                yield from _visible_files(Path(entry.path), True)
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path), entry.stat(follow_symlinks=False)


def corpus(store: Any) -> Iterator[tuple[str, Path, os.stat_result]]:
    """The searchable memory: MEMORY.md, memory_summary.md, active rollout summaries, skills/**,
    ad hoc notes. Never .state, never .retired, never raw memories."""
    root = root_of(store)
    for name in ("MEMORY.md", "memory_summary.md"):
        p = root / name
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        if stat_mod.S_ISREG(st.st_mode):
            yield name, p, st
    for base, recursive in ((root / ROLLOUT_DIR, False), (root / "skills", True), (Path(store.notes_dir), True)):
        for p, st in _visible_files(base, recursive):
            if base.name == ROLLOUT_DIR and not p.name.endswith(".md"):
                continue
            yield rel_of(store, p), p, st


def files_under(store: Any, prefix: str | None) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Files a line search covers: the corpus, or everything visible under an explicit prefix
    (so `rollout_summaries/.retired` can be searched on purpose)."""
    if not prefix or prefix.strip() in ("", ".", "./"):
        yield from corpus(store)
        return
    base = guard(store, prefix)
    try:
        st = base.lstat()
    except FileNotFoundError:
        raise NotFoundError(f"no such file or directory in memory: {prefix}") from None
    if stat_mod.S_ISREG(st.st_mode):
        yield rel_of(store, base), base, st
        return
    for p, pst in _visible_files(base, True):
        yield rel_of(store, p), p, pst


# ---- content cache: long-running servers avoid re-reading unchanged files -----------------

_CACHE: dict[str, tuple[tuple[int, int, int], str | None]] = {}
_CACHE_CHARS = [0]
_CACHE_LIMIT = 96_000_000


def read_text(path: Path, st: os.stat_result | None = None) -> str | None:
    """File text keyed by (ino, size, mtime_ns); None for non-UTF-8 files."""
    st = st or path.stat()
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _CACHE.get(str(path))
    if hit and hit[0] == key:
        return hit[1]
    try:
        text: str | None = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if _CACHE_CHARS[0] > _CACHE_LIMIT:
        _CACHE.clear()
        _CACHE_CHARS[0] = 0
    _CACHE[str(path)] = (key, text)
    _CACHE_CHARS[0] += len(text or "")
    return text


# ---- usage telemetry ----------------------------------------------------------------------


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def record_usage(store: Any, rels: Iterable[str], state: Any = None, now: datetime | None = None) -> list[str]:
    """One usage record per active rollout summary per call. Everything else never counts."""
    keys = sorted({r for r in rels if is_active_rollout(r)})
    if not keys:
        return []
    if state is None:
        from dsh_memory.state import StateStore

        state = StateStore(root_of(store))
    when = now or now_utc()
    for key in keys:
        state.record_usage(key, when)
    return keys
