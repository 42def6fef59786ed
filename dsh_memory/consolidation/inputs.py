"""Gather, cap and annotate everything Phase 2 feeds the model (docs/running.md: what goes in).

Raw blocks and notes are packed whole, in order, until their cap; only what made it into the
input is consumed afterwards (`raw_ids`, `note_rels`), the rest waits for the next run. A rollout
summary's last activity is max(usage last_at, session updated_at, extracted_at); only the
forgetting candidates annotated here may be retired by this run (`candidate_slugs`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from dsh_memory.consolidation import stale
from dsh_memory.consolidation.prompt import Section, build_messages
from dsh_memory.consolidation.skill_inventory import SkillInfo, one_line, read_optional, skills_inventory
from dsh_memory.errors import DshMemoryError
from dsh_memory.readpath.learned import dates_of
from dsh_memory.scope import group_of, project_root
from dsh_memory.storage.store_format import parse_front_matter

INIT, INCREMENTAL = "INIT", "INCREMENTAL"
GIST_CHARS = 160


def as_utc(value: Any) -> datetime | None:
    """datetime / ISO string (a state row, a front matter field) → aware UTC datetime; None when
    unusable."""
    if value is None or value == "":
        return None
    if not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _date(d: datetime | None) -> str:
    return d.date().isoformat() if d else "unknown"


CUT_MARK = "\n[… cut here: "


def cap_text(text: str, cap: int) -> tuple[str, bool]:
    """Keep the head of `text` within `cap` characters (cut at a line end when one is near)."""
    if len(text) <= cap:
        return text, False
    marker = f"{CUT_MARK}{len(text) - cap} more characters not shown (input cap {cap})]\n"
    keep = max(0, cap - len(marker))
    head = text[:keep]
    nl = head.rfind("\n")
    if nl >= keep * 3 // 4:
        head = head[: nl + 1]
    return head + marker, True


def pack(items: list[str], cap: int) -> tuple[list[str], bool]:
    """(whole items in order while they fit, truncated); a first item larger than the cap is cut
    to fit. len(items) is how many were consumed."""
    n = bisect_right(list(accumulate(map(len, items))), cap)  # how many fit: running totals within the cap
    if n == 0 and items:
        return [cap_text(items[0], cap)[0]], True
    return items[:n], n < len(items)


@dataclass
class IndexEntry:
    """One active rollout summary in the index: `line` is what the model is shown."""

    slug: str
    last_activity: datetime | None
    candidate: bool
    line: str


@dataclass
class Phase2Inputs:
    mode: str
    today: str
    memory_md: str  # current MEMORY.md (full text, "" when missing)
    summary: str  # current memory_summary.md (full text)
    raw_ids: list[str]  # raw blocks that made it into the input (consumed on success)
    raw_total: int
    note_rels: list[str]  # notes that made it into the input (consumed on success)
    notes_total: int
    index: list[IndexEntry]  # summaries shown in the input
    summaries_total: int
    candidate_slugs: list[str]  # annotated forgetting candidates shown in the input
    skills: list[SkillInfo]
    sections: list[Section]
    budgets: dict[str, int]
    truncated: list[str] = field(default_factory=list)
    flagged: list = field(default_factory=list)  # stale.Flagged: items injection flags (archived if dropped)
    memory_md_unseen: str = ""  # the end of MEMORY.md the input cap left out (a rewrite keeps it)

    def messages(self) -> list[dict]:
        return build_messages(mode=self.mode, today=self.today, budgets=self.budgets, sections=self.sections)

    def counts(self) -> dict:
        return {
            "raw_blocks": len(self.raw_ids),
            "raw_blocks_total": self.raw_total,
            "notes": len(self.note_rels),
            "notes_total": self.notes_total,
            "summaries": len(self.index),
            "summaries_total": self.summaries_total,
            "forgetting_candidates": len(self.candidate_slugs),
            "flagged_items": len(self.flagged),
            "skills": len(self.skills),
            "memory_md_chars": len(self.memory_md),
            "summary_chars": len(self.summary),
            "input_chars": sum(len(s.body) for s in self.sections),
            "truncated": list(self.truncated),
        }

    @property
    def has_evidence(self) -> bool:
        return bool(self.raw_ids or self.note_rels or self.candidate_slugs)


def build_index(store: Any, usage: dict, now: datetime, max_unused_days: int) -> list[IndexEntry]:
    """Every active rollout summary with provenance, usage and its forgetting annotation."""
    entries: list[IndexEntry] = []
    for info in store.list_rollout_summaries():
        prov = info.provenance or {}
        count, last_used = usage.get(info.rel, (0, None))
        last_used = as_utc(last_used)
        updated = as_utc(prov.get("updated_at")) or as_utc(info.mtime)
        # Freshness starts no earlier than the extraction: a backfilled summary of an old session
        # gets a full max_unused_days to be used before it can be retired.
        extracted = as_utc(prov.get("extracted_at"))
        activity = max((d for d in (last_used, updated, extracted) if d is not None), default=None)
        candidate = bool(
            max_unused_days > 0 and activity is not None and (now - activity).total_seconds() > max_unused_days * 86400
        )
        _, body = parse_front_matter(read_optional(store.root / info.rel) or "")
        parts = [
            f"- {info.slug}",
            f"file={info.rel}",
            f"session={one_line(prov.get('session_id'), 120) or 'unknown'}",
            f"cwd={one_line(prov.get('cwd'), 200) or 'unknown'}",
            f"updated={_date(updated)}",
            f"used={int(count or 0)}x (last {_date(last_used) if last_used else 'never'})",
        ]
        if gist := next((s for ln in body.splitlines() if (s := ln.strip().lstrip("#").strip())), ""):
            parts.append(f"gist: {one_line(gist, GIST_CHARS)}")  # its first line, headings unmarked
        line = " · ".join(parts)
        if candidate:
            line += f" · FORGETTING CANDIDATE (no activity for {(now - activity).days} days)"
        entries.append(IndexEntry(info.slug, activity, candidate, line + "\n"))
    return entries


def _render_raw(i: int, b: Any) -> str:
    project = group_of(b.project or project_root(b.cwd))
    head = (
        f"### raw block {i} · slug={one_line(b.slug, 80) or 'unknown'} · session={one_line(b.session_id, 120)}"
        f" · source={one_line(b.source, 20)} · cwd={one_line(b.cwd, 200) or 'unknown'}"
        f" · project={one_line(project, 200)}"
        f" · updated={one_line(b.updated_at, 40) or 'unknown'}"
    )
    return f"{head}\n{b.body.strip()}\n\n"


def _render_note(rel: str, text: str) -> str:
    fields, body = parse_front_matter(text)
    title = f" · title={one_line(fields['title'], 120)}" if fields.get("title") else ""
    title += f" · project={one_line(fields['project'], 300)}" if fields.get("project") else ""  # an imported note's
    title += f" · imported from {fields['agent']} {one_line(fields.get('source'), 300)}" if fields.get("agent") else ""
    return f"### note {rel} · created={one_line(fields.get('created_at'), 40) or 'unknown'}{title}\n{body.strip()}\n\n"


def gather_inputs(store: Any, state: Any, settings: Any, now: datetime) -> Phase2Inputs:
    """Read the memory root and build the capped, annotated model input. Reads only."""
    now = as_utc(now)
    memory_md = read_optional(store.memory_md_path)
    summary = read_optional(store.summary_path)
    mode = INIT if memory_md is None or summary is None else INCREMENTAL
    memory_md, summary = memory_md or "", summary or ""
    truncated: list[str] = []

    def capped(what: str, shown_and_cut: tuple) -> Any:
        if shown_and_cut[1]:
            truncated.append(what)
        return shown_and_cut[0]

    mem_shown = capped("MEMORY.md", cap_text(memory_md, settings.max_memory_md_chars))
    unseen = memory_md[mem_shown.rfind(CUT_MARK) :] if "MEMORY.md" in truncated else ""
    sum_shown = capped("memory_summary.md", cap_text(summary, settings.max_summary_chars))
    blocks = store.read_raw_blocks()
    raw_items = capped(
        "raw memories", pack([_render_raw(i + 1, b) for i, b in enumerate(blocks)], settings.max_raw_chars)
    )
    raw_ids = [b.id for b in blocks[: len(raw_items)]]

    note_rels_all = store.list_notes()
    note_texts = []
    for rel in note_rels_all:
        try:
            note_texts.append((rel, store.read_text(rel)))
        except (OSError, ValueError, DshMemoryError):  # vanished or unreadable: not consumed
            continue
    note_items = capped("ad hoc notes", pack([_render_note(rel, t) for rel, t in note_texts], settings.max_notes_chars))
    note_rels = [rel for rel, _ in note_texts[: len(note_items)]]

    entries = build_index(store, state.usage(), now, settings.max_unused_days)
    by_age = sorted(entries, key=lambda e: (e.last_activity or datetime.min.replace(tzinfo=UTC), e.slug))
    cands = [e for e in by_age if e.candidate]  # oldest first; the fresh ones newest first (slugs are unique)
    fresh = [e for e in reversed(by_age) if not e.candidate]
    # Candidates get at most half the index budget, so forgetting can always make progress.
    cand_lines, cut_c = pack([e.line for e in cands], settings.max_index_chars // 2)
    used = sum(len(x) for x in cand_lines)
    fresh_lines, cut_f = pack([e.line for e in fresh], settings.max_index_chars - used)
    shown = cands[: len(cand_lines)] + fresh[: len(fresh_lines)]
    if cut_c or cut_f:
        truncated.append("rollout summary index")

    skills = skills_inventory(store.skills_dir)
    skill_items = capped("skills inventory", pack([s.render() for s in skills], settings.max_index_chars))

    from dsh_memory.consolidation.mechanical import parse_memory_md, scope_of_group

    dates = dates_of(memory_md, str(store.root))  # the items injection flags, dated by their sources
    flagged = stale.flagged(parse_memory_md(memory_md), scope_of_group, dates, now.date(), settings.stale_after_days)

    def note(n: int, total: int, what: str) -> str:
        return f"({n} of {total} {what} shown{'; the rest waits for a later run' if n < total else ''})"

    days = settings.max_unused_days
    forgetting = f" Forgetting threshold: {days} days without use." if days else " Forgetting is disabled."

    sections = [
        Section(
            "notes",
            "Ad hoc notes (the user asked to remember these; highest priority)",
            "".join(note_items),
            note(len(note_rels), len(note_rels_all), "notes"),
        ),
        *(
            Section(name, f"Current {name}", shown, "(file does not exist yet)" if mode == INIT and not text else "")
            for name, shown, text in (("MEMORY.md", mem_shown, memory_md), ("memory_summary.md", sum_shown, summary))
        ),
        Section(
            "raw_memories",
            "New raw memories (not yet consolidated)",
            "".join(raw_items),
            note(len(raw_ids), len(blocks), "raw blocks"),
        ),
        Section(
            "rollout_index",
            "Rollout summary index (forgetting candidates first)",
            "".join(cand_lines) + "".join(fresh_lines),
            note(len(shown), len(entries), "rollout summaries") + forgetting,
        ),
        Section("skills", "Skills inventory", "".join(skill_items), note(len(skill_items), len(skills), "skills")),
        *([flagged_section(flagged, settings.max_index_chars // 2)] if flagged else []),
    ]
    return Phase2Inputs(
        mode=mode,
        today=now.date().isoformat(),
        memory_md=memory_md,
        summary=summary,
        raw_ids=raw_ids,
        raw_total=len(blocks),
        note_rels=note_rels,
        notes_total=len(note_rels_all),
        index=shown,
        summaries_total=len(entries),
        candidate_slugs=[e.slug for e in shown if e.candidate],
        skills=skills,
        sections=sections,
        budgets={"MEMORY.md": settings.max_memory_md_chars, "memory_summary.md": settings.max_summary_chars},
        truncated=truncated,
        flagged=flagged,
        memory_md_unseen=unseen,
    )


def flagged_section(items: list, cap: int) -> Section:
    """The input section that shows the model the flagged items (prompt: '# Stale items'), the
    ones to retire first, whole lines within `cap` characters (the rest named in the note; apply
    still archives any of them the model leaves out)."""
    ordered = sorted(items, key=lambda f: not f.retire)
    lines = [
        f"- project={f.project} · {'RETIRE · ' if f.retire else ''}{f.bullet.strip()} · {f.note}\n" for f in ordered
    ]
    shown, _ = pack(lines, cap)
    more = f"; {len(lines) - len(shown)} more not shown (input cap)" if len(shown) < len(lines) else ""
    return Section(
        "flagged",
        "Handbook items flagged at injection (gone from the working tree, or not confirmed for a long time)",
        "".join(shown),
        f"({len(items)} items; RETIRE: contradicted and not confirmed for a long time{more})",
    )
