"""The deterministic rule behind a model's handbook: a project's item stays in its project
(docs/architecture.md, Project scope). A line the model put in the global (or another project's)
group or part that is one of the raw memories' project-only items moves to its project's group or
part before the files are written; nothing else of the model's text changes. A line is an item
when it holds at least MIN_SHARE of the item's words; one matching several projects' stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from dsh_memory import scope as sc
from dsh_memory.consolidation.mechanical import Group, note_items
from dsh_memory.consolidation.summary import MAX_PREF_CHARS
from dsh_memory.readpath.learned import SOURCE
from dsh_memory.storage.store_format import parse_front_matter

WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*")
NOISE = frozenset("the and for you with this that user said says agent".split())

MIN_SHARE = 0.8
ITEM_PREFIXES = ("- ", "* ", "+ ")


def _words(line: str) -> frozenset[str]:
    """The words of an item that say what it is (3+ letters, not who said it)."""
    return frozenset(w for w in WORD.findall(sc.untag(SOURCE.sub("", line)).lower()) if len(w) >= 3 and w not in NOISE)


def project_items(blocks: Iterable[Any]) -> list[tuple[frozenset[str], str]]:
    """(content words, project) of every project-only item of the raw blocks: not tagged global,
    found in one project only."""
    where: dict[frozenset[str], set[str]] = {}
    for b in blocks:
        project = sc.group_of(b.project or sc.project_root(b.cwd))  # never global (a cwd naming none)
        for line in (b.body or "").split("\n"):
            if not line.lstrip().startswith(ITEM_PREFIXES):
                continue
            words = _words(line)
            if len(words) >= 2:
                where.setdefault(words, set()).add(sc.GLOBAL if sc.is_tagged_global(line) else project)
    return [(w, next(iter(p))) for w, p in where.items() if len(p) == 1 and sc.GLOBAL not in p]


def note_blocks(store: Any, rels: Iterable[str]) -> list[Any]:
    """The ad hoc notes of one project (`project:` in their front matter: `add` with a cwd, an
    import) as raw blocks of their handbook items, for `project_items`: a note's items are its
    project's, like a raw memory's."""
    blocks = []
    for rel in rels:
        try:
            fields, body = parse_front_matter(store.read_text(rel))
        except Exception:  # noqa: BLE001 - a vanished note guards nothing
            continue
        if fields.get("project") and body.strip():
            blocks.append(
                SimpleNamespace(  # a long note: its head, as the summary's line of it has it
                    project=str(fields["project"]),
                    cwd=None,
                    body="\n".join(i[:MAX_PREF_CHARS] for i in note_items(fields, body)),
                )
            )
    return blocks


def _owner(line: str, items: list[tuple[frozenset[str], str]]) -> str | None:
    words = _words(line)
    owners = {p for w, p in items if len(w & words) / len(w) >= MIN_SHARE}
    return owners.pop() if len(owners) == 1 else None


Groups = list[tuple[str | None, list[str]]]  # (project, or None for global; its lines)


def _sort_out(groups: Groups, items: list[tuple[frozenset[str], str]]) -> tuple[Groups, dict[str, list[str]]]:
    """The groups without the item lines that belong to another project, and those lines by owner."""
    kept: Groups = []
    moved: dict[str, list[str]] = {}
    for where, body in groups:
        keep = []
        for line in body:
            owner = _owner(line, items) if line.lstrip().startswith(ITEM_PREFIXES) else None
            if owner and owner != where:
                moved.setdefault(owner, []).append(line)
            else:
                keep.append(line)
        kept.append((where, keep))
    return kept, moved


def guard_summary(text: str, items: list[tuple[frozenset[str], str]]) -> tuple[str, int]:
    """(summary with misplaced project items moved to their part, how many moved)."""
    if not items or not text.strip():
        return text, 0
    glob, parts = sc.summary_parts(text)
    kept, moved = _sort_out([(None, glob.split("\n")), *((p, t.split("\n")) for p, t in parts.items())], items)
    if not moved:
        return text, 0
    sections = dict(kept)
    for owner, lines in moved.items():
        sections.setdefault(owner, []).extend(["## User preferences", *lines] if owner not in parts else lines)
    out = ["v1", "", f"{sc.SUMMARY_HEADING}global", *sections.pop(None), ""]
    for name, lines in sections.items():
        out += [f"{sc.SUMMARY_HEADING}project {name}", *lines, ""]
    return "\n".join(out).rstrip() + "\n", sum(len(v) for v in moved.values())


def guard_handbook(text: str, items: list[tuple[frozenset[str], str]]) -> tuple[str, int]:
    """(MEMORY.md with misplaced project items moved to their project's task group, how many)."""
    if not items or not text.strip():
        return text, 0
    lines = text.split("\n")
    starts = sc.handbook_groups(lines)
    ends = [s for s, _ in starts[1:]] + [len(lines)]
    kept, moved = _sort_out([(p, lines[s:e]) for (s, p), e in zip(starts, ends, strict=True)], items)
    if not moved:
        return text, 0
    count = sum(len(v) for v in moved.values())
    out = [ln for project, body in kept for ln in [*body, *moved.pop(project, [])]]
    for owner, extra in moved.items():  # a project without a group yet: a new one, in the merge's format
        out += ["", *Group(owner, {"User preferences": extra}).render().split("\n")]
    return "\n".join(out).rstrip() + "\n", count
