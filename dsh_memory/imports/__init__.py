"""`dsh-memory import`: bring in what Claude Code and Codex already remember, as ad hoc notes with
their provenance (what is read, how it is scoped, the bounds: docs/agents.md).

Idempotent: `.state/imports.json` remembers each piece's sha256, so an unchanged piece is
skipped and a changed one is imported again as the next version; the version it replaces, when
no consolidation has read it yet, moves to the notes' archive. Each note written is also appended
to `.state/imports.json.journal` at once, so an import killed half-way is not imported twice: the
next one reads the journal, rewrites the manifest and drops the journal. The sources are only read.
The sources, and how each piece is read and placed: `imports/sources.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from contextlib import nullcontext, suppress
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from dsh_memory import progress
from dsh_memory.errors import UserInputError
from dsh_memory.imports.sources import Item, capped, claude_items, codex_items
from dsh_memory.storage.store_format import _write_atomic, read_regular
from dsh_memory.transcript.private import drop_private
from dsh_memory.transcript.redact import redact

Which = Literal["claude", "codex", "all"]
MANIFEST = ".state/imports.json"
JOURNAL = MANIFEST + ".journal"  # one JSON line per note written since the manifest was last written
MAX_MANIFEST_BYTES = 16 << 20
# Pieces remembered: an import sees at most 2 × MAX_FILES, so past this only pieces whose source is
# gone (a Codex recap Codex deleted) are forgotten, the longest imported first (≈ 11 MB of JSON).
MAX_MANIFEST_ENTRIES = 20_000
PHASE = "import"  # `progress.report`s: one per piece, as it is read and imported (the CLI counts them)


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
    from dsh_memory.settings import claude_config_dir, codex_home

    exclude = list(settings.exclude_projects or ())
    result = ImportResult(dry_run=dry_run)
    pieces: list[Iterable[Item]] = []  # read one by one, as they are imported
    if which in ("claude", "all"):
        result.sources["claude"] = str(claude_config_dir() / "projects")
        pieces.append(capped(claude_items(claude_config_dir(), exclude)))
    if which in ("codex", "all"):
        result.sources["codex"] = str(codex_home() / "memories")
        pieces.append(capped(codex_items(codex_home(), exclude)))
    # a dry run writes nothing, not even the lock (the manifest is replaced atomically, a torn
    # journal line is skipped: read without it, it is at worst a moment old)
    with nullcontext() if dry_run else store.lock("imports"):
        manifest = load_manifest(store)
        journal = Path(store.root) / JOURNAL  # bookkeeping: .state/ is never served (made by store.lock)
        waiting = set(store.list_notes())  # once: listed again for each changed piece, N changes cost N²
        seen: set[str] = set()
        for item in chain(*pieces):
            seen.add(redact(item.key))
            result.rows.append(_redacted(_one(store, manifest, item, dry_run, journal, waiting)))
            progress.report(PHASE, 1, 0, item.source.name)
        if not dry_run and (journal.exists() or any(r.action in ("import", "update") for r in result.rows)):
            _bound(manifest, seen, set(result.sources))
            text = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
            _write_atomic(Path(store.root) / MANIFEST, text)
            journal.unlink(missing_ok=True)
    return result


def _bound(manifest: dict, seen: set[str], agents: set[str]) -> None:
    """Keep MAX_MANIFEST_ENTRIES pieces: past that, those of `agents` (the ones this import read)
    that it did not see (their source is gone) are forgotten, the longest imported first (one
    that comes back is imported again)."""
    if (extra := len(manifest) - MAX_MANIFEST_ENTRIES) > 0:
        mine = {k for k, v in manifest.items() if isinstance(v, dict) and v.get("agent") in agents}
        gone = [k for k in mine if k not in seen]
        gone.sort(key=lambda k: str(manifest[k].get("imported_at", "")))
        for key in gone[:extra]:
            del manifest[key]


def _redacted(row: ImportRow) -> ImportRow:
    """`row` as printed: a secret in a file's name, a `type:` or a `cwd:` line is redacted, as in the note."""
    return row.model_copy(update={k: redact(v) for k, v in row.model_dump().items() if isinstance(v, str)})


def _one(store: Any, manifest: dict, item: Item, dry_run: bool, journal: Path, waiting: set[str]) -> ImportRow:
    row = ImportRow(
        agent=item.agent,
        source=item.where,
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
    key = redact(item.key)  # .state/imports.json keeps no secret either (a file's name may hold one)
    known = manifest.get(key)
    if known and known.get("sha256") == item.sha256:
        row.action = row.reason = "unchanged"
        row.version, row.note = known.get("version"), known.get("note")
        if not dry_run:  # an import killed before archiving the version this one replaced
            _archive_replaced(store, known, waiting)
        return row
    row.action = "update" if known else "import"
    last = known.get("version") if known else None  # a hand-edited manifest may hold anything
    last = last if isinstance(last, int) and not isinstance(last, bool) and last > 0 else 1
    row.version = last + 1 if known else 1
    row.reason = f"changed since version {row.version - 1}" if known else "new"
    if dry_run:
        return row
    now = datetime.now(UTC)
    extra = {
        "agent": item.agent,
        "source": item.where,
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
    kept = ("agent", "source", "part", "project", "sha256", "mtime", "version", "supersedes")
    manifest[key] = {k: redact(extra[k]) if isinstance(extra[k], str) else extra[k] for k in kept} | {
        "note": row.note,
        "imported_at": now.isoformat(timespec="seconds"),
    }
    with open(journal, "a", encoding="utf-8") as fh:  # at once: a kill before the manifest loses nothing
        # a line of its own even after one cut short (a full disk): a newline first, not last
        fh.write("\n" + json.dumps({key: manifest[key]}, ensure_ascii=False))
        fh.flush()
        os.fsync(fh.fileno())
    _archive_replaced(store, manifest[key], waiting)
    return row


def _archive_replaced(store: Any, entry: dict, waiting: set[str]) -> None:
    """Move the version `entry` supersedes to the archive while no consolidation has read it yet.
    After the new one is written (a name of its own) and journaled: killed before, the next
    import, finding the piece unchanged, does it."""
    old = str(entry.get("supersedes"))
    if old in waiting and old != entry.get("note"):  # a hand-edited manifest may hold anything
        store.archive_notes([old])
        waiting.discard(old)


def load_manifest(store: Any) -> dict[str, dict]:
    """What was imported, by piece (`.state/imports.json`; {} before the first import). An
    unreadable manifest is an error, not a reason to import everything again."""
    path = os.path.join(str(store.root), MANIFEST)
    data: Any = {}
    try:
        if os.path.getsize(path) > MAX_MANIFEST_BYTES:
            raise UserInputError(f"{path} is larger than {MAX_MANIFEST_BYTES >> 20} MiB: not an import manifest")
        data = json.loads(read_regular(path))  # a FIFO in its place is refused, never waited on
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path} is unreadable ({exc}): move it aside to import everything again") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path} is not an import manifest: move it aside to import everything again")
    data = {**data, **dict(_journal(path + ".journal"))}
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _journal(path: str) -> list[tuple[str, Any]]:
    """The entries an import killed before writing its manifest appended (a torn line is skipped)."""
    out: list[tuple[str, Any]] = []
    with suppress(OSError):  # none: nothing to add; a FIFO in its place is refused, never waited on
        for line in read_regular(path, MAX_MANIFEST_BYTES).splitlines():
            with suppress(ValueError):
                if isinstance(entry := json.loads(line), dict):
                    out += entry.items()
    return out
