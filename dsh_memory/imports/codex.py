"""Codex memories: `$CODEX_HOME/memories/` (default `~/.codex`).

- `MEMORY.md`: the handbook, in task groups (`# Task Group: <name>`, then `scope:` and
  `applies_to: cwd=<repository root>; reuse_rule=…` lines). Each group is imported on its own and
  keeps its `applies_to`: a group for one repository is that project's, a pattern (`cwd=.*`) or
  `global` is global (`scope.group_project`). Text before the first group is global.
- `memory_summary.md`: what Codex injects at session start: global.
- `rollout_summaries/*.md`: one recap per session; its `cwd:` line (front matter or a leading
  `key: value` line) places it in that repository.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

from dsh_memory import scope
from dsh_memory.consolidation.skill_inventory import one_line
from dsh_memory.imports import MAX_FILES, Item, cut, read_bounded

AGENT = "codex"
_CWD_LINE = re.compile(r"^(?:[-*]\s*)?cwd:\s*(\S.*?)\s*$", re.M)


def items(codex_home: Path, exclude: list[str]) -> Iterator[Item]:
    root = codex_home / "memories"
    if not root.is_dir() or root.is_symlink():
        return
    yield from _handbook(root / "MEMORY.md", exclude)
    summary = root / "memory_summary.md"
    if summary.exists():
        yield _file(Item(AGENT, summary, kind="summary", title="Codex memory summary"))
    rollouts = root / "rollout_summaries"
    if rollouts.is_dir() and not rollouts.is_symlink():
        for n, path in enumerate(sorted(p for p in rollouts.iterdir() if p.suffix == ".md")):
            if n >= MAX_FILES:
                return
            item = _file(Item(AGENT, path, kind="rollout_summary", title=f"Codex recap {path.stem}"))
            m = _CWD_LINE.search(item.text[:4000]) if item.text else None
            cwd = m.group(1).strip("'\"") if m else None
            item.project = scope.project_root(cwd) if cwd else None
            if cwd and scope.excluded_by(cwd, exclude):
                item.skip, item.text = "excluded (exclude_projects)", ""
            yield item


def _file(item: Item) -> Item:
    text, sha, mtime = read_bounded(item.source)
    if text is None:
        item.skip = mtime
        return item
    item.sha256, item.mtime = sha, mtime
    item.text = f"Codex memory ({item.kind})\n\n" + cut(text, item.source)
    return item


def _handbook(path: Path, exclude: list[str]) -> Iterator[Item]:
    if not path.exists():
        return
    text, _sha, mtime = read_bounded(path)
    if text is None:
        yield Item(AGENT, path, kind="handbook", skip=mtime)
        return
    lines = text.split("\n")
    starts = scope.handbook_groups(lines) + [(len(lines), None)]
    for (start, project), (end, _) in zip(starts, starts[1:], strict=False):
        part = "\n".join(lines[start:end]).strip()
        if not part:
            continue
        heading = lines[start] if lines[start].startswith(scope.GROUP_HEADING) else ""
        name = one_line(heading.split(":", 1)[1], 120) if heading else "(before the first task group)"
        item = Item(AGENT, path, part=name, project=project, kind="task_group", mtime=mtime)
        item.title = f"Codex task group {name}"
        if project and scope.excluded_by(project, exclude):
            item.skip = "excluded (exclude_projects)"
        else:
            item.sha256 = hashlib.sha256(part.encode("utf-8", "replace")).hexdigest()
            item.text = "Codex memory (task group)\n\n" + cut(part, path)
        yield item
