"""The state database across versions, for real: a database each earlier schema version wrote
(MIGRATIONS is append-only, so its first k entries are exactly version k's schema; checked against
git history) is opened by today's code with nothing lost; a migration killed (SIGKILL) half-way
is completed by the next open; processes that open an old database at once all end on the
current version with one memory id.
"""

from __future__ import annotations

import ast
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_memory.storage.state import StateStore
from dsh_memory.storage.state_schema import MIGRATIONS, SCHEMA_VERSION, apply_migrations, connect
from dsh_memory.storage.turn_ends import TurnEnds

REPO = Path(__file__).resolve().parents[1]
TS = "2025-12-01T00:00:00.000000+00:00"
# A claim's log path as versions before 8 kept it: a project folder named after a cwd ending in a key.
KEYED_PATH = "/home/me/.dsh/sessions/-home-me-sk-proj-Zr8Tq2Wm5Kx9Lb3Nv7Hc4Jd1Fg6Ys0Ue/s1/session.jsonl"


def old_database(root: Path, version: int) -> Path:
    """A state database as schema `version` wrote it, with a row in every table it has."""
    db = root / ".state" / "state.sqlite3"
    conn = connect(db)
    assert apply_migrations(conn, target=version) == version
    conn.execute(
        "INSERT INTO claims (session_id, status, attempts, last_seq, parts, updated_at, started_at, error, slug, path)"
        " VALUES ('old', 'failed', 2, 55, 3, ?, ?, 'boom', 'legacy-slug', ?)",
        (TS, TS, KEYED_PATH),
    )
    conn.execute("UPDATE pipeline SET pending_consolidation=1, phase2_failures=2, last_phase2_at=?", (TS,))
    conn.execute("INSERT INTO overrides VALUES ('old', 'exclude')")
    if version >= 2:
        conn.execute("INSERT INTO usage VALUES ('rollout_summaries/a.md', 4, ?)", (TS,))
        conn.execute("INSERT INTO retired VALUES ('gone', ?)", (TS,))
    if version >= 3:
        conn.execute("UPDATE claims SET input_tokens=7, model='m', provider='p', parked=1")
    if version >= 4:
        conn.execute("UPDATE claims SET owner='elsewhere:1:2'")
    if version >= 5:
        conn.execute("INSERT INTO turn_ends VALUES ('old', 1000.5, 0)")
    conn.close()
    return db


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_database_of_each_earlier_version_is_migrated_with_nothing_lost(tmp_path: Path, version: int):
    root = tmp_path / "m"
    old_database(root, version)
    st = StateStore(root)
    assert st.schema_version() == SCHEMA_VERSION
    c = st.get_claim("old")
    assert (c.status, c.attempts, c.last_seq, c.parts, c.error, c.slug) == ("failed", 2, 55, 3, "boom", "legacy-slug")
    assert c.updated_at.isoformat(timespec="microseconds") == TS
    meta = st.get_meta()
    assert (meta.pending_consolidation, meta.phase2_failures, meta.last_phase2_failure_at) == (True, 2, None)
    assert meta.memory_id and len(meta.memory_id) == 16
    assert st.overrides() == {"old": "exclude"}
    if version >= 2:
        assert st.usage()["rollout_summaries/a.md"][0] == 4 and "gone" in st.retired()
    if version >= 3:
        assert (c.input_tokens, c.model, c.provider, c.parked) == (7, "m", "p", True)
    if version >= 4:
        assert c.owner == "elsewhere:1:2"
    if version >= 5:
        assert TurnEnds(st).pending() == 1
    assert c.path is None  # the raw log path (a key in its folder name) is gone: v8
    st.close()
    assert not [p for p in (root / ".state").iterdir() if b"Zr8Tq2Wm5Kx9" in p.read_bytes()]
    again = StateStore(root)  # a second open migrates nothing and keeps the memory id
    assert again.get_meta().memory_id == meta.memory_id
    again.close()


_KILLED_MIGRATION = """
import sys, time
from pathlib import Path
from dsh_memory.storage.state_schema import apply_migrations, connect
conn = connect(Path(sys.argv[1]))
def trace(stmt):
    if "memory_id" in stmt:  # v6, after v2..v5 ran in the same transaction
        print("midway", flush=True)
        time.sleep(600)
conn.set_trace_callback(trace)
apply_migrations(conn)
"""


def test_a_migration_killed_half_way_is_completed_by_the_next_open(tmp_path: Path):
    root = tmp_path / "m"
    db = old_database(root, 1)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", textwrap.dedent(_KILLED_MIGRATION), str(db)]
    proc = subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "midway", proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    raw = sqlite3.connect(db)  # the kill left the database as v1 wrote it
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name='usage'").fetchone()[0] == 0
    raw.close()
    st = StateStore(root)
    assert st.schema_version() == SCHEMA_VERSION
    assert st.get_claim("old").slug == "legacy-slug" and st.get_meta().memory_id
    st.close()


_OPEN = """
import sys
from pathlib import Path
from dsh_memory.storage.state import StateStore
print("ready", flush=True)
sys.stdin.readline()
st = StateStore(Path(sys.argv[1]))
print(st.schema_version(), st.get_meta().memory_id, st.get_claim("old").slug, flush=True)
"""


def test_processes_opening_an_old_database_at_once_all_migrate_it_once(tmp_path: Path):
    root = tmp_path / "m"
    old_database(root, 1)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", textwrap.dedent(_OPEN), str(root)]
    procs = [
        subprocess.Popen(
            args, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(out.split())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert {o[0] for o in outs} == {str(SCHEMA_VERSION)} and {o[2] for o in outs} == {"legacy-slug"}
    assert len({o[1] for o in outs}) == 1  # one memory id: v6 ran once


def test_migrations_are_append_only_in_git_history():
    """Every version of the schema module in history lists a prefix of today's MIGRATIONS, so the
    databases built above are the ones those versions wrote."""
    path = "dsh_memory/storage/state_schema.py"
    log = subprocess.run(["git", "log", "--format=%H", "--", path], cwd=REPO, capture_output=True, text=True)
    if log.returncode != 0 or not log.stdout.strip():
        pytest.skip("no git history here")
    for rev in log.stdout.split():
        src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True).stdout
        start = src.find("MIGRATIONS: list[str] = [")
        if start < 0:
            continue
        old = ast.literal_eval(src[src.index("= [", start) + 2 : src.index("\n]\n", start) + 2])
        assert old == MIGRATIONS[: len(old)], rev
