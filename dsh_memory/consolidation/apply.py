"""Validate a `ConsolidationOutput` and write it into the memory root.

Order: validate everything (pure, no filesystem call) → skills → MEMORY.archive.md (what the
new handbook leaves out) → MEMORY.md → memory_summary.md →
retire candidates → archive consumed raw blocks → archive consumed notes. Every text write goes
through `MemoryStore.atomic_write`; a crash midway leaves each file either old or new and the raw
blocks and notes unconsumed (the next run sees them again), never lost. An invalid skill (name,
or a file outside scripts/, templates/, examples/) is skipped and reported; the rest lands.
"""

from __future__ import annotations

import bisect
import os
import re
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dsh_memory.consolidation.inputs import INIT, Phase2Inputs
from dsh_memory.consolidation.mechanical import HEAD_LINES, Group, cap_handbook
from dsh_memory.consolidation.output import ConsolidationOutput, stored
from dsh_memory.consolidation.prompt import data_fence
from dsh_memory.consolidation.scope_guard import guard_handbook, guard_summary, note_blocks, project_items
from dsh_memory.consolidation.skill_files import set_aside, unstage, write_skill
from dsh_memory.consolidation.skill_inventory import read_optional
from dsh_memory.consolidation.skills import SkillError, ValidSkill, validate_skill, validate_skill_name
from dsh_memory.consolidation.stale import Flagged
from dsh_memory.errors import DshMemoryError, LLMOutputError
from dsh_memory.phase1.near import Seen
from dsh_memory.phase1.postprocess import (
    BOILERPLATE,
    WORD,
    cut_reason,
    is_content,
    norm,
    trim_to_sentence,
    unloop,
)
from dsh_memory.readpath.learned import BULLET, FLAGS, SOURCE, item_key
from dsh_memory.scope import GLOBAL, GROUP_HEADING, handbook_groups, summary_file_cap
from dsh_memory.storage.store_format import keep_newest
from dsh_memory.transcript.redact import redact

MAX_SKILLS_PER_RUN = 20
SUMMARY_FIRST_LINE = "v1"
ARCHIVE = "MEMORY.archive.md"
ARCHIVE_TITLE = "# Retired handbook items (kept, with why and when; see docs/agents.md)"
ARCHIVE_MAX_CHARS = 1_000_000  # MEMORY.archive.md's newest, in whole task groups (16 full handbooks)
MAX_RETIRED_SUMMARIES = 2000  # rollout_summaries/.retired/'s newest (and every one MEMORY.md names)


def ensure_summary_v1(text: str, cap: int) -> str:
    """First line exactly `v1` (repaired when missing or decorated), whole text within `cap`."""
    body = (text or "").lstrip("\ufeff")
    lines = body.split("\n")
    first_idx = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first_idx is not None and lines[first_idx].strip().strip("`*#").strip().lower() == SUMMARY_FIRST_LINE:
        rest = "\n".join(lines[first_idx + 1 :]).lstrip("\n")
    else:
        rest = body.strip("\n")
    out = SUMMARY_FIRST_LINE + "\n\n" + rest.rstrip() + "\n" if rest.strip() else SUMMARY_FIRST_LINE + "\n"
    if len(out) > cap:  # whole lines; the head always keeps the `v1` line and its newline
        head = out[: max(len(SUMMARY_FIRST_LINE) + 1, cap - 1)]
        out = head[: head.rfind("\n") + 1]
    return out


@dataclass
class ApplyResult:
    files_written: list[str] = field(default_factory=list)
    skills_written: list[str] = field(default_factory=list)
    skills_removed: list[str] = field(default_factory=list)
    skill_errors: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    retire_refused: list[str] = field(default_factory=list)  # not an annotated candidate
    retire_missing: list[str] = field(default_factory=list)
    raw_archived: int = 0
    notes_archived: int = 0
    summary_repaired: bool = False
    scope_moved: int = 0  # project items the model put in another part (scope_guard)
    items_retired: int = 0  # flagged (or capped) handbook items left out, moved to MEMORY.archive.md
    kept_unchanged: list[str] = field(default_factory=list)
    unseen_kept: int = 0  # characters of MEMORY.md past the input cap, kept after the model's text


def clean_handbook(text: str, vocabulary_text: str, answer: str = "") -> str:
    """The handbook file any Phase 2 writes (model or mechanical merge), cleaned deterministically:
    Phase 1's line rules (`phase1/postprocess.py`) minus grounding, repeated lines kept once per
    task group (two projects may share a rule). The vocabulary that tells a cut word from a real
    one is the consolidation's input (raw memories, notes, the current files); a word cut short
    is the start of one of its words or of the whole `answer`'s (both files); a line the input has
    whole (a note ending "plan a") is no cut. A task group's heading keeps its first HEAD_LINES
    `scope:` / `applies_to:` lines. Nothing is cut inside a line (`stored` drops control
    characters and private spans first). U+2028 and U+2029 end a line, as for the read path's
    `splitlines` (the scope of each line): a heading after one would head a part only it sees."""
    text = stored(re.sub("[\u2028\u2029]", "\n", text or ""))
    vocab = {w.lower() for w in WORD.findall(vocabulary_text or "")}
    counts = Counter(w.lower() for w in WORD.findall(text or ""))
    known = sorted(vocab | counts.keys() | {w.lower() for w in WORD.findall(answer)})
    whole = {_item_text(ln) for ln in (vocabulary_text or "").split("\n")}  # a line the input has is no cut
    out: list[str] = []
    seen = Seen()
    fence = False
    head: int | None = None  # a task group's scope lines so far (None: past its heading)
    for raw in (text or "").split("\n"):
        line = raw.rstrip()
        if line.strip().startswith("```"):
            fence = not fence
        if fence or line.strip().startswith("```") or not is_content(line) or line.strip() == "v1":
            if line.startswith("# "):  # a new task group: the same bullet may hold in two projects
                seen = Seen()
                head = 0 if line.startswith(GROUP_HEADING) else None
            out.append(line)
            continue
        if head is not None and line.startswith(("scope:", "applies_to:")):
            head += 1  # a heading's first HEAD_LINES count (`handbook_groups`); a rewrite may add thousands
            if head > HEAD_LINES:
                continue
        else:
            head = None
        if BOILERPLATE.search(line):
            continue
        line = unloop(line)
        why = cut_reason(line, vocab, counts)
        if why and (why != "ends mid-word" or cut_word(line, known)) and _item_text(line) not in whole:
            trimmed = trim_to_sentence(line, vocab, counts)
            if trimmed is None:
                continue
            line = trimmed
        key = norm(line)
        if len(key) >= 12 and seen.near(key):
            continue
        seen.add(key)
        out.append(line)
    return "\n".join(out).rstrip() + "\n" if any(s.strip() for s in out) else ""


def _item_text(line: str) -> str:
    """A line's words without its bullet and spacing: a note's text as the input and a handbook
    item have it ('- roll back with plan a', 'roll back with plan a')."""
    return " ".join(line.strip().lstrip("-*+").split())


def cut_word(line: str, words: list[str]) -> bool:
    """The line's last word is the start of a longer one of `words` (sorted: the first word after
    it, found by bisection, not a scan per line) ('## User prefe'): cut mid-word. Else a word the
    input never had is the model's own, in a line it wrote without a period (a cut-off field of
    its answer is never used)."""
    w = WORD.findall(line)[-1].lower()
    i = bisect.bisect_right(words, w)
    return i < len(words) and words[i].startswith(w)


def keep_unseen(memory_md: str, full: str, unseen: str) -> str:
    """The model's MEMORY.md, then `unseen` (the end of `full` its input did not show) under the
    heading, scope lines and section of the task group the cut fell in: each line keeps its project."""
    lines = full[: len(full) - len(unseen)].split("\n")
    start = handbook_groups(lines)[-1][0]
    if unseen.lstrip("\n").startswith(GROUP_HEADING):
        head = []
    elif lines[start].startswith(GROUP_HEADING):
        head = [lines[start], *(ln for ln in lines[start + 1 : start + 4] if ln.startswith(("scope:", "applies_to:")))]
    else:  # text before any task group is global
        head = [f"{GROUP_HEADING} {GLOBAL}"]
    section = next((ln for ln in reversed(lines[start + 1 :]) if ln.startswith("## ")), None)
    if head and section and not unseen.lstrip("\n").startswith("#"):
        head.append(section)
    return "\n".join([memory_md.rstrip("\n"), "", *head, unseen.strip("\n")]) + "\n"


def plan_skills(output: ConsolidationOutput, result: ApplyResult) -> tuple[list[ValidSkill], list[str]]:
    """Validate skills and removals (no filesystem access). Errors go into result.skill_errors."""
    valid: list[ValidSkill] = []
    for i, item in enumerate(output.skills):
        if i >= MAX_SKILLS_PER_RUN:
            result.skill_errors.append(f"more than {MAX_SKILLS_PER_RUN} skills in one run: the rest skipped")
            break
        try:
            s = validate_skill(item)
        except SkillError as exc:
            name = item.get("name") if isinstance(item, dict) else None
            result.skill_errors.append(f"{redact(name)[:80] if isinstance(name, str) else '?'}: {exc}")
            continue
        if any(v.name == s.name for v in valid):
            result.skill_errors.append(f"{s.name}: emitted twice; the first one kept")
            continue
        valid.append(s)
    removals: list[str] = []
    for name in output.remove_skills:
        try:
            n = validate_skill_name(name)
        except SkillError as exc:
            result.skill_errors.append(f"remove: {exc}")
            continue
        if any(v.name == n for v in valid):
            result.skill_errors.append(f"remove {n}: also written in this run; not removed")
        elif len(removals) == MAX_SKILLS_PER_RUN:  # one run's set-asides stay within skills/.removed/'s bound
            result.skill_errors.append(f"more than {MAX_SKILLS_PER_RUN} skills removed in one run: the rest kept")
            break
        elif n not in removals:
            removals.append(n)
    return valid, removals


def apply_output(
    store: Any, state: Any, inputs: Phase2Inputs, output: ConsolidationOutput, settings: Any, now: datetime
) -> ApplyResult:
    """Write the consolidation. Raises only for failures of the core files (MEMORY.md, summary),
    and, writing nothing, when one of them changed since the inputs were read (edited by hand
    while the model worked: the next run merges from the edited text) or a raw block or note of
    the input is gone (forgotten or deleted: the next run reads what is left)."""
    for rel, seen in (("MEMORY.md", inputs.memory_md), ("memory_summary.md", inputs.summary)):
        if (read_optional(store.root / rel) or "") != seen:
            raise DshMemoryError(f"{rel} changed while this consolidation ran: nothing written, the next run reads it")
    present = {b.id for b in store.read_raw_blocks()}  # `forget` (or a delete) took some of the input meanwhile
    if any(i not in present for i in inputs.raw_ids) or any(not (store.root / r).is_file() for r in inputs.note_rels):
        raise DshMemoryError("raw memories or notes were forgotten while this consolidation ran: nothing written")
    fence = data_fence(inputs.sections)  # in the answer only when the model repeated its input
    if any(fence in text for text in (output.memory_md, output.memory_summary_md)):
        raise LLMOutputError("the model's answer repeats its input (the data fences): nothing written")
    result = ApplyResult()
    skills, removals = plan_skills(output, result)
    store.ensure_layout()

    unstage(store)  # what a killed run staged
    for s in skills:
        try:
            result.files_written += write_skill(store, s, now)
            result.skills_written.append(s.name)
        except (DshMemoryError, OSError) as exc:
            result.skill_errors.append(f"{s.name}: {exc}")
    unstage(store)
    for name in removals:
        try:
            path = store.resolve(f"skills/{name}")  # refuses symlinks on the way
            if os.path.isdir(path) and not os.path.islink(path):  # kept, never deleted: the model's word alone
                set_aside(store, path, name, now)
                result.skills_removed.append(name)
            else:
                result.skill_errors.append(f"remove {name}: no such skill")
        except (DshMemoryError, OSError) as exc:
            result.skill_errors.append(f"remove {name}: {exc}")

    incremental = inputs.mode != INIT
    evidence = "\n".join(sec.body for sec in inputs.sections)
    answer = f"{output.memory_md}\n{output.memory_summary_md}"
    output.memory_md = clean_handbook(output.memory_md, evidence, answer) if output.memory_md.strip() else ""
    if output.memory_summary_md.strip():
        output.memory_summary_md = clean_handbook(output.memory_summary_md, evidence, answer) or "v1\n"
    if output.source != "mechanical":  # the model's scopes, checked against the raw memories and notes
        notes = note_blocks(store, [*store.list_notes(archived=True), *inputs.note_rels])
        items = project_items([*store.read_raw_archive_blocks(), *store.read_raw_blocks(), *notes])
        output.memory_md, moved_md = guard_handbook(output.memory_md, items)
        output.memory_summary_md, moved_summary = guard_summary(output.memory_summary_md, items)
        result.scope_moved = moved_md + moved_summary
        if output.memory_md.strip() and inputs.memory_md_unseen.strip():  # never shown: kept as it was
            output.memory_md = keep_unseen(output.memory_md, inputs.memory_md, inputs.memory_md_unseen)
            result.unseen_kept = len(inputs.memory_md_unseen)
    if output.memory_md.strip() or not incremental:
        # bounded whoever wrote it (the merge caps its own); an item left out is archived, never
        # lost silently (a flagged or capped one with its reason first; what only a model's answer
        # had last, so a rambling answer past the archive's bound cannot crowd the handbook out)
        text, capped = cap_handbook(output.memory_md.rstrip() + "\n", settings.max_memory_md_chars)
        handbook = [] if output.source == "mechanical" else items_of(inputs)
        had = {item_key(f.bullet) for f in handbook}
        new = [f for f in capped if item_key(f.bullet) not in had]
        dropped = [*inputs.flagged, *output.archive, *(f for f in capped if item_key(f.bullet) in had), *handbook, *new]
        if dropped:
            result.items_retired = archive_dropped(store, dropped, text, now)
            result.files_written += [ARCHIVE] if result.items_retired else []  # first, so a failure loses none
        store.atomic_write("MEMORY.md", text)
        result.files_written.append("MEMORY.md")
    else:
        result.kept_unchanged.append("MEMORY.md")

    new_summary = output.memory_summary_md if output.memory_summary_md.strip() or not incremental else inputs.summary
    fixed = ensure_summary_v1(new_summary, summary_file_cap(new_summary, settings.max_summary_chars))
    result.summary_repaired = fixed.split("\n", 1)[0] != (new_summary or "").split("\n", 1)[0]
    if fixed != inputs.summary or not incremental:
        store.atomic_write("memory_summary.md", fixed)
        result.files_written.append("memory_summary.md")
    else:
        result.kept_unchanged.append("memory_summary.md")

    candidates = set(inputs.candidate_slugs)
    for item in output.retire_summaries:
        slug = store.clean_slug(item.strip().removeprefix("rollout_summaries/")) if isinstance(item, str) else None
        if slug is None or slug not in candidates:
            result.retire_refused.append(redact(str(item))[:100])  # redacted before the cut
            continue
        if slug in result.retired:
            continue
        if store.retire_summary(slug):
            result.retired.append(slug)
            state.mark_retired(slug, now)
        else:
            result.retire_missing.append(slug)
    keep_newest_retired(store)

    result.raw_archived = store.archive_raw_blocks(set(inputs.raw_ids))
    result.notes_archived = store.archive_notes(list(inputs.note_rels))
    return result


def keep_newest_retired(store: Any) -> None:
    """Keep MAX_RETIRED_SUMMARIES summaries in rollout_summaries/.retired/, the newest written;
    one MEMORY.md names stays (injection dates an item by its sources, `readpath/learned.py`)."""
    try:
        named = {w.removesuffix(".md") for w in re.findall(r"[\w.-]+", store.read_text("MEMORY.md"))}
    except FileNotFoundError:
        named = set()
    with suppress(DshMemoryError):  # a link in its place: not ours to bound
        keep_newest(store.resolve("rollout_summaries/.retired"), MAX_RETIRED_SUMMARIES, named)


def items_of(inputs: Phase2Inputs) -> list[Flagged]:
    """Every bullet of the current handbook, under its project, archived if the model's rewrite
    leaves it out (as written: the merge's memory rules are no reason to lose a line)."""
    lines = inputs.memory_md.split("\n")
    starts, project, out = dict(handbook_groups(lines)), None, []
    for i, line in enumerate(lines):
        project = starts.get(i, project)
        if BULLET.match(line):
            out.append(Flagged(project or GLOBAL, line, "left out of the model's rewrite", False))
    return out


def archive_dropped(store: Any, flagged: list[Any], new_memory_md: str, now: datetime) -> int:
    """Append every flagged item `new_memory_md` no longer has to MEMORY.archive.md; how many.

    A flagged item (`consolidation/stale.py`) the new MEMORY.md no longer has, a bullet the
    `max_memory_md_chars` cap dropped (the merge's, or `cap_handbook`'s from a model's), and one a
    model's rewrite left out (`items_of`) go at the end, under their project's task group in a `## Retired <date>` section, as
    `- <item> (retired: <why>) [source: …]`. The file is in the handbook's format, so the read
    path lists and reads it with each line's scope; like retired rollout summaries it is out of
    search (what was retired should not steer an agent)."""
    have = {item_key(ln) for ln in new_memory_md.splitlines() if BULLET.match(ln)}
    first: dict[str, Any] = {}  # each item once, as first flagged
    for f in flagged:
        first.setdefault(item_key(f.bullet), f)
    gone = [f for key, f in first.items() if key not in have]
    if not gone:
        return 0
    try:
        current = store.read_text(ARCHIVE)
    except FileNotFoundError:
        current = ""
    groups: dict[str, Group] = {}  # appended: what is in the archive stays as it is
    heading = f"Retired {now.date().isoformat()}"
    used, room = 0, ARCHIVE_MAX_CHARS - len(ARCHIVE_TITLE) - 3
    for f in gone:
        text = FLAGS.sub("", SOURCE.sub("", f.bullet)).rstrip()
        text = re.sub(r" \(may be stale: [^)]*\)$", "", text)
        tag = SOURCE.search(f.bullet)
        line = f"{text if BULLET.match(text) else '- ' + text} (retired: {f.note})"
        line += f" [source: {tag.group(1)}]" if tag else ""
        new = f.project not in groups
        used += len(Group(f.project, {heading: [line]}).render()) + 2 if new else len(line) + 1
        if used > room:
            break  # one run's retirements past the archive's bound (a looping answer): the first that fit
        groups.setdefault(f.project, Group(f.project)).sections.setdefault(heading, []).append(line)
    body = "\n\n".join(g.render() for g in groups.values())
    old = current.rstrip() if current.strip() else ARCHIVE_TITLE
    if len(old) + len(body) + 3 > ARCHIVE_MAX_CHARS:  # the oldest task groups go, whole
        at = old.find(f"\n{GROUP_HEADING}", len(old) + len(body) + len(ARCHIVE_TITLE) + 5 - ARCHIVE_MAX_CHARS)
        old = ARCHIVE_TITLE + ("\n" + old[at:] if at >= 0 else "")
    store.atomic_write(ARCHIVE, f"{old}\n\n{body}\n")
    return len(gone)
