"""The memory store: every file under the memory root (its layout: docs/architecture.md, "The
memory root"), written atomically behind one path guard; its formats and write primitives are
in store_format.py.

Rules: every relative path goes through `resolve()` before any filesystem call; every write is
temp file + fsync + `os.replace` in the same directory; text passes through redaction first.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError
from dsh_memory.storage.locks import AlreadyRunning
from dsh_memory.storage.store_format import (
    MAX_ARCHIVED_NOTES,
    PROVENANCE_KEYS,
    RAW_ARCHIVE_TITLE,
    RAW_TITLE,
    SLUG_RE,
    STATE_DIRNAME,
    RawBlock,
    RolloutSummaryInfo,
    _clean_text,
    _discard_temp,
    _fsync_dir,
    _prepare_temp,
    _redact,
    _with_suffix,
    _write_atomic,
    _write_new,
    keep_newest,
    newest_blocks,
    parse_front_matter,
    parse_raw_blocks,
    read_regular,
    render_front_matter,
    serialize_raw_block,
    slugify,
    temp_writer_gone,
)


class MemoryFileNotFound(NotFoundError, FileNotFoundError):
    """A memory file does not exist: catch it as NotFoundError (adapters) or FileNotFoundError."""


_locks: dict[str, tuple[threading.RLock, object]] = {}
_thread_locks_guard = threading.Lock()


class MemoryStore:
    def __init__(self, root: Path | str):
        self._root = Path(root).expanduser()

    # -- layout -----------------------------------------------------------------------------
    root = property(lambda self: self._root)
    summary_path = property(lambda self: self._root / "memory_summary.md")
    memory_md_path = property(lambda self: self._root / "MEMORY.md")
    raw_path = property(lambda self: self._root / "raw_memories.md")
    raw_archive_path = property(lambda self: self._root / "raw_memories.archive.md")
    rollout_dir = property(lambda self: self._root / "rollout_summaries")
    retired_dir = property(lambda self: self._root / "rollout_summaries" / ".retired")
    skills_dir = property(lambda self: self._root / "skills")
    notes_dir = property(lambda self: self._root / "extensions" / "ad_hoc" / "notes")
    notes_archive_dir = property(lambda self: self._root / "extensions" / "ad_hoc" / "archive")
    state_dir = property(lambda self: self._root / STATE_DIRNAME)

    def ensure_layout(self) -> None:
        for d in (
            self.root,
            self.rollout_dir,
            self.retired_dir,
            self.skills_dir,
            self.notes_dir,
            self.notes_archive_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(mode=0o700, exist_ok=True)

    def sweep_temp_files(self) -> list[str]:
        """Delete the `.<name>.<random>.tmp` files an atomic write leaves when its process is
        killed between writing and renaming: at once when the name shows that its writer (a
        process of this host) is gone, else only when older than five minutes (a write in
        flight takes milliseconds). Never follows links; `.state/` holds no such files."""
        cutoff = time.time() - 300
        pattern = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")
        removed: list[str] = []
        folders = [str(self.root)]  # a loop: os.walk recurses per level (a tree may be thousands deep)
        while folders:
            with suppress(OSError), os.scandir(folders.pop()) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        folders += [e.path] if e.name != STATE_DIRNAME else []
                    elif pattern.match(e.name) and e.is_file(follow_symlinks=False):
                        with suppress(OSError):
                            if e.stat(follow_symlinks=False).st_mtime < cutoff or temp_writer_gone(e.name):
                                os.unlink(e.path)
                                removed.append(os.path.relpath(e.path, self.root))
        return sorted(removed)

    # -- path guard -------------------------------------------------------------------------
    def resolve(self, rel: str) -> Path:
        """THE path guard: a relative path strictly inside the root, checked before any I/O."""
        if isinstance(rel, os.PathLike):
            rel = os.fspath(rel)
        if not isinstance(rel, str):
            raise PathGuardError(f"path must be a string, got {type(rel).__name__}")
        if not rel:
            raise PathGuardError("empty path")
        if "\x00" in rel:
            raise PathGuardError("path contains a NUL byte")
        if "\\" in rel:
            raise PathGuardError(f"backslashes are not allowed in memory paths: {rel!r}")
        if rel.startswith("/") or os.path.isabs(rel) or re.match(r"^[A-Za-z]:", rel):
            raise PathGuardError(f"absolute paths are not allowed: {rel!r}")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise PathGuardError(f"'..' is not allowed in memory paths: {rel!r}")
        if not parts:
            raise PathGuardError(f"path names no file inside the memory root: {rel!r}")
        if parts[0].casefold() == STATE_DIRNAME:
            raise PathGuardError(f"{STATE_DIRNAME}/ is private bookkeeping: {rel!r}")
        cur = self.root
        for p in parts:
            cur = cur / p
            try:
                st = os.lstat(cur)
            except FileNotFoundError:
                break
            except NotADirectoryError:
                raise PathGuardError(f"a component of {rel!r} is not a directory") from None
            if stat.S_ISLNK(st.st_mode):
                raise PathGuardError(f"symlinks are not followed inside the memory root: {rel!r}")
        return self.root.joinpath(*parts)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- plain files ------------------------------------------------------------------------
    def atomic_write(self, rel: str, text: str) -> Path:
        path = self.resolve(rel)
        _write_atomic(path, _redact(text))
        return path

    def read_text(self, rel: str) -> str:
        """Exact text (no newline translation). MemoryFileNotFound when missing."""
        path = self.resolve(rel)
        try:
            return read_regular(path)
        except FileNotFoundError:
            raise MemoryFileNotFound(2, "no such memory file", rel) from None

    # -- locks ------------------------------------------------------------------------------
    @contextmanager
    def lock(self, name: str, timeout: float = 120) -> Iterator[None]:
        """Serialize a mutation across threads (RLock) and processes (file lock in .state/);
        AlreadyRunning when another process still holds it after `timeout` seconds."""
        from filelock import FileLock, Timeout

        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock_path = str(self.state_dir / f"{name}.lock")
        with _thread_locks_guard:
            if lock_path not in _locks:  # one RLock + one (reentrant) FileLock per lock file
                _locks[lock_path] = (threading.RLock(), FileLock(lock_path, thread_local=False))
            tlock, flock = _locks[lock_path]
        with tlock:
            try:
                held = flock.acquire(timeout=timeout)  # released when the `with` below ends
            except Timeout:
                held_for = f"after {timeout:g} s (a stopped or stuck dsh-memory?)"
                raise AlreadyRunning(name, f"{lock_path} is still held by another process {held_for}") from None
            with held:
                yield

    # -- raw memories -----------------------------------------------------------------------
    def _raw_blocks(self, path: Path) -> list[RawBlock]:
        try:
            return parse_raw_blocks(read_regular(path))
        except FileNotFoundError:
            return []

    def read_raw_blocks(self) -> list[RawBlock]:
        return self._raw_blocks(self.resolve("raw_memories.md"))

    def _write_raw(self, blocks: list[RawBlock], path: Path, title: str) -> None:
        _write_atomic(path, title + "".join(serialize_raw_block(b) for b in blocks))

    def append_raw(self, block: RawBlock) -> str:
        """Append one block (redacted). An existing block with the same id is replaced in place,
        so a retried extraction never duplicates. Returns the block id."""
        clean = RawBlock(
            id="",
            session_id=str(block.session_id),
            slug=slugify(block.slug) if block.slug else "",
            source=str(block.source),
            cwd=None if block.cwd is None else _redact(_clean_text(str(block.cwd))),
            updated_at=str(block.updated_at),
            body=_redact(_clean_text(block.body)),
            project=_redact(_clean_text(str(block.project))) if block.project else None,
        )
        clean.id = str(block.id) if block.id else RawBlock.make_id(clean.session_id, clean.slug, clean.body)
        with self.lock("raw"):
            path = self.resolve("raw_memories.md")
            blocks = self._raw_blocks(path)
            idx = next((i for i, b in enumerate(blocks) if b.id == clean.id), None)
            if idx is None:
                blocks.append(clean)
            else:
                blocks[idx] = clean
            self._write_raw(blocks, path, RAW_TITLE)
        return clean.id

    def archive_raw_blocks(self, ids: set[str]) -> int:
        """Move exactly the blocks with these ids to the end of the archive (`newest_blocks`). Blocks
        appended meanwhile stay. Archive first, then raw: a crash in between duplicates, never loses."""
        ids = set(ids)
        if not ids:
            return 0
        with self.lock("raw"):
            raw = self.resolve("raw_memories.md")
            arch = self.resolve("raw_memories.archive.md")
            blocks = self._raw_blocks(raw)
            moving = [b for b in blocks if b.id in ids]
            if not moving:
                return 0
            archived = self._raw_blocks(arch)
            seen = {b.id for b in archived}
            archived += [b for b in moving if b.id not in seen]
            self._write_raw(newest_blocks(archived), arch, RAW_ARCHIVE_TITLE)
            self._write_raw([b for b in blocks if b.id not in ids], raw, RAW_TITLE)
            return len(moving)

    def read_raw_archive_blocks(self) -> list[RawBlock]:
        return self._raw_blocks(self.resolve("raw_memories.archive.md"))

    # -- rollout summaries ------------------------------------------------------------------
    def _summary_owner(self, path: Path) -> tuple[str | None, object] | None:
        try:
            fields, _ = parse_front_matter(read_regular(path, 8192))
        except FileNotFoundError:
            return None
        return fields.get("session_id"), fields.get("part")

    def write_rollout_summary(self, slug: str, provenance: dict, body: str) -> str:
        """Write rollout_summaries/<slug>.md with a provenance header; returns the final slug.
        The same (session_id, part) rewrites its own file; anyone else gets `-2`, `-3`…"""
        base = slugify(slug) or "summary"
        fields: dict = {k: provenance.get(k) for k in PROVENANCE_KEYS} | provenance  # ours first, then the rest
        fields = {k: (_redact(_clean_text(v)) if isinstance(v, str) else v) for k, v in fields.items()}
        owner = (None if fields["session_id"] is None else str(fields["session_id"]), fields["part"])
        if isinstance(owner[1], str) and owner[1].isdigit():
            owner = (owner[0], int(owner[1]))
        text = render_front_matter(fields) + "\n" + _redact(_clean_text(body)).strip("\n") + "\n"
        # Write and fsync outside the lock; only the name choice and the rename are serialized.
        tmp = _prepare_temp(self.rollout_dir / f"{base}.md", text)
        try:
            with self.lock("summaries"):
                for n in itertools.count(1):
                    cand = _with_suffix(base, n)
                    path = self.resolve(f"rollout_summaries/{cand}.md")
                    active = self._summary_owner(path)
                    retired = self._summary_owner(self.resolve(f"rollout_summaries/.retired/{cand}.md"))
                    if (active is None or (owner[0] is not None and active == owner)) and retired is None:
                        break
                os.replace(tmp, path)
        except BaseException:
            _discard_temp(tmp)
            raise
        _fsync_dir(path.parent)
        return cand

    def list_rollout_summaries(self) -> list[RolloutSummaryInfo]:
        out: list[RolloutSummaryInfo] = []
        if not self.rollout_dir.is_dir() or self.rollout_dir.is_symlink():
            return out
        for entry in sorted(os.scandir(self.rollout_dir), key=lambda e: e.name[:-3]):
            name = entry.name
            if not name.endswith(".md") or not SLUG_RE.fullmatch(name[:-3]) or not entry.is_file(follow_symlinks=False):
                continue
            fields, _ = parse_front_matter(read_regular(entry.path, 8192))
            mtime = datetime.fromtimestamp(entry.stat(follow_symlinks=False).st_mtime, tz=UTC)
            out.append(
                RolloutSummaryInfo(slug=name[:-3], rel=f"rollout_summaries/{name}", provenance=fields, mtime=mtime)
            )
        return out

    @staticmethod
    def clean_slug(slug: str) -> str | None:
        """A summary's slug from its name (`.md` optional); None when it is no valid slug."""
        s = str(slug or "").strip().removesuffix(".md")
        return s if SLUG_RE.fullmatch(s) else None

    def _move_summary(self, slug: str, src_dir: str, dst_dir: str) -> str | None:
        """Move `<src_dir>/<slug>.md` to `<dst_dir>/`, never overwriting (`-2`, `-3`… when the
        name is taken there); the name it got, or None when there is no such summary."""
        s = self.clean_slug(slug)
        if s is None:
            return None
        with self.lock("summaries"):
            src = self.resolve(f"{src_dir}/{s}.md")
            if not src.is_file() or src.is_symlink():
                return None
            self.resolve(dst_dir).mkdir(parents=True, exist_ok=True)
            n = 1
            while (dst := self.resolve(f"{dst_dir}/{(name := _with_suffix(s, n))}.md")).exists():
                n += 1
            os.replace(src, dst)
            _fsync_dir(self.rollout_dir)
            _fsync_dir(self.retired_dir)
            return name

    def retire_summary(self, slug: str) -> bool:
        """Move an active summary into .retired/. False (no error) when missing or invalid."""
        return self._move_summary(slug, "rollout_summaries", "rollout_summaries/.retired") is not None

    def restore_summary(self, name: str) -> str:
        """Move `.retired/<name>.md` back among the active summaries; the slug it got (`-2`, `-3`…
        when the name is taken). NotFoundError when there is no such retired summary."""
        slug = self._move_summary(name, "rollout_summaries/.retired", "rollout_summaries")
        if slug is None:
            raise NotFoundError(f"no retired summary named {str(name)[:100]!r}")
        return slug

    def _real_dir(self, path: Path) -> bool:
        """A folder of the root reached without a symlink (what `resolve` lets through)."""
        try:
            return self.resolve(self.rel(path)).is_dir()
        except PathGuardError:
            return False

    def retired_slugs(self) -> list[str]:
        if not self._real_dir(self.retired_dir):
            return []
        return sorted(
            p.name[:-3]
            for p in self.retired_dir.iterdir()
            if p.name.endswith(".md") and p.is_file() and not p.is_symlink()
        )

    # -- ad hoc notes -----------------------------------------------------------------------
    def add_note(
        self, text: str, title: str | None = None, now: datetime | None = None, extra: dict | None = None
    ) -> str:
        """A new ad hoc note, without its `<private>` spans; `extra` adds provenance fields to its
        front matter (redacted)."""
        from dsh_memory.transcript.private import drop_private

        text, title = drop_private(text) if isinstance(text, str) else text, drop_private(title or "") or None
        if not isinstance(text, str) or not text.strip():
            raise UserInputError("a note needs some text")
        now = (now or datetime.now(UTC)).astimezone(UTC)
        first = title or next((ln for ln in text.splitlines() if ln.strip()), "note")
        # the file name is redacted too (a slug lowercases a secret past its pattern: redact first)
        stem = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{slugify(_redact(_clean_text(first)))[:48].rstrip('-') or 'note'}"
        fields = {"created_at": now.isoformat(), "title": _redact(_clean_text(title)) if title else None}
        fields |= {k: _redact(_clean_text(v)) if isinstance(v, str) else v for k, v in (extra or {}).items()}
        content = render_front_matter(fields) + "\n" + _redact(_clean_text(text)).strip("\n") + "\n"
        for n in itertools.count(1):  # the first name not taken: stem, stem-2, stem-3…
            rel = f"extensions/ad_hoc/notes/{stem}{'' if n == 1 else f'-{n}'}.md"
            if _write_new(self.resolve(rel), content):
                return rel

    def list_notes(self, archived: bool = False) -> list[str]:
        """The notes waiting for consolidation; `archived`: the consumed ones kept."""
        d = self.notes_archive_dir if archived else self.notes_dir
        if not self._real_dir(d):
            return []
        return sorted(
            f"{self.rel(d)}/{p.name}"
            for p in d.iterdir()
            if p.name.endswith(".md") and not p.name.startswith(".") and p.is_file() and not p.is_symlink()
        )

    def archive_notes(self, rels: list[str]) -> int:
        """Move consumed notes into extensions/ad_hoc/archive/ (never overwriting; its newest
        MAX_ARCHIVED_NOTES kept). Returns count."""
        moved = 0
        prefix = "extensions/ad_hoc/notes/"
        with self.lock("notes"):
            for rel in rels:
                src = self.resolve(rel)
                if self.rel(src).rsplit("/", 1)[0] + "/" != prefix:
                    raise PathGuardError(f"not an ad hoc note: {rel!r}")
                if not src.is_file():
                    continue
                self.notes_archive_dir.mkdir(parents=True, exist_ok=True)
                stem, n = src.name.removesuffix(".md"), 1
                while (dst := self.resolve(f"extensions/ad_hoc/archive/{stem}{'' if n == 1 else f'-{n}'}.md")).exists():
                    n += 1
                os.replace(src, dst)
                moved += 1
            if moved:
                keep_newest(self.notes_archive_dir, MAX_ARCHIVED_NOTES)
        return moved
