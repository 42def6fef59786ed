"""MemoryStore on real files: path guard, atomic writes (incl. SIGKILL mid-loop), raw memories,
rollout summaries, ad hoc notes. Multi-process tests start real child interpreters."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_memory.errors import PathGuardError, UserInputError
from dsh_memory.storage.store import MemoryStore
from dsh_memory.storage.store_format import SLUG_RE, RawBlock, parse_front_matter, parse_raw_blocks, slugify

REPO = Path(__file__).resolve().parents[1]
FAKE_KEY = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "memories")
    s.ensure_layout()
    return s


def _child(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- layout ------------------------------------------------------------------------------------
def test_layout_paths(store: MemoryStore):
    r = store.root
    assert store.summary_path == r / "memory_summary.md"
    assert store.memory_md_path == r / "MEMORY.md"
    assert store.raw_path == r / "raw_memories.md"
    assert store.raw_archive_path == r / "raw_memories.archive.md"
    assert store.rollout_dir == r / "rollout_summaries"
    assert store.retired_dir == r / "rollout_summaries" / ".retired"
    assert store.skills_dir == r / "skills"
    assert store.notes_dir == r / "extensions" / "ad_hoc" / "notes"
    assert store.notes_archive_dir == r / "extensions" / "ad_hoc" / "archive"
    assert store.state_dir == r / ".state"
    for d in (
        store.rollout_dir,
        store.retired_dir,
        store.skills_dir,
        store.notes_dir,
        store.notes_archive_dir,
        store.state_dir,
    ):
        assert d.is_dir()


# -- path guard --------------------------------------------------------------------------------
@pytest.fixture
def hostile_links(store: MemoryStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside")
    os.symlink(outside / "secret.txt", store.root / "link.md")
    os.symlink(outside, store.root / "linkdir")
    os.symlink(outside, store.skills_dir / "evil")


@pytest.mark.parametrize(
    "rel",
    [
        "",
        ".",
        "./",
        "../x",
        "a/../../x",
        "a/..",
        "/etc/passwd",
        "a\x00b",
        "..\\x",
        "a\\..\\..\\x",
        "link.md",
        "linkdir/secret.txt",
        "linkdir",
        "skills/evil/SKILL.md",
        ".state/state.sqlite3",
        ".state",
        "./.state/raw.lock",
        ".STATE/x",
        "C:/x",
    ],
)
def test_path_guard_refuses(store: MemoryStore, hostile_links: None, rel: str):
    with pytest.raises(PathGuardError):
        store.resolve(rel)
    with pytest.raises(PathGuardError):
        store.atomic_write(rel, "x")
    with pytest.raises(PathGuardError):
        store.read_text(rel)
    assert (store.root.parent / "outside" / "secret.txt").read_text() == "outside"


def test_path_guard_is_a_user_input_error(store: MemoryStore):
    with pytest.raises(UserInputError, match=r"\.\."):
        store.resolve("../x")


@pytest.mark.parametrize(
    "rel, expected",
    [
        ("MEMORY.md", "MEMORY.md"),
        ("./MEMORY.md", "MEMORY.md"),
        ("rollout_summaries/a.md", "rollout_summaries/a.md"),
        ("rollout_summaries//./a.md", "rollout_summaries/a.md"),
        ("skills/x/SKILL.md", "skills/x/SKILL.md"),
        ("new/dir/file.md", "new/dir/file.md"),
        ("state/x.md", "state/x.md"),
        ("notes..md", "notes..md"),
    ],
)
def test_path_guard_accepts(store: MemoryStore, hostile_links: None, rel: str, expected: str):
    p = store.resolve(rel)
    assert p == store.root / expected
    store.atomic_write(rel, "ok\n")
    assert store.read_text(rel) == "ok\n"


# -- atomic writes -----------------------------------------------------------------------------
def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_atomic_write_roundtrip_no_temp_files(store: MemoryStore):
    text = "line one\r\nline two\n\tünïcödé\n"
    path = store.atomic_write("deep/nested/file.md", text)
    assert path == store.root / "deep/nested/file.md"
    assert store.read_text("deep/nested/file.md") == text
    store.atomic_write("deep/nested/file.md", "replaced")
    assert path.read_text() == "replaced"
    assert _temp_files(store.root) == []


def test_atomic_write_redacts_secrets(store: MemoryStore):
    path = store.atomic_write("MEMORY.md", f"use key {FAKE_KEY} for the API\n")
    on_disk = path.read_bytes()
    assert FAKE_KEY.encode() not in on_disk
    assert b"use key" in on_disk and b"for the API" in on_disk


def test_atomic_write_survives_sigkill(store: MemoryStore):
    a, b = "A" * 300_000 + "\nend-A\n", "B" * 500_000 + "\nend-B\n"
    store.atomic_write("big.md", a)
    child = _child(
        """
        import sys
        from pathlib import Path
        from dsh_memory.storage.store import MemoryStore
        s = MemoryStore(Path(sys.argv[1]))
        a, b = "A" * 300_000 + "\\nend-A\\n", "B" * 500_000 + "\\nend-B\\n"
        print("ready", flush=True)
        i = 0
        while True:
            s.atomic_write("big.md", a if i % 2 else b)
            i += 1
    """,
        str(store.root),
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        seen: set[str] = set()
        reads = 0
        deadline = time.monotonic() + 60  # loop bound only; nothing asserts on timing
        # Read while the child rewrites: every read must be complete, old or new.
        while (len(seen) < 2 or reads < 100) and time.monotonic() < deadline:
            content = (store.root / "big.md").read_text()
            assert content in (a, b), f"torn read: {len(content)} chars"
            seen.add(content[0])
            reads += 1
        assert seen == {"A", "B"}  # the child really was rewriting the file
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert (store.root / "big.md").read_text() in (a, b)
    # A kill mid-write may leave a temp file behind, but never a visible .md other than ours.
    assert sorted(p.name for p in store.root.glob("*.md")) == ["big.md"]


def test_a_fifo_in_a_memory_files_place_is_refused_never_waited_on(store: MemoryStore):
    """A plain open of a FIFO blocks until a writer comes: `forget --project`, `status`, Phase 1
    and Phase 2 hung on one named MEMORY.md, raw_memories.md or a recap's name."""
    for rel in ("MEMORY.md", "raw_memories.md", "rollout_summaries/taken.md"):
        os.mkfifo(store.root / rel)
    child = _child(
        """
        import sys
        from dsh_memory.consolidation.skill_inventory import read_optional
        from dsh_memory.errors import UserInputError
        from dsh_memory.storage.store import MemoryStore
        s = MemoryStore(sys.argv[1])
        calls = (
            lambda: s.read_text("MEMORY.md"),
            s.read_raw_blocks,
            lambda: s.write_rollout_summary("taken", {"session_id": "s1"}, "a recap"),
        )
        for call in calls:
            try:
                call()
            except UserInputError as exc:
                print("refused:", exc)
        print("optional:", read_optional(s.memory_md_path))
    """,
        str(store.root),
    )
    try:
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out.count("refused: not a regular file") == 3 and "optional: None" in out, (out, err)


def test_a_lock_held_too_long_is_one_error_not_a_traceback(store: MemoryStore):
    """A stopped or stuck process holding a store lock (Ctrl-Z on `import`): the next writer
    gave up with filelock's Timeout, a traceback at the CLI; now AlreadyRunning (exit 5)."""
    from dsh_memory.storage.locks import AlreadyRunning

    child = _child(
        """
        import sys, threading
        from dsh_memory.storage.store import MemoryStore
        with MemoryStore(sys.argv[1]).lock("imports"):
            print("held", flush=True)
            threading.Event().wait()  # until killed
    """,
        str(store.root),
    )
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning, match=r"imports\.lock is still held by another process") as exc:
            with store.lock("imports", timeout=0.2):
                pass
        assert exc.value.exit_code == 5
    finally:
        child.kill()
        child.wait()
    with store.lock("imports", timeout=30):  # released with its holder
        pass


# -- raw memories ------------------------------------------------------------------------------
HOSTILE_BODIES = [
    "plain body",
    "",
    "\n\nleading and trailing newlines\n\n",
    'looks like a marker:\n<!-- dsh-memory:raw {"id":"evil","len":0} -->\nafter',
    "## heading\n# Raw Memories\n---\n-->\n<!--",
    "windows\r\nline\rendings\r\n",
    "unicode ✓ 日本語 \u2028 sep \x00 nul \x1b[31m",
    "x" * 100_000,
]


def test_raw_roundtrip_hostile_bodies(store: MemoryStore):
    blocks = [
        RawBlock(
            id=f"id-{i}",
            session_id=f"sess-{i}",
            slug=f"slug-{i}",
            source="codex",
            cwd=None if i % 2 else f"/home/u/p{i} -->\n<!-- x",
            updated_at=f"2026-02-0{i % 9 + 1}T00:00:00+00:00",
            body=body,
        )
        for i, body in enumerate(HOSTILE_BODIES)
    ]
    for b in blocks:
        assert store.append_raw(b) == b.id
    text = store.raw_path.read_text(encoding="utf-8")
    assert text.startswith("# Raw Memories\n")
    assert "## slug-0 · sess-0" in text  # human-readable heading per block
    # … as written, but for the control characters a memory file never holds (NUL, ESC)
    assert store.read_raw_blocks() == [replace(b, body=re.sub("[\x00\x1b]", "", b.body)) for b in blocks]
    # an injected marker inside a body never becomes its own block
    assert [b.id for b in store.read_raw_blocks()] == [f"id-{i}" for i in range(len(HOSTILE_BODIES))]


def test_raw_append_redacts_and_is_idempotent(store: MemoryStore):
    b = RawBlock(
        id="",
        session_id="s",
        slug="Some Slug",
        source="dsh",
        cwd="/w",
        updated_at="2026-01-01T00:00:00+00:00",
        body=f"token {FAKE_KEY}",
    )
    id1 = store.append_raw(b)
    id2 = store.append_raw(b)
    assert id1 == id2 and id1
    (got,) = store.read_raw_blocks()
    assert FAKE_KEY not in got.body and got.body.startswith("token ")
    assert got.slug == "some-slug"
    assert FAKE_KEY not in store.raw_path.read_text()


def test_raw_hand_edited_body_still_parses():
    text = (
        '# Raw Memories\n\n## a · s\n<!-- dsh-memory:raw {"id":"a","len":3,"session_id":"s","sha":"0"} -->\n'
        'edited by hand, longer now\n\n## b · t\n<!-- dsh-memory:raw {"id":"b","len":2,"session_id":"t"} -->\nok\n'
    )
    blocks = parse_raw_blocks(text)
    assert [(b.id, b.body) for b in blocks] == [("a", "edited by hand, longer now"), ("b", "ok")]


def test_raw_marker_nested_too_deep_is_skipped_like_any_bad_marker():
    deep = '{"x": ' + "[" * 100_000 + "}"
    text = (
        f"# Raw Memories\n\n<!-- dsh-memory:raw {deep} -->\njunk\n\n## b · t\n"
        '<!-- dsh-memory:raw {"id":"b","len":2,"session_id":"t"} -->\nok\n'
    )
    assert [(b.id, b.body) for b in parse_raw_blocks(text)] == [("b", "ok")]


def test_front_matter_part_that_is_not_an_ascii_number_stays_text():
    """A hand edit `part: ²` (a digit to str.isdigit, not to int) is read as text, not a crash."""
    assert parse_front_matter("---\npart: ²\n---\nbody")[0] == {"part": "²"}
    assert parse_front_matter("---\npart: 12\n---\nbody")[0] == {"part": 12}


def test_raw_concurrent_append_from_processes(store: MemoryStore):
    n_procs, per_proc = 4, 15
    code = """
        import sys
        from pathlib import Path
        from dsh_memory.storage.store import MemoryStore
        from dsh_memory.storage.store_format import RawBlock
        s = MemoryStore(Path(sys.argv[1]))
        w = sys.argv[2]
        for i in range(int(sys.argv[3])):
            s.append_raw(RawBlock(id=f"{w}-{i}", session_id=w, slug=f"s-{w}", source="dsh", cwd=None,
                                  updated_at="2026-01-01", body=f"body {w} {i}\\n" * 20))
    """
    procs = [_child(code, str(store.root), f"w{k}", str(per_proc)) for k in range(n_procs)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    ids = [b.id for b in store.read_raw_blocks()]
    assert sorted(ids) == sorted(f"w{k}-{i}" for k in range(n_procs) for i in range(per_proc))
    for b in store.read_raw_blocks():
        w, i = b.id.split("-")
        assert b.body == f"body {w} {i}\n" * 20


def test_archive_moves_only_given_ids(store: MemoryStore):
    def blk(i: int) -> RawBlock:
        return RawBlock(
            id=f"b{i}",
            session_id=f"s{i}",
            slug=f"x{i}",
            source="claude",
            cwd="/c",
            updated_at="2026-01-01",
            body=f"body {i}",
        )

    for i in range(5):
        store.append_raw(blk(i))
    assert store.archive_raw_blocks({"b1", "b3", "nope"}) == 2
    store.append_raw(blk(5))  # Phase 1 keeps appending
    assert [b.id for b in store.read_raw_blocks()] == ["b0", "b2", "b4", "b5"]
    assert [b.id for b in store.read_raw_archive_blocks()] == ["b1", "b3"]
    assert store.archive_raw_blocks({"b0"}) == 1
    assert store.archive_raw_blocks({"b0"}) == 0
    assert store.archive_raw_blocks(set()) == 0
    archived = store.read_raw_archive_blocks()
    assert [b.id for b in archived] == ["b1", "b3", "b0"]  # appended at the end
    assert archived[-1] == blk(0)
    assert store.raw_archive_path.read_text().startswith("# Raw Memories (archive)\n")


def test_the_raw_archive_keeps_its_newest_blocks_only(store: MemoryStore):
    """raw_memories.archive.md was only ever added to, read and written whole by every
    consolidation (and read whole by the scope guard): it keeps its newest RAW_ARCHIVE_MAX_CHARS,
    in whole blocks, the oldest going first."""
    from dsh_memory.storage.store_format import RAW_ARCHIVE_MAX_CHARS, RAW_ARCHIVE_TITLE, serialize_raw_block

    def blk(i: int) -> RawBlock:
        return RawBlock(
            id=f"b{i}", session_id=f"s{i}", slug=f"x{i}", source="dsh", cwd="/c", updated_at="", body="y" * 5000
        )

    n = RAW_ARCHIVE_MAX_CHARS // 5000 + 50
    old = "".join(serialize_raw_block(blk(i)) for i in range(n))
    store.raw_archive_path.write_text(RAW_ARCHIVE_TITLE + old)
    store.append_raw(blk(n))
    assert store.archive_raw_blocks({f"b{n}"}) == 1
    text = store.raw_archive_path.read_text()
    ids = [b.id for b in store.read_raw_archive_blocks()]
    assert len(text) <= RAW_ARCHIVE_MAX_CHARS and text.startswith(RAW_ARCHIVE_TITLE)
    assert ids[-2:] == [f"b{n - 1}", f"b{n}"] and "b0" not in ids and len(ids) > n - 100


# -- rollout summaries -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Fix the Build!",
        "../../etc/passwd",
        "a" * 300,
        "UPPER_case.md",
        "-x-",
        "x\x00y/z",
        "a-" * 60,
        "Ünïcödé 42",
    ],
)
def test_slugify_always_valid(text: str):
    s = slugify(text)
    assert SLUG_RE.fullmatch(s), s
    assert slugify(s) == s


@pytest.mark.parametrize("text", ["", "---", "日本語", "../..", None])
def test_slugify_empty_when_nothing_usable(text):
    assert slugify(text) == ""


def test_slugify_examples():
    assert slugify("Fix the Build!") == "fix-the-build"
    assert slugify("../../etc/passwd") == "etc-passwd"
    assert slugify("Café déjà vu") == "cafe-deja-vu"


def _prov(session: str, part: int = 1, **kw) -> dict:
    return {
        "session_id": session,
        "source": "codex",
        "cwd": "/home/u/proj",
        "path": "/logs/x.jsonl",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "part": part,
        "extracted_at": "2026-01-02T00:00:00+00:00",
        "model": "deepseek-chat",
        "provider": "deepseek",
        **kw,
    }


def test_rollout_summary_provenance_roundtrip(store: MemoryStore):
    prov = _prov("s1", cwd='/weird: "dir"\n---\nsession_id: forged')
    slug = store.write_rollout_summary("Fix the Build", prov, f"# Recap\n\nused {FAKE_KEY}\n")
    assert slug == "fix-the-build"
    (info,) = store.list_rollout_summaries()
    assert info.slug == slug and info.rel == "rollout_summaries/fix-the-build.md"
    assert info.provenance == prov
    assert info.mtime.tzinfo is not None
    text = (store.rollout_dir / "fix-the-build.md").read_text()
    assert text.startswith("---\nsession_id: s1\n")
    assert FAKE_KEY not in text and "# Recap" in text
    fields, body = parse_front_matter(store.read_text(f"rollout_summaries/{slug}.md"))
    assert fields == prov and body.strip().startswith("# Recap")


def test_a_key_in_the_session_logs_folder_name_never_reaches_the_provenance(store: MemoryStore):
    """A DSH project folder named after a cwd that ends in a key (`-home-me-sk-proj-…`): the key
    sits right after a `-`, which the key rule missed, so the log's path kept it in the recap."""
    folder = "-home-me-" + FAKE_KEY.replace("sk-", "sk-proj-")
    prov = _prov("s1", path=f"/home/me/.dsh/projects/{folder}/2026-01-02/session.jsonl")
    slug = store.write_rollout_summary("fix", prov, "a recap")
    text = (store.rollout_dir / f"{slug}.md").read_text()
    assert FAKE_KEY[3:] not in text and "projects/-home-me-[REDACTED:api_key]/2026-01-02/session.jsonl" in text, text


def test_rollout_slug_uniqueness(store: MemoryStore):
    assert store.write_rollout_summary("fix", _prov("s1"), "one") == "fix"
    assert store.write_rollout_summary("fix", _prov("s2"), "two") == "fix-2"
    assert store.write_rollout_summary("fix", _prov("s1", part=2), "one p2") == "fix-3"
    assert store.write_rollout_summary("FIX", _prov("s1"), "one again") == "fix"  # same session+part: rewrite
    assert store.write_rollout_summary("fix", _prov("s2"), "two again") == "fix-2"
    assert store.write_rollout_summary("日本語", _prov("j"), "no ascii") == "summary"  # never an empty name
    long = "x" * 100
    assert store.write_rollout_summary(long, _prov("a"), "a") == "x" * 80
    second = store.write_rollout_summary(long, _prov("b"), "b")
    assert second == "x" * 78 + "-2" and SLUG_RE.fullmatch(second)
    assert [i.slug for i in store.list_rollout_summaries()] == sorted(
        ["fix", "fix-2", "fix-3", "summary", "x" * 80, second]
    )
    assert "one again" in (store.rollout_dir / "fix.md").read_text()
    assert _temp_files(store.root) == []


def test_retire_summary(store: MemoryStore):
    store.write_rollout_summary("old", _prov("s1"), "old recap")
    store.write_rollout_summary("keep", _prov("s2"), "kept")
    assert store.retire_summary("old") is True
    assert store.retire_summary("old") is False  # missing: no error
    assert store.retire_summary("../MEMORY") is False
    assert store.retire_summary("never-existed") is False
    assert store.retired_slugs() == ["old"]
    assert [i.slug for i in store.list_rollout_summaries()] == ["keep"]
    assert "old recap" in (store.retired_dir / "old.md").read_text()
    # a new session cannot take a retired slug (it would collide in .retired/ later)
    assert store.write_rollout_summary("old", _prov("s3"), "new") == "old-2"


# -- ad hoc notes ------------------------------------------------------------------------------
def test_notes_never_overwrite(store: MemoryStore):
    now = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    rels = [store.add_note(f"note {i}", title="Same Title", now=now) for i in range(3)]
    assert rels[0] == "extensions/ad_hoc/notes/20260304T050607Z-same-title.md"
    assert len(set(rels)) == 3
    assert store.list_notes() == sorted(rels)
    for i, rel in enumerate(rels):
        assert f"note {i}" in store.read_text(rel)
    # a file that appears under the next name is not clobbered either
    (store.notes_dir / "20260304T050607Z-same-title-4.md").write_text("someone else's")
    rel5 = store.add_note("five", title="Same Title", now=now)
    assert rel5.endswith("-same-title-5.md")
    assert (store.notes_dir / "20260304T050607Z-same-title-4.md").read_text() == "someone else's"
    assert _temp_files(store.root) == []


def test_note_redacts_and_rejects_empty(store: MemoryStore):
    rel = store.add_note(f"my key is {FAKE_KEY}")
    assert FAKE_KEY not in store.read_text(rel)
    titled = store.add_note("the deploy key", title=f"key {FAKE_KEY}")
    for name in (rel, titled):  # not in the file name either (a slug lowercases it)
        assert FAKE_KEY.lower() not in name.lower() and FAKE_KEY[3:].lower() not in name.lower()
    assert SLUG_RE.fullmatch(rel.split("Z-", 1)[1][:-3])
    with pytest.raises(UserInputError):
        store.add_note("   \n")
    assert store.add_note("日本語のメモ", now=datetime(2026, 1, 1, tzinfo=UTC)).endswith("Z-note.md")


def test_archive_notes(store: MemoryStore):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    a = store.add_note("a", title="a", now=now)
    b = store.add_note("b", title="b", now=now)
    assert store.archive_notes([a]) == 1
    assert store.list_notes() == [b]
    assert (store.notes_archive_dir / Path(a).name).read_text().endswith("a\n")
    a2 = store.add_note("a again", title="a", now=now)  # same name as the archived one
    assert store.archive_notes([a2, "extensions/ad_hoc/notes/missing.md"]) == 1
    assert sorted(p.name for p in store.notes_archive_dir.iterdir()) == [
        "20260101T000000Z-a-2.md",
        "20260101T000000Z-a.md",
    ]
    with pytest.raises(PathGuardError):
        store.archive_notes(["MEMORY.md"])
    with pytest.raises(PathGuardError):
        store.archive_notes(["../x.md"])


def test_the_notes_archive_keeps_its_newest_notes_only(store: MemoryStore):
    """extensions/ad_hoc/archive/ took every note a consolidation read, forever: it keeps the
    newest MAX_ARCHIVED_NOTES (by time written), the oldest going first; the notes waiting stay."""
    from dsh_memory.storage.store_format import MAX_ARCHIVED_NOTES

    store.notes_archive_dir.mkdir(parents=True, exist_ok=True)
    for i in range(MAX_ARCHIVED_NOTES):
        path = store.notes_archive_dir / f"2020{i:08d}-old.md"
        path.write_text(f"old {i}\n")
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))
    waiting = store.add_note("still waiting")
    fresh = store.add_note("just read")
    assert store.archive_notes([fresh]) == 1
    kept = sorted(p.name for p in store.notes_archive_dir.iterdir())
    assert len(kept) == MAX_ARCHIVED_NOTES and Path(fresh).name in kept
    assert "202000000000-old.md" not in kept and "202000000001-old.md" in kept
    assert store.list_notes() == [waiting]


def test_missing_file_is_not_found(store: MemoryStore):
    from dsh_memory.errors import NotFoundError

    with pytest.raises(NotFoundError):
        store.read_text("MEMORY.md")
    with pytest.raises(FileNotFoundError):
        store.read_text("rollout_summaries/nope.md")
    assert store.read_raw_blocks() == [] and store.list_notes() == [] and store.list_rollout_summaries() == []


def test_a_sessions_control_characters_never_reach_a_memory_file(store: MemoryStore):
    """Phase 1 writes what sessions said (a colored test output, a terminal's escape sequence):
    raw memories, recaps and notes hold no C0 (but tab and line feed), DEL or C1 character (U+009B
    is CSI), as Phase 2's writes do not."""
    hostile = "red \x1b[31mFAIL\x1b[0m and \x9b2J csi, bell \x07, del \x7f, nel \x85\tkept\nline two"
    b = RawBlock(id="", session_id="s", slug="x", source="dsh", cwd="/w\x1b[1m", updated_at="2026-01-01", body=hostile)
    store.append_raw(b)
    store.write_rollout_summary("Colors", _prov("s1"), f"# Recap\n\n{hostile}\n")
    store.add_note(hostile)
    for path in (store.raw_path, store.rollout_dir / "colors.md", *store.notes_dir.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        assert "red [31mFAIL[0m and 2J csi, bell , del , nel \tkept\nline two" in text, path
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), path
