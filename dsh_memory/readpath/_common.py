"""Helpers shared by the read-path operations: validation, cursors, the file corpus, a small
content cache, and usage telemetry (the forgetting input)."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import re
import stat as stat_mod
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError
from dsh_memory.readpath.models import is_utf8

M = TypeVar("M", bound=BaseModel)

ROLLOUT_DIR = "rollout_summaries"


def validate(model: type[M], /, **values: Any) -> M:
    """Build a request model; pydantic's complaint becomes a UserInputError naming the fields."""
    try:
        return model(**values)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in err['loc']) or 'request'}: {err['msg']}" for err in exc.errors()]
        raise UserInputError("invalid arguments: " + "; ".join(parts)) from None


# Control characters but tab and line feed (C0, DEL, C1): an escape sequence in a memory file
# (its text comes from session logs) would drive the terminal it is printed on, or reach an agent's
# context as bytes nobody sees.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# ... and beyond C0 (what JSON leaves raw too): DEL, C1, the bidi embeddings, overrides and
# isolates (U+202A-U+202E, U+2066-U+2069): they reorder what a terminal shows ("Trojan Source"), so
# a line reads other than it is; and lone surrogates (a file name's bytes that are no UTF-8,
# `"\ud800"` in a JSON log), which no UTF-8 output encodes. A character class's body.
BEYOND_C0 = r"\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_HIDDEN = re.compile(rf"[\x00-\x08\x0b-\x1f{BEYOND_C0}]")


def visible(text: str) -> str:
    """`text` for a terminal or an agent's context: each control character but tab and line feed
    shown as `\\x1b`, a bidi control as `\\u202e`, a file name's byte that is no UTF-8 as `\\xff`
    (as `list` names it), another lone surrogate as `\\ud800` (a CRLF line end is a line end)."""
    return _HIDDEN.sub(_escaped, text.replace("\r\n", "\n"))


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
        if offset > sys.maxsize:  # made up: no page is that far (and islice refuses it)
            raise ValueError
    except Exception:
        raise UserInputError("invalid cursor (pass next_cursor from the previous page unchanged)") from None
    if got != fp or offset < 0:
        raise UserInputError("cursor belongs to a different request; repeat the same arguments")
    return offset


# ---- paths --------------------------------------------------------------------------------

NAME_MAX_BYTES = 255  # one file or directory name (NAME_MAX on Linux, macOS, Windows)
PATH_MAX_BYTES = 4096  # a whole path (PATH_MAX on Linux)


def check_name_lengths(rel: str, root: str = "") -> None:
    """A path no file system can hold is bad input, not an OSError ("File name too long"):
    every component at most 255 bytes in UTF-8, the whole path with `root` and its NUL at most
    4096."""
    size = len(rel.encode("utf-8", "surrogatepass"))
    room = PATH_MAX_BYTES - 1 - (len(os.fsencode(root)) + 1 if root else 0)
    if size > room:
        raise UserInputError(f"path is {size} bytes long in UTF-8; at most {room} bytes are allowed")
    for part in rel.split("/"):
        n = len(part.encode("utf-8", "surrogatepass"))
        if n > NAME_MAX_BYTES:
            shown = part if len(part) <= 40 else part[:40] + "…"
            raise UserInputError(
                f"name {shown!r} is {n} bytes long in UTF-8; names (each part of a path) "
                f"are at most {NAME_MAX_BYTES} bytes"
            )


def guard(store: Any, rel: str | None) -> tuple[Path, str]:
    """Every path an agent names goes through here first (length limits, then the store's
    guard): (the path, its canonical root-relative POSIX form); '' or None is the root ('')."""
    rel = rel or ""
    if "\x00" in rel:
        raise PathGuardError("path contains a NUL byte")
    check_name_lengths(rel, str(store.root))
    stripped = rel.strip()
    if stripped in ("", ".", "./"):
        return store.root, ""
    path = store.resolve(stripped)
    return path, store.rel(path)


def is_active_rollout(rel: str) -> bool:
    """rollout_summaries/<slug>.md — not .retired, not nested, not hidden."""
    parts = rel.split("/")
    return len(parts) == 2 and parts[0] == ROLLOUT_DIR and parts[1].endswith(".md") and not parts[1].startswith(".")


def nameable(path: str) -> bool:
    """A path the system can open (under PATH_MAX with its NUL); a folder tree can grow past it."""
    return len(path) < PATH_MAX_BYTES // 4 or len(os.fsencode(path)) < PATH_MAX_BYTES


def _listed(base: str) -> list[os.DirEntry]:
    try:
        with os.scandir(base) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _entries(base: str, rel_base: str, recursive: bool) -> Iterator[tuple[str, os.DirEntry]]:
    """(rel, directory entry) of the regular, non-hidden, non-symlink files under `base` whose
    names are UTF-8 (another name cannot be cited or indexed) and whose paths the system can
    open, sorted by name, depth first. Plain strings: this walk runs before every search, over
    thousands of files; a loop, not recursion (a tree may be thousands of folders deep)."""
    levels = [(rel_base, iter(_listed(base)))]
    while levels:
        rel_dir, entries = levels[-1]
        entry = next(entries, None)
        if entry is None:
            levels.pop()
        elif entry.name[0] != "." and not entry.is_symlink() and is_utf8(entry.name) and nameable(entry.path):
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                if recursive:
                    levels.append((rel, iter(_listed(entry.path))))
            elif entry.is_file(follow_symlinks=False):
                yield rel, entry


def regular_file(path: str | Path) -> os.stat_result | None:
    """The lstat of a regular file; None when there is none (missing, a link, a folder)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st if stat_mod.S_ISREG(st.st_mode) else None


def writable(folder: Path, names: tuple[str, ...] = ()) -> bool:
    """Whether this process can create files in `folder` (made when missing) and write those of
    `names` that are there."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    return all(os.access(folder / name, os.W_OK) for name in names if os.path.lexists(folder / name))


def lstat_named(path: Path, rel: str) -> os.stat_result:
    """The lstat of a guarded path; NotFoundError naming `rel` when it is missing."""
    try:
        return path.lstat()
    except FileNotFoundError:
        raise NotFoundError(f"no such file or directory in memory: {rel or '.'}") from None
    except NotADirectoryError:
        raise NotFoundError(f"not a directory on the way to: {rel}") from None


def top_files(root: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """MEMORY.md and memory_summary.md at the root, when they are regular files (never a link)."""
    for name in ("MEMORY.md", "memory_summary.md"):
        p = os.path.join(root, name)
        if (st := regular_file(p)) is not None:
            yield name, p, st


def corpus(store: Any) -> Iterator[tuple[str, str, os.stat_result]]:
    """The searchable memory, in this order: MEMORY.md, memory_summary.md, active rollout
    summaries, skills/**, ad hoc notes (by name within each). Never .state, .retired, raw memories."""
    yield from top_files(str(store.root))
    yield from still_there(corpus_entries(store))


def still_there(entries: Iterable[tuple[str, os.DirEntry]]) -> Iterator[tuple[str, str, os.stat_result]]:
    """(rel, path, lstat) of each listed file that is still there: one a consolidation retired (or
    the vault deleted) since its folder was listed is passed over."""
    for rel, entry in entries:
        try:
            yield rel, entry.path, entry.stat(follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            continue


def _linked(root: str, rel: str) -> bool:
    """A folder of the root reached through a symlink (it leads out of the memory root)."""
    parts = rel.split("/")
    return any(os.path.islink(os.path.join(root, *parts[: i + 1])) for i in range(len(parts)))


def corpus_entries(store: Any) -> Iterator[tuple[str, os.DirEntry]]:
    """The corpus below the root's two files, as directory entries (no stat yet); never
    through a linked folder (the path guard refuses it too)."""
    root = str(store.root)
    if not _linked(root, ROLLOUT_DIR):
        yield from (
            (rel, e) for rel, e in _entries(os.path.join(root, ROLLOUT_DIR), ROLLOUT_DIR, False) if rel.endswith(".md")
        )
    for rel_base in ("skills", store.rel(store.notes_dir)):
        if not _linked(root, rel_base):
            yield from _entries(os.path.join(root, rel_base), rel_base, True)


def files_under(store: Any, prefix: str | None) -> Iterator[tuple[str, str, os.stat_result]]:
    """Files a line search covers: the corpus, or everything visible under a prefix (a path
    `guard` has canonicalized, so `rollout_summaries/.retired` can be searched on purpose)."""
    if not prefix:
        yield from corpus(store)
        return
    base = store.root / prefix
    st = lstat_named(base, prefix)
    if stat_mod.S_ISREG(st.st_mode):
        yield prefix, str(base), st
        return
    yield from still_there(_entries(str(base), prefix, True))


# ---- content cache: long-running servers avoid re-reading unchanged files -----------------

_CACHE: dict[str, tuple[tuple[int, int, int], dict[str, str | None]]] = {}
_CACHE_CHARS = [0]
_CACHE_LIMIT = 128_000_000
# A file larger than this is not searched: memory files are small (MEMORY.md is capped at tens of
# KB); a huge file dropped into the root would cost the index ~25 times its size in memory.
MAX_SEARCH_FILE_BYTES = 4 << 20


def why_no_text(path: str | Path, st: os.stat_result) -> str:
    """Why `read_text` has no text for a file (search names it, `skipped`): over 4 MiB, not
    UTF-8, or not readable (permissions, a disk error)."""
    return _entry(str(path), st).get("why") or ""


# The coarsest file-system clock (FAT: 2 s): a file modified this close to a read of it may be
# changed again with the same mtime, so what was read is not reused on the strength of a stat.
MTIME_TICK_NS = 2_000_000_000


def _entry(path: str, st: os.stat_result | None) -> dict[str, str | None]:
    """The cache entry of a regular file. Read without following a link and without waiting on a
    FIFO: what was listed as a memory file may have been swapped for either since (no text)."""
    try:
        st = st or os.lstat(path)
        hit = _CACHE.get(path)
        if hit and hit[0] == (st.st_ino, st.st_size, st.st_mtime_ns):
            return hit[1]
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat_mod.S_ISREG(st.st_mode):
                return {"": ""}
            raw = f.read(MAX_SEARCH_FILE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):  # retired or deleted since it was listed: no text
        return {"": ""}
    except OSError as exc:  # ELOOP: a symbolic link (O_NOFOLLOW); else unreadable, never cached
        return {"": ""} if exc.errno == errno.ELOOP else {"": None, "why": "not readable"}
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    settled = st.st_mtime_ns < time.time_ns() - MTIME_TICK_NS
    entry: dict[str, str | None] = {"": None, "why": "over 4 MiB"}
    if len(raw) <= MAX_SEARCH_FILE_BYTES:
        try:
            entry = {"": raw.decode("utf-8")}
        except UnicodeDecodeError:
            entry = {"": None, "why": "not UTF-8"}
    text = entry[""]
    if _CACHE_CHARS[0] > _CACHE_LIMIT:
        _CACHE.clear()
        _CACHE_CHARS[0] = 0
    if settled:
        _CACHE[path] = (key, entry)
        _CACHE_CHARS[0] += len(text or "")
    return entry


def read_text(path: str | Path, st: os.stat_result | None = None) -> str | None:
    """File text keyed by (ino, size, mtime_ns); None for non-UTF-8 files and files over
    MAX_SEARCH_FILE_BYTES, or that cannot be read (`why_no_text` says which); '' for one that is
    gone or is no longer a regular file."""
    return _entry(str(path), st)[""]


def read_folded(
    path: str | Path, st: os.stat_result | None, kind: str, fold: Callable[[str], str]
) -> tuple[str | None, str | None]:
    """(text, fold(text)), the folded variant cached next to the text under `kind`."""
    entry = _entry(str(path), st)
    text = entry[""]
    if text is None:
        return None, None
    if kind not in entry:
        entry[kind] = fold(text)
        _CACHE_CHARS[0] += len(text)
    return text, entry[kind]


class FileCache:
    """Values built from a file, reused while its (inode, size, mtime_ns) is unchanged; past
    `limit` files it starts over. A None value is not kept."""

    def __init__(self, limit: int) -> None:
        self._items: dict[str, tuple[tuple[int, int, int], Any]] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def get(self, path: str, st: os.stat_result, build: Callable[[], Any]) -> Any:
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._items.get(path)
        if hit and hit[0] == key:
            return hit[1]
        value = build()
        if value is not None:
            with self._lock:
                if len(self._items) > self._limit:
                    self._items.clear()
                self._items[path] = (key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# ---- usage telemetry ----------------------------------------------------------------------


def record_usage(store: Any, rels: Iterable[str], state: Any = None, now: datetime | None = None) -> list[str]:
    """One usage record per active rollout summary per call. Everything else never counts; nor
    does anything in a memory root this process cannot write (a read-only mount, another user's
    memory): reading it must not fail, and nothing is forgotten there."""
    keys = sorted({r for r in rels if is_active_rollout(r)})
    if not keys:
        return []
    db = Path(state.db_path if state is not None else store.root / ".state" / "state.sqlite3")
    if not writable(db.parent, (db.name, f"{db.name}-wal", f"{db.name}-shm")):
        return []
    if state is None:
        from dsh_memory.storage.state import StateStore

        state = StateStore(store.root)
    when = now or datetime.now(UTC)
    for key in keys:
        state.record_usage(key, when)
    return keys
