"""The labelled search evaluation: questions over a memory root (bench/search_eval/root), each with
the evidence lines (file + line) that answer it (questions.json).

Scored as an agent reads results: the lines returned, in order (each match's content lines,
start_line..end_line, each line counted once), and

- R@10, R@50: share of a question's evidence lines among the first 10 / 50 lines returned
- Hit@1: the first match's file holds evidence (session Hit@1)
- Line@1: the first line returned is an evidence line (the answer comes first)

next to an anchor: a plain SQLite FTS5 line index (one row per line, bm25, the product's
tokenizer settings: porter unicode61 with the CJK bigram column), queried with every word of the
question OR'd together.

    python bench/search_eval/evaluate.py            # prints the table (bench/bench_search.py too)
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE / "root"
QUESTIONS = HERE / "questions.json"
DEPTHS = (10, 50)

Line = tuple[str, int]  # (path relative to the memory root, 1-based line)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    evidence: tuple[Line, ...]

    @property
    def files(self) -> set[str]:
        return {p for p, _ in self.evidence}


def load(root: Path = ROOT, path: Path = QUESTIONS) -> list[Question]:
    """The questions; every evidence line is checked against its quote, so an edit of the root
    that moves a line fails here instead of silently scoring against the wrong line."""
    out = []
    for q in json.loads(path.read_text(encoding="utf-8")):
        ev = []
        for e in q["evidence"]:
            lines = (root / e["path"]).read_text(encoding="utf-8").splitlines()
            if not (0 < e["line"] <= len(lines)) or e["quote"] not in lines[e["line"] - 1]:
                raise ValueError(f"{q['id']}: {e['path']}:{e['line']} no longer holds {e['quote']!r}")
            ev.append((e["path"], e["line"]))
        out.append(Question(q["id"], q["question"], tuple(ev)))
    return out


@dataclass
class Run:
    """What one searcher returned for one question: matches as (path, first, last line)."""

    matches: list[tuple[str, int, int]] = field(default_factory=list)
    first_page_chars: int = 0

    def lines(self) -> list[Line]:
        seen: dict[Line, None] = {}
        for path, a, b in self.matches:
            for n in range(a, b + 1):
                seen.setdefault((path, n), None)
        return list(seen)


def score(questions: list[Question], runs: list[Run]) -> dict[str, float]:
    rec = {k: [] for k in DEPTHS}
    hit1, line1 = [], []
    for q, run in zip(questions, runs, strict=True):
        lines = run.lines()
        ev = set(q.evidence)
        for k in DEPTHS:
            rec[k].append(len(ev & set(lines[:k])) / len(ev))
        hit1.append(bool(run.matches) and run.matches[0][0] in q.files)
        line1.append(bool(lines) and lines[0] in ev)
    out = {f"R@{k}": statistics.fmean(v) for k, v in rec.items()}
    out["Hit@1"] = statistics.fmean(hit1)
    out["Line@1"] = statistics.fmean(line1)
    return out


# ---- the anchor: a plain FTS5 line index ------------------------------------------------


class LineIndex:
    """One row per non-blank line of the corpus, bm25, the product's tokenizer settings."""

    def __init__(self, store) -> None:
        from dsh_memory.readpath._common import corpus, read_text
        from dsh_memory.readpath.index import cjk_shadow, latin_body

        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(body, cjk, path UNINDEXED, line UNINDEXED, "
            "tokenize='porter unicode61')"
        )
        rows = []
        for rel, path, st in corpus(store):
            for n, text in enumerate((read_text(path, st) or "").splitlines(), 1):
                if text.strip():
                    rows.append((latin_body(text), cjk_shadow(text), rel, n))
        self.db.executemany("INSERT INTO fts(body, cjk, path, line) VALUES (?,?,?,?)", rows)

    @staticmethod
    def terms(question: str) -> list[str]:
        """Every word of the question (no stopwords dropped), a CJK run as its bigrams."""
        from dsh_memory.readpath.terms import CJK_RUN, WORD, bigrams

        out = []
        for tok in WORD.findall(question):
            if CJK_RUN.fullmatch(tok):
                out += [f'cjk : "{g}"' for g in (bigrams(tok)[:-1] or [tok])]
            else:
                out.append('body : "' + tok.replace('"', '""') + '"')
        return list(dict.fromkeys(out))

    def search(self, question: str, limit: int = 50) -> Run:
        terms = self.terms(question)
        if not terms:
            return Run()
        rows = self.db.execute(
            "SELECT path, line FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (" OR ".join(terms), limit)
        ).fetchall()
        return Run(matches=[(p, n, n) for p, n in rows])


def sections(store, question: str, limit: int = 50) -> Run:
    """Sections as the unit (ranked search before line ranking): the index's sections in BM25
    order, each returned whole (at most 24 lines)."""
    from dsh_memory.readpath import index
    from dsh_memory.readpath.terms import query_terms

    terms = query_terms([question])
    index.refresh(store)
    conn = index._connect(store)
    _, dfs = index.doc_freqs(conn, terms)
    rows = index.candidate_sections(conn, terms, [0] * len(dfs), None, limit)
    return Run(matches=[(p, a, b) for _, p, a, b, _ in rows])


# ---- the product ------------------------------------------------------------------------

_WORDS = re.compile(r"\w+")


def keywords(question: str) -> list[str]:
    """The question as separate keyword queries (what an agent passing `queries` might do)."""
    from dsh_memory.readpath.terms import STOPWORDS

    words = [w for w in _WORDS.findall(question) if w.casefold() not in STOPWORDS]
    return words[:16] or [question]


def product(store, queries: list[str], depth: int = 50, semantic: bool | None = None, **params) -> Run:
    """memory_search in ranked mode with its defaults, following next_cursor until `depth` lines
    were returned (an agent paging on). `semantic`: the semantic half on or off (None: the
    semantic_search setting's default, 'auto': on when the embedder is installed)."""
    from dsh_memory import readpath as rp

    mode = {None: "auto", True: "on", False: "off"}[semantic]
    return _product(rp, store, queries, depth, semantic_search=mode, **params)


def _product(rp, store, queries: list[str], depth: int, **params) -> Run:
    run = Run()
    cursor = None
    while True:
        res = rp.search(store, queries, mode="ranked", cursor=cursor, **params)
        if cursor is None:
            run.first_page_chars = len(res.model_dump_json())
        run.matches += [(m.path, m.start_line, m.end_line) for m in res.matches]
        cursor = res.next_cursor
        if not cursor or len(run.lines()) >= depth:
            return run


@contextlib.contextmanager
def scratch_store(src: Path = ROOT) -> Iterator:
    """A copy of the evaluation root (the index writes under .state/)."""
    from dsh_memory.storage.store import MemoryStore

    tmp = Path(tempfile.mkdtemp(prefix="dsh-search-eval-"))
    try:
        shutil.copytree(src, tmp / "mem")
        yield MemoryStore(tmp / "mem")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def evaluate(searchers: dict[str, Callable[[Question], Run]], questions: list[Question]) -> dict[str, dict]:
    out = {}
    for name, fn in searchers.items():
        runs = [fn(q) for q in questions]
        metrics = score(questions, runs)
        chars = [r.first_page_chars for r in runs if r.first_page_chars]
        if chars:
            metrics["page chars (mean/max)"] = (statistics.fmean(chars), max(chars))
        out[name] = metrics
    return out


def table(results: dict[str, dict], n_questions: int) -> str:
    cols = ["R@10", "R@50", "Hit@1", "Line@1"]
    head = f"{'search (' + str(n_questions) + ' questions)':<40}" + "".join(f"{c:>8}" for c in cols)
    rows = [head]
    for name, m in results.items():
        row = f"{name:<40}" + "".join(f"{m[c]:>8.2f}" for c in cols)
        if "page chars (mean/max)" in m:
            mean, mx = m["page chars (mean/max)"]
            row += f"   first page {mean:,.0f} chars (max {mx:,})"
        rows.append(row)
    return "\n".join(rows)


def held_out(questions: list[Question]) -> tuple[list[Question], list[Question]]:
    """(tuning half, held-out half) of the shipped fusion weights (tune_fusion.py): questions in
    id order, every other one; the weights were tuned on the second, fourth… (q02, q04, …)."""
    ordered = sorted(questions, key=lambda q: q.id)
    return ordered[1::2], ordered[0::2]


def run_all(verbose: bool = False) -> str:
    from dsh_memory.readpath import embedder

    questions = load()
    with scratch_store() as store:
        anchor = LineIndex(store)
        searchers = {
            "FTS5 line index (anchor)": lambda q: anchor.search(q.question),
            "sections as the unit (BM25, whole section)": lambda q: sections(store, q.question),
            "ranked, lexical only, the question": lambda q: product(store, [q.question], semantic=False),
            "ranked, lexical only, keyword queries": lambda q: product(store, keywords(q.question), semantic=False),
        }
        fused = "ranked + semantic (fused), the question"
        if embedder.get() is not None:  # semantic_search 'auto', the default, with the model installed
            searchers[fused] = lambda q: product(store, [q.question], semantic=True)
            searchers["ranked + semantic (fused), keyword queries"] = lambda q: product(
                store, keywords(q.question), semantic=True
            )
        results = evaluate(searchers, questions)
        _, held = held_out(questions)
        held_results = evaluate(
            {k: v for k, v in searchers.items() if k in ("FTS5 line index (anchor)", fused)}
            | {"ranked, lexical only, the question": searchers["ranked, lexical only, the question"]},
            held,
        )
        if verbose:
            for q in questions:
                run = product(store, [q.question])
                lines = run.lines()[:10]
                got = [i for i, ln in enumerate(lines) if ln in set(q.evidence)]
                print(q.id, q.question, "→", run.matches[:3], "evidence at", got, file=sys.stderr)
    out = table(results, len(questions))
    if embedder.get() is None:
        return out + "\nranked + semantic: not measured (the semantic extra is not installed)"
    return out + "\n\nheld-out half (not used to tune the fusion weights)\n" + table(held_results, len(held))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1]))
    print(run_all(verbose="-v" in sys.argv))
