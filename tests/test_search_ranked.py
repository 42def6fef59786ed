"""Ranked search finds the line (issue 17): the line that answers is the first line cited,
question-shaped queries work, a page stays within its budget, and the cursor pages on."""

from __future__ import annotations

import json

import pytest

from dsh_memory import readpath as rp
from dsh_memory.errors import UserInputError
from dsh_memory.readpath.models import DEFAULT_SEARCH_CHARS, MAX_SEARCH_CHARS
from dsh_memory.readpath.terms import query_terms
from dsh_memory.storage.store import MemoryStore

SESSION = """# 2026-01-12 · ledger · settlement test fails on Mondays
user: the settlement test is red again in CI, can you look at it?
agent: Running make test -k settlement locally: it passes on my side.
user: it only seems to fail on Mondays, every Monday morning the nightly run is red
agent: The rollover computes the previous business day with date.today() in the local timezone.
agent: On a Monday the previous business day is Friday, and the rates fixture has no Friday rows.
user: remember that we always use the clock service for dates in ledger
agent: Noted: in ledger, dates come from clock.utc_today(), never date.today().
user: who reviews the rollover code?
agent: Priya owns rollover.py; she reviews every change to it.
user: what is the on-call rotation for the ledger pager this week?
agent: Tomás, until Sunday.
"""

DEPLOY = """---
session_id: s2
---
## Task
The user asked the agent to deploy ledger to staging.

## What happened
- Ran `make deploy-staging`: failed (`Permission denied (publickey)`)
- Ran `ssh-add ~/.ssh/deploy_ed25519`: ok
- Ran `make deploy-staging`: ok

## Outcome
Staging deploys need the deploy key loaded with ssh-add first.
"""

MEMORY = """# Handbook

## ledger
- Run the tests with `make test`.
- Production deploys are the user's: never run `make deploy-prod`.

## dashboard
- pnpm only, never npm.
"""

BACKUP = """# 2026-03-01 · ledger · 夜间备份失败
user: 昨晚的数据库备份又失败了，帮我看一下
agent: 备份任务 pg_dump 报错：S3 凭证已过期，上传被拒绝。
agent: 凭证存放在 Vault 的 secret/ledger/backup 路径下。
"""


@pytest.fixture()
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (s.rollout_dir / "conv-2026-01-12-ledger-settlement.md").write_text(SESSION, encoding="utf-8")
    (s.rollout_dir / "2026-01-15-ledger-staging-deploy.md").write_text(DEPLOY, encoding="utf-8")
    (s.rollout_dir / "conv-2026-03-01-backup.md").write_text(BACKUP, encoding="utf-8")
    for i in range(12):  # look-alike sessions: the words, not the answers
        (s.rollout_dir / f"conv-2026-02-{i + 1:02d}-other.md").write_text(
            f"# 2026-02-{i + 1:02d} · ledger · chores\nuser: run the ledger tests please\n"
            f"agent: make test passed, {400 + i} tests.\nuser: and deploy it\nagent: deployed build {i}.\n",
            encoding="utf-8",
        )
    return s


def _first(res) -> tuple[str, int]:
    m = res.matches[0]
    return m.path, m.match_line


S = "rollout_summaries/conv-2026-01-12-ledger-settlement.md"


D = "rollout_summaries/2026-01-15-ledger-staging-deploy.md"
B = "rollout_summaries/conv-2026-03-01-backup.md"


@pytest.mark.parametrize(
    ("queries", "answer"),
    [
        (["What does the rollover use to compute the previous business day?"], (S, 5)),
        (["Where do dates come from in ledger?"], (S, 8)),
        (["Who reviews the rollover code?"], (S, 10)),  # the answer, not the line that asked
        (["How do I load the deploy key for staging?"], (D, 13)),
        (["Who may deploy to production?"], ("MEMORY.md", 5)),
        (["which package manager for the dashboard?"], ("MEMORY.md", 8)),
        (["凭证存放在哪里？"], (B, 4)),
        (["备份任务报错是什么？"], (B, 3)),
    ],
)
def test_the_answering_line_is_the_first_line_cited(store, queries, answer):
    res = rp.search(store, queries, mode="ranked")
    assert _first(res) == answer
    m = res.matches[0]
    assert m.start_line == m.match_line  # best line first: no context before it by default
    assert m.content.splitlines()[0] == (store.root / m.path).read_text().splitlines()[m.match_line - 1]


def test_an_asking_line_cites_the_answer_below_it(store):
    q = ["on-call rotation for the ledger pager this week"]
    (m, *_) = rp.search(store, q, mode="ranked", semantic_search="off").matches
    # the question holds every word, the answer none: the cited range runs on to the answer
    assert (m.match_line, m.match_end_line) == (11, 12) and m.content.endswith("Tomás, until Sunday.")
    # the default (fused when the model is installed; the answer line may then be cited on its own,
    # as its likeness to the line above adds up): the first match cites the answer line either way
    (m, *_) = rp.search(store, q, mode="ranked").matches
    assert m.match_line <= 12 <= m.match_end_line and m.content.endswith("Tomás, until Sunday.")


def test_headings_and_front_matter_are_context_not_hits(store):
    res = rp.search(store, ["ledger staging deploy session"], mode="ranked", max_results=50)
    for m in res.matches:
        line = (store.root / m.path).read_text().splitlines()[m.match_line - 1]
        assert not line.startswith("#") and line not in ("---", "session_id: s2")


def test_question_shaped_queries_equal_their_keywords(store):
    """Stopwords are dropped and words stemmed: the question, its keywords as separate queries,
    and the keywords in another form rank the same lines (lexical only: the same order; fused,
    the embedder sees the two wordings a little differently: the same lines, the answer as high)."""
    question, words = ["Why did the settlement tests fail on Mondays?"], ["settlement", "test", "failing", "Monday"]
    sentence = rp.search(store, question, mode="ranked", semantic_search="off")
    keywords = rp.search(store, words, mode="ranked", semantic_search="off")
    assert [(m.path, m.match_line) for m in sentence.matches] == [(m.path, m.match_line) for m in keywords.matches]
    fused_sentence, fused_keywords = rp.search(store, question, mode="ranked"), rp.search(store, words, mode="ranked")
    cited = [[(m.path, m.match_line) for m in r.matches] for r in (fused_sentence, fused_keywords)]
    assert cited[0][0] == cited[1][0] and set(cited[0]) == set(cited[1])
    answer = {5, 6}  # the rollover's previous business day, Friday missing from the fixture
    first = [next(i for i, (p, line) in enumerate(c) if "settlement" in p and line in answer) for c in cited]
    assert first[0] <= first[1] <= 4, cited  # the sentence ranks the answer no lower than its keywords
    assert [t.key for t in query_terms(["What did the user say about the deploy?"])] == ["user", "sai", "deploi"]
    assert [t.key for t in query_terms(["what is it"])] == ["what", "is", "it"]  # only stopwords: kept
    assert sentence.matches[0].matched_queries == ["Why did the settlement tests fail on Mondays?"]
    assert set(keywords.matches[0].matched_queries) == {"failing", "Monday"}


def test_ranked_context_lines(store):
    q = ["What does the rollover use to compute the previous business day?"]
    (m, *_) = rp.search(store, q, mode="ranked", context_lines=1).matches
    assert (m.start_line, m.match_line, m.match_end_line, m.end_line) == (4, 5, 5, 6)
    assert len(m.content.splitlines()) == 3


def test_context_lines_never_hide_a_hit(tmp_path):
    """A hit inside a better hit's context was no hit of its own: when the page's budget cut that
    context (or a cwd left the better hit out), the line was on no page. Context adds lines around
    a hit; the hits are the same with or without it, page after page."""
    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    filler = [f"- filler line {i} " + "lorem ipsum dolor " * 20 for i in range(15)]
    lines = ["- the quokka lives on Rottnest island, quokka quokka.", *filler, "- a second quokka fact."]
    (s.root / "MEMORY.md").write_text("\n".join(lines) + "\n")
    bare = rp.search(s, ["quokka"], mode="ranked", semantic_search="off", max_results=50)
    cited, cursor = [], None
    while True:
        page = rp.search(
            s, ["quokka"], mode="ranked", semantic_search="off", context_lines=20, max_chars=2000, cursor=cursor
        )
        cited += [m.match_line for m in page.matches]
        if not (cursor := page.next_cursor):
            break
    assert cited == [m.match_line for m in bare.matches] and 1 in cited
    # project b's hit lies in the context of project a's better one, which b's cwd leaves out
    a, b = tmp_path / "a", tmp_path / "b"
    groups = [
        f"# Task Group: {p}\nscope: project {p}\napplies_to: cwd={p}; reuse_rule=this project only\n" for p in (a, b)
    ]
    (s.root / "MEMORY.md").write_text(
        f"{groups[0]}\n## Project facts\n- the quokka quokka quokka lives here.\n\n{groups[1]}\n## Project facts\n"
        "- the b project also keeps one quokka somewhere in its long list of facts about animals and places.\n"
    )
    res = rp.search(s, ["quokka"], mode="ranked", semantic_search="off", context_lines=8, cwd=str(b))
    assert [m.match_line for m in res.matches] == [13]


def _big_root(tmp_path, n: int = 300) -> MemoryStore:
    s = MemoryStore(tmp_path / "big")
    s.ensure_layout()
    long = " ".join(["the deploy of the ledger service failed again after the migration"] * 30)
    for i in range(n):
        body = "\n".join(
            f"- step {j}: deploy ledger migration {i}-{j}; {long if j % 3 == 0 else 'ok'}" for j in range(30)
        )
        (s.rollout_dir / f"2026-01-01-deploy-{i:04d}.md").write_text(f"# Deploy {i}\n{body}\n")
    return s


@pytest.mark.parametrize(
    "params",
    [
        {"mode": "ranked"},
        {"mode": "ranked", "context_lines": 20},
        {"mode": "any"},
        {"mode": "any", "context_lines": 20},
        {"mode": "all_within_lines", "within_lines": 50},
    ],
    ids=["ranked", "ranked-context", "any", "any-context", "within"],
)
def test_a_default_page_stays_within_the_budget(tmp_path, params):
    store = _big_root(tmp_path)
    res = rp.search(store, ["deploy", "ledger migration"], **params)
    assert res.matches and res.truncated and res.next_cursor
    assert len(res.model_dump_json()) <= DEFAULT_SEARCH_CHARS  # ≈ 2,000 tokens
    # every match is still citable: its content is exactly its lines (a cut line ends with …)
    for m in res.matches:
        assert m.start_line <= m.match_line <= m.match_end_line <= m.end_line
        assert len(m.content.splitlines()) == m.end_line - m.start_line + 1
    wide = rp.search(store, ["deploy", "ledger migration"], max_chars=MAX_SEARCH_CHARS, max_results=500, **params)
    assert len(wide.model_dump_json()) <= MAX_SEARCH_CHARS and len(wide.matches) > len(res.matches)


def test_ranked_lines_are_cut_around_the_match(tmp_path):
    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("x " * 2000 + " the quokka answer " + "y " * 2000 + "\n")
    (m,) = rp.search(s, ["quokka"], mode="ranked").matches
    assert "quokka" in m.content and len(m.content) <= 400
    assert m.content.startswith("…") and m.content.endswith("…")


@pytest.mark.parametrize("mode", ["ranked", "any"])
def test_cursor_pages_through_what_one_big_page_holds(tmp_path, mode):
    store = _big_root(tmp_path, n=12)
    q = ["deploy ledger migration"] if mode == "ranked" else ["migration 1"]
    whole = rp.search(store, q, mode=mode, max_results=500, max_chars=MAX_SEARCH_CHARS)
    seen, cursor, pages = [], None, 0
    while True:
        res = rp.search(store, q, mode=mode, cursor=cursor, max_results=20 + pages % 7)  # page size may change
        seen += [(m.path, m.match_line) for m in res.matches]
        pages += 1
        cursor = res.next_cursor
        assert res.truncated == bool(cursor)
        if not cursor:
            break
    big = [(m.path, m.match_line) for m in whole.matches]
    assert pages > 2 and len(seen) == len(set(seen))
    assert seen[: len(big)] == big
    with pytest.raises(UserInputError, match="different request"):
        rp.search(store, ["other"], mode=mode, cursor=rp.search(store, q, mode=mode, max_results=2).next_cursor)


def test_page_json_is_what_the_adapters_send(store):
    """The budget is measured on the result as serialized (what MCP and the RPC return)."""
    res = rp.search(store, ["ledger"], mode="ranked", max_chars=1000)
    assert len(json.dumps(res.model_dump(), ensure_ascii=False, separators=(",", ":"))) <= 1000
    assert res.truncated


def test_several_queries_are_one_bag_of_terms(store):
    one = rp.search(store, ["dates clock service ledger"], mode="ranked")
    many = rp.search(store, ["dates", "clock service", "ledger"], mode="ranked")
    assert [(m.path, m.match_line) for m in one.matches] == [(m.path, m.match_line) for m in many.matches]


@pytest.mark.parametrize("mode", ["ranked", "any"])
def test_one_huge_match_is_cut_to_the_page(tmp_path, mode):
    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("\n".join("数据库迁移 " * 300 for _ in range(30)), encoding="utf-8")
    res = rp.search(s, ["数据库迁移"], mode=mode, context_lines=20, max_chars=1000)
    (m,) = res.matches
    assert len(res.model_dump_json()) <= 1000 and res.truncated
    assert m.end_line == m.start_line == 1 and m.content.endswith("…")


@pytest.mark.parametrize("mode", ["ranked", "any"])
def test_a_match_cut_to_the_page_keeps_the_line_it_cites(tmp_path, mode):
    """With context_lines and long lines, a match cut to the page kept its first lines, the context
    above: `MEMORY.md:11-12` citing line 31, and no line of it holding the query. The context goes
    first (the side with more of it), then the cited line is cut to its head, ending with `…`."""
    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    lines = [f"line{i} " + "z" * 300 for i in range(60)]
    lines[30] = "the needle here"
    (s.root / "MEMORY.md").write_text("\n".join(lines) + "\n")
    (s.root / "skills" / "long.md").write_text("a\n" * 5 + "needle " + "w" * 5000 + "\nb\n")
    res = rp.search(s, ["needle"], mode=mode, context_lines=20, max_chars=1000, path="MEMORY.md")
    (m,) = res.matches
    assert len(res.model_dump_json()) <= 1000
    assert m.start_line <= m.match_line == 31 == m.match_end_line <= m.end_line
    assert "the needle here" in m.content and len(m.content.splitlines()) == m.end_line - m.start_line + 1
    res = rp.search(s, ["needle"], mode=mode, context_lines=20, max_chars=1000, path="skills/long.md")
    (m,) = res.matches
    assert m.start_line <= m.match_line == 6 <= m.end_line and "needle www" in m.content  # ranked: 400 a line
    assert "w…" in m.content and len(res.model_dump_json()) <= 1000


def test_line_search_holds_no_more_of_a_long_line_than_a_page(tmp_path):
    """Every match of a line search is built before its page is cut: with context_lines each held
    its 41 lines whole, 4 MB a match for 100 KB lines (656 MB for five such files). A line is held
    to max_chars + 1 characters (more never fits a page); the pages are the same."""
    import tracemalloc

    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    for k in range(2):
        (s.rollout_dir / f"f{k}.md").write_text("\n".join(["needle " + "z" * 99_000] * 40) + "\n")
    tracemalloc.start()
    try:
        res = rp.search(s, ["needle"], context_lines=20, max_results=500)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.matches and res.truncated and len(res.model_dump_json()) <= DEFAULT_SEARCH_CHARS
    assert peak < 100 << 20, peak  # 80 matches of 41 lines: 330 MB held whole


@pytest.mark.parametrize("mode", ["ranked", "any", "all_on_same_line"])
def test_long_queries_never_take_a_page_past_max_chars(tmp_path, mode):
    """Sixteen 1,000-character queries, each a long line of the file: a page of one match was
    32 KB against max_chars 1,000 or 8,000 (the queries come back in the page and in the match,
    which no cut shortens). Refused in words, with the max_chars they need; with that, a page fits
    and the cursor moves on."""
    import re

    s = MemoryStore(tmp_path / "m")
    s.ensure_layout()
    queries = [f"q{i:02d} " + "y" * 996 for i in range(16)]
    (s.root / "MEMORY.md").write_text("\n".join(" ".join(queries) for _ in range(5)) + "\n")
    for max_chars in (1000, 8000):
        with pytest.raises(UserInputError, match="pass max_chars at least") as err:
            rp.search(s, queries, mode=mode, context_lines=2, max_chars=max_chars)
    need = int(re.search(r"take ([\d,]+) characters", str(err.value)).group(1).replace(",", ""))
    seen, cursor = [], None
    for _ in range(6):
        res = rp.search(s, queries, mode=mode, context_lines=2, max_chars=need, cursor=cursor)
        assert len(res.model_dump_json()) <= need and res.matches
        seen += [m.match_line for m in res.matches]
        if not (cursor := res.next_cursor):
            break
    assert len(seen) == len(set(seen)) >= 2


def test_stems_of_words_cached_before_the_cache_starts_over(monkeypatch):
    """A word stemmed before the stem cache outgrew its bound and started over is still answered
    (it raised KeyError once the cache was cleared in the same call)."""
    from dsh_memory.readpath import terms

    monkeypatch.setattr(terms, "_STEMS", {})
    monkeypatch.setattr(terms, "_STEMS_MAX", 1)
    assert terms.stems(["running", "tests"]) == ["run", "test"]
    assert terms.stems(["running", "jumps"]) == ["run", "jump"]
