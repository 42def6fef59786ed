"""Project scope on the read path (the rules: docs/architecture.md, Project scope): the scope of
each line of a memory file (`scope_of`, parsed once per file version), search hits with this
project's and global ones first (`layer`), and the summary injected for a project
(`compose_summary`). The counts per project that `status` shows live in `readpath.health`.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dsh_memory import scope as sc
from dsh_memory.errors import UserInputError
from dsh_memory.readpath._common import FileCache, read_text
from dsh_memory.readpath.models import cwd_problem

PROJECT = "project "
MIXED = "mixed"
MAX_OTHERS_NAMED = 8
SEARCH_SCAN_LIMIT = 5000  # matches a scoped line search looks at (in-scope ones are served first)

_spans_cache = FileCache(4096)


@dataclass(frozen=True)
class Where:
    """The project a request comes from (`cwd` → repository root)."""

    root: str
    is_repo: bool

    @classmethod
    def of(cls, cwd: str | None) -> Where | None:
        """None without a cwd; one that names no project (`models.cwd_problem`) is refused
        (UserInputError), never read as every project's memory."""
        if problem := cwd_problem(cwd):
            raise UserInputError(problem)
        root, is_repo = sc.locate(os.path.expanduser(cwd) if cwd else None)
        return cls(root, is_repo) if root else None

    def sees(self, scope: str | None) -> bool:
        """This project's and global memory (a scope that is not a project is global)."""
        return not scope or not scope.startswith(PROJECT) or sc.matches(scope[len(PROJECT) :], self.root, self.is_repo)


def _as_spans(groups: list[tuple[int, str | None]]) -> list[tuple[int, str]]:
    """(first line number, scope) per task group or summary part (`scope.handbook_groups`,
    `scope.summary_groups`)."""
    return [(i + 1, PROJECT + p if p else sc.GLOBAL) for i, p in groups]


def _front_matter_scope(text: str) -> str:
    from dsh_memory.storage.store_format import parse_front_matter

    fields, _ = parse_front_matter(text[:8192])
    project = fields.get("project")
    if not project and "session_id" in fields:  # a rollout summary without a project field
        project = sc.project_root(fields.get("cwd") or "")
    return PROJECT + str(project).rstrip("/") if project else sc.GLOBAL


def _spans(store: Any, rel: str) -> list[tuple[int, str]]:
    """(first line, scope) spans of one memory file, cached per file version."""
    path = os.path.join(str(store.root), rel)
    top = rel.split("/", 1)[0]
    notes = rel.startswith("extensions/ad_hoc/")  # a note's `project:` (add with a cwd, an import)
    if top not in ("MEMORY.md", "MEMORY.archive.md", "memory_summary.md", "rollout_summaries", "skills") and not notes:
        return [(1, sc.GLOBAL)]
    if top == "skills":
        parts = rel.split("/")
        path = os.path.join(str(store.root), "skills", parts[1], "SKILL.md") if len(parts) > 2 else path
    try:
        st = os.lstat(path)
    except OSError:
        return [(1, sc.GLOBAL)]

    def build() -> list[tuple[int, str]]:
        text = read_text(path, st) or ""
        if top in ("MEMORY.md", "MEMORY.archive.md"):  # the archive keeps the handbook's task groups
            return _as_spans(sc.handbook_groups(text.splitlines()))
        if top == "memory_summary.md":
            return _as_spans(sc.summary_groups(text.splitlines()))
        return [(1, _front_matter_scope(text))]

    return _spans_cache.get(path, st, build)


def scope_of(store: Any, rel: str, line: int = 1) -> str:
    """`global` or `project <root>` for line `line` of memory file `rel`."""
    spans = _spans(store, rel)  # sorted by first line
    i = bisect_right(spans, line, key=lambda span: span[0])
    return spans[i - 1][1] if i else sc.GLOBAL


def file_scope(store: Any, rel: str) -> str:
    """One file's scope; `mixed` when it holds parts of several."""
    scopes = {s for _, s in _spans(store, rel)}
    return scopes.pop() if len(scopes) == 1 else MIXED


def layer(
    items: Iterable[Any], where: Where | None, other_projects: bool, scope: Callable[[Any], str | None]
) -> Iterator[Any]:
    """Every search match or list entry with its `scope(item)`; with a project: in-scope items
    first, the others after them only when `other_projects` (the order within each layer unchanged)."""
    later = []
    for m in items:
        m = m.model_copy(update={"scope": scope(m)})
        if where is None or where.sees(m.scope):
            yield m
        elif other_projects:
            later.append(m)
    yield from later


def _trim(text: str, cap: int, what: str) -> tuple[str, bool]:
    """`text` within `cap`, whole lines; what is cut is named in one last line (how many lines of
    which part, and how to get them), never left out silently."""
    from dsh_memory.phase1.postprocess import cap_lines

    if len(text) <= cap:
        return text, False
    lines = text.split("\n")
    note = "- not shown here: {n} more lines of " + what + " (memory_search for them, or memory_read MEMORY.md)"
    kept = cap_lines(lines, max(0, cap - len(note) - 8))
    n = sum(1 for ln in lines[len(kept.split("\n")) if kept else 0 :] if ln.strip() and not ln.startswith("#"))
    return (kept + "\n" if kept else "") + note.format(n=n), True


def others_line(projects: list[str], room: int) -> str:
    """One line naming the other projects with memories: MAX_OTHERS_NAMED at most, and only as
    many as fit `room` characters (a project's path comes from a session log: it may be long);
    the rest counted."""
    if not projects:
        return ""
    head = "Other projects with memories (memory_search with other_projects=true to look there): "
    names: list[str] = []
    for p in projects[:MAX_OTHERS_NAMED]:
        name = f"{sc.label(p)} ({p})"
        if len(head) + len(", ".join([*names, name])) + len(" and 99999 more.") > room:
            break
        names.append(name)
    rest = len(projects) - len(names)
    more = (f" and {rest} more" if names else f"{rest} project{'s' * (rest > 1)}") if rest else ""
    return f"{head}{', '.join(names)}{more}."


def compose_summary(
    full: str,
    where: Where,
    max_chars: int,
    check: Callable[[str], str] | None = None,
    split: tuple[str, dict[str, str]] | None = None,
) -> tuple[str, bool, list[str], list[str]]:
    """(content, truncated, this project's parts, other projects) for one project. `check` maps
    the project's parts to what is shown of them (the freshness notes) before the budget applies,
    so the notes count against it too; `split`: `scope.summary_parts(full)`, when the caller has it."""
    glob, parts = split or sc.summary_parts(full)
    mine = sorted(p for p in parts if sc.matches(p, where.root, where.is_repo))
    others = sorted(p for p in parts if p not in mine)
    tail = others_line(others, max_chars // 4)  # the rest for the memory itself
    head = "v1\n\n"
    project_text = "\n\n".join(f"{sc.SUMMARY_HEADING}{PROJECT}{p}\n{parts[p]}".rstrip() for p in mine)
    project_text = check(project_text) if check and project_text else project_text
    global_text = f"{sc.SUMMARY_HEADING}global\n{glob}".rstrip() if glob.strip() else ""
    avail = max(0, max_chars - len(head) - len(tail) - 4)
    g_cap = max(avail // 2, avail - len(project_text))
    global_text, cut_g = _trim(global_text, g_cap, "the global part")
    label = ", ".join(sc.label(p) for p in mine) or where.root
    project_text, cut_p = _trim(project_text, max(0, avail - len(global_text)), f"project {label}")
    body = "\n\n".join(t for t in (global_text, project_text, tail) if t.strip())
    content = (head + body).strip() if body.strip() else ""
    return content, cut_g or cut_p, mine, others
