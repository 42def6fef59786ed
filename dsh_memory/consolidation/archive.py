"""MEMORY.archive.md: where handbook items consolidation took out go, with why and when.

A flagged item (`consolidation/stale.py`) the new MEMORY.md no longer has, and a bullet the
merge's `max_memory_md_chars` cap dropped, are appended under their project's task group in a
`## Retired <date>` section, as `- <item> (retired: <why>) [source: …]`. The file is in the
handbook's format, so the read path lists and reads it with each line's scope; like retired
rollout summaries it is out of search (what was retired should not steer an agent).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from dsh_memory.consolidation.mechanical import Group, parse_memory_md
from dsh_memory.readpath.learned import BULLET, FLAGS, SOURCE, item_key

ARCHIVE = "MEMORY.archive.md"
TITLE = "# Retired handbook items (kept, with why and when; see docs/agents.md)"


def archive_dropped(store: Any, flagged: list[Any], new_memory_md: str, now: datetime) -> int:
    """Append every flagged item `new_memory_md` no longer has to the archive; how many."""
    have = {item_key(ln) for ln in new_memory_md.splitlines() if BULLET.match(ln)}
    gone, seen = [], set()
    for f in flagged:
        key = item_key(f.bullet)
        if key not in have and key not in seen:
            gone.append(f)
            seen.add(key)
    if not gone:
        return 0
    try:
        current = store.read_text(ARCHIVE)
    except FileNotFoundError:
        current = ""
    groups = parse_memory_md(current)
    heading = f"Retired {now.date().isoformat()}"
    for f in gone:
        g = groups.setdefault(f.project, Group(f.project))
        text = FLAGS.sub("", SOURCE.sub("", f.bullet)).rstrip()
        text = re.sub(r" \(may be stale: [^)]*\)$", "", text)
        tag = SOURCE.search(f.bullet)
        line = f"{text if BULLET.match(text) else '- ' + text} (retired: {f.note})"
        g.sections.setdefault(heading, []).append(line + (f" [source: {tag.group(1)}]" if tag else ""))
    body = "\n\n".join(g.render() for g in groups.values())
    store.atomic_write(ARCHIVE, f"{TITLE}\n\n{body.strip()}\n")
    return len(gone)
