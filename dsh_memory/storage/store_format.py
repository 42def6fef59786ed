"""On-disk formats and file primitives of the memory store, apart from `MemoryStore` (store.py)
because the read path, imports and replay need them without the store's path guard and locks.

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
import json
import os
import re
import socket
import stat
import tempfile
import unicodedata
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from dsh_memory.errors import UserInputError
from dsh_memory.storage.state_schema import proc_start

STATE_DIRNAME = ".state"
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,79}")
SLUG_MAX = 80
RAW_TITLE = "# Raw Memories\n"
RAW_ARCHIVE_TITLE = "# Raw Memories (archive)\n"
RAW_ARCHIVE_MAX_CHARS = 2_000_000  # raw_memories.archive.md's newest, in whole blocks
MAX_ARCHIVED_NOTES = 1000  # notes kept in extensions/ad_hoc/archive/, the newest written
_MARKER_RE = re.compile(r"^<!-- dsh-memory:raw (\{[^\n]*\}) -->$", re.M)
PROVENANCE_KEYS = ("session_id", "source", "cwd", "path", "updated_at", "part", "extracted_at", "model", "provider")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_./:@+~,-][A-Za-z0-9_./:@+~, -]*[A-Za-z0-9_./:@+~,-]|[A-Za-z0-9_./@+,-]")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _redact(text: str) -> str:
    from dsh_memory.transcript.redact import redact  # lazy: the read-only commands never load the secret rules

    return redact(text)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 but tab and line ends, DEL, C1 (CSI is U+009B)


def _clean_text(text: str) -> str:
    """What a memory file may hold: no control characters a session's text carried (a terminal
    or an agent reading the file later gets its escape sequences), and lone surrogates, which cannot
    be encoded as UTF-8, replaced rather than failing mid-write."""
    text = text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else str(text)
    return _CONTROL.sub("", text)


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
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _temp_prefix(path: Path) -> str:
    """`.<name>.w<host>_<pid>_<start>_`: mkstemp appends the random part and `.tmp`."""
    pid = os.getpid()
    name = path.name.encode("utf-8")[:180].decode("utf-8", "ignore")  # the temp name fits in 255 bytes
    return f".{name}.w{_host_tag()}_{pid}_{proc_start(pid) or 0}_"


def temp_writer_gone(name: str) -> bool:
    """True when `name` is a temp file written by a process of this host that no longer runs
    (killed between writing and renaming). Unknown writers (another host, an older name) never
    count as gone."""
    m = _OWNED_TEMP_RE.match(name)
    if m is None or m.group(1) != _host_tag() or m.group(3) == "0":
        return False
    return proc_start(int(m.group(2))) != m.group(3)


def read_regular(path: Path | str, limit: int = -1) -> str:
    """The text of a regular file (newlines as written, bad UTF-8 replaced), at most `limit`
    characters. FileNotFoundError when missing; UserInputError for anything else, never a wait
    (a FIFO in a memory file's place would block a plain open forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserInputError(f"not a regular file: {path}")
    except BaseException:
        os.close(fd)
        raise
    with open(fd, encoding="utf-8", errors="replace", newline="") as f:
        return f.read(limit)


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


def serialize_raw_block(b: RawBlock) -> str:
    heading = re.sub(r"[\x00-\x1f\x7f]", " ", f"{b.slug} · {b.session_id}")[:200]
    meta = {k: v for k, v in asdict(b).items() if k != "body" and (k != "project" or v)}
    meta |= {"len": len(b.body), "sha": hashlib.sha256(b.body.encode("utf-8")).hexdigest()[:16]}
    marker = json.dumps(meta, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    # `-->` / `<!--` can never appear inside the comment, not even from a hostile cwd.
    marker = marker.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"\n## {heading}\n<!-- dsh-memory:raw {marker} -->\n{b.body}\n"


def newest_blocks(blocks: list[RawBlock], cap: int = RAW_ARCHIVE_MAX_CHARS - len(RAW_ARCHIVE_TITLE)) -> list[RawBlock]:
    """The newest (last) of `blocks` whose serialized text fits `cap`; the newest one always."""
    size = 0
    for i in range(len(blocks) - 1, -1, -1):
        size += len(serialize_raw_block(blocks[i]))
        if size > cap and i < len(blocks) - 1:
            return blocks[i + 1 :]
    return blocks


def keep_newest(folder: Path, n: int, spare: frozenset[str] | set[str] = frozenset()) -> None:
    """Delete the oldest `.md` files of `folder` (by time written) past its newest `n`; one whose
    name without `.md` is in `spare` stays (and counts). Never the reason a write fails."""

    def written(e: os.DirEntry) -> tuple[float, str]:
        with suppress(OSError):
            return (e.stat(follow_symlinks=False).st_mtime, e.name)
        return (0.0, e.name)

    files: list[os.DirEntry] = []
    with suppress(OSError), os.scandir(folder) as it:
        files = [e for e in it if e.name.endswith(".md") and e.is_file(follow_symlinks=False)]
    extra = len(files) - n
    for e in sorted(files, key=written):
        if extra <= 0:
            break
        if e.name[:-3] not in spare:
            with suppress(OSError):
                os.unlink(e.path)
            extra -= 1


def parse_raw_blocks(text: str) -> list[RawBlock]:
    """Parse a raw-memories file. Bodies are length-prefixed (and hash-checked), so a body may
    contain anything, including lines that look like markers. A hand-edited body whose length no
    longer matches falls back to "everything up to the next marker"."""
    blocks: list[RawBlock] = []
    pos = 0
    while (m := _MARKER_RE.search(text, pos)) is not None:
        try:
            meta = json.loads(m.group(1))
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
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
        val: object = None if raw == "null" else raw
        if raw.startswith('"'):
            with suppress(ValueError):
                val = json.loads(raw)
        if key == "part" and isinstance(val, str) and val.isascii() and val.isdigit():  # not "²"
            val = int(val)
        fields[key] = val
    return fields, text[end + 5 :]
