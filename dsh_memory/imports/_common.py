"""What every import source shares: one `Item` per piece of memory, bounded reads, front matter."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

MAX_FILE_BYTES = 1 << 20  # a memory file larger than 1 MiB is not imported
MAX_FILES = 5000  # files looked at in one run, over every source
MAX_NOTE_CHARS = 8000  # what one imported note keeps (the rest stays in its source)
MAX_FRONT_MATTER = 8192


@dataclass
class Item:
    """One piece of another agent's memory: a file, or one task group of a Codex MEMORY.md."""

    agent: str  # claude | codex
    source: Path
    part: str | None = None  # a Codex task group's name
    project: str | None = None  # repository root; None: global
    title: str = ""
    text: str = ""
    sha256: str = ""
    mtime: str = ""
    kind: str | None = None  # index, a Claude topic's type (user, feedback, project, reference…), summary…
    skip: str | None = None  # why it is not imported (excluded, too large, unreadable…)
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.agent}:{self.source}" + (f"#{self.part}" if self.part else "")


def read_bounded(path: Path) -> tuple[str | None, str, str]:
    """(text or None, sha256, mtime) of a regular file (no symlink) of at most MAX_FILE_BYTES; a
    reason instead of the text when it cannot be imported."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return None, "", "not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return None, "", f"larger than {MAX_FILE_BYTES // 1024} KiB ({st.st_size} bytes)"
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, "", f"cannot read: {exc.strerror or exc}"
    if len(data) > MAX_FILE_BYTES:
        return None, "", f"larger than {MAX_FILE_BYTES // 1024} KiB"
    mtime = datetime.fromtimestamp(st.st_mtime, tz=UTC).isoformat(timespec="seconds")
    return data.decode("utf-8", "replace"), hashlib.sha256(data).hexdigest(), mtime


def front_matter(text: str) -> tuple[dict, str]:
    """(fields, body) of a Markdown file with YAML front matter (`---` … `---`); {} when it has
    none or it is not a mapping. `type` may sit under `metadata:`."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0 or end > MAX_FRONT_MATTER:
        return {}, text
    import yaml

    try:
        fields = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}, text
    body = text[end + 4 :].lstrip("-").lstrip("\n")
    if not isinstance(fields, dict):
        return {}, body
    meta = fields.get("metadata")
    if "type" not in fields and isinstance(meta, dict) and "type" in meta:
        fields["type"] = meta["type"]
    return {k: v for k, v in fields.items() if isinstance(k, str)}, body


def cut(text: str, source: Path) -> str:
    text = text.strip()
    if len(text) <= MAX_NOTE_CHARS:
        return text
    head = text[:MAX_NOTE_CHARS].rsplit("\n", 1)[0]
    return f"{head}\n\n[… cut: the rest is in {source}]"
