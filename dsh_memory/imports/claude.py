"""Claude Code auto memory: `$CLAUDE_CONFIG_DIR/projects/<project>/memory/` (default `~/.claude`).

A `MEMORY.md` index (one line per memory, loaded at session start) plus topic files, each with
YAML front matter (`name`, `description`, `type`: user, feedback, project, reference; `type` may
sit under `metadata:`). The project folder is the repository root with every character other
than a letter or digit replaced by `-`: it maps back to the repository when exactly one existing
directory fits (`readers.header.claude_folder_path`), else through the `cwd` a transcript in the
same folder names; a folder that maps to neither is skipped, never imported as global.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dsh_memory import scope
from dsh_memory.consolidation.skill_inventory import one_line
from dsh_memory.imports import MAX_FILES, Item, cut, front_matter, read_bounded
from dsh_memory.readers._input import is_dir, scandir

AGENT = "claude"


def items(config_dir: Path, exclude: list[str]) -> Iterator[Item]:
    projects = config_dir / "projects"
    folders = sorted((e for e in scandir(projects) if is_dir(e, follow_symlinks=False)), key=lambda e: e.name)
    seen = 0
    for folder in folders:
        memory = Path(folder.path) / "memory"
        if not memory.is_dir() or memory.is_symlink():
            continue
        files = sorted(p for p in memory.iterdir() if p.suffix == ".md" and not p.name.startswith("."))
        cwd = _folder_cwd(Path(folder.path))
        project = scope.project_root(cwd) if cwd else None
        for path in files:
            seen += 1
            if seen > MAX_FILES:
                return
            item = Item(AGENT, path, project=project)
            if cwd is None:
                item.skip = f"cannot tell which repository the folder {folder.name} is (no single existing path fits)"
            elif scope.excluded_by(cwd, exclude):
                item.skip = "excluded (exclude_projects)"
            else:
                _fill(item)
            yield item


def _fill(item: Item) -> None:
    text, sha, mtime = read_bounded(item.source)
    if text is None:
        item.skip = mtime  # the reason
        return
    item.sha256, item.mtime = sha, mtime
    fields, body = front_matter(text)
    if item.source.name == "MEMORY.md":
        item.kind, item.title = "index", f"Claude Code memory index of {scope.label(item.project or '')}"
    else:
        item.kind = one_line(fields.get("type"), 40) or "topic"
        item.title = one_line(fields.get("name"), 120) or item.source.stem
    head = f"Claude Code auto memory ({item.kind})"
    if fields.get("description"):
        head += ": " + one_line(fields["description"], 300)
    item.text = head + "\n\n" + cut(body, item.source)
    item.extra = {"claude_name": one_line(fields.get("name"), 120) or None}


def _folder_cwd(folder: Path) -> str | None:
    """The directory a Claude Code project folder stands for (see the module docstring)."""
    from dsh_memory.models import SessionRef
    from dsh_memory.readers.header import claude_folder_path, session_cwd

    found = claude_folder_path(folder.name)
    if found:
        return found
    try:
        logs = sorted((p for p in folder.glob("*.jsonl") if p.is_file()), key=lambda p: -p.stat().st_mtime)[:5]
    except OSError:
        return None
    for log in logs:
        ref = SessionRef(id=log.stem, source="claude", path=log, size=0, mtime_ns=0)
        cwd = session_cwd(ref)
        if cwd and "".join(c if c.isalnum() else "-" for c in cwd) == folder.name:
            return cwd
    return None
