"""Ranked search, line by line: the sections the index found (index.py) are re-read and every
line in them is scored, so the line that answers comes first and the range to cite is that line.
Each query term counts once per line, by its idf over the index's sections, times the weight of
the nearest place it is found (the constants below); headings and front matter are context,
never hits. What users read of it: docs/search.md (Ranked search); the weights were set on
bench/search_eval (bench/bench_search.py scores them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dsh_memory.readpath._common import read_text
from dsh_memory.readpath.models import SearchMatch
from dsh_memory.readpath.terms import Term, line_stems

NEAR_ABOVE = (0.6, 0.3)  # weight of a term found 1 / 2 lines above (the question an answer follows)
NEAR_BELOW = (0.3, 0.15)  # weight of a term found 1 / 2 lines below
ASKS = 0.6  # a line that asks (ends with "?") answers less than a line that says
CONTEXT = 0.2  # weight of a term found elsewhere in the section, or in the file's title or name
K1, B, AVG_WORDS = 1.2, 0.25, 14.0  # BM25's length factor for the line itself
LINE_MAX_CHARS = 400  # a longer line is cut (around its first term) in the returned content

_HEADING = re.compile(r"^\s*#{1,6}\s")
_FRONT = re.compile(r"^---\s*$")
_SENTENCE_END = re.compile(r"[.!?]\s|[。！？]")


@dataclass(frozen=True)
class Section:
    path: str
    start: int  # 1-based, inclusive
    end: int
    rank: int  # the index's BM25 order (0 = best)
    whole: bool = False  # every line is a candidate, not only those near a query term (fusion.py)


@dataclass
class Hit:
    path: str
    line: int  # 1-based
    end: int  # last cited line
    score: float
    rank: int  # the section's BM25 order: ties go to the better section
    terms: frozenset[int]  # indexes of the query terms on the cited lines


def idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def asks(line: str) -> bool:
    """A line that only asks: one sentence, ending with '?' ("user: who reviews it?"), not a line
    that says something and asks back ("I went on Friday. How about you?")."""
    text = line.rstrip()
    return text.endswith(("?", "？")) and not _SENTENCE_END.search(text[:-1])


def _front_matter_end(lines: list[str]) -> int:
    """Number of lines of YAML front matter at the top (0 when there is none)."""
    if lines and _FRONT.match(lines[0]):
        for i in range(1, min(len(lines), 40)):
            if _FRONT.match(lines[i]):
                return i + 1
    return 0


class _File:
    """One file's lines, which query terms each line has, and what the file is about (its name
    and title)."""

    def __init__(self, rel: str, text: str, terms: list[Term]) -> None:
        self.lines = text.splitlines()
        self.front = _front_matter_end(self.lines)
        self._latin = {t.key: i for i, t in enumerate(terms) if not t.cjk}
        self._cjk = [(i, t.key) for i, t in enumerate(terms) if t.cjk]
        self._has: dict[int, frozenset[int]] = {}
        title = next((ln for ln in self.lines[self.front : self.front + 40] if _HEADING.match(ln)), "")
        self.about = self._check(rel.replace("/", " ").replace("-", " ") + " " + title)

    def _check(self, text: str) -> frozenset[int]:
        latin = self._latin
        got = [latin[s] for s in line_stems(text)[0] if s in latin] if latin else []
        got += [i for i, key in self._cjk if key in text]
        return frozenset(got)

    def has(self, i: int) -> frozenset[int]:
        """Query terms on 0-based line i."""
        got = self._has.get(i)
        if got is None:
            got = self._has[i] = self._check(self.lines[i]) if 0 <= i < len(self.lines) else frozenset()
        return got

    def context(self, i: int) -> bool:
        """A heading or front matter: context for the lines around, never a hit."""
        return i < self.front or bool(_HEADING.match(self.lines[i]))

    def words(self, i: int) -> int:
        """Length of line i in words (a CJK line: in characters / 2)."""
        return line_stems(self.lines[i])[1] or max(1, len(self.lines[i]) // 2)


def score_sections(
    store: Any, terms: list[Term], weights: list[float], sections: list[Section]
) -> tuple[list[Hit], dict[str, _File]]:
    """The non-blank, non-heading lines of the sections with a query term on or near them (all
    of them in a `whole` section), scored, best first; and the files read."""
    root = store.root
    files: dict[str, _File | None] = {}
    hits: list[Hit] = []
    for sec in sections:
        if sec.path not in files:
            text = read_text(root / sec.path)  # '' when deleted since it was indexed
            files[sec.path] = _File(sec.path, text, terms) if text else None
        f = files[sec.path]
        if f is None:
            continue
        a, b = max(0, sec.start - 1), min(len(f.lines), sec.end)
        has = [f.has(i) for i in range(a, b)]
        section_terms = f.about.union(*has)
        if not section_terms and not sec.whole:
            continue
        empty: frozenset[int] = frozenset()
        for k, own in enumerate(has):
            i = a + k
            around = [has[k + d] if 0 <= k + d < len(has) else empty for d in (-1, 1, -2, 2)]
            if not (sec.whole or own or any(around)) or f.context(i) or not f.lines[i].strip():
                continue
            norm = (K1 + 1) / (1 + K1 * (1 - B + B * f.words(i) / AVG_WORDS))
            score = sum(weights[t] for t in own) * norm
            seen = set(own)
            for near, w in zip(around, (NEAR_ABOVE[0], NEAR_BELOW[0], NEAR_ABOVE[1], NEAR_BELOW[1]), strict=True):
                score += w * sum(weights[t] for t in near - seen)
                seen |= near
            score += CONTEXT * sum(weights[t] for t in section_terms - seen)
            if asks(f.lines[i]):
                score *= ASKS
            hits.append(Hit(sec.path, i + 1, i + 1, score, sec.rank, own))
    hits.sort(key=lambda h: (-h.score, h.rank, h.path, h.line))
    return hits, {k: v for k, v in files.items() if v is not None}


def _run_on(h: Hit, f: _File) -> None:
    """A line that asks is cited with the line below it, which answers (unless it asks too)."""
    nxt = h.line  # 0-based index of the next line
    if nxt >= len(f.lines) or f.context(nxt) or not f.lines[nxt].strip():
        return
    if asks(f.lines[h.line - 1]) and not asks(f.lines[nxt]):
        h.end, h.terms = h.line + 1, h.terms | f.has(nxt)


def _cut(line: str, terms: list[Term], own: frozenset[int]) -> str:
    if len(line) <= LINE_MAX_CHARS:
        return line
    low = line.casefold()
    at = min((low.find(terms[t].key) for t in own if terms[t].key in low), default=0)
    start = max(0, min(at - LINE_MAX_CHARS // 4, len(line) - LINE_MAX_CHARS))
    head = "…" if start else ""
    tail = "…" if start + LINE_MAX_CHARS < len(line) else ""
    return head + line[start : start + LINE_MAX_CHARS - len(head) - len(tail)] + tail


def matches(
    hits: list[Hit], files: dict[str, _File], terms: list[Term], queries: list[str], context: int, skip: int = 0
) -> Iterator[SearchMatch]:
    """The hits as SearchMatch, best first, after the first `skip` (a page further on): a line
    a better hit already cites is not a hit again. `context`: lines around the cited range (a hit
    there is still its own match: a page's budget may cut the context, and a filter its match)."""
    shown: set[tuple[str, int]] = set()
    for h in hits:
        if (h.path, h.line) in shown:
            continue
        f = files[h.path]
        _run_on(h, f)
        a = max(1, h.line - context)
        b = min(len(f.lines), h.end + context)
        shown.update((h.path, n) for n in range(h.line, h.end + 1))
        if skip:
            skip -= 1
            continue
        content = "\n".join(_cut(f.lines[n - 1], terms, f.has(n - 1)) for n in range(a, b + 1))
        matched = {q for t in h.terms for q in terms[t].queries}
        yield SearchMatch(
            path=h.path,
            start_line=a,
            end_line=b,
            match_line=h.line,
            match_end_line=h.end,
            content=content,
            matched_queries=[q for i, q in enumerate(queries) if i in matched],
            score=round(h.score, 4),
        )
