"""Lexical + semantic ranking (with the embedder, embedder.py): the sections BM25 found
(index.py) and the SEMANTIC_SECTIONS most like the question (vectors.py) are read; a line scores
its lexical score over the query's best (lines.py) plus, above FLOOR, the weighted likeness of the
question to the line, the line above it and its section. Not reciprocal-rank fusion: a static
embedder is far weaker than BM25 on the keyword-heavy questions agents ask, so likeness mostly
breaks ties and brings in lines that say the same in other words. How the weights were tuned
(bench/search_eval/tune_fusion.py) and what they score: docs/search.md (Semantic half)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from dsh_memory.readpath import vectors
from dsh_memory.readpath.embedder import Embedder
from dsh_memory.readpath.lines import Hit, Section, score_sections
from dsh_memory.readpath.terms import LATIN_WORD, STOPWORDS, Term

SEMANTIC_SECTIONS = 10  # sections found by likeness alone, read besides BM25's
# tuned on half of bench/search_eval (bench/search_eval/tune_fusion.py): the line's own likeness
# and its section's did not help; the line above's did (an answer follows its question)
W_LINE = 0.0
W_ABOVE = 0.25
W_SECTION = 0.0
W_UNMATCHED = 0.5  # more weight of a line's own likeness when no query word is on or near it: scores the
# same as 0 on bench/search_eval (its answers all share words with their questions), and lets a
# line that says the same in other words be found as itself, not only as the line after a similar one
FLOOR = 0.3
CONTENT_WORDS = False  # embed the question without its stopwords (terms.STOPWORDS)


def ranked(
    store: Any,
    conn: sqlite3.Connection,
    vpath: Path,
    emb: Embedder,
    queries: list[str],
    terms: list[Term],
    weights: list[float],
    rows: list[tuple[int, str, int, int, float]],
    path_cond: tuple[str, list[Any]],
) -> tuple[list[Hit], dict]:
    """The lines of the lexical candidate sections (`rows`, index.candidate_sections) and of the
    sections most like the question, scored by both, best first; and the files read."""
    qv = emb.embed([_question(queries)])[0]
    near = vectors.nearest(conn, vpath, qv, path_cond, SEMANTIC_SECTIONS) if SEMANTIC_SECTIONS else []
    where: dict[int, tuple[str, int, int]] = {r[0]: (r[1], r[2], r[3]) for r in rows}
    cos = {sid: c for sid, *_, c in near}
    for sid, p, a, b, _ in near:
        where.setdefault(sid, (p, a, b))
    ids = list(where)  # BM25's order, then likeness's
    if W_SECTION:
        cos.update(vectors.cosines(conn, vpath, qv, [sid for sid in ids if sid not in cos]))
    lexical = len(rows)
    sections = [Section(*where[sid], rank, whole=rank >= lexical) for rank, sid in enumerate(ids)]
    hits, files = score_sections(store, terms, weights, sections)
    if not hits:
        return hits, files
    top = max(h.score for h in hits) or 1.0
    own = [W_LINE or (W_UNMATCHED and not h.score) for h in hits]  # whose own likeness counts
    texts = [files[h.path].lines[h.line - 1] if use else None for h, use in zip(hits, own, strict=True)]
    above = [_above(files[h.path], h.line) if W_ABOVE else None for h in hits]
    known = [t for t in dict.fromkeys(texts + above) if t]  # only what a weight uses is embedded
    sims = dict(zip(known, (emb.embed_lines(known) @ qv).tolist(), strict=True))
    for h, text, up in zip(hits, texts, above, strict=True):
        like = max(0.0, sims[text] - FLOOR) if text else 0.0
        h.score = (
            h.score / top
            + (W_LINE if h.score else W_LINE + W_UNMATCHED) * like
            + (W_ABOVE * max(0.0, sims[up] - FLOOR) if up else 0.0)
            + W_SECTION * max(0.0, cos.get(ids[h.rank], 0.0) - FLOOR)
        )
    # a line with no query word near it, nor likeness above FLOOR, is no hit (as without the embedder)
    hits = [h for h in hits if h.score > 0]
    hits.sort(key=lambda h: (-h.score, h.rank, h.path, h.line))
    return hits, files


def applies(terms: list[Term]) -> bool:
    """Whether the embedder's likeness is worth fusing in: not for a question with CJK terms. The
    model's tokenizer (Llama 2's) splits CJK text into single characters and bytes: an unrelated CJK
    question is as like a CJK line as a related one (0.48–0.51 for "午饭吃什么" against lines on
    database backups, 0.31 for "迁徙" against "数据库迁移…"), so such a question is ranked lexically."""
    return not any(t.cjk for t in terms)


def _question(queries: list[str]) -> str:
    text = " ".join(queries)
    if not CONTENT_WORDS:
        return text
    words = [w for w in LATIN_WORD.findall(text) if w.casefold() not in STOPWORDS]
    return " ".join(words) or text


def _above(f: Any, line: int) -> str | None:
    """The text of the line above 1-based `line`, when it is a line of text (not a heading)."""
    i = line - 2
    if i < 0 or f.context(i) or not f.lines[i].strip():
        return None
    return f.lines[i]
