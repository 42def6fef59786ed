"""The memory store: every file under the memory root (its layout: docs/architecture.md, "The
memory root"), written atomically behind one path guard, and its on-disk formats.

Rules: every relative path goes through `resolve()` before any filesystem call; every write is
temp file + fsync + `os.replace` in the same directory; text passes through redaction first.

- atomic writes (temp + fsync + os.replace) and no-overwrite creates (temp + os.link); a temp
  file's name says which process writes it (`temp_writer_gone`), so a killed writer's leftover
  can be swept at once
- raw-memories blocks: a markdown heading plus an HTML-comment marker carrying the metadata and
  the body length (and a short hash), so a body may contain anything, even marker-like lines
- YAML-like front matter for provenance headers (values JSON-quoted when not plainly safe)
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import stat
import tempfile
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError

STATE_DIRNAME = ".state"
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,79}")
SLUG_MAX = 80
RAW_TITLE = "# Raw Memories\n"
RAW_ARCHIVE_TITLE = "# Raw Memories (archive)\n"
_MARKER_RE = re.compile(r"^<!-- dsh-memory:raw (\{[^\n]*\}) -->$", re.M)
PROVENANCE_KEYS = ("session_id", "source", "cwd", "path", "updated_at", "part", "extracted_at", "model", "provider")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_./:@+~,-][A-Za-z0-9_./:@+~, -]*[A-Za-z0-9_./:@+~,-]|[A-Za-z0-9_./@+,-]")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _redact(text: str) -> str:
    from dsh_memory.transcript.redact import redact  # lazy: the read-only commands never load the secret rules

    return redact(text)


def _clean_text(text: str) -> str:
    """Lone surrogates cannot be encoded as UTF-8: replace them rather than fail mid-write."""
    return text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else str(text)


def _fsync_dir(path: Path) -> None:
    with suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# `.<name>.w<host>_<pid>_<start>_<random>.tmp`: the writer's host (hash), pid and start time.
_OWNED_TEMP_RE = re.compile(r"^\..+\.w([0-9a-f]{8})_(\d+)_(\d+)_[A-Za-z0-9_]+\.tmp$")


@functools.cache
def _host_tag() -> str:
    import socket

    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _temp_prefix(path: Path) -> str:
    """`.<name>.w<host>_<pid>_<start>_`: mkstemp appends the random part and `.tmp`."""
    from dsh_memory.storage.state import proc_start

    pid = os.getpid()
    name = path.name.encode("utf-8")[:180].decode("utf-8", "ignore")  # the temp name fits in 255 bytes
    return f".{name}.w{_host_tag()}_{pid}_{proc_start(pid) or 0}_"


def temp_writer_gone(name: str) -> bool:
    """True when `name` is a temp file written by a process of this host that no longer runs
    (killed between writing and renaming). Unknown writers (another host, an older name) never
    count as gone."""
    from dsh_memory.storage.state import proc_start

    m = _OWNED_TEMP_RE.match(name)
    if m is None or m.group(1) != _host_tag() or m.group(3) == "0":
        return False
    return proc_start(int(m.group(2))) != m.group(3)


def _write_fd(fd: int, text: str) -> None:
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(_clean_text(text))
        f.flush()
        os.fsync(f.fileno())


def _prepare_temp(path: Path, text: str) -> str:
    """A complete, fsynced temp file next to `path` (the slow part of an atomic write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")
    try:
        _write_fd(fd, text)
    except BaseException:
        _discard_temp(tmp)
        raise
    return tmp


def _discard_temp(tmp: str) -> None:
    with suppress(OSError):
        os.unlink(tmp)


def _write_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory, flush, fsync, os.replace. No redaction here."""
    tmp = _prepare_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        _discard_temp(tmp)
        raise
    _fsync_dir(path.parent)


def _write_new(path: Path, text: str) -> bool:
    """Write a file that must not exist yet: complete temp file, then os.link (never overwrites).

    Falls back to O_CREAT|O_EXCL where hard links are unsupported. False if the name is taken.
    """
    if path.exists() or path.is_symlink():
        return False
    tmp = _prepare_temp(path, text)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some FUSE/vfat): exclusive create instead
            try:
                xfd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return False
            _write_fd(xfd, text)
    finally:
        _discard_temp(tmp)
    _fsync_dir(path.parent)
    return True


def slugify(text: str) -> str:
    """Untrusted text → `[a-z0-9][a-z0-9-]{0,79}`, or "" when nothing usable is left (so callers
    can write `slugify(x) or fallback`)."""
    s = unicodedata.normalize("NFKD", str(text or "")).encode("ascii", "ignore").decode("ascii").lower()
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s[:SLUG_MAX].rstrip("-")


def _with_suffix(base: str, n: int) -> str:
    if n <= 1:
        return base
    suffix = f"-{n}"
    return base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix


@dataclass
class RawBlock:
    id: str
    session_id: str
    slug: str
    source: str
    cwd: str | None
    updated_at: str
    body: str
    project: str | None = None  # the repository root of `cwd` (dsh_memory.scope); None: derive from cwd

    @staticmethod
    def make_id(session_id: str, slug: str, body: str) -> str:
        """A stable, content-keyed id: the same extraction appended twice is one block."""
        h = hashlib.sha256("\0".join((session_id, slug, body)).encode("utf-8", "replace"))
        return h.hexdigest()[:20]


@dataclass
class RolloutSummaryInfo:
    slug: str
    rel: str
    provenance: dict
    mtime: datetime


def _marker_json(meta: dict) -> str:
    s = json.dumps(meta, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    # `-->` / `<!--` can never appear inside the comment, not even from a hostile cwd.
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def serialize_raw_block(b: RawBlock) -> str:
    heading = re.sub(r"[\x00-\x1f\x7f]", " ", f"{b.slug} · {b.session_id}")[:200]
    meta = {k: v for k, v in asdict(b).items() if k != "body" and (k != "project" or v)}
    meta |= {"len": len(b.body), "sha": hashlib.sha256(b.body.encode("utf-8")).hexdigest()[:16]}
    return f"\n## {heading}\n<!-- dsh-memory:raw {_marker_json(meta)} -->\n{b.body}\n"


def parse_raw_blocks(text: str) -> list[RawBlock]:
    """Parse a raw-memories file. Bodies are length-prefixed (and hash-checked), so a body may
    contain anything, including lines that look like markers. A hand-edited body whose length no
    longer matches falls back to "everything up to the next marker"."""
    blocks: list[RawBlock] = []
    pos = 0
    while (m := _MARKER_RE.search(text, pos)) is not None:
        try:
            meta = json.loads(m.group(1))
        except ValueError:
            pos = m.end()
            continue
        start = m.end() + 1
        n = meta.get("len")
        body = text[start : start + n] if isinstance(n, int) and n >= 0 else None
        ok = body is not None and len(body) == n
        if ok and meta.get("sha"):
            ok = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16] == meta["sha"]
        if ok:
            pos = start + n
        else:
            nxt = _MARKER_RE.search(text, start)
            end = nxt.start() if nxt else len(text)
            body = text[start:end]
            if nxt:  # drop the next block's heading line
                body = body.rstrip("\n")
                body = body.rsplit("\n", 1)[0] if "\n" in body else ("" if body.startswith("## ") else body)
            body = body.rstrip("\n")
            pos = end
        texts = {k: str(meta.get(k) or "") for k in ("id", "session_id", "slug", "source", "updated_at")}
        project = meta.get("project") if isinstance(meta.get("project"), str) else None
        blocks.append(RawBlock(**texts, cwd=meta.get("cwd"), body=body, project=project))
    return blocks


def _fm_value(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        v = str(v).lower()
    elif isinstance(v, datetime):
        v = v.isoformat()
    s = str(v)
    if _PLAIN_VALUE.fullmatch(s) and s not in ("null", "true", "false", "~") and not s.startswith("-"):
        return s
    return json.dumps(s, ensure_ascii=False)


def render_front_matter(fields: dict) -> str:
    lines = ["---"]
    for k, v in fields.items():
        if not isinstance(k, str) or not _KEY_RE.fullmatch(k):
            raise UserInputError(f"invalid provenance key {k!r}")
        lines.append(f"{k}: {_fm_value(v)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def parse_front_matter(text: str) -> tuple[dict, str]:
    """(fields, body). Fields are strings (or None); `part` is an int when it looks like one."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3)
    if end < 0:
        return {}, text
    fields: dict = {}
    for line in text[4:end].split("\n"):
        key, sep, raw = line.partition(": ")
        if not sep or not _KEY_RE.fullmatch(key):
            continue
        if raw == "null":
            val: object = None
        elif raw.startswith('"'):
            try:
                val = json.loads(raw)
            except ValueError:
                val = raw
        else:
            val = raw
        if key == "part" and isinstance(val, str) and val.isdigit():
            val = int(val)
        fields[key] = val
    return fields, text[end + 5 :]


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
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = [d for d in dirnames if d != STATE_DIRNAME]
            for name in filenames:
                if not pattern.match(name):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    if (st.st_mtime < cutoff or temp_writer_gone(name)) and not os.path.islink(path):
                        os.unlink(path)
                        removed.append(os.path.relpath(path, self.root))
                except OSError:
                    continue
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
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                return f.read()
        except FileNotFoundError:
            raise MemoryFileNotFound(2, "no such memory file", rel) from None

    # -- locks ------------------------------------------------------------------------------
    @contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Serialize a mutation across threads (RLock) and processes (file lock in .state/)."""
        from filelock import FileLock

        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock_path = str(self.state_dir / f"{name}.lock")
        with _thread_locks_guard:
            if lock_path not in _locks:  # one RLock + one (reentrant) FileLock per lock file
                _locks[lock_path] = (threading.RLock(), FileLock(lock_path, timeout=120, thread_local=False))
            tlock, flock = _locks[lock_path]
        with tlock, flock:
            yield

    # -- raw memories -----------------------------------------------------------------------
    def _read_raw_file(self, path: Path) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def read_raw_blocks(self) -> list[RawBlock]:
        return parse_raw_blocks(self._read_raw_file(self.resolve("raw_memories.md")))

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
            blocks = parse_raw_blocks(self._read_raw_file(path))
            idx = next((i for i, b in enumerate(blocks) if b.id == clean.id), None)
            if idx is None:
                blocks.append(clean)
            else:
                blocks[idx] = clean
            self._write_raw(blocks, path, RAW_TITLE)
        return clean.id

    def archive_raw_blocks(self, ids: set[str]) -> int:
        """Move exactly the blocks with these ids to the end of the archive. Blocks appended
        meanwhile stay. Archive first, then raw: a crash in between duplicates, never loses."""
        ids = set(ids)
        if not ids:
            return 0
        with self.lock("raw"):
            raw = self.resolve("raw_memories.md")
            arch = self.resolve("raw_memories.archive.md")
            blocks = parse_raw_blocks(self._read_raw_file(raw))
            moving = [b for b in blocks if b.id in ids]
            if not moving:
                return 0
            archived = parse_raw_blocks(self._read_raw_file(arch))
            seen = {b.id for b in archived}
            archived += [b for b in moving if b.id not in seen]
            self._write_raw(archived, arch, RAW_ARCHIVE_TITLE)
            self._write_raw([b for b in blocks if b.id not in ids], raw, RAW_TITLE)
            return len(moving)

    def read_raw_archive_blocks(self) -> list[RawBlock]:
        return parse_raw_blocks(self._read_raw_file(self.resolve("raw_memories.archive.md")))

    # -- rollout summaries ------------------------------------------------------------------
    def _summary_owner(self, path: Path) -> tuple[str | None, object] | None:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                fields, _ = parse_front_matter(f.read(8192))
        except FileNotFoundError:
            return None
        return fields.get("session_id"), fields.get("part")

    def write_rollout_summary(self, slug: str, provenance: dict, body: str) -> str:
        """Write rollout_summaries/<slug>.md with a provenance header; returns the final slug.
        The same (session_id, part) rewrites its own file; anyone else gets `-2`, `-3`…"""
        base = slugify(slug) or "summary"
        fields: dict = {k: provenance.get(k) for k in PROVENANCE_KEYS}
        fields.update({k: v for k, v in provenance.items() if k not in fields})
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
                tmp = None
        finally:
            if tmp is not None:
                _discard_temp(tmp)
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
            with open(entry.path, encoding="utf-8", errors="replace", newline="") as f:
                fields, _ = parse_front_matter(f.read(8192))
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

    def retired_slugs(self) -> list[str]:
        if not self.retired_dir.is_dir():
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
        stem = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{slugify(first)[:48].rstrip('-') or 'note'}"
        fields = {"created_at": now.isoformat(), "title": _redact(_clean_text(title)) if title else None}
        fields |= {k: _redact(_clean_text(v)) if isinstance(v, str) else v for k, v in (extra or {}).items()}
        content = render_front_matter(fields) + "\n" + _redact(_clean_text(text)).strip("\n") + "\n"
        n = 1
        while True:
            rel = f"extensions/ad_hoc/notes/{stem}{'' if n == 1 else f'-{n}'}.md"
            if _write_new(self.resolve(rel), content):
                return rel
            n += 1

    def list_notes(self) -> list[str]:
        d = self.notes_dir
        if not d.is_dir() or d.is_symlink():
            return []
        return sorted(
            f"extensions/ad_hoc/notes/{p.name}"
            for p in d.iterdir()
            if p.name.endswith(".md") and not p.name.startswith(".") and p.is_file() and not p.is_symlink()
        )

    def archive_notes(self, rels: list[str]) -> int:
        """Move consumed notes into extensions/ad_hoc/archive/ (never overwriting). Returns count."""
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
        return moved
