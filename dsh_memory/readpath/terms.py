"""Query terms for ranked search, and the same terms found in lines of text.

A question is reduced to its content words: stopwords dropped (unless nothing else is left),
each word stemmed by SQLite's own `porter unicode61` tokenizer, the one the index uses, so a
line holds a term exactly when the index would match it there. CJK runs (no spaces) are terms
of their own, matched as substrings (the index matches them as bigram phrases).

Several queries are one bag of terms: ["stale lock", "deploy"] and "stale lock deploy" rank the
same lines.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
CJK_RUN = re.compile(f"[{_CJK}]+")
WORD = re.compile(f"[^\\W_{_CJK}]+|[{_CJK}]+", re.UNICODE)
LATIN_WORD = re.compile(f"[^\\W_{_CJK}]+", re.UNICODE)

# English function words, question words and contraction stubs: the words of a question that
# say nothing about what the answer is about. Negations stay (never, not): rules hang on them.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can cannot could couldn d did didn do does doesn doing don down during
    each few for from further had hadn has hasn have haven having he her here hers herself him himself
    his how i if in into is isn it its itself just ll m me might mightn more most must mustn my myself
    need needn now o of off on once only or other ought our ours ourselves out over own re s same
    shall shan she should shouldn so some such t than that the their theirs them themselves then there
    these they this those through to too under until up ve very was wasn we were weren what when where
    which while who whom whose why will with won would wouldn y you your yours yourself yourselves
    tell know please anything something thing things get got give let lets
    """.split()
)
# The same for CJK: question words and particles, cut out of a run before it is split in bigrams.
CJK_STOPWORDS = sorted(
    """为什么 什么时候 什么 怎么样 怎么 怎样 如何 哪里 哪儿 哪个 哪些 哪 多少 几 谁 何时 是否 是不是 吗 呢 吧
    了 的 地 得 是 在 有 和 与 及 或 也 都 就 还 要 会 能 可以 应该 请 我 你 他 她 它 我们 你们 他们 这 那 这个 那个
    何 なに なぜ どこ いつ だれ どう です ます か の は が を に で と""".split(),
    key=len,
    reverse=True,
)
_CJK_STOP = re.compile("|".join(map(re.escape, CJK_STOPWORDS)))


@dataclass(frozen=True)
class Term:
    """One query term: a porter stem (matched against a line's stems) or a CJK run (matched as a
    substring). `fts` is its FTS5 expression."""

    key: str
    cjk: bool
    fts: str
    queries: tuple[int, ...]  # indexes of the queries it came from


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


# ---- stems, from SQLite's porter tokenizer ------------------------------------------------

_local = threading.local()
_STEMS: dict[str, str] = {}  # lower-cased word → porter stem ('' when the tokenizer drops it)
_STEMS_MAX = 500_000


def _stemmer() -> sqlite3.Connection:
    conn = getattr(_local, "stemmer", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.execute("CREATE VIRTUAL TABLE w USING fts5(x, tokenize='porter unicode61', detail=column)")
        conn.execute("CREATE VIRTUAL TABLE temp.wv USING fts5vocab(main, w, 'instance')")
        _local.stemmer = conn
    return conn


def stems(words: list[str]) -> list[str]:
    """The porter stem of each lower-cased word, as the index tokenizes it (cached)."""
    found = {w: _STEMS.get(w) for w in words}  # read before the cache may start over below
    todo = [w for w, s in found.items() if s is None]
    if todo:
        conn = _stemmer()
        conn.executemany("INSERT INTO w(rowid, x) VALUES (?,?)", list(enumerate(todo)))
        got: dict[int, str] = {}
        for doc, term in conn.execute("SELECT doc, term FROM wv"):
            got.setdefault(doc, term)  # a word the tokenizer splits: its first part is enough
        conn.execute("DELETE FROM w")
        if len(_STEMS) > _STEMS_MAX:
            _STEMS.clear()
        for i, w in enumerate(todo):
            found[w] = _STEMS[w] = got.get(i, "")
    return [found[w] for w in words]


@lru_cache(maxsize=200_000)  # a server sees the same lines again and again
def line_stems(text: str) -> tuple[frozenset[str], int]:
    """The stems of one line's words, and how many words it has."""
    words = LATIN_WORD.findall(text.lower())
    return frozenset(stems(words)) - {""}, len(words)


# ---- queries ----------------------------------------------------------------------------


def query_terms(queries: list[str]) -> list[Term]:
    """The content terms of the queries, in order of first appearance. Stopwords are dropped
    unless the queries have nothing else (a search for "where" still searches)."""
    words = [(qi, t) for qi, q in enumerate(queries) for t in WORD.findall(q)]
    content = [(qi, t) for qi, t in words if CJK_RUN.fullmatch(t) or t.lower() not in STOPWORDS] or words
    pieces = []  # (query, piece, is CJK): a CJK run may split into several terms (cjk_pieces)
    for qi, t in content:
        cjk = bool(CJK_RUN.fullmatch(t))
        pieces += [(qi, p, cjk) for p in (cjk_pieces(t) if cjk else [t])]
    latin_stems = iter(stems([p.lower() for _, p, cjk in pieces if not cjk]))
    by_key: dict[str, tuple[bool, str, set[int]]] = {}
    for qi, p, cjk in pieces:
        key = p if cjk else next(latin_stems)
        if key:
            by_key.setdefault(key, (cjk, p.lower(), set()))[2].add(qi)
    out = []
    for key, (cjk, word, qs) in by_key.items():
        if cjk:
            fts = f"cjk : {_quote(key)}*" if len(key) == 1 else f"cjk : {_quote(' '.join(bigrams(key)[:-1]))}"
        else:
            fts = f"body : {_quote(word)}"  # FTS5 stems the word as it stemmed the indexed text
        out.append(Term(key=key, cjk=cjk, fts=fts, queries=tuple(sorted(qs))))
    return out


def cjk_pieces(run: str) -> list[str]:
    """A CJK run as terms. A short run (≤ 3 characters, likely one word) is one term; a longer run
    (a phrase or a question) loses its question words and particles and becomes overlapping
    bigrams, each a term of its own: the lines with most of them rank first."""
    if len(run) <= 3:
        return [run]
    parts = [p for p in _CJK_STOP.split(run) if p]
    grams = [g for p in parts if len(p) >= 2 for g in bigrams(p)[:-1]]
    return list(dict.fromkeys(grams)) or parts or [run]
