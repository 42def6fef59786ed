"""Near-duplicate lines: what Phase 1's clean-up (`postprocess.clean_text`, `unloop`) and Phase 2's
handbook clean-up (`consolidation/apply.clean_handbook`) keep once; and one sentence that restates
another (`restates`: a session's facts, a file's tripwires).
"""

from __future__ import annotations

import math
import re

from dsh_memory.phase1.chinese import HAN_RANGE

NEAR_CONTAINED = 40  # a normalized line this long inside another is a near duplicate of it
NEAR_WORDS, NEAR_JACCARD = 6, 0.85  # … and so are two lines of ≥ 6 words sharing 85 % of them


def near(a: str, b: str) -> bool:
    """Two normalized lines say the same: equal, one (long enough) inside the other, or most words shared."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= NEAR_CONTAINED and short in long_:
        return True
    return _similar(set(a.split()), set(b.split()))


_HAN_RUN = re.compile(f"[{HAN_RANGE}]+")
_WORD = re.compile(f"[^\\W{HAN_RANGE}]{{4,}}")  # a word of 4+ characters, not Chinese


def _terms(s: str) -> set[str]:
    """A sentence's words of 4 characters or more; in Chinese, which has no spaces, each pair of
    characters in a row stands for a word."""
    han = _HAN_RUN.findall(s)
    return set(_WORD.findall(s.lower())) | {r[i : i + 2] for r in han for i in range(len(r) - 1)}


def restates(a: str, b: str, share: float = 0.6) -> bool:
    """Most of `a`'s words (`_terms`) are `b`'s: `a` says again what `b` says."""
    words = _terms(a)
    return len(words & _terms(b)) >= share * max(1, len(words))


def _similar(wa: set[str], wb: set[str]) -> bool:
    return min(len(wa), len(wb)) >= NEAR_WORDS and len(wa & wb) / len(wa | wb) >= NEAR_JACCARD


class Seen:
    """The normalized lines kept so far, answering "is this one `near` one of them?" in about
    linear time (a pairwise check took 9 s for 2,000 lines): equal lines by a set; containment
    by one search in all the kept text and a map of each long line's first NEAR_CONTAINED
    characters; word overlap by the prefix filter (two word sets with Jaccard ≥ t share a word
    among the first |w| − ⌈t·|w|⌉ + 1 of each, in any one fixed order), each candidate then checked
    exactly."""

    def __init__(self) -> None:
        self._exact: set[str] = set()
        self._text = "\n"
        self._heads: dict[str, list[str]] = {}
        self._words: list[set[str]] = []
        self._index: dict[str, list[int]] = {}

    @staticmethod
    def _prefix(words: set[str]) -> list[str]:
        return sorted(words)[: len(words) - math.ceil(NEAR_JACCARD * len(words) - 1e-9) + 1]

    def near(self, key: str) -> bool:
        if key in self._exact:
            return True
        if len(key) >= NEAR_CONTAINED and key in self._text:  # inside a longer kept line
            return True
        for i in range(len(key) - NEAR_CONTAINED + 1):  # a kept line inside this one
            if any(key.startswith(k, i) for k in self._heads.get(key[i : i + NEAR_CONTAINED], ())):
                return True
        words = set(key.split())
        if len(words) < NEAR_WORDS:
            return False
        candidates = {i for w in self._prefix(words) for i in self._index.get(w, ())}
        return any(_similar(words, self._words[i]) for i in candidates)

    def add(self, key: str) -> None:
        self._exact.add(key)
        self._text += key + "\n"
        if len(key) >= NEAR_CONTAINED:
            self._heads.setdefault(key[:NEAR_CONTAINED], []).append(key)
        words = set(key.split())
        if len(words) >= NEAR_WORDS:
            for w in self._prefix(words):
                self._index.setdefault(w, []).append(len(self._words))
        self._words.append(words)
