"""The standing instructions a session's user typed, and when two of them say the same thing.

Finding them: Phase 1's own reading of the user's words (`phase1/user_words.rule_text`: `is_rule`
tells a standing wish, "don't use npm here", from a task instruction, said with the sentence it
needs), so replay counts exactly what Phase 1 would keep as a rule. Comparing them (`Matcher`):
words alone are not enough and meaning alone is too loose (a small static embedding puts "use tabs
in Go" next to "spaces, not tabs, in Python"). Two sentences state the same rule when they share at
least two content terms covering ≥ 60 % of the shorter one's (or its only term, when the other is
short too: "no mocks" ~ "never mock our code"), or, with the search embedding model installed, at
cosine ≥ 0.55 sharing a term. The thresholds were set on hand-written pairs of restatements and
near misses (the module's test), not on the benchmark.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from dsh_memory.models import Session
from dsh_memory.phase1.postprocess import STOP
from dsh_memory.phase1.typed import own_sentences
from dsh_memory.phase1.user_words import rule_text
from dsh_memory.transcript.render import clean_surrogates

MAX_RULES_PER_SESSION = 50  # a session is untrusted input: its rules are bounded
MIN_SHARE = 0.6
MIN_COSINE = 0.55

_TERM = re.compile(r"[a-z][a-z0-9_+#-]*[a-z0-9+#]|[a-z]{2}")
_SHORT_STOP = set(
    """am an as at be by do go he if in is it me my no of on or so to up us we ok the and for not you are but
    use used uses using don dont didn doesn isn can cant won wont all any our its own get got let yes via per
    one how why who out off too now i'd i'm i've please again told tell said say just here there repo
    project code file files make sure want like need prefer instead rather avoid stop keep ever every time
    thing things way also remember doesnt didnt isnt wont cant shouldnt wouldnt arent was ill ive im etc
    maybe think know great kind first currently anymore aka might may""".split()
)


def standing_instructions(session: Session, limit: int = MAX_RULES_PER_SESSION) -> list[str]:
    """The standing instructions the user typed in `session`, in order, each once (redacted; a
    lone surrogate a JSON log may hold, half an emoji, as U+FFFD: the embedder and the report
    take UTF-8 text alone)."""
    out: list[str] = []
    for seq, (_words, prompt) in own_sentences(session.events).items():
        if seq < session.inherited_cut:
            continue
        for n in range(len(prompt)):
            text = clean_surrogates(rule_text(prompt, n))
            if text and text not in out:
                out.append(text)
                if len(out) >= limit:
                    return out
    return out


def _undouble(w: str) -> str:
    return w[:-1] if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "slz" else w  # committ → commit


def _stem(w: str) -> str:
    if len(w) > 5 and w.endswith("ing"):
        return _undouble(w[:-3])
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith("ed"):
        return _undouble(w[:-2])
    if len(w) > 3 and w.endswith("es") and w[-3] in "sxh":
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


@functools.lru_cache(maxsize=1 << 16)  # each rule is compared with every earlier one sharing a term
def terms(text: str) -> frozenset[str]:
    """The content terms of a sentence: lower case, stemmed, without stop words and rule cues."""
    flat = text.lower().replace("’", "'").replace("'", "")
    return frozenset(
        _stem(w) for w in _TERM.findall(flat) if w not in _SHORT_STOP and w not in STOP and _stem(w) not in _SHORT_STOP
    )


def _lexical(a: frozenset[str], b: frozenset[str], base: int) -> bool:
    """`base`: the terms the share is taken of. A one-term sentence ("no mocks") matches only a
    short one (at most three terms) holding that term: one word in common with a long sentence
    ("…run git add && git commit…" ~ "don't commit") is not the same rule."""
    shared = len(a & b)
    if base == 1:
        return shared == 1 and max(len(a), len(b)) <= 3
    return shared >= 2 and shared / base >= MIN_SHARE


class Matcher:
    """Whether two rules say the same thing, and whether a memory's lines hold a rule.
    `embedder`: the search embedding model (None: words only)."""

    def __init__(self, embedder: Any | None = None):
        self.embedder = embedder
        self._vectors: dict[str, Any] = {}

    @property
    def how(self) -> str:
        return "words and meaning (the search embedding model)" if self.embedder is not None else "words only"

    def _cosine(self, a: str, b: str) -> float:
        if self.embedder is None:
            return 0.0
        missing = [t for t in (a, b) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self.embedder.embed(missing), strict=True))
        return float(self._vectors[a] @ self._vectors[b])

    def same(self, a: str, b: str, *, base_a: bool = False) -> str:
        """'words' or 'meaning' when `a` and `b` state the same rule, else ''. The share is taken
        of the shorter one's terms, or with `base_a` of `a`'s (`holder`)."""
        ta, tb = terms(a), terms(b)
        if not ta or not tb:
            return ""
        if _lexical(ta, tb, len(ta) if base_a else min(len(ta), len(tb))):
            return "words"
        if ta & tb and self._cosine(a, b) >= MIN_COSINE:
            return "meaning"
        return ""

    def holder(self, rules: list[str], lines: list[str]) -> str:
        """The first of `lines` (a memory) that states one of `rules` (the same rule in its
        sayings), else ''. A line may say more than the rule: the rule's terms are the base."""
        return next((line for line in lines for rule in rules if self.same(rule, line, base_a=True)), "")
