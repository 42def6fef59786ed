"""When a handbook item was learned, read back from its evidence (for injection and status).

Every MEMORY.md bullet the merge writes ends in `[source: <slug>, …]`; a rollout summary's front
matter dates its session (`updated_at`), each group's `Tasks` lines repeat that date
(`updated=YYYY-MM-DD`), and a note's name starts with its creation time. An item's date is its
newest source's. `learned_dates(store)` maps every bullet (`item_key`) to it, built once per
MEMORY.md version: the Tasks lines first, then the front matter of the summaries they do not name
(active, else retired), then note names. An item with no readable source (an endpoint model's
handbook without `[source: …]` tags) has no date and is never called old.
"""

from __future__ import annotations

import os
import re
from datetime import date
from functools import cache
from typing import Any

from dsh_memory.readpath._common import FileCache, read_text, regular_file

SOURCE = re.compile(r"\s*\[source: ([^\]]*)\]\s*$")
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
FLAGS = re.compile(r" \((?:may be stale: [^)]*|learned \d+ days? ago)\)")
TASK = re.compile(r"rollout_summaries/([\w.-]+?)\.md \([^)]*?updated=(\d{4}-\d{2}-\d{2})")
NOTE_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})T\d{6}Z")
ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
WORDS = re.compile(r"\W+")
FRONT_MATTER_CHARS = 4096

_dates_cache = FileCache(16)


def item_key(line: str) -> str:
    """A bullet's words without its marker, provenance tag and our own flags, lower case: the same
    item in MEMORY.md and in memory_summary.md (where tags are dropped) has the same key."""
    text = BULLET.sub("", line)
    if "[source: " in text:
        text = SOURCE.sub("", text)
    if " (" in text:
        text = FLAGS.sub("", text)
    return WORDS.sub(" ", text).strip().lower()


def sources_of(bullet: str) -> list[str]:
    """The names in a bullet's `[source: …]` tag, in order."""
    m = SOURCE.search(bullet)
    return [s.strip() for s in m.group(1).split(",") if s.strip()] if m else []


def with_sources(bullet: str, sources: list[str]) -> str:
    """`bullet` with `sources` added to its `[source: …]` tag (each name once)."""
    have = sources_of(bullet)
    have += [s for s in dict.fromkeys(sources) if s and s not in have]
    base = SOURCE.sub("", bullet).rstrip()
    return f"{base} [source: {', '.join(have)}]" if have else base


def as_date(value: Any) -> date | None:
    """The date an ISO text starts with (`2026-07-01`, `2026-07-01T09:00:00+00:00`); None if none."""
    m = ISO_DATE.match(str(value or ""))
    try:
        return date(*map(int, m.groups())) if m else None
    except ValueError:
        return None


def _summary_date(root: str, slug: str) -> date | None:
    """`updated_at` from a rollout summary's front matter (active first, then retired)."""
    from dsh_memory.storage.store_format import parse_front_matter

    if not re.fullmatch(r"[\w.-]+", slug) or slug.startswith("."):
        return None
    for folder in ("rollout_summaries", "rollout_summaries/.retired"):
        path = os.path.join(root, folder, f"{slug}.md")
        if os.path.islink(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                fields, _ = parse_front_matter(f.read(FRONT_MATTER_CHARS))
        except OSError:
            continue
        found = as_date(fields.get("updated_at")) or as_date(fields.get("extracted_at"))
        if found:
            return found
    return None


def dates_of(text: str, root: str) -> dict[str, date]:
    """item key → newest date among the item's sources, for a MEMORY.md `text` (see the module)."""
    lines = text.splitlines()
    tasks: dict[str, date] = {}
    for line in lines:
        m = TASK.search(line)
        if m and (d := as_date(m.group(2))) and d > tasks.get(m.group(1), date.min):
            tasks[m.group(1)] = d

    @cache  # a source several items name is looked up once
    def source_date(source: str) -> date | None:
        if source in tasks:
            return tasks[source]
        m = NOTE_DATE.match(source)
        return as_date("-".join(m.groups())) if m else _summary_date(root, source)

    out: dict[str, date] = {}
    for line in lines:
        if not BULLET.match(line):
            continue
        found = [source_date(s) for s in sources_of(line)]
        newest = max((d for d in found if d), default=None)
        if newest:
            key = item_key(line)
            if newest > out.get(key, date.min):
                out[key] = newest
    return out


def learned_dates(store: Any) -> dict[str, date]:
    """`dates_of` the store's MEMORY.md, cached by its identity; {} when there is none."""
    root = str(store.root)
    path = os.path.join(root, "MEMORY.md")
    st = regular_file(path)
    if st is None:  # none, or a link (no memory file)
        return {}
    return _dates_cache.get(path, st, lambda: dates_of(read_text(path, st) or "", root))


def age_days(line: str, dates: dict[str, date], today: date) -> int | None:
    """How many days ago `line`'s item was last learned; None when its evidence has no date."""
    d = dates.get(item_key(line)) if dates else None
    return None if d is None else max(0, (today - d).days)
