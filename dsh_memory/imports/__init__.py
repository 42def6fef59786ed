"""`dsh-memory import`: bring in what Claude Code and Codex already remember, as ad hoc notes with
their provenance (what is read, how it is scoped, the bounds: docs/agents.md).

Idempotent: `.state/imports.json` remembers each piece's sha256, so an unchanged piece is
skipped and a changed one is imported again as the next version; the version it replaces, when
no consolidation has read it yet, moves to the notes' archive. The sources are only read.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from dsh_memory.errors import UserInputError

Which = Literal["claude", "codex", "all"]
MANIFEST = ".state/imports.json"
MAX_MANIFEST_BYTES = 16 << 20
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


class ImportRow(BaseModel):
    agent: str
    source: str
    part: str | None = None
    project: str | None = None
    kind: str | None = None
    action: Literal["import", "update", "unchanged", "skip"]
    reason: str = ""
    version: int | None = None
    note: str | None = None  # the note written (or that was, for an unchanged piece)


class ImportResult(BaseModel):
    dry_run: bool
    sources: dict[str, str] = Field(default_factory=dict)  # agent → folder read
    rows: list[ImportRow] = Field(default_factory=list)


def run_import(store: Any, settings: Any, which: Which = "all", *, dry_run: bool = False) -> ImportResult:
    """Import the memories of `which` agent(s) into `store` (see the module docstring)."""
    from dsh_memory.imports import claude, codex
    from dsh_memory.settings import claude_config_dir, codex_home

    exclude = list(settings.exclude_projects or ())
    result = ImportResult(dry_run=dry_run)
    pieces: list[Item] = []
    if which in ("claude", "all"):
        result.sources["claude"] = str(claude_config_dir() / "projects")
        pieces += claude.items(claude_config_dir(), exclude)
    if which in ("codex", "all"):
        result.sources["codex"] = str(codex_home() / "memories")
        pieces += codex.items(codex_home(), exclude)
    with store.lock("imports"):
        manifest = load_manifest(store)
        result.rows = [_one(store, manifest, item, dry_run) for item in pieces]
        if not dry_run and any(r.action in ("import", "update") for r in result.rows):
            from dsh_memory.storage.store_format import _write_atomic

            path = Path(store.root) / MANIFEST  # bookkeeping: .state/ is never served
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return result


def _one(store: Any, manifest: dict, item: Item, dry_run: bool) -> ImportRow:
    row = ImportRow(
        agent=item.agent,
        source=str(item.source),
        part=item.part,
        project=item.project,
        kind=item.kind,
        action="skip",
        reason=item.skip or "",
    )
    if item.skip:
        return row
    if not item.text.strip():
        row.reason = "empty"
        return row
    known = manifest.get(item.key)
    if known and known.get("sha256") == item.sha256:
        row.action = row.reason = "unchanged"
        row.version, row.note = known.get("version"), known.get("note")
        return row
    row.action = "update" if known else "import"
    row.version = int(known.get("version") or 1) + 1 if known else 1
    row.reason = f"changed since version {row.version - 1}" if known else "new"
    if dry_run:
        return row
    from dsh_memory.transcript.private import drop_private

    now = datetime.now(UTC)
    extra = {
        "agent": item.agent,
        "source": str(item.source),
        "part": item.part,
        "sha256": item.sha256,
        "mtime": item.mtime,
        "version": row.version,
        "supersedes": known.get("note") if known else None,
        "kind": item.kind,
        "project": item.project,
        **{k: v for k, v in item.extra.items() if v},
    }
    row.note = store.add_note(drop_private(item.text), title=item.title, now=now, extra=extra)
    if known and known.get("note") in store.list_notes():  # the version it replaces, not consolidated yet
        store.archive_notes([known["note"]])
    kept = ("agent", "source", "part", "project", "sha256", "mtime", "version")
    manifest[item.key] = {k: extra[k] for k in kept} | {
        "note": row.note,
        "imported_at": now.isoformat(timespec="seconds"),
    }
    return row


def load_manifest(store: Any) -> dict[str, dict]:
    """What was imported, by piece (`.state/imports.json`; {} before the first import). An
    unreadable manifest is an error, not a reason to import everything again."""
    path = os.path.join(str(store.root), MANIFEST)
    try:
        if os.path.getsize(path) > MAX_MANIFEST_BYTES:
            raise UserInputError(f"{path} is larger than {MAX_MANIFEST_BYTES >> 20} MiB: not an import manifest")
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path} is unreadable ({exc}): move it aside to import everything again") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path} is not an import manifest: move it aside to import everything again")
    return {k: v for k, v in data.items() if isinstance(v, dict)}
