"""The read-path core against a real memory root on disk (no mocks)."""

from __future__ import annotations

import base64
import builtins
import json
import os
import sys
from datetime import UTC, datetime

import pytest

from dsh_memory import readpath as rp
from dsh_memory.context import context_of
from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.fs_helpers import age, nested, remove_deep

MEMORY_MD = """# Handbook

## Deploys
Use the foo-bar script for staging deploys.
Postgres migrations: run alembic upgrade head before deploying.

## Preferences
The user prefers uv over pip.

## 数据库
数据库迁移之前必须先备份。
"""

ROLLOUT = """---
session_id: s1
---

# Fix flaky deploy
The foo_bar script failed on staging.
Root cause: a stale lock file.
We removed the lock and retried the deploy.
"""


@pytest.fixture()
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    root = s.root
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    (root / "memory_summary.md").write_text("v1\n## Topics\n- deploys and releases\n- postgres\n")
    (root / "rollout_summaries" / "fix-flaky-deploy.md").write_text(ROLLOUT)
    (root / "rollout_summaries" / "other-topic.md").write_text("# Other\nNothing about it here.\n")
    (root / "rollout_summaries" / ".retired" / "old-deploy.md").write_text("# Old\nfoo bar legacy deploy notes\n")
    (root / "skills" / "deploy").mkdir(parents=True)
    (root / "skills" / "deploy" / "SKILL.md").write_text("# Deploy skill\nRun the foo-bar script.\n")
    (root / ".state" / "secret.txt").write_text("foo bar secret in state\n")
    return s


@pytest.fixture()
def state(store) -> StateStore:
    return StateStore(store.root)


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# ---- summary ----------------------------------------------------------------------------


def test_summary_caps_and_caches_by_file_identity(store):
    s = rp.summary(store, max_chars=10_000)
    assert s.content.startswith("v1\n## Topics") and not s.truncated and not s.empty
    assert "path:start-end" in s.instructions and "stale" in s.instructions
    block = s.injection()
    assert block.index(s.instructions) < block.index("v1\n## Topics")

    big = "v1\n" + "\n".join(f"- topic line {i} " + "x" * 40 for i in range(400)) + "\n- newest topic\n"
    store.summary_path.write_text(big)
    capped = rp.summary(store, max_chars=2000)
    assert capped.truncated and len(capped.content) <= 2000 and capped.chars == len(big.strip())
    assert capped.content.startswith("v1\n- topic line 0") and capped.content.endswith("- newest topic")
    # a rewrite (new identity) is seen at once, never served stale from the cache
    store.summary_path.write_text("v1\nchanged\n")
    assert rp.summary(store, max_chars=2000).content == "v1\nchanged"


def test_a_summary_larger_than_phase2_writes_is_not_read_whole(store):
    """memory_summary.md was read whole at every session start: a 220 MB one (Phase 2 writes at
    most 1,000,000 characters) took 4.4 s and 1.2 GB to inject 10,000 characters. Its first 4 MiB
    are read, and a line says the rest is not shown."""
    import tracemalloc

    read_at_most = 4 << 20
    line = "- a line of the summary, long enough to fill it\n"
    store.summary_path.write_text("v1\n" + line * (12 * read_at_most // len(line)) + "- the last\n")
    for cwd in (None, "/r/app"):
        tracemalloc.start()
        try:
            s = rp.summary(store, max_chars=10_000, cwd=cwd)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert s.truncated and len(s.content) <= 10_000 and "- the last" not in s.content
        assert peak < 8 * read_at_most, peak  # the file is 48 MiB
    assert rp.summary(store, max_chars=10_000).content.endswith(
        "- not shown here: memory_summary.md past its first 4 MiB"
    )


def test_summary_empty_memory_is_empty_not_an_error(tmp_path):
    s = rp.summary(MemoryStore(tmp_path / "nothing-here"), max_chars=1000)
    assert s.empty and s.content == "" and s.injection() == ""


# ---- list -------------------------------------------------------------------------------


def test_a_summary_serializes_as_its_documented_fields(store):
    """A Summary's dump and its serialization schema are its fields (with their descriptions);
    the injection block is added by the adapters that return it (CLI --json, the RPC)."""
    s = rp.summary(store, 10_000)
    assert set(s.model_dump()) == set(type(s).model_fields)
    schema = type(s).model_json_schema(mode="serialization")
    assert set(schema["properties"]) == set(type(s).model_fields)
    assert schema["properties"]["content"]["description"].startswith("memory_summary.md")


def test_list_is_shallow_sorted_hides_state_and_paginates(store):
    os.symlink(store.root / "MEMORY.md", store.root / "link.md")
    res = rp.list_dir(store)
    paths = [e.path for e in res.entries]
    assert paths == ["MEMORY.md", "extensions", "memory_summary.md", "rollout_summaries", "skills"]
    assert {e.path: e.type for e in res.entries}["skills"] == "directory"
    sub = rp.list_dir(store, "rollout_summaries")
    assert [e.path for e in sub.entries] == [
        "rollout_summaries/.retired",
        "rollout_summaries/fix-flaky-deploy.md",
        "rollout_summaries/other-topic.md",
    ]
    page1 = rp.list_dir(store, "", max_results=2)
    assert page1.truncated and [e.path for e in page1.entries] == paths[:2]
    page2 = rp.list_dir(store, "", cursor=page1.next_cursor, max_results=2)
    page3 = rp.list_dir(store, "", cursor=page2.next_cursor, max_results=2)
    assert [e.path for e in page2.entries + page3.entries] == paths[2:]
    assert page3.next_cursor is None and not page3.truncated
    with pytest.raises(UserInputError):  # a cursor from another listing
        rp.list_dir(store, "rollout_summaries", cursor=page1.next_cursor, max_results=2)
    with pytest.raises(UserInputError):
        rp.list_dir(store, "", cursor="garbage!!")
    with pytest.raises(NotFoundError):
        rp.list_dir(store, "no-such-dir")


# ---- read -------------------------------------------------------------------------------


def test_read_slices_lines_one_based_with_truncation(store):
    full = rp.read(store, "MEMORY.md")
    assert full.start_line == 1 and full.end_line == full.total_lines == len(MEMORY_MD.splitlines())
    assert not full.truncated and full.next_start_line is None
    part = rp.read(store, "MEMORY.md", start_line=4, max_lines=2)
    assert (part.start_line, part.end_line) == (4, 5)
    assert part.content.splitlines() == MEMORY_MD.splitlines()[3:5]
    assert part.truncated and part.next_start_line == 6
    rest = rp.read(store, "MEMORY.md", start_line=part.next_start_line)  # continue where it stopped
    assert rest.start_line == 6 and rest.content.splitlines() == MEMORY_MD.splitlines()[5:]
    last = rp.read(store, "MEMORY.md", start_line=full.total_lines)
    assert (last.start_line, last.end_line, last.next_start_line) == (full.total_lines, full.total_lines, None)
    for bad in (0, full.total_lines + 1):
        with pytest.raises(UserInputError, match="start_line"):
            rp.read(store, "MEMORY.md", start_line=bad)
    with pytest.raises(UserInputError, match="line_offset"):  # the old name is refused, not ignored
        rp.read(store, "MEMORY.md", line_offset=3)
    with pytest.raises(UserInputError):
        rp.read(store, "skills")  # a directory
    with pytest.raises(NotFoundError):
        rp.read(store, "nope.md")


def test_read_only_counts_the_lines_outside_its_page(store):
    """`read` of a 3 GB file took 12 s: every line of it was split off and handled one by one to
    say total_lines. A chunk with no line of the page in it (and no line break but "\\n") is only
    counted now (C speed); the numbers are the same (the test above checks them against
    `splitlines`). Python function calls during the read show it: one per line, before."""

    target = store.root / "skills" / "long.md"
    target.write_text("top\n" + "a line of it\n" * 2_000_000 + "bottom\n")
    calls = [0]

    def count(frame, event, arg):
        calls[0] += event == "call"

    for start, first in ((1, "top"), (2_000_002, "bottom")):
        calls[0] = 0
        sys.setprofile(count)
        try:
            res = rp.read(store, "skills/long.md", start_line=start, max_lines=3)
        finally:
            sys.setprofile(None)
        assert res.total_lines == 2_000_002 and res.content.startswith(first)
        assert calls[0] < 500_000, calls  # the page's chunk is split (≈ 80,000 lines), the rest counted


def test_read_holds_no_more_of_a_file_than_its_page(store):
    """`read` held every line of its window whole: with lines of 500,000 characters the window
    (up to 5,000 lines) was the file, 83 MiB to return 64,000 characters of a 100 MB one. It keeps
    what the page can return; the page is the same."""
    import tracemalloc

    with open(store.root / "skills" / "wide.md", "w") as f:
        for i in range(200):
            f.write(f"{i} " + "x" * 500_000 + "\n")
    tracemalloc.start()
    try:
        res = rp.read(store, "skills/wide.md", start_line=3, max_lines=5000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak  # one chunk (1 MiB characters) and its lines, not the file
    assert (res.start_line, res.end_line, res.total_lines, res.truncated, res.next_start_line) == (3, 3, 200, True, 4)
    assert res.content == "2 " + "x" * (64_000 - 3)


def test_read_size_cap_sets_truncated(store):
    (store.root / "skills" / "big.md").write_text("\n".join("y" * 1000 for _ in range(200)))
    res = rp.read(store, "skills/big.md", max_lines=200)
    assert res.truncated and res.end_line < 200 and len(res.content) <= 64_000
    assert res.next_start_line == res.end_line + 1


def test_read_streams_a_large_file_and_splits_lines_as_search_does(store, monkeypatch):
    """`read` loaded the whole file to return a page (an archive grown over months, or a 300 MB
    file, cost its size several times over). It reads in chunks now, holding a chunk and the page:
    the same lines, line count and page as splitting the whole text (every line break
    `str.splitlines` knows, "\r\n" across a chunk's edge, a line longer than a page), with
    memory bounded by the chunk, not the file."""
    import random
    import tracemalloc

    from dsh_memory.readpath import files

    rng = random.Random(3)
    breaks = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"]
    target = store.root / "skills" / "archive.md"
    for trial in range(40):
        lines = ["".join(rng.choices("ab é✓", k=rng.randint(0, 12))) for _ in range(rng.randint(0, 30))]
        text = "".join(line + rng.choice(breaks) for line in lines) + rng.choice(["", "tail", "x" * 70_000])
        target.write_text(text, encoding="utf-8", newline="")
        sizes = [1, 2, 5, 64] if len(text) < 1000 else [4096, 1 << 20]  # (1 char at a time: 70k steps)
        monkeypatch.setattr(files, "READ_CHUNK_CHARS", rng.choice(sizes))
        whole = text.splitlines()
        start = rng.randint(1, max(len(whole), 1))
        res = rp.read(store, "skills/archive.md", start_line=start, max_lines=rng.randint(1, 40))
        assert res.total_lines == len(whole), trial
        page = [ln[: files.MAX_READ_CHARS - 1] if len(ln) > files.MAX_READ_CHARS else ln for ln in whole]
        assert res.content == "\n".join(page[start - 1 : res.end_line]), trial

    monkeypatch.setattr(files, "READ_CHUNK_CHARS", 1 << 20)
    with target.open("w") as f:
        for i in range(200_000):  # ≈ 20 MB
            f.write(f"line {i:07d} of an archive that grew for months, kept for the record\n")
    tracemalloc.start()
    res = rp.read(store, "skills/archive.md", start_line=100_000, max_lines=3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.total_lines == 200_000 and res.content.startswith("line 0099999 of an archive")
    assert peak < 12 * 2**20, peak  # the file is ≈ 20 MB; whole, it cost > 60 MB


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "skills/../../x",
        ".state/secret.txt",
        ".STATE/secret.txt",
        "a\x00b",
        "rollout_summaries/../.state/state.sqlite3",
    ],
)
def test_path_attacks_are_refused_before_any_io(store, bad):
    for call in (
        lambda: rp.read(store, bad),
        lambda: rp.list_dir(store, bad),
        lambda: rp.search(store, ["foo"], path=bad),
    ):
        with pytest.raises(PathGuardError):
            call()


def test_a_path_too_long_under_the_memory_root_is_bad_input_not_an_oserror(store):
    """A path of 4,095 bytes (every name within 255) passed the length check, and the memory
    root's own path made it one no system call takes: OSError "File name too long", HTTP 500 in
    every operation. The bound counts the root too: one line, exit 2 / 400."""
    too_long = "/".join(["a" * 255] * 16)
    for call in (
        lambda: rp.read(store, too_long),
        lambda: rp.list_dir(store, too_long),
        lambda: rp.search(store, ["foo"], path=too_long),
        lambda: rp.delete_file(store, too_long),
    ):
        with pytest.raises(UserInputError, match="bytes long in UTF-8; at most"):
            call()


def test_symlinks_inside_the_root_are_refused(store, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("secret outside the root\n")
    os.symlink(outside, store.root / "skills" / "evil.md")
    os.symlink(tmp_path, store.root / "skills" / "evil-dir")
    with pytest.raises(PathGuardError):
        rp.read(store, "skills/evil.md")
    with pytest.raises(PathGuardError):
        rp.read(store, "skills/evil-dir/outside.md")
    # search never follows them either
    assert rp.search(store, ["secret outside"]).matches == []
    assert rp.search(store, ["secret outside"], mode="ranked").matches == []


@pytest.mark.parametrize("linked", ["skills", "rollout_summaries", "extensions", "extensions/ad_hoc/notes"])
def test_search_does_not_follow_a_linked_memory_folder(store, tmp_path, linked):
    """A memory folder that is itself a symlink leads out of the root: read and list refuse it,
    and search must not show what lies behind it either."""
    outside = tmp_path / "outside"
    (outside / "ad_hoc" / "notes").mkdir(parents=True)
    for folder in (outside, outside / "ad_hoc" / "notes"):
        (folder / "leak.md").write_text("secret outside the root\n")
    target = store.root / linked
    if target.is_dir():
        os.rename(target, tmp_path / "moved-away")
    os.symlink(outside, target)
    assert rp.search(store, ["secret outside"]).matches == []
    assert rp.search(store, ["secret outside"], mode="ranked").matches == []


@pytest.mark.parametrize("mode", ["any", "ranked"])
def test_search_under_a_missing_path_says_so_in_every_mode(store, mode):
    """A mistyped `path` is an error, not zero hits that look like an answer."""
    with pytest.raises(NotFoundError, match="skils"):
        rp.search(store, ["deploy"], mode=mode, path="skils")


def test_search_skips_a_file_too_large_to_be_memory(store):
    """A huge file dropped into the root is not read whole (nor indexed) by search."""
    from dsh_memory.readpath._common import MAX_SEARCH_FILE_BYTES

    line = "oversized needle line\n"
    (store.notes_dir / "huge.md").write_text(line * (MAX_SEARCH_FILE_BYTES // len(line) + 1))
    (store.notes_dir / "small.md").write_text(line)
    for mode in ("any", "ranked"):
        paths = {m.path for m in rp.search(store, ["oversized needle"], mode=mode).matches}
        assert paths == {"extensions/ad_hoc/notes/small.md"}, mode


@pytest.mark.parametrize("mode", ["any", "all_within_lines"])
def test_a_line_search_holds_no_more_of_a_match_than_a_page_can_show(store, mode):
    """A line search keeps the matches it has found (up to max_results + 1, or 5,000 with a cwd)
    before a page is cut, each built whole: with 20 lines of context around lines of 64 KB, one
    match took 2.6 MB, and a search of a 2.5 MiB note 85 MiB (4 MiB files: gigabytes). A match
    keeps what a page can hold, cut in the page's own order; the page is the same."""
    import tracemalloc

    line = "- the zebra " + "z" * 64_000 + "\n"
    (store.notes_dir / "wide.md").write_text(line * 40)
    tracemalloc.start()
    try:
        res = rp.search(store, ["zebra"], mode=mode, context_lines=20, max_chars=64_000, max_results=500)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * len(line) * 40, peak
    ((m,),) = [res.matches]
    assert (m.start_line, m.match_line, m.end_line) == (1, 1, 1) and m.content.startswith("- the zebra zzz")
    assert res.truncated and len(res.model_dump_json()) <= 64_000


@pytest.mark.parametrize("mode", ["any", "ranked"])
def test_a_file_name_that_is_not_utf8_breaks_no_search(store, mode):
    """A note named `caf\\xe9.md` (Latin-1 bytes, as another system may write them): every search
    of the memory was a traceback (a match's path could not be written as JSON; the index could
    not store the name). Such a file is passed over, like a hidden one; the rest is searched."""
    (store.notes_dir / "plain.md").write_text("- the zebra deploy\n")
    with open(os.fsencode(store.notes_dir) + b"/caf\xe9.md", "wb") as f:
        f.write(b"- the zebra deploy again\n")
    for path in (None, "extensions/ad_hoc"):
        paths = [m.path for m in rp.search(store, ["zebra"], mode=mode, path=path).matches]
        assert paths == ["extensions/ad_hoc/notes/plain.md"], paths
    with pytest.raises(UserInputError, match="not UTF-8"):  # named: one line, not a traceback
        rp.search(store, ["zebra"], mode=mode, path=os.fsdecode(b"extensions/ad_hoc/notes/caf\xe9.md"))


class _Listed(list):
    """What os.scandir returned, as a list that is also its context manager."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_file_retired_while_a_call_looks_at_it_is_gone_not_an_error(store, monkeypatch):
    """A consolidation retires rollout summaries (or the vault deletes one) while an agent's call
    runs: search (every mode), list and read met the file listed, or stat'ed, and then gone, and
    each answered with FileNotFoundError (HTTP 500, a bare MCP error). The file is simply not
    there: search and list pass it over, read says it is not found."""
    gone = store.root / "rollout_summaries" / "fix-flaky-deploy.md"
    real_scandir, real_open = os.scandir, builtins.open

    def scandir(path="."):  # the folder is listed with the file; the file goes right after
        entries = _Listed(real_scandir(path))
        if os.path.abspath(path) == str(gone.parent) and gone.exists():
            gone.unlink()
        return entries

    def open_(file, *args, **kw):  # read has looked at the file; it goes before read opens it
        if os.fspath(file) == str(gone) and gone.exists():
            gone.unlink()
        return real_open(file, *args, **kw)

    monkeypatch.setattr(os, "scandir", scandir)
    for mode in ("any", "ranked"):
        for path in (None, "rollout_summaries"):
            gone.write_text(ROLLOUT)
            hits = rp.search(store, ["lock file", "flaky"], mode=mode, path=path).matches
            assert gone.name not in str([m.path for m in hits]), (mode, path)
    gone.write_text(ROLLOUT)
    assert [e.path for e in rp.list_dir(store, "rollout_summaries").entries] == [
        "rollout_summaries/.retired",
        "rollout_summaries/other-topic.md",
    ]
    monkeypatch.setattr(os, "scandir", real_scandir)
    monkeypatch.setattr(builtins, "open", open_)
    gone.write_text(ROLLOUT)
    with pytest.raises(NotFoundError, match="fix-flaky-deploy.md"):
        rp.read(store, "rollout_summaries/fix-flaky-deploy.md")


@pytest.mark.parametrize("mode", ["any", "ranked"])
def test_a_deep_or_long_folder_breaks_no_search(store, mode):
    """A folder tree under skills/ (or the notes) 1,200 folders deep made every search a
    RecursionError, and one whose path passes the system's 4,096 bytes an OSError ("File name too
    long"): the whole memory unsearchable, HTTP 500. The deep file is searched like any other;
    the one no path can name (nor `read` open) is passed over."""
    nested(store.root / "skills", ["a"] * 1200, "SKILL.md", "- the walrus deploy, deep down\n")
    nested(store.root / "skills", ["b" * 250] * 20, "SKILL.md", "- the walrus deploy, too far\n")
    deep = "/".join(["skills", *["a"] * 1200, "SKILL.md"])
    try:
        hits = rp.search(store, ["walrus"], mode=mode).matches
        assert [m.path for m in hits] == [deep]
        assert rp.read(store, deep).content == "- the walrus deploy, deep down"
    finally:  # rmtree recurses too: pytest's cleanup of old temp folders would fail on this tree
        remove_deep(store.root / "skills" / "a")


@pytest.mark.parametrize("mode", ["any", "all_within_lines", "ranked"])
def test_search_says_which_files_it_skipped(store, mode):
    """A MEMORY.md over 4 MiB or a note that is no UTF-8, each holding the word, answered "no
    matches" as if the memory had none: the result names the files it could not search, in one
    line within the page's max_chars, as many as fit (the count always)."""
    from dsh_memory.readpath._common import MAX_SEARCH_FILE_BYTES

    (store.root / "MEMORY.md").write_text("- keep the needle here\n" * (MAX_SEARCH_FILE_BYTES // 20))
    (store.notes_dir / "latin.md").write_bytes("- needle in caf\xe9 notes\n".encode("latin-1"))
    (store.notes_dir / "plain.md").write_text("- a needle you can find\n")
    (store.notes_dir / "blank.md").write_text("\n  \n")  # nothing to search: not skipped
    res = rp.search(store, ["needle"], mode=mode)
    assert [m.path for m in res.matches] == ["extensions/ad_hoc/notes/plain.md"]
    assert res.skipped == "skipped 2 files: MEMORY.md (over 4 MiB), extensions/ad_hoc/notes/latin.md (not UTF-8)"
    one = rp.search(store, ["needle"], mode=mode, path="MEMORY.md")
    assert (one.matches, one.skipped) == ([], "skipped 1 file: MEMORY.md (over 4 MiB)")
    assert rp.search(store, ["needle"], mode=mode, path="extensions/ad_hoc/notes/plain.md").skipped is None
    for n in range(300):  # more than a page can name: the count, and the names that fit
        (store.notes_dir / f"bad-{n:03}-{'x' * 200}.md").write_bytes(b"needle \xff\n")
    page = rp.search(store, ["needle"], mode=mode, max_chars=1000)
    assert len(page.model_dump_json()) <= 1000 and page.matches, page
    assert page.skipped.startswith("skipped 302 files: MEMORY.md (over 4 MiB), ") and page.skipped.endswith(" more")


@pytest.mark.parametrize("mode", ["any", "ranked"])
def test_a_query_has_a_size_bound(store, mode):
    """A pasted 14 KB stack trace as a query was searched and echoed in the result and every
    match (pages of one hit, far past max_chars); a query over the bound is refused, in words."""
    from dsh_memory.readpath.models import MAX_QUERY_CHARS

    assert rp.search(store, ["x" * MAX_QUERY_CHARS], mode=mode).matches == []
    with pytest.raises(UserInputError, match=f"at most {MAX_QUERY_CHARS:,} characters"):
        rp.search(store, ["deploy", "x" * (MAX_QUERY_CHARS + 1)], mode=mode)


def test_percent_encoded_dots_are_a_literal_name_not_traversal(store):
    with pytest.raises(NotFoundError):
        rp.read(store, "%2e%2e/%2e%2e/etc/passwd")


# ---- search: line modes -----------------------------------------------------------------


def _cites(res):
    return [(m.path, m.match_line, m.match_end_line) for m in res.matches]


def test_search_any_is_case_insensitive_sorted_and_skips_state_and_retired(store):
    res = rp.search(store, ["FOO-BAR", "alembic"])
    assert _cites(res) == [("MEMORY.md", 4, 4), ("MEMORY.md", 5, 5), ("skills/deploy/SKILL.md", 2, 2)]
    assert res.matches[1].matched_queries == ["alembic"]
    assert all(not m.path.startswith((".state", "rollout_summaries/.retired")) for m in res.matches)
    assert rp.search(store, ["FOO-BAR"], case_sensitive=True).matches == []


def test_search_normalized_ignores_punctuation(store):
    res = rp.search(store, ["foo bar"], normalized=True)
    assert _cites(res) == [
        ("MEMORY.md", 4, 4),
        ("rollout_summaries/fix-flaky-deploy.md", 6, 6),
        ("skills/deploy/SKILL.md", 2, 2),
    ]
    assert rp.search(store, ["foo bar"]).matches == []  # plain substring: no such text
    with pytest.raises(UserInputError):
        rp.search(store, ["--"], normalized=True)


def test_search_all_on_same_line_and_within_lines(store):
    same = rp.search(store, ["staging", "script"], mode="all_on_same_line")
    assert _cites(same) == [("MEMORY.md", 4, 4), ("rollout_summaries/fix-flaky-deploy.md", 6, 6)]
    win = rp.search(store, ["lock file", "retried"], mode="all_within_lines", within_lines=3)
    assert _cites(win) == [("rollout_summaries/fix-flaky-deploy.md", 7, 8)]
    assert "stale lock file" in win.matches[0].content and "retried" in win.matches[0].content
    too_far = rp.search(store, ["foo_bar script", "retried"], mode="all_within_lines", within_lines=2)
    assert too_far.matches == []
    # windows that strictly contain a tighter one are dropped
    (store.root / "skills" / "w.md").write_text("alpha\nalpha\nbeta\n")
    w = rp.search(store, ["alpha", "beta"], mode="all_within_lines", within_lines=5, path="skills/w.md")
    assert _cites(w) == [("skills/w.md", 2, 3)]


def test_search_context_lines_and_path(store):
    res = rp.search(store, ["stale lock"], context_lines=1, path="./rollout_summaries/")
    assert res.path == "rollout_summaries"  # the scope searched, canonical
    (m,) = res.matches
    assert (m.start_line, m.match_line, m.end_line) == (6, 7, 8)
    assert m.content.splitlines()[1] == "Root cause: a stale lock file."
    retired = rp.search(store, ["legacy"], path="rollout_summaries/.retired")
    assert _cites(retired) == [("rollout_summaries/.retired/old-deploy.md", 2, 2)]


def test_search_pagination_with_opaque_cursor(store):
    (store.root / "skills" / "many.md").write_text("\n".join(f"needle {i}" for i in range(7)))
    seen, cursor = [], None
    while True:
        res = rp.search(store, ["needle"], max_results=3, cursor=cursor)
        seen += [m.match_line for m in res.matches]
        if not res.next_cursor:
            break
        assert res.truncated
        cursor = res.next_cursor
    assert seen == list(range(1, 8))
    with pytest.raises(UserInputError):  # cursor bound to its query
        rp.search(store, ["other"], max_results=3, cursor=rp.search(store, ["needle"], max_results=3).next_cursor)
    # a cursor is only base64 JSON: one made up with an offset past any index is refused like
    # any bad cursor (it was a ValueError from islice: HTTP 500, an MCP tool's bare exception)
    made = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    for mode in ("any", "all_within_lines", "ranked"):
        fp = rp.search(store, ["needle"], mode=mode, max_results=3).next_cursor
        made["f"] = json.loads(base64.urlsafe_b64decode(fp + "=" * (-len(fp) % 4)))["f"]
        made["o"] = 2**63
        forged = base64.urlsafe_b64encode(json.dumps(made).encode()).decode()
        with pytest.raises(UserInputError, match="invalid cursor"):
            rp.search(store, ["needle"], mode=mode, max_results=3, cursor=forged)


# ---- search: ranked ---------------------------------------------------------------------


def test_ranked_bm25_stems_and_cites_lines(store):
    res = rp.search(store, ["migration"], mode="ranked")
    top = res.matches[0]
    assert top.path == "MEMORY.md" and top.score is not None
    assert top.match_line == 5 and "alembic" in top.content  # "migrations" matched via porter
    assert top.start_line <= top.match_line <= top.match_end_line <= top.end_line
    deploy = rp.search(store, ["stale lock deploy"], mode="ranked")
    assert deploy.matches[0].path == "rollout_summaries/fix-flaky-deploy.md"
    assert (store.state_dir / "search_index.sqlite3").exists()
    assert not any(m.path.startswith("rollout_summaries/.retired") for m in deploy.matches)


def test_ranked_cjk_substrings(store):
    res = rp.search(store, ["迁移"], mode="ranked")
    assert [m.path for m in res.matches] == ["MEMORY.md"] and res.matches[0].match_line == 11
    assert rp.search(store, ["备"], mode="ranked").matches[0].match_line == 11  # single character
    assert rp.search(store, ["移之前"], mode="ranked").matches  # across bigram boundaries
    assert rp.search(store, ["迁徙"], mode="ranked").matches == []
    # line modes find CJK substrings too
    assert _cites(rp.search(store, ["必须先备份"])) == [("MEMORY.md", 11, 11)]


def test_ranked_index_updates_incrementally(store):
    assert rp.search(store, ["kubernetes"], mode="ranked").matches == []
    new = store.rollout_dir / "k8s-rollout.md"
    new.write_text("# Kubernetes rollout\nkubectl rollout restart fixed the stuck pods.\n")
    age(store.root)  # written long ago: trusted by its stat (one written in the last 2 s is read again)
    from dsh_memory.readpath.index import refresh

    res = rp.search(store, ["kubernetes"], mode="ranked")
    assert [m.path for m in res.matches] == ["rollout_summaries/k8s-rollout.md"]
    assert refresh(store) == {"indexed": 0, "dropped": 0}  # nothing changed since
    new.write_text("# Helm rollout\nhelm upgrade fixed the stuck pods.\n")
    assert rp.search(store, ["kubernetes"], mode="ranked").matches == []
    assert rp.search(store, ["helm"], mode="ranked").matches[0].path == "rollout_summaries/k8s-rollout.md"
    new.unlink()
    assert rp.search(store, ["helm"], mode="ranked").matches == []
    assert refresh(store) == {"indexed": 0, "dropped": 0}


def test_ranked_path_and_pagination(store):
    for i in range(5):
        (store.notes_dir / f"n{i}.md").write_text(f"zebra note {i}\n")
    got, cursor = [], None
    while True:
        res = rp.search(store, ["zebra"], mode="ranked", max_results=2, cursor=cursor, path="extensions/ad_hoc/notes")
        got += [m.path for m in res.matches]
        cursor = res.next_cursor
        if not cursor:
            break
    assert sorted(got) == [f"extensions/ad_hoc/notes/n{i}.md" for i in range(5)]
    assert rp.search(store, ["zebra"], mode="ranked", path="skills").matches == []


# ---- add / delete -----------------------------------------------------------------------


def test_add_writes_a_new_note_and_never_overwrites(store):
    a = rp.add(store, "Always run tests with -x.", title="testing", now=NOW, cwd="/src/app")
    b = rp.add(store, "Always run tests with -x.", title="testing", now=NOW, cwd="/src/app")
    assert a.path != b.path and a.path.startswith("extensions/ad_hoc/notes/")
    assert "Always run tests with -x." in (store.root / a.path).read_text()
    assert rp.search(store, ["tests with -x"]).matches  # searchable right away
    with pytest.raises(UserInputError):
        rp.add(store, "   ")


def test_a_note_is_for_its_project_and_global_only_when_asked(store, tmp_path):
    repo = tmp_path / "app"
    (repo / ".git").mkdir(parents=True)
    note = rp.add(store, "Run `make ci` before pushing.", cwd=str(repo / "web"))
    assert note.scope == f"project {repo}"
    assert f"\nproject: {repo}\n" in (store.root / note.path).read_text()
    assert rp.add(store, "Answer in French.", cwd=str(repo), scope="global").scope == "global"
    with pytest.raises(UserInputError, match="pass cwd"):  # no project known: never global by default
        rp.add(store, "Answer in French.")
    # an adapter that knows where its caller works (the stdio MCP server): the default, and the bound
    assert rp.add(store, "x", session_cwd=str(repo / "web")).scope == f"project {repo}"
    assert rp.add(store, "x", cwd=str(repo / "lib"), session_cwd=str(repo)).scope == f"project {repo}"
    with pytest.raises(UserInputError, match="outside this session's project"):
        rp.add(store, "x", cwd=str(tmp_path / "shop"), session_cwd=str(repo))


@pytest.mark.parametrize("started_in", ["/", "home"])
def test_a_server_started_in_the_root_or_home_is_no_project_for_a_note(store, tmp_path, monkeypatch, started_in):
    """A stdio server the client started in / (or in the home directory) filed `memory_add` notes
    under project / (or ~): searchable, injected into no session. It knows no project: without
    cwd, one line saying so; with one, that project (not bounded by / or ~)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    where = "/" if started_in == "/" else str(home)
    with pytest.raises(UserInputError) as err:
        rp.add(store, "Deploy with make ship.", session_cwd=where)
    said = str(err.value)
    assert "pass cwd" in said and "start the server in" in said and "\n" not in said
    assert store.list_notes() == []
    repo = tmp_path / "app"
    (repo / ".git").mkdir(parents=True)
    assert rp.add(store, "x", cwd=str(repo), session_cwd=where).scope == f"project {repo}"
    assert rp.add(store, "x", session_cwd=str(home / "scratch")).scope == f"project {home / 'scratch'}"


def test_the_injected_instructions_say_how_memory_add_scopes_a_note(store):
    """They said "call `memory_add` with one short note": without cwd, refused where the server
    does not know the project."""
    said = rp.summary(store).instructions
    assert "memory_add` with one short note and your working directory as `cwd`" in said
    assert 'scope: "global"' in said


def test_a_notes_scope_is_its_project_in_search_and_list(store):
    """A note waiting for consolidation was labelled global and came up in every project's search."""
    local = rp.add(store, "The staging DB is blue-heron.", cwd="/src/app").path
    everywhere = rp.add(store, "Answer about blue-heron in French.", scope="global").path
    hits = {m.path: m.scope for m in rp.search(store, ["blue-heron"], cwd="/src/shop").matches}
    assert hits == {everywhere: "global"}
    hits = {m.path: m.scope for m in rp.search(store, ["blue-heron"], cwd="/src/app").matches}
    assert hits == {local: "project /src/app", everywhere: "global"}
    listed = {e.path: e.scope for e in rp.list_dir(store, "extensions/ad_hoc/notes").entries}
    assert listed == {local: "project /src/app", everywhere: "global"}


@pytest.mark.parametrize(
    "cwd",
    [
        "/src/app\n# Scope: global",  # a heading of its own in the summary
        "/src/app\u2028x",
        "/src/a\x00",
        "global",
        "src/app",
        "",
        "/" + "a" * 5000,
    ],
)
def test_add_refuses_a_cwd_that_names_no_project_with_one_line(store, cwd):
    with context_of(MemorySettings(memory_root=store.root)) as ctx:
        with pytest.raises(UserInputError) as err:
            rp.dispatch(ctx, "add", {"note": "x", "cwd": cwd})
        assert "cwd" in str(err.value) and "\n" not in str(err.value)
        assert store.list_notes() == []
        assert rp.dispatch(ctx, "add", {"note": "x", "cwd": "/src/app"}).scope == "project /src/app"


def test_delete_file_refuses_pipeline_files_and_retired(store):
    for protected in (
        "MEMORY.md",
        "memory_summary.md",
        "raw_memories.md",
        "raw_memories.archive.md",
        "rollout_summaries/.retired/old-deploy.md",
        "./MEMORY.md",
        "skills/../MEMORY.md",
    ):
        with pytest.raises(PathGuardError):
            rp.delete_file(store, protected)
    assert (store.root / "MEMORY.md").exists() and (store.retired_dir / "old-deploy.md").exists()
    assert rp.delete_file(store, "rollout_summaries/other-topic.md").deleted
    assert not (store.rollout_dir / "other-topic.md").exists()
    with pytest.raises(UserInputError):
        rp.delete_file(store, "skills/deploy")


# ---- usage telemetry --------------------------------------------------------------------


def test_usage_recorded_only_for_active_rollout_summaries(store, state):
    rp.list_dir(store, "rollout_summaries")
    rp.summary(store).injection()
    rp.read(store, "MEMORY.md", state=state, now=NOW)
    rp.read(store, "skills/deploy/SKILL.md", state=state, now=NOW)
    rp.read(store, "rollout_summaries/.retired/old-deploy.md", state=state, now=NOW)
    rp.search(store, ["legacy"], path="rollout_summaries/.retired", state=state, now=NOW)
    assert state.usage() == {}

    rp.read(store, "rollout_summaries/./fix-flaky-deploy.md", start_line=3, max_lines=3, state=state, now=NOW)
    # several hits in one file within one call: one record
    rp.search(store, ["foo_bar", "stale", "retried"], state=state, now=NOW)
    rp.search(store, ["stale lock"], mode="ranked", state=state, now=NOW)
    usage = state.usage()
    assert set(usage) == {"rollout_summaries/fix-flaky-deploy.md"}
    assert usage["rollout_summaries/fix-flaky-deploy.md"][0] == 3


def test_a_last_line_over_the_cap_comes_cut_with_nothing_to_continue_from(store):
    """memory_read's description told an agent to call again with next_start_line whenever
    `truncated` was true; a last line over the size cap comes cut (truncated) with no
    next_start_line to call with. The description says what the answer gives."""
    from dsh_memory.readpath import files
    from dsh_memory.serve.mcp_server import READ_DESC

    store.atomic_write("notes/wide.md", "head\n" + "x" * (files.MAX_READ_CHARS + 10) + "\n")
    res = rp.read(store, "notes/wide.md", start_line=2)
    assert (res.truncated, res.next_start_line, len(res.content)) == (True, None, files.MAX_READ_CHARS - 1)
    assert "If next_start_line is set" in READ_DESC and "If truncated is true, call again" not in READ_DESC
