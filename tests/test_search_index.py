"""The ranked-search index stays fresh cheaply: a new, replaced, edited or deleted file is seen
by the next search, mostly without a stat of every file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing

import pytest

from dsh_memory import readpath as rp
from dsh_memory.readpath import changes, index
from dsh_memory.readpath._common import corpus
from dsh_memory.storage.store import MemoryStore
from tests.fs_helpers import age


@pytest.fixture()
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\n- alpha\n")
    (s.rollout_dir / "a.md").write_text("# A\nthe quokka line\n")
    (s.rollout_dir / "notes.txt").write_text("not markdown: not searched\n")
    (s.rollout_dir / ".retired").mkdir(exist_ok=True)
    (s.rollout_dir / ".retired" / "old.md").write_text("retired quokka\n")
    (s.root / "skills" / "deploy").mkdir(parents=True)
    (s.root / "skills" / "deploy" / "SKILL.md").write_text("# Deploy\nrun it\n")
    (s.notes_dir / "n.md").write_text("a note\n")
    os.symlink(s.root / "MEMORY.md", s.rollout_dir / "link.md")
    return s


def test_the_quick_listing_is_the_corpus(store):
    assert set(changes.listing(store)) == {rel for rel, _, _ in corpus(store)}


def _paths(store, q):
    return [m.path for m in rp.search(store, [q], mode="ranked").matches]


def test_new_replaced_edited_and_deleted_files_are_seen(store, monkeypatch):
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    full = []
    real = changes.diff
    monkeypatch.setattr(
        changes, "diff", lambda conn, s, quick, recent_ns: full.append(not quick) or real(conn, s, quick, recent_ns)
    )
    new = store.rollout_dir / "b.md"
    new.write_text("# B\nanother quokka\n")  # a new file: its directory changed
    assert sorted(_paths(store, "quokka")) == ["rollout_summaries/a.md", "rollout_summaries/b.md"]
    new.write_text("# B\nnow a wombat\n")  # edited in place right away: same inode, same directory
    assert _paths(store, "wombat") == ["rollout_summaries/b.md"]
    tmp = store.rollout_dir / ".b.tmp"
    tmp.write_text("# B\nreplaced by a numbat\n")
    os.replace(tmp, new)  # the store's way: a new inode
    assert _paths(store, "numbat") == ["rollout_summaries/b.md"] and _paths(store, "wombat") == []
    new.unlink()
    assert _paths(store, "numbat") == []
    assert full and not any(full)  # all of it without a full diff (a stat of every file)


def test_a_full_diff_still_runs_now_and_then(store, monkeypatch):
    _paths(store, "quokka")
    monkeypatch.setattr(index, "FULL_SCAN_SECONDS", 0.0)
    f = store.rollout_dir / "a.md"
    st = f.stat()
    f.write_text("# A\nthe dingo line\n")  # in place, long after it was indexed: only a full diff sees it
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert _paths(store, "dingo") == ["rollout_summaries/a.md"]


def _garbled_pages(data: bytes, page: int = 4096) -> bytes:
    """`data` with every page but the first overwritten past its 8-byte header: the file header
    still reads, the tables do not (SQLite: "database disk image is malformed")."""
    out = bytearray(data)
    for at in range(page, len(out), page):
        out[at + 8 : at + page] = bytes(range(256)) * (page // 256 - 1) + bytes(range(248))
    return bytes(out)


@pytest.mark.parametrize("damage", ["garbage", "cut", "pages"])
def test_a_damaged_index_is_rebuilt_not_an_error(store, damage):
    """The index is a cache of the memory files: bytes that are no database (a disk error, a
    copy cut short) or pages SQLite finds malformed when a search reads them are rebuilt by that
    search, never a traceback (damaged pages were one on every ranked search)."""
    path = store.state_dir / index.INDEX_NAME
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    index._local.conns.pop(str(path)).close()  # as a new process would open it
    data = path.read_bytes()
    cut = data[: len(data) // 2]
    path.write_bytes({"garbage": os.urandom(5000), "cut": cut, "pages": _garbled_pages(data)}[damage])
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    assert _paths(store, "line") == ["rollout_summaries/a.md"]


def test_an_index_that_cannot_be_opened_is_one_error(store):
    """A folder where the index file goes: no traceback, an error naming it (not deleted)."""
    from dsh_memory.errors import DshMemoryError

    path = store.state_dir / index.INDEX_NAME
    path.mkdir(parents=True)
    with pytest.raises(DshMemoryError, match="search_index.sqlite3"):
        _paths(store, "quokka")
    assert path.is_dir()


def test_an_index_deleted_under_a_running_process_is_built_again_at_once(store):
    """A server searched, then its index files were deleted (by hand, or by another process that
    found them damaged): the next search opened a new, empty index, but the server still took the
    memory's folders as scanned and answered "no matches" until its next full diff."""
    age(store.root)  # folders not modified for an hour: a scan trusts them
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    for p in store.state_dir.glob(f"{index.INDEX_NAME}*"):
        p.unlink()
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]


HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""


def test_an_index_another_process_holds_is_one_error_then_searched_again(store, monkeypatch):
    """Another process updating the index longer than an update waits for it: one error naming
    the index (it was a "database is locked" traceback); once it lets go, the search runs."""
    from dsh_memory.errors import DshMemoryError

    path = store.state_dir / index.INDEX_NAME
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    index._local.conns.pop(str(path)).close()  # as a new process would open it
    monkeypatch.setattr(index, "LOCK_WAIT_SECONDS", 0.2)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        (store.rollout_dir / "b.md").write_text("# B\nanother quokka\n")  # the search has to update the index
        with pytest.raises(DshMemoryError, match=r"search_index\.sqlite3 \(database is locked\)"):
            _paths(store, "quokka")
    finally:
        holder.communicate(b"", timeout=60)
    assert sorted(_paths(store, "quokka")) == ["rollout_summaries/a.md", "rollout_summaries/b.md"]


def test_an_edit_within_the_files_mtime_tick_and_of_the_same_size_is_seen(store, monkeypatch):
    """A file system whose clock ticks coarsely (1 or 2 s: FAT, HFS+, network mounts) gives an
    edit in place right after the index read a file the mtime it had then: of the same size, the
    file looked unchanged and its old words were searched for good. (The mtime is set ahead of
    the clock here, so the edit is within its tick however slow the machine is.)"""
    monkeypatch.setattr(index, "FULL_SCAN_SECONDS", 0.0)  # a full diff (a stat per file) each search
    f = store.rollout_dir / "a.md"
    tick = time.time_ns() + 60 * 10**9
    f.write_text("# A\nthe quokka line\n")
    os.utime(f, ns=(tick, tick))
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    with open(f, "r+") as h:  # in place: the same inode, the same size
        h.write("# A\nthe dingos line\n")
    os.utime(f, ns=(tick, tick))
    assert _paths(store, "dingos") == ["rollout_summaries/a.md"]
    assert _paths(store, "quokka") == []


def test_an_edit_within_the_files_mtime_tick_is_seen_by_the_next_cli_run(store):
    """The same, through the CLI: each run is a new process, its index the one on disk."""
    f = store.rollout_dir / "a.md"
    tick = time.time_ns() + 60 * 10**9  # ahead of the clock: within its tick however slow the runs are
    os.utime(f, ns=(tick, tick))
    # words only: the semantic half reads back every section of so small a memory, stale or not
    env = {**os.environ, "DSH_MEMORY_ROOT": str(store.root), "DSH_MEMORY_SEMANTIC_SEARCH": "off"}

    def cli_paths(q: str) -> list[str]:
        cmd = [sys.executable, "-m", "dsh_memory.cli", "search", q, "--mode", "ranked", "--json"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return [m["path"] for m in json.loads(out.stdout)["matches"]]

    assert cli_paths("quokka") == ["rollout_summaries/a.md"]
    with open(f, "r+") as h:
        h.write("# A\nthe dingos line\n")
    os.utime(f, ns=(tick, tick))
    assert cli_paths("dingos") == ["rollout_summaries/a.md"]


@pytest.mark.parametrize("swap", ["link", "fifo"])
def test_a_file_swapped_for_a_link_or_fifo_after_the_update_is_not_read(store, tmp_path, monkeypatch, swap):
    """Another process swaps a memory file for a link out of the root, or a FIFO, between the
    update of the index and the read of its lines: the link was followed (the outside file's text
    came back as the memory file's) and a FIFO would hang the search. Neither is read now."""
    f = store.rollout_dir / "a.md"
    outside = tmp_path / "outside.md"
    outside.write_text("# A\nquokka: the outside secret\n")
    real = index.refresh

    def refresh_then_swap(*args, **kwargs):
        out = real(*args, **kwargs)
        f.unlink()
        os.symlink(outside, f) if swap == "link" else os.mkfifo(f)
        return out

    monkeypatch.setattr(index, "refresh", refresh_then_swap)
    done: list = []
    t = threading.Thread(target=lambda: done.append(rp.search(store, ["quokka"], mode="ranked")), daemon=True)
    t.start()
    t.join(30)
    hung = t.is_alive()
    if hung:  # waiting for a writer to the FIFO: give it one so the thread ends
        with open(f, "w") as w:
            w.write("unblocked\n")
        t.join(30)
    assert not hung
    assert done and done[0].matches == []  # nothing of the outside file


def test_a_server_updates_the_index_another_process_built_in_place_of_the_old_one(store):
    """The index deleted and built again by another process (the CLI, finding it damaged): a
    server went on updating the deleted file it had open, an index of its own apart from the one
    on disk (both taking rows of the one vector file). It updates the one on disk now."""
    path = store.state_dir / index.INDEX_NAME
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]
    for p in store.state_dir.glob(f"{index.INDEX_NAME}*"):
        p.unlink()
    env = {**os.environ, "DSH_MEMORY_ROOT": str(store.root)}
    cmd = [sys.executable, "-m", "dsh_memory.cli", "search", "quokka", "--mode", "ranked", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["matches"], out.stderr
    (store.rollout_dir / "b.md").write_text("# B\nanother quokka\n")
    assert sorted(_paths(store, "quokka")) == ["rollout_summaries/a.md", "rollout_summaries/b.md"]
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as disk:
        assert disk.execute("SELECT count(*) FROM files WHERE path = 'rollout_summaries/b.md'").fetchone() == (1,)


def _unprivileged() -> list[str]:
    """The prefix that runs a command without root's permission to read every file."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no file is unreadable")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("mode", ["ranked", "any"])
def test_a_memory_file_that_cannot_be_read_is_skipped_not_an_error(store, mode):
    """One memory file the searching user may not read (another user's, mode 600) made every
    ranked search fail ("error: Permission denied: …"), and every line search that reached it.
    It is skipped and named, like a file that is not UTF-8, and read once it can be."""
    f = store.rollout_dir / "locked.md"
    f.write_text("# L\nthe locked quokka\n")
    f.chmod(0)
    env = {**os.environ, "DSH_MEMORY_ROOT": str(store.root)}
    cmd = [*_unprivileged(), sys.executable, "-m", "dsh_memory.cli", "search", "quokka", "--mode", mode, "--json"]

    def run() -> dict:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    first = run()
    assert [m["path"] for m in first["matches"]] == ["rollout_summaries/a.md"]
    assert first["skipped"] == "skipped 1 file: rollout_summaries/locked.md (not readable)"
    f.chmod(0o644)  # a new mode: no new mtime, size or inode
    second = run()
    assert sorted(m["path"] for m in second["matches"]) == ["rollout_summaries/a.md", "rollout_summaries/locked.md"]
    assert second["skipped"] is None


def test_a_new_index_made_by_two_processes_at_once_keeps_what_the_first_indexed(store, monkeypatch):
    """Two processes (threads here: each has its own connection) open a new index at once and
    both find it without tables: the second made the tables after the first had made and filled
    them, dropping its rows; the first then answered "no matches" until its next full diff."""
    path = store.state_dir / index.INDEX_NAME
    real_open = index._open
    b_waits, a_done = threading.Event(), threading.Event()

    def pause_before_the_write_lock(sql: str) -> None:
        if sql.lstrip().upper().startswith("BEGIN IMMEDIATE") and not b_waits.is_set():
            b_waits.set()  # B has read the schema version (none yet): A builds the index now
            a_done.wait(60)

    def open_traced(p):
        conn = real_open(p)
        if threading.current_thread() is tb:
            conn.set_trace_callback(pause_before_the_write_lock)
        return conn

    monkeypatch.setattr(index, "_open", open_traced)
    errors: list[BaseException] = []

    def b() -> None:
        try:
            index._connect(store).set_trace_callback(None)
        except BaseException as exc:
            errors.append(exc)

    tb = threading.Thread(target=b, daemon=True)
    tb.start()
    assert b_waits.wait(60)
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]  # A: the tables made, and filled
    a_done.set()
    tb.join(60)
    assert not tb.is_alive() and not errors
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as disk:
        assert disk.execute("SELECT count(*) FROM files").fetchone()[0] > 0
    assert _paths(store, "quokka") == ["rollout_summaries/a.md"]


@pytest.mark.parametrize("index_is", ["current", "stale", "missing"])
def test_a_read_only_memory_root_is_searched_without_writing_to_it(store, tmp_path, index_is):
    """A memory root this user cannot write (a read-only mount, another user's memory): every
    ranked search failed ("attempt to write a readonly database"), even with the index current,
    and so did a search or read that recorded usage. The index is searched as it is, or brought up
    to date in a private copy; usage is not recorded; nothing in the root is written."""
    env = {**os.environ, "DSH_MEMORY_ROOT": str(store.root), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()

    def run(*args: str) -> dict:
        cmd = [*_unprivileged(), sys.executable, "-m", "dsh_memory.cli", *args, "--json"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    run("search", "quokka", "--mode", "ranked")  # the index and the state database made
    if index_is == "stale":
        (store.rollout_dir / "b.md").write_text("# B\nanother quokka\n")
    elif index_is == "missing":
        for p in store.state_dir.glob("search_*"):
            p.unlink()
    want = ["rollout_summaries/a.md"] + (["rollout_summaries/b.md"] if index_is == "stale" else [])
    files = sorted(p for p in store.root.rglob("*"))
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in files}
    for p in files:
        p.chmod(p.stat().st_mode & ~0o222)
    store.root.chmod(0o555)
    try:
        assert sorted(m["path"] for m in run("search", "quokka", "--mode", "ranked")["matches"]) == want
        assert [m["path"] for m in run("search", "quokka")["matches"]] == want  # usage not recorded
        assert run("read", "rollout_summaries/a.md")["content"]
    finally:
        for p in [store.root, *files]:
            p.chmod(p.stat().st_mode | 0o200)
    assert sorted(store.root.rglob("*")) == files
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in files} == before
    assert list((tmp_path / "tmp").iterdir()) == []  # the private copy removed at exit
