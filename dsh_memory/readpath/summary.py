"""summary(): memory_summary.md, capped and cached, plus our own usage instructions.

The summary is navigation, injected into every session; details stay in MEMORY.md and the
rollout summaries, fetched on demand with the tools. Injection is never "usage"."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from dsh_memory.readpath._common import FileCache, regular_file, visible
from dsh_memory.readpath.freshness import checkout_root, flag_stale
from dsh_memory.readpath.learned import learned_dates
from dsh_memory.readpath.models import Summary
from dsh_memory.readpath.scoping import Where, compose_summary
from dsh_memory.scope import summary_parts

NOT_SHOWN = re.compile(r"^- not shown here: (\d+) ", re.M)
CUT_MARK = "\n\n- not shown here: {n} lines of memory_summary.md (memory_read memory_summary.md for all)\n\n"

_cache = FileCache(16)  # per file version
MAX_SUMMARY_FILE_BYTES = 4 << 20  # Phase 2 writes at most 1,000,000 characters (consolidation/output.py)


def instructions(memory_root: str = "") -> str:
    """How an agent uses long-term memory. Our own words; kept short on purpose."""
    where = f" Files live under `{memory_root}`." if memory_root else ""
    return f"""## Long-term memory (dsh-memory)

You have notes distilled from earlier sessions: user preferences, project facts, procedures that
worked, and mistakes to avoid. The summary below is an index, not the whole memory.{where}

When to look: before non-trivial work that touches a repo, path, tool or topic named in the
summary; when the user refers to earlier work ("like last time", "as before"); when you are
unsure about a convention; and again after two failed attempts at the same problem. Skip memory
for self-contained requests (a quick conversion, a one-off command, small talk).

How to look (keep it to a few calls):
1. Pick keywords from the summary and run `memory_search` (mode `ranked` for topics, `any` for
   exact identifiers). MEMORY.md is the main handbook; rollout_summaries/ hold per-session recaps;
   skills/ hold promoted procedures.
2. Open only what the hits point at with `memory_read` (a line range, not whole folders).
3. Stop when nothing relevant turns up: absence of memory is not evidence.
The summary is already shown here; do not open memory_summary.md again.

Memory can be stale. It describes the past: files move, versions change, decisions get
reversed. A line ending in "(may be stale: …)" cites something your working tree no longer has;
"(learned N days ago)" means no session has confirmed it since. Check anything you act on against
the current code, configuration or the user's words; the present always wins. When an answer rests on memory you could not verify, say so.

Cite what you used: `path:start-end` with the path relative to the memory root and the line
numbers the tools returned, e.g. `MEMORY.md:12-18` or `rollout_summaries/<slug>.md:3-9`.

Only write memory when the user explicitly asks you to remember, forget or correct something:
call `memory_add` with one short note and your working directory as `cwd` (it is kept for this
project; `scope: "global"` only when the user says it holds in every project). Never edit memory
files directly; notes are merged into memory by the next consolidation."""


def _head(path: Any) -> str:
    """memory_summary.md, its first MAX_SUMMARY_FILE_BYTES at most (whole lines), with a line
    saying what is not: a summary larger than any Phase 2 writes is not read whole at every
    session start."""
    with open(path, "rb") as f:
        raw = f.read(MAX_SUMMARY_FILE_BYTES + 1)
    text = raw[:MAX_SUMMARY_FILE_BYTES].decode("utf-8", errors="replace")
    if len(raw) <= MAX_SUMMARY_FILE_BYTES:
        return text
    mib = MAX_SUMMARY_FILE_BYTES >> 20
    return text[: text.rfind("\n") + 1] + f"- not shown here: memory_summary.md past its first {mib} MiB\n"


def _cap(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    # keep head and tail (the index's end often lists the newest topics), cut on line breaks
    budget = max(0, max_chars - len(CUT_MARK) - 12)
    head_len, tail_len = budget * 2 // 3, budget // 3
    head = text[:head_len]
    head = head[: head.rfind("\n")] if "\n" in head else head
    tail = text[len(text) - tail_len :] if tail_len else ""
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    omitted = text[len(head) : len(text) - len(tail)].strip("\n").count("\n") + 1
    return head + CUT_MARK.format(n=omitted) + tail, True


def left_out(text: str) -> int:
    """How many lines a summary names as not shown ("- not shown here: N …" lines: what the
    injection's budget cut, and what consolidation could not fit in memory_summary.md)."""
    return sum(int(n) for n in NOT_SHOWN.findall(text))


def summary(
    store: Any,
    max_chars: int = 10_000,
    cwd: str | None = None,
    stale_after_days: int = 0,
    now: datetime | None = None,
) -> Summary:
    """memory_summary.md capped at `max_chars`, its control characters made visible (it is
    injected into agents' contexts and printed on terminals); read and split into parts once per
    file version. Empty memory → empty. With `cwd`: the global part plus that project's part within
    the same cap, and one line naming the other projects with memories (`scoping.compose_summary`);
    the project's lines are checked against its working tree and, with `stale_after_days` > 0,
    those learned longer ago say how long (`freshness.flag_stale`), before the cap applies: the
    notes count against it."""
    root = str(store.root)
    path = store.root / "memory_summary.md"
    where = Where.of(cwd)
    text, truncated, chars, shown, others, flags = "", False, 0, [], [], {}
    st = regular_file(path)
    if st is not None:
        full, split = _cache.get(str(path), st, lambda: _read(path))
        chars = len(full)
        if where is None:
            text, truncated = _cap(full, max_chars)
        else:
            tree = checkout_root(cwd) if where.is_repo else where.root  # a worktree's own checkout
            dates = learned_dates(store) if stale_after_days > 0 else None
            today = (now or datetime.now(UTC)).astimezone(UTC).date()
            check = freshness_check(tree or where.root, dates, today, stale_after_days, max_chars, flags)
            text, truncated, shown, others = compose_summary(full, where, max_chars, check, split)
    seen = [flags[line] for line in text.split("\n") if line in flags]
    return Summary(
        content=text,
        truncated=truncated,
        chars=chars,
        empty=not text.strip(),
        instructions=instructions(root),
        memory_root=root,
        project=where.root if where else None,
        projects_shown=list(shown),
        other_projects=list(others),
        stale=sum(stale for stale, _ in seen),
        aged=sum(old for _, old in seen),
        left_out=left_out(text),
    )


def freshness_check(
    tree: str | None,
    dates: dict | None,
    today: date,
    stale_after_days: int,
    max_chars: int,
    flags: dict[str, tuple[bool, bool]],
) -> Callable[[str], str]:
    """`compose_summary`'s `check`: a project's parts with their lines flagged against `tree`
    (`freshness.flag_stale`, each flagged line added to `flags`); only the lines that can be
    shown are checked, those within the first `max_chars`."""

    def check(project_text: str) -> str:
        cut = len(project_text)
        if cut > max_chars:
            cut = project_text.rfind("\n", 0, max_chars) + 1
        head, found = flag_stale(project_text[:cut], tree, dates, today, stale_after_days)
        flags.update(found)
        return head + project_text[cut:]

    return check


def _read(path: Any) -> tuple[str, tuple[str, dict[str, str]]]:
    """memory_summary.md as shown (`_head`, `visible`) and its parts (`scope.summary_parts`)."""
    full = visible(_head(path)).strip()
    return full, summary_parts(full)
