"""What `dsh-memory import` reads: the pieces of Claude Code's and Codex's memories, each with
the project it belongs to, or why it is skipped (the bounds: docs/agents.md).

Claude Code auto memory: `$CLAUDE_CONFIG_DIR/projects/<project>/memory/` (default `~/.claude`).
A `MEMORY.md` index (one line per memory, loaded at session start) plus topic files, each with
YAML front matter (`name`, `description`, `type`: user, feedback, project, reference; `type` may
sit under `metadata:`). The project folder is the repository root with every character other
than an ASCII letter or digit replaced by `-`: it maps back to the repository when exactly one existing
directory fits (`readers.header.claude_folder_path`), else through the `cwd` a transcript in the
same folder names; a folder that maps to neither is skipped, never imported as global.

Codex memories: `$CODEX_HOME/memories/` (default `~/.codex`).
- `MEMORY.md`: the handbook, in task groups (`# Task Group: <name>`, then `scope:` and
  `applies_to: cwd=<repository root>; reuse_rule=…` lines). Each group is imported on its own and
  keeps its `applies_to`: a group for one repository is that project's, a pattern (`cwd=.*`) or
  `global` is global (`scope.group_project`). Text before the first group is global.
- `memory_summary.md`: what Codex injects at session start: global.
- `rollout_summaries/*.md`: one recap per session; its `cwd:` line (front matter or a leading
  `key: value` line) places it in that repository.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from dsh_memory import scope
from dsh_memory.consolidation.skill_inventory import one_line
from dsh_memory.readers._input import is_dir
from dsh_memory.readpath.models import shown_name
from dsh_memory.transcript.private import drop_private
from dsh_memory.transcript.redact import redact

MAX_FILE_BYTES = 1 << 20  # a memory file larger than 1 MiB is not imported
MAX_FILES = 5000  # files (Codex task groups) looked at in one run, per source
MAX_NOTE_CHARS = 8000  # what one imported note keeps (the rest stays in its source)
MAX_FRONT_MATTER = 8192
CANNOT_READ = "cannot read: "  # the skip reason of a file or folder that cannot be read (`unreadable`)
LINKED = "a symlink: never followed (the sources are read in place)"  # a memory folder's skip reason
_CWD_LINE = re.compile(r"^(?:[-*]\s*)?cwd:\s*(\S.*?)\s*$", re.M)  # a Codex recap's repository


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
    def where(self) -> str:
        """The source's path as UTF-8 text: a byte of a name that is no UTF-8 as `\\xff`."""
        return shown_name(os.fspath(self.source))

    @property
    def key(self) -> str:
        return f"{self.agent}:{self.where}" + (f"#{self.part}" if self.part else "")


def _read(item: Item) -> str | None:
    """The text of `item.source`, a regular file (no symlink) of at most MAX_FILE_BYTES, its
    sha256 and mtime noted on `item`; None, with `item.skip` saying why, when it cannot be imported.
    Opened without following a link and checked on the open file: one swapped for a symlink (or a
    FIFO) between a check and the open is never read through. UTF-8 text only: a NUL byte or bytes
    that are no UTF-8 are refused (a picture named `.md` is no memory)."""
    try:
        fd = os.open(item.source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                item.skip = "not a regular file"
            elif st.st_size > MAX_FILE_BYTES:
                item.skip = f"larger than {MAX_FILE_BYTES // 1024} KiB ({st.st_size} bytes)"
            elif len(data := fh.read(MAX_FILE_BYTES + 1)) > MAX_FILE_BYTES:
                item.skip = f"larger than {MAX_FILE_BYTES // 1024} KiB"
    except OSError as exc:
        item.skip = "not a regular file" if exc.errno == errno.ELOOP else unreadable(exc)
    if not item.skip and b"\0" in data:
        item.skip = "binary (NUL bytes)"
    if item.skip:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        item.skip = f"not UTF-8 text (byte {exc.start})"
        return None
    item.sha256 = hashlib.sha256(data).hexdigest()
    item.mtime = datetime.fromtimestamp(st.st_mtime, tz=UTC).isoformat(timespec="seconds")
    return text


def front_matter(text: str) -> tuple[dict, str]:
    """(fields, body) of a Markdown file with YAML front matter (`---` … `---`); {} when it has
    none or it is not a mapping. `type` may sit under `metadata:`. Only plain values are kept:
    a list or mapping of aliases is tiny on disk but exponential as text (a billion laughs), and
    one the parser cannot build (nested too deep, a date that is none) is no front matter."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0 or end > MAX_FRONT_MATTER:
        return {}, text
    import yaml

    try:
        fields = yaml.safe_load(text[3:end])
    except (yaml.YAMLError, ValueError, RecursionError):  # a date 2024-02-30, an int of 5,000 digits, `[[[[…`
        return {}, text
    if not isinstance(fields, dict):  # `---` as a Markdown rule: the text is the body
        return {}, text
    body = text[end + 4 :].lstrip("-").lstrip("\n")
    meta = fields.get("metadata")
    if "type" not in fields and isinstance(meta, dict) and "type" in meta:
        fields["type"] = meta["type"]
    return {k: v for k, v in fields.items() if isinstance(k, str) and isinstance(v, str | int | float)}, body


def noted(head: str, body: str, source: Path) -> str:
    """A note's text: `head`, then `body` cut; "" when `body` says nothing (empty, blank, all
    private), which the import skips as empty."""
    body = cut(body, source)
    return f"{head}\n\n{body}" if drop_private(body).strip() else ""


def cut(text: str, source: Path) -> str:
    """`text`, or its first MAX_NOTE_CHARS up to a line's end (mid-line when its first line is
    longer): redacted before it is cut, so a secret cut in two is not kept in part."""
    text = text.strip()
    if len(text) <= MAX_NOTE_CHARS:
        return text
    text = redact(text)
    head = text[:MAX_NOTE_CHARS].rsplit("\n", 1)[0]
    return f"{head}\n\n[… cut: the rest is in {source}]"


def capped(items: Iterator[Item]) -> Iterator[Item]:
    """At most MAX_FILES items of a source (a Codex task group counts as a file: a 1 MiB handbook
    holds 30,000); the first one past the cap is reported skipped, so the cut is said, not silent."""
    for n, item in enumerate(islice(items, MAX_FILES + 1)):
        if n == MAX_FILES:
            item.skip = f"this and the rest of the source left out: an import reads {MAX_FILES:,} at most"
            item.text = ""
        yield item


def guarded(agent: str, folder: Path, items: Iterator[Item]) -> Iterator[Item]:
    """`items`, the pieces read from `folder`; when the folder (or one in it) cannot be read
    (permission denied, an I/O error), one piece skipped naming it and why, and the import goes
    on with the other folders. A folder that is not there (or is a file) has nothing to import."""
    try:
        yield from items
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else folder
        yield Item(agent, Path(where), skip=unreadable(exc))


def unreadable(exc: OSError) -> str:
    """The skip reason of a file or folder that cannot be read (`CANNOT_READ`, then why)."""
    return CANNOT_READ + str(exc.strerror or exc)


# -- Claude Code auto memory (see the module docstring) ----------------------------------------


def claude_items(config_dir: Path, exclude: list[str]) -> Iterator[Item]:
    yield from guarded("claude", config_dir / "projects", _claude_projects(config_dir / "projects", exclude))


def _claude_projects(projects: Path, exclude: list[str]) -> Iterator[Item]:
    with os.scandir(projects) as it:
        folders = sorted((e for e in it if is_dir(e, follow_symlinks=False)), key=lambda e: e.name)
    for folder in folders:
        memory = Path(folder.path) / "memory"
        yield from guarded("claude", memory, _claude_folder(Path(folder.path), memory, exclude))


def _claude_folder(folder: Path, memory: Path, exclude: list[str]) -> Iterator[Item]:
    if memory.is_symlink():
        yield Item("claude", memory, skip=LINKED)
        return
    if not memory.is_dir():
        return
    files = sorted(p for p in memory.iterdir() if p.suffix == ".md" and not p.name.startswith("."))
    cwd = _folder_cwd(folder)
    project = scope.project_root(cwd) if cwd else None
    for path in files:
        item = Item("claude", path, project=project)
        if cwd is None:
            item.skip = f"cannot tell which repository the folder {folder.name} is (no single existing path fits)"
        elif scope.excluded_by(cwd, exclude):
            item.skip = "excluded (exclude_projects)"
        else:
            _claude_fill(item)
        yield item


def _claude_fill(item: Item) -> None:
    text = _read(item)
    if text is None:
        return
    fields, body = front_matter(text)
    # as the text; redacted before `one_line` cuts them, so a secret cut in two is not kept in part
    fields = {k: redact(drop_private(v)) if isinstance(v, str) else v for k, v in fields.items()}
    if item.source.name == "MEMORY.md":
        item.kind, item.title = "index", f"Claude Code memory index of {scope.label(item.project or '')}"
    else:
        item.kind = one_line(fields.get("type"), 40) or "topic"
        item.title = one_line(fields.get("name"), 120) or item.source.stem
    head = f"Claude Code auto memory ({item.kind})"
    if fields.get("description"):
        head += ": " + one_line(fields["description"], 300)
    # a topic may say what it says in its description alone
    item.text = noted(head, body, item.source) or (head if fields.get("description") else "")
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
        if cwd and "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd) == folder.name:
            return cwd
    return None


# -- Codex memories (see the module docstring) -------------------------------------------------


def codex_items(codex_home: Path, exclude: list[str]) -> Iterator[Item]:
    yield from guarded("codex", codex_home / "memories", _codex(codex_home / "memories", exclude))


def _codex(root: Path, exclude: list[str]) -> Iterator[Item]:
    if root.is_symlink():
        yield Item("codex", root, skip=LINKED)
        return
    names = set(os.listdir(root))  # a folder that cannot be listed is skipped, saying so (`guarded`)
    if "MEMORY.md" in names:
        yield from _handbook(root / "MEMORY.md", exclude)
    if "memory_summary.md" in names:
        item = Item("codex", root / "memory_summary.md", kind="summary", title="Codex memory summary")
        _codex_file(item)
        yield item
    rollouts = root / "rollout_summaries"
    if "rollout_summaries" in names:
        yield from guarded("codex", rollouts, _rollouts(rollouts, exclude))


def _rollouts(rollouts: Path, exclude: list[str]) -> Iterator[Item]:
    if rollouts.is_symlink():
        yield Item("codex", rollouts, skip=LINKED)
        return
    if not rollouts.is_dir():
        return
    for path in sorted((p for p in rollouts.iterdir() if p.suffix == ".md"), key=_newest_first)[: MAX_FILES + 1]:
        item = Item("codex", path, kind="rollout_summary", title=f"Codex recap {path.stem}")
        text = _codex_file(item)  # the cwd as written (the note's text may be redacted)
        m = _CWD_LINE.search(text[:4000]) if text else None
        cwd = m.group(1).strip("'\"") if m else None
        item.project = scope.project_root(cwd) if cwd else None
        if cwd and scope.excluded_by(cwd, exclude):
            item.skip, item.text = "excluded (exclude_projects)", ""
        yield item


def _newest_first(path: Path) -> tuple[float, str]:
    """The newest recaps first: past MAX_FILES the oldest are left out, not the newest (by name,
    dated names put the newest last, and unchanged files count toward the cap on every run)."""
    try:
        return (-path.lstat().st_mtime, path.name)
    except OSError:
        return (0.0, path.name)


def _codex_file(item: Item) -> str | None:
    """Fill `item` with its file's note; the file's text as read (None: unreadable, `item.skip` says why)."""
    text = _read(item)
    if text is not None:
        item.text = noted(f"Codex memory ({item.kind})", text, item.source)
    return text


def _handbook(path: Path, exclude: list[str]) -> Iterator[Item]:
    whole = Item("codex", path, kind="handbook")
    text = _read(whole)
    if text is None:
        yield whole
        return
    lines = text.split("\n")
    starts = scope.handbook_groups(lines) + [(len(lines), None)]
    taken: dict[str, int] = {}  # a name is a piece's key: a second group of one name is "name (2)"
    for (start, project), (end, _) in zip(starts, starts[1:], strict=False):
        part = "\n".join(lines[start:end]).strip()
        if not part:
            continue
        heading = lines[start] if lines[start].startswith(scope.GROUP_HEADING) else ""
        # redacted here: the name is the piece's key in .state/imports.json and is printed
        said = drop_private(heading.split(":", 1)[1]) if heading else ""
        name = first = one_line(redact(said), 120) if heading else "(before the first task group)"
        while name in taken:
            taken[first] += 1
            name = f"{first} ({taken[first]})"
        taken[name] = 1
        item = Item("codex", path, part=name, project=project, kind="task_group", mtime=whole.mtime)
        item.title = f"Codex task group {name}"
        if project and scope.excluded_by(project, exclude):
            item.skip = "excluded (exclude_projects)"
        else:
            item.sha256 = hashlib.sha256(part.encode("utf-8", "replace")).hexdigest()
            item.text = noted("Codex memory (task group)", part, path)
        yield item
