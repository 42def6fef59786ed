"""Phase 2 without a big model call: merge raw memories into the handbook mechanically.

Used when the local model answers (flows/consolidate.py). Asking a 1.5B model to rewrite the
whole handbook took 13 minutes and cut it off mid-word; the merge below takes well under a
second and never cuts a bullet. What it does, for users: docs/local-llm.md (step 6) and
docs/architecture.md (Project scope). Besides: a line that is never memory
(`phase1/clean.py`) is dropped from new blocks and the current MEMORY.md alike; forgetting
candidates lose their `Tasks` lines, not their knowledge bullets; a bullet the working tree
contradicts is set aside, and retired when also old (`consolidation/stale.py`); a knowledge
bullet the MEMORY.md cap drops (oldest of the largest section; a whole project group, the
longest-named then the emptiest first, while the groups' headings alone pass half the cap), or a
project's code map line or fact past its newest MAX_CODE_MAP / MAX_FACTS, goes to
MEMORY.archive.md (listed and read); one shield per command kind and fix, one line for commands
that failed alike and were fixed alike, and one code map line per file.
"""

from __future__ import annotations

import heapq
import re
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from dsh_memory.consolidation import stale
from dsh_memory.consolidation.checks import SETUP_LINE, merged_documented, merged_list, wider
from dsh_memory.consolidation.output import ConsolidationOutput
from dsh_memory.consolidation.summary import render_summary, scope_of_group
from dsh_memory.phase1 import steps
from dsh_memory.phase1.clean import clip_marked, why_not_memory
from dsh_memory.phase1.codemap import merged_map_line
from dsh_memory.phase1.command_line import family
from dsh_memory.readpath.learned import BULLET, SOURCE, dates_of, item_key, sources_of, with_sources
from dsh_memory.readpath.models import MAX_NOTE_CHARS
from dsh_memory.scope import (
    GLOBAL,
    LINE_BREAKS,
    NO_PROJECT,
    REUSE,
    group_of,
    is_tagged_global,
    project_root,
    untag,
)
from dsh_memory.storage.store_format import parse_front_matter, slugify

SECTIONS = {  # raw-memory heading (prefix) → MEMORY.md section, in the order written
    steps.RULES: "User preferences",
    steps.FACTS: "Project facts",
    steps.SHIELDS: "Failure shields",
    steps.COMMANDS: "Reusable knowledge",
    steps.TRIPWIRES: "Project facts",
    steps.FINDINGS: "Project facts",
    steps.CODE_MAP: "Code map",
    steps.PROCEDURE: "Procedures",
}
ORDER = ["User notes", *dict.fromkeys(SECTIONS.values()), "Agent findings", "Notes", stale.SECTION, "Tasks"]
PROMOTABLE = ("User preferences",)  # what recurs across projects is the user's, not a project's
VERSION = re.compile(r"^v?\d+(\.\d+)*$")
LIST_LINES = (steps.CHECKS,)  # one such line per project, the sessions' items merged
MAX_CODE_MAP = 12  # a project's code map lines in MEMORY.md, newest first (where things are now)
MAX_FACTS = 40  # a project's facts in MEMORY.md, newest first (the archive keeps the rest)
SECTION_CAPS = {"Code map": MAX_CODE_MAP, "Project facts": MAX_FACTS}
HEAD_LINES = 3  # a task group's scope lines that count: `scope.handbook_groups` reads its first 3 lines


@dataclass
class Group:
    name: str
    sections: dict[str, list[str]] = field(default_factory=dict)
    head: list[str] = field(default_factory=list)  # scope / applies_to lines

    def add(self, section: str, bullet: str, source: str = "", first: bool = True) -> None:
        text = SOURCE.sub("", bullet).strip()
        if section != "Tasks" and why_not_memory(text):
            return  # never memory, whoever wrote it (phase1/clean.py)
        items = self.sections.setdefault(section, [])
        if text.startswith(LIST_LINES):
            head = text.split(":", 1)[0]
            for i, old in enumerate(items):
                if SOURCE.sub("", old).startswith(head + ":"):
                    items[i] = with_sources(merged_list(text, SOURCE.sub("", old)), [*sources_of(old), source])
                    return
            text = merged_list(text, head + ":")  # one session's list under the same rules
        if text.startswith(SETUP_LINE):  # one line where one session's steps are among another's
            for i, old in enumerate(items):
                plain = SOURCE.sub("", old).strip()
                if plain.startswith(SETUP_LINE) and (kept := wider(plain, text)):
                    items[i] = with_sources(kept, [*sources_of(old), source])
                    return
        key = _key(section, text)
        for i, old in enumerate(items):
            if _key(section, old) == key:
                items[i] = _with_source(old, source)
                return
        merge = _MERGES.get(section)
        for i, old in enumerate(items if merge else []):
            if merged := merge(SOURCE.sub("", old).strip(), text):
                items[i] = with_sources(merged, [*sources_of(old), source])
                return
        items.insert(0 if first else len(items), _with_source(text, source))

    def scope_lines(self) -> list[str]:
        """The `scope:` / `applies_to:` lines the group is written with: global's are the merge's
        own, a project's kept are at most HEAD_LINES (a rewrite may have added any number: `_cap`
        never drops the global group, and drops a project's whole)."""
        if self.name == GLOBAL:
            return ["scope: global (every project)", "applies_to: cwd=*; reuse_rule=every project"]
        if self.head:
            return self.head[:HEAD_LINES]
        return [f"scope: project {self.name}", f"applies_to: cwd={self.name}; {REUSE}"]

    def render(self) -> str:
        lines = [f"# Task Group: {self.name}", *self.scope_lines()]
        for name in sorted(self.sections, key=lambda s: ORDER.index(s) if s in ORDER else len(ORDER)):
            if self.sections[name]:
                lines += ["", f"## {name}", *self.sections[name]]
        return "\n".join(lines)


_SHIELD = re.compile(r"`(?P<cmd>[^`]+)` failed: .*; (?:fixed by|the agent's fix:) (?P<fix>.+?)\.?$")


def _key(section: str, bullet: str) -> str:
    """What makes two bullets one item: their words; for a shield, its command's kind and its fix
    (one lesson whatever error line each session quoted: `bun run lint` failing three ways, each
    fixed by `bun run lint:fix`, is one shield, said as first learned)."""
    m = _SHIELD.match(BULLET.sub("", SOURCE.sub("", bullet)).strip()) if section == "Failure shields" else None
    return f"shield: {family(m['cmd'])}; {item_key(m['fix'])}" if m else item_key(bullet)


_FAILED = re.compile(r"^(?P<commands>`[^`]+`(?:, `[^`]+`)*) failed: (?P<rest>.+)$")
MAX_FAILED_COMMANDS = 6


def _one_failure(old: str, new: str) -> str | None:
    """One line for shields of different commands with the same error, cause and fix (Codex's
    sandbox refuses every `mix` task's socket alike, and each was fixed by escalated permissions):
    "`a`, `b` failed: …"; None when they differ or the line names MAX_FAILED_COMMANDS already."""
    a, b = _FAILED.match(BULLET.sub("", old).strip()), _FAILED.match(BULLET.sub("", new).strip())
    if not (a and b) or a["rest"] != b["rest"]:
        return None
    commands = list(dict.fromkeys(re.findall(r"`[^`]+`", a["commands"]) + re.findall(r"`[^`]+`", b["commands"])))
    return None if len(commands) > MAX_FAILED_COMMANDS else f"- {', '.join(commands)} failed: {a['rest']}"


# Two bullets of a section that are one line: shields of one lesson, a file's code map, a project's documented commands
_MERGES = {"Failure shields": _one_failure, "Code map": merged_map_line, "Reusable knowledge": merged_documented}


def _with_source(bullet: str, source: str) -> str:
    return with_sources(bullet if BULLET.match(bullet) else f"- {bullet}", [source])


def parse_memory_md(text: str) -> dict[str, Group]:
    """Task groups of a MEMORY.md (this module's format; anything else lands in `Notes`)."""
    groups: dict[str, Group] = {}
    group: Group | None = None
    section, head = "Notes", False  # head: only a task group heading's lines so far
    for line in (text or "").splitlines():
        head = head and (not line.strip() or line.startswith(("scope:", "applies_to:")))
        if line.startswith("# Task Group:"):
            name = line.split(":", 1)[1].strip() or GLOBAL
            group = groups.setdefault(name, Group(name))
            section, head = "Notes", True
        elif head and group is not None and line.startswith(("scope:", "applies_to:")):
            group.head += [] if group.sections else [line]  # a repeated heading (`keep_unseen`): the first's
        elif line.startswith("## "):
            section = re.sub(r"^## (Task \d+: )?", "", line).strip() or "Notes"
        elif group is None:
            if line.strip() and not line.startswith("#"):
                group = groups.setdefault(GLOBAL, Group(GLOBAL))
                group.add("Notes", line.strip(), first=False)
        elif line.strip() and not (BULLET.match(line) and section != "Tasks" and why_not_memory(line)):
            group.sections.setdefault(section, []).append(line.rstrip())
    for name, g in groups.items():  # a model's group without scope lines ("team habits") is global, as it is read
        g.head = g.head or (Group(GLOBAL).scope_lines() if _worded(name) else [])
    return groups


def _worded(name: str) -> bool:
    """A task group named in words, no path (a model's "team habits"): never a session's project."""
    return name not in (GLOBAL, NO_PROJECT) and not re.search(r"[/\\:]", name)


def split_raw(body: str) -> list[tuple[str, str, list[str]]]:
    """(MEMORY.md section, heading text, bullets) per heading of a raw block."""
    out: list[tuple[str, str, list[str]]] = []
    for line in (body or "").splitlines():
        if line.startswith("#"):
            section = next((v for k, v in SECTIONS.items() if line.startswith(k)), "Notes")
            out.append((section, line.lstrip("#").strip(), []))
        elif line.strip():
            if not out:  # lines before the first heading
                out.append(("Notes", "", []))
            out[-1][2].append(line.rstrip())
    return out


def _task_line(store: Any, block: Any) -> str:
    rel = f"rollout_summaries/{block.slug}.md"
    gist = ""
    with suppress(Exception):  # a missing recap only loses its gist
        body = parse_front_matter(store.read_text(rel))[1]
        lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        gist = clip_marked(next((ln for ln in lines if not ln.startswith("#")), ""), 200)
    date = (block.updated_at or "")[:10] or "unknown"
    line = f"- {rel} (session={block.session_id}, source={block.source}, updated={date})"
    return f"{line}: {gist}" if gist else line


def skill_from(block: Any, parts: list[tuple[str, str, list[str]]]) -> dict | None:
    """A skill for a raw block that holds a procedure, `skills/<project>-<task>/SKILL.md`: when to
    use, the steps, verification from the commands that worked, pitfalls from its shields."""
    proc = next(((h, b) for s, h, b in parts if s == SECTIONS[steps.PROCEDURE] and b), None)
    if proc is None:
        return None
    heading, step_lines = proc
    task = heading.split(":", 1)[1].strip() if ":" in heading else heading
    root = block.project or project_root(block.cwd) or ""
    project = root.rstrip("/").rsplit("/", 1)[-1]
    # No version numbers in the name: the next release updates the same skill.
    words = [w for w in slugify(f"{project}-{task}").split("-") if w and not w.isdigit() and not VERSION.match(w)]
    name = "-".join(words)[:60].rstrip("-") or slugify(block.slug)
    verify = [b for s, _, bs in parts if s == SECTIONS[steps.COMMANDS] for b in bs]
    pitfalls = [b for s, _, bs in parts if s == SECTIONS[steps.SHIELDS] for b in bs]
    rules = [b for s, _, bs in parts if s == SECTIONS[steps.RULES] for b in bs]
    cwd = " ".join(LINE_BREAKS.sub(" ", block.cwd or "").split())  # on one line: no step or section of its own
    desc = re.sub(r"[\r\n\"]", " ", f"{task} (in {cwd or 'any project'})")[:200]
    md = [
        "---",
        f"name: {name}",
        f'description: "{desc}"',
        *([f"project: {root}"] if root else []),
        "---",
        "",
        "## When to use",
        f"- In `{cwd or 'the project'}`, when asked to: {task}",
        *rules,
        "",
        "## Procedure",
        *step_lines,
        "",
        "## Verification",
        *(verify or ["- The last step succeeded in the recorded session."]),
        "",
        "## Pitfalls",
        *(pitfalls or ["- None recorded."]),
        "",
        "## Source",
        f"- rollout_summaries/{block.slug}.md (session={block.session_id})",
    ]
    return {"name": name, "skill_md": "\n".join(md) + "\n", "task": task, "project": root or None}


def promote_recurring(groups: dict[str, Group]) -> None:
    """Move every user preference found (same words) in ≥ 2 project groups to `global`, sources
    merged: the user says it wherever they work. A command, fact or shield that two repositories
    share stays with each (two projects built alike are still two projects)."""
    seen: dict[tuple[str, str], list[tuple[Group, str]]] = {}
    for g in groups.values():
        if scope_of_group(g) is None:  # global already
            continue
        for section in PROMOTABLE:
            for b in g.sections.get(section, []):
                seen.setdefault((section, item_key(b)), []).append((g, b))
    for (section, _), where in seen.items():
        if len({g.name for g, _ in where}) < 2:
            continue
        target = groups.setdefault(GLOBAL, Group(GLOBAL))
        for g, b in where:
            g.sections[section].remove(b)
            for src in sources_of(b) or [""]:
                target.add(section, SOURCE.sub("", b), src, first=False)


def _heading_chars(g: Group) -> int:
    return sum(len(line) + 1 for line in [f"# Task Group: {g.name}", *g.scope_lines()]) + 1


def _cap(groups: dict[str, Group], limit: int, dropped: list) -> str:
    """Render, dropping the oldest bullet of the largest section until it fits (whole bullets);
    each dropped knowledge bullet is added to `dropped` (apply archives it: no silent loss).
    First, while the project groups' headings alone take over half of `limit` (session logs may
    claim many cwds, each up to 4,096 characters), whole project groups go from `groups`: the
    longest headings by the KiB first (a long cwd's, however many items it holds), then the
    emptiest. Never `global` (nor for its own heading: dropping projects would not shorten it)."""
    size = {n: _heading_chars(g) for n, g in groups.items()}
    held = {n: sum(len(v) for s, v in g.sections.items() if s != "Tasks") for n, g in groups.items()}
    total = sum(size[n] for n in groups if n != GLOBAL)
    note = f"over max_memory_md_chars ({limit}): the task groups' headings passed half of it, this one's long or empty"
    for n in sorted((n for n in groups if n != GLOBAL), key=lambda n: (-(size[n] // 1024), held[n], -size[n])):
        if total <= limit // 2:
            break
        g, total = groups.pop(n), total - size[n]
        dropped += [stale.Flagged(g.name, b, note, True) for s, bs in g.sections.items() if s != "Tasks" for b in bs]
    every = [(g, s) for g in groups.values() for s in g.sections]  # a model's answer may hold 80,000
    heapq.heapify(heap := [(-len(g.sections[s]), n, g, s) for n, (g, s) in enumerate(every) if g.sections[s]])
    while True:
        text = "\n\n".join(g.render() for g in groups.values()).strip() + "\n"
        size = len(text)
        if size <= limit or not heap:
            return text if size <= limit else text[: text.rfind("\n", 0, limit) + 1]
        while size > limit and heap:  # each bullet's line, and an emptied section's 2, leave the text
            _, n, g, s = heapq.heappop(heap)
            bullet = g.sections[s].pop()
            size -= len(bullet) + 1 + (0 if g.sections[s] else len(f"## {s}") + 2)
            if g.sections[s]:
                heapq.heappush(heap, (-len(g.sections[s]), n, g, s))
            if s != "Tasks":
                note = f"over max_memory_md_chars ({limit}): the oldest of the largest section, {s}"
                dropped.append(stale.Flagged(g.name, bullet, note, True))


def cap_handbook(text: str, limit: int) -> tuple[str, list[stale.Flagged]]:
    """A model's handbook within `limit` as `_cap` bounds the merge's, and the items it left out (to
    archive); `text` when it fits (a group without scope lines keeps its scope: `parse_memory_md`)."""
    if len(text) <= limit:
        return text, []
    groups, dropped = parse_memory_md(text), []
    return _cap(groups, limit, dropped), dropped


def note_items(fields: dict, body: str) -> list[str]:
    """A note's handbook items: one for a note the user added, whole (as long as `add` takes); an
    imported memory file's own bullets (at most 40), each on its own line."""
    whole = ["- " + " ".join(body.split())[:MAX_NOTE_CHARS]]
    if not fields.get("agent"):
        return whole
    bullets = [" ".join(ln.split()[1:]) for ln in body.splitlines() if re.match(r"\s*[-*+]\s+\S", ln)]
    return ["- " + b[:300] for b in bullets[:40]] or whole


def consolidate(store: Any, inputs: Any, settings: Any) -> ConsolidationOutput:
    """The mechanical merge (see the module docstring) as a ConsolidationOutput for `apply`."""
    groups = parse_memory_md(inputs.memory_md)
    wanted = set(inputs.raw_ids)
    skills: list[dict] = []
    for block in [b for b in store.read_raw_blocks() if b.id in wanted]:
        name = group_of(block.project or project_root(block.cwd))
        if _worded(name) and name in groups and scope_of_group(groups[name]) is None:
            name = NO_PROJECT  # a log whose cwd is a global group's name ("team habits"): never into it
        g = groups.setdefault(name, Group(name))
        parts = split_raw(block.body)
        skill = skill_from(block, parts)
        for section, _heading, bullets in reversed(parts):
            if section == SECTIONS[steps.PROCEDURE]:
                if skill:
                    g.add(section, f"- skills/{skill['name']}/SKILL.md: {skill['task']}", block.slug)
                continue
            for b in reversed(bullets):
                if is_tagged_global(b):
                    groups.setdefault(GLOBAL, Group(GLOBAL)).add(section, untag(b), block.slug)
                else:
                    g.add(section, b, block.slug)
        g.add("Tasks", _task_line(store, block))
        if skill:
            skills.append(skill)
    for rel in inputs.note_rels:
        try:
            text = store.read_text(rel)
        except Exception:  # noqa: BLE001 - a vanished note is not consumed (apply archives listed ones)
            continue
        fields, body = parse_front_matter(text)
        name = str(fields.get("project") or "") or GLOBAL  # an imported note keeps its project
        where = groups.setdefault(name, Group(name))
        if body.strip():
            for item in note_items(fields, body):
                where.add("User notes", item, rel.rsplit("/", 1)[-1])
    retired = list(inputs.candidate_slugs)
    for g in groups.values():
        g.sections["Tasks"] = [t for t in g.sections.get("Tasks", []) if not any(f"/{s}.md" in t for s in retired)]
    promote_recurring(groups)
    capped: list[stale.Flagged] = []
    for g in groups.values():  # a project's code map and facts: their newest lines (the rest archived)
        for section, most in SECTION_CAPS.items():
            for bullet in g.sections.get(section, [])[most:]:
                capped.append(stale.Flagged(g.name, bullet, f"beyond the newest {most} lines of {section}", True))
            if section in g.sections:
                g.sections[section] = g.sections[section][:most]
    stale.set_aside(groups, scope_of_group)
    # Leave out the set-aside items no session confirmed for `stale_after_days` (dated by the
    # sources of the handbook as merged, new sessions included); apply archives them.
    dates = dates_of("\n\n".join(g.render() for g in groups.values()), str(store.root))
    stale.retire(groups, scope_of_group, dates, date.fromisoformat(inputs.today), settings.stale_after_days)
    if GLOBAL in groups and not any(groups[GLOBAL].sections.values()):
        del groups[GLOBAL]
    groups = dict(sorted(groups.items(), key=lambda kv: (kv[0] != GLOBAL, kv[0])))
    memory_md = _cap(groups, settings.max_memory_md_chars, capped)
    # the summary routes to this run's skills and to the existing ones this run does not rewrite
    written = {s["name"] for s in skills}
    known = [{"name": s.name, "task": s.description or s.name, "project": s.project or None} for s in inputs.skills]
    summary = render_summary(
        groups, skills + [s for s in known if s["name"] not in written], settings.max_summary_chars
    )
    return ConsolidationOutput(
        memory_md=memory_md,
        memory_summary_md=summary,
        skills=[{"name": s["name"], "skill_md": s["skill_md"]} for s in skills],
        retire_summaries=retired,
        source="mechanical",
        archive=capped,
    )
