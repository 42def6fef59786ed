"""search(): line-based substring modes, plus `ranked` (the lines that answer first: index.py finds
the sections, lines.py ranks their lines).

Every match carries path + line range so an agent can cite `path:start-end`. Hits in active
rollout summaries are recorded as usage (one record per file per call)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from typing import Any

from pydantic_core import to_json

from dsh_memory.errors import UserInputError
from dsh_memory.readpath._common import (
    decode_cursor,
    encode_cursor,
    files_under,
    fingerprint,
    guard,
    lstat_named,
    read_folded,
    record_usage,
    validate,
    why_no_text,
)
from dsh_memory.readpath.models import MAX_SEARCH_CHARS, SearchMatch, SearchRequest, SearchResult
from dsh_memory.readpath.scoping import SEARCH_SCAN_LIMIT, Where, layer, scope_of
from dsh_memory.settings import SemanticSearch

_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
RESERVED = "skipped 999,999,999 files"  # the least room a page keeps for its `skipped` line
MAX_NAMED = 20  # files a `skipped` line names at most


def _windows(hits: list[set[int]], nq: int, n: int) -> list[tuple[int, int, set[int]]]:
    """Windows starting at a matching line, ≤ n lines long, that cover every query; windows
    that strictly contain another window are dropped (the tightest evidence wins)."""
    wins: list[tuple[int, int, set[int]]] = []
    total = len(hits)
    for i, h in enumerate(hits):
        if not h:
            continue
        seen: set[int] = set()
        for j in range(i, min(total, i + n)):
            seen |= hits[j]
            if len(seen) == nq:
                wins.append((i, j, seen))
                break
    kept: list[tuple[int, int, set[int]]] = []
    end = total  # the smallest end among the windows starting later
    for i, j, seen in reversed(wins):
        if j < end:  # else it contains a later, tighter window
            kept.append((i, j, seen))
            end = j
    return kept[::-1]


def _file_matches(
    rel: str, text: str, whole: str, req: SearchRequest, folded: list[str], fold, limit: int
) -> list[SearchMatch]:
    nq = len(folded)
    if not (any if req.mode == "any" else all)(q in whole for q in folded):  # the whole file first
        return []
    lines = text.splitlines()
    # case folding keeps line breaks where they were: split the cached folded text
    flines = [] if req.normalized else whole.splitlines()
    if len(flines) != len(lines):
        flines = [fold(line) for line in lines]
    hits = [{i for i, q in enumerate(folded) if q in f} for f in flines]  # per line, the queries on it
    spans: list[tuple[int, int, set[int]]]
    if req.mode == "any":
        spans = [(i, i, h) for i, h in enumerate(hits) if h]
    elif req.mode == "all_on_same_line":
        spans = [(i, i, h) for i, h in enumerate(hits) if len(h) == nq]
    else:
        spans = _windows(hits, nq, req.within_lines)
    out = []
    c, cap = req.context_lines, req.max_chars + 1  # more never fits a page
    for i, j, h in spans[:limit]:
        a, b = _within(lines, max(0, i - c), min(len(lines) - 1, j + c), i, j, cap)
        out.append(
            SearchMatch(
                path=rel,
                start_line=a + 1,
                end_line=b + 1,
                match_line=i + 1,
                match_end_line=min(j, b) + 1,
                content="\n".join(line[:cap] for line in lines[a : b + 1]),
                matched_queries=[req.queries[k] for k in sorted(h)],
            )
        )
    return out


def _within(lines: list[str], a: int, b: int, i: int, j: int, cap: int) -> tuple[int, int]:
    """Lines a..b of a match citing i..j, cut (as `_shrink` cuts: its context first, a line at a
    time from the side with more of it, then the cited range's last lines) until at most `cap`
    characters are left, which no page exceeds: a line search holds up to SEARCH_SCAN_LIMIT
    matches at once, and 20 lines of context around lines of 64 KB took 2.6 MB a match."""

    def size() -> int:
        return sum(min(len(line), cap) for line in lines[a : b + 1])

    while (a < i or b > j) and size() > cap:
        if i - a >= b - j:
            a += 1
        else:
            b -= 1
    while b > i and size() > cap:
        b -= 1
    return a, b


def _line_search(store: Any, req: SearchRequest, need: int) -> tuple[list[SearchMatch], list[tuple[str, str]]]:
    """Matches in corpus order, then line order; stops once `need` matches are known. Queries
    and text are compared folded alike (case, punctuation). Besides, (path, why) of each file
    met that could not be searched."""

    def fold(s: str) -> str:
        if req.normalized:  # only letters and digits: foo-bar, foo_bar, 'foo bar' → foobar
            s = _NON_ALNUM.sub("", s)
        return s if req.case_sensitive else s.casefold()

    folded = [fold(q) for q in req.queries]
    if any(not q for q in folded):
        raise UserInputError("a query has no letters or digits left after normalization")
    kind = ("n" if req.normalized else "") + ("" if req.case_sensitive else "c")
    matches: list[SearchMatch] = []
    skipped: list[tuple[str, str]] = []
    for rel, path, st in files_under(store, req.path):
        text, whole = read_folded(path, st, kind, fold)
        if text is None:  # too big, not UTF-8, unreadable: skipped, never half-decoded into false hits
            skipped.append((rel, why_no_text(path, st)))
            continue
        matches.extend(_file_matches(rel, text, whole, req, folded, fold, need - len(matches)))
        if len(matches) >= need:
            break
    return matches, skipped


def _skipped_line(skipped: list[tuple[str, str]], room: int) -> str | None:
    """'skipped 2 files: MEMORY.md (over 4 MiB), notes/a.md (not UTF-8)': as many names as fit
    in `room` characters of JSON (at most MAX_NAMED), the count always."""
    if not skipped:
        return None
    n = len(skipped)
    head = f"skipped {n:,} file{'' if n == 1 else 's'}"
    names = [f"{rel} ({why})" for rel, why in skipped[:MAX_NAMED]]
    for k in range(len(names), 0, -1):
        line = f"{head}: {', '.join(names[:k])}" + (f" and {n - k:,} more" if n > k else "")
        if _chars(line) <= room:
            return line
    return head


def _chars(value: str | None) -> int:
    return len(to_json(value).decode())


def search(
    store: Any,
    queries: list[str] | str,
    *,
    state: Any = None,
    now: datetime | None = None,
    usage: bool = True,
    semantic_search: SemanticSearch = "auto",
    **params: Any,
) -> SearchResult:
    """Search the memory; `params`: SearchRequest's other fields (models.py says what each does).
    Line modes return matches in corpus order (MEMORY.md, memory_summary.md, rollout_summaries,
    skills, notes; by name), then line order; `ranked`, the lines that answer best first (index.py,
    lines.py), with the embedder's likeness fused in as the `semantic_search` setting says
    (embedder.for_mode). Every hit carries its scope; with `cwd`, this project's and global hits
    come first, other projects' only with `other_projects` (scoping.layer). A page holds at most
    `max_results` matches and `max_chars` characters of JSON; the rest comes with `next_cursor`.
    The files it could not search (over 4 MiB, not UTF-8) are named in `skipped`, within the page."""
    if isinstance(queries, str):
        queries = [queries]
    req = validate(SearchRequest, queries=queries, **params)
    prefix = req.path = guard(store, req.path)[1] or None  # guard before anything else
    if prefix:  # a missing path is an error in every mode (ranked would find nothing there)
        lstat_named(store.root / prefix, prefix)
    room, least = _room(req, prefix)
    # the page size may change from page to page; everything else must stay
    fp = fingerprint("search", req.model_dump(exclude={"cursor", "max_results", "max_chars"}))
    start = decode_cursor(req.cursor, fp)
    found: Iterator[SearchMatch]
    where = Where.of(req.cwd)
    skip = 0 if where else start  # a project reorders the matches: the page is cut after that
    if req.mode == "ranked":  # the index's modules are imported by ranked search alone
        from dsh_memory.readpath.index import ranked_search, skipped_files
        from dsh_memory.readpath.lines import matches as line_matches

        hits, files, terms = ranked_search(store, req.queries, prefix, semantic_search)
        found = line_matches(hits, files, terms, req.queries, req.context_lines, skip=skip)
        unsearched = skipped_files(store, prefix)
    else:
        need = SEARCH_SCAN_LIMIT if where else start + req.max_results + 1
        matches, unsearched = _line_search(store, req, need)
        found = islice(matches, skip, None)
    # what was not searched is said, in the room kept for it and what the least match leaves
    skipped = _skipped_line(unsearched, room - least + _chars(RESERVED))
    room += _chars(RESERVED) - _chars(skipped)
    found = layer(found, where, req.other_projects, lambda m: scope_of(store, m.path, m.match_line))
    if where:
        found = islice(found, start, None)
    page, more = _page(found, req, room)
    if usage:  # the vault passes False: a person searching is not an agent using the memory
        record_usage(store, [m.path for m in page], state=state, now=now)
    return SearchResult(
        queries=req.queries,
        mode=req.mode,
        path=prefix,
        matches=page,
        next_cursor=encode_cursor(start + len(page), fp) if more else None,
        truncated=more,
        skipped=skipped,
    )


def _room(req: SearchRequest, prefix: str | None) -> tuple[int, int]:
    """Characters of a page left for its matches (a `skipped` line of RESERVED's size kept), and
    the least one match takes. The queries are in every page twice (`queries`, and a match's
    `matched_queries`, which no cut shortens): when max_chars cannot hold them and one match cut
    to its least, the request is refused, not answered past max_chars."""
    empty = SearchResult(
        queries=req.queries, mode=req.mode, path=prefix, matches=[], next_cursor="x" * 64, skipped=RESERVED
    )
    room = req.max_chars - len(empty.model_dump_json())
    n = 10**9  # line numbers as long as they get
    least = SearchMatch(
        path="x" * 64, start_line=n, end_line=n, match_line=n, match_end_line=n, content="…", score=-1e9, scope="global"
    )
    need = len(least.model_copy(update={"matched_queries": req.queries}).model_dump_json()) + 1
    if need > room:
        raise UserInputError(
            f"these queries take {req.max_chars - room + need:,} characters of a page's JSON (they come back in "
            f"queries and in each match's matched_queries); pass max_chars at least that (at most "
            f"{MAX_SEARCH_CHARS:,}), or shorter queries"
        )
    return room, need


def _page(found: Iterator[SearchMatch], req: SearchRequest, room: int) -> tuple[list[SearchMatch], bool]:
    """Matches while they fit in max_results and `room` (the first one always, cut to fit if it
    must be: only a path and scope longer than `_room` allows for can take a page past max_chars);
    and whether more follow."""
    page: list[SearchMatch] = []
    for m in found:
        size = len(m.model_dump_json()) + 1
        if len(page) == req.max_results or (page and size > room):
            return page, True
        if size > room:
            m = _shrink(m, room)
            size = len(m.model_dump_json()) + 1
        page.append(m)
        room -= size
    return page, False


def _shrink(m: SearchMatch, room: int) -> SearchMatch:
    """A match too big for a page on its own: its context given up first, a line at a time from
    the side with more of it, then the cited range's last lines, and when its first line alone is
    still too big, that line's head ending with `…`. The line it cites is always in it."""
    lines = [line[: room + 1] for line in m.content.split("\n")]  # a line past `room` never fits whole
    first, last = m.match_line - m.start_line, m.match_end_line - m.start_line  # the cited range (indexes)
    a, b = 0, len(lines) - 1

    def sized(content: str | None = None) -> tuple[SearchMatch, int]:
        update = {
            "content": "\n".join(lines[a : b + 1]) if content is None else content,
            "start_line": m.start_line + a,
            "end_line": m.start_line + b,
            "match_end_line": m.start_line + min(last, b),
        }
        out = m.model_copy(update=update)
        return out, len(out.model_dump_json()) + 1

    out, size = sized()
    while size > room and (a < first or b > last):
        if first - a >= b - last:
            a += 1
        else:
            b -= 1
        out, size = sized()
    while size > room and b > first:
        b -= 1
        out, size = sized()
    content = out.content
    while size > room and content:
        content = content[: max(0, len(content) - (size - room) - 1)]
        out, size = sized(content + "…")
    return out
