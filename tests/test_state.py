"""StateStore on a real SQLite file: claims lifecycle, backoff, parking, stale recovery,
cross-process single winner, migrations, pipeline globals, overrides, usage, retired."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_memory.errors import ConfigError
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.state_schema import (
    MAX_ERROR_CHARS,
    MIGRATIONS,
    SCHEMA_VERSION,
    STALE_ERROR,
    apply_migrations,
    connect,
)

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 2, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def st(tmp_path: Path):
    s = StateStore(tmp_path / "memories")
    yield s
    s.close()


def test_db_location_and_wal(st: StateStore, tmp_path: Path):
    assert st.get_claim("nope") is None
    assert st.db_path == tmp_path / "memories" / ".state" / "state.sqlite3"
    assert st.db_path.is_file()
    conn = sqlite3.connect(st.db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


def test_a_claim_keeps_its_logs_path_redacted(st: StateStore):
    """A DSH project folder is named after the session's cwd: a key in the cwd was kept in the
    claim's path, on disk in the state database (forget finds the log through the readers)."""
    folder = "-home-me-sk-proj-Zr8Tq2Wm5Kx9Lb3Nv7Hc4Jd1Fg6Ys0Ue"
    assert st.try_start("s1", T0, source="dsh", path=f"/home/me/.dsh/sessions/{folder}/s1/session.jsonl")
    assert st.get_claim("s1").path == "/home/me/.dsh/sessions/-home-me-[REDACTED:api_key]/s1/session.jsonl"
    st.close()
    assert not [p for p in st.db_path.parent.iterdir() if b"Zr8Tq2Wm5Kx9" in p.read_bytes()]


def test_claim_lifecycle(st: StateStore):
    assert st.try_start("s1", T0, source="codex", path="/logs/s1.jsonl") is True
    c = st.get_claim("s1")
    assert (c.status, c.attempts, c.last_seq, c.parts, c.started_at) == ("running", 0, -1, 0, T0)
    assert c.last_seq < 0 and c.source == "codex" and c.path == "/logs/s1.jsonl"
    assert st.try_start("s1", T0 + timedelta(seconds=60)) is False  # fresh running claim wins

    t1 = T0 + timedelta(minutes=2)
    done = st.finish(
        "s1",
        "done",
        last_seq=41,
        now=t1,
        slug="fix-build",
        parts_inc=1,
        usage={"input_tokens": 1000, "output_tokens": 200},
        model="deepseek-chat",
        provider="deepseek",
    )
    assert (done.status, done.last_seq, done.parts, done.slug) == ("done", 41, 1, "fix-build")
    assert (done.input_tokens, done.output_tokens, done.model, done.provider) == (
        1000,
        200,
        "deepseek-chat",
        "deepseek",
    )
    assert done.updated_at == t1 and done.last_checked_at == t1 and done.updated_at.tzinfo is not None
    assert st.get_meta().pending_consolidation is True

    # incremental re-extraction: a second part keeps the first slug unless given, sums usage
    t2 = t1 + timedelta(hours=1)
    assert st.try_start("s1", t2) is True
    again = st.get_claim("s1")
    assert (again.status, again.last_seq, again.parts) == ("running", 41, 1)
    done2 = st.finish("s1", "done", last_seq=80, now=t2, parts_inc=1, usage={"input_tokens": 5, "output_tokens": 5})
    assert (done2.last_seq, done2.parts, done2.slug, done2.input_tokens, done2.model) == (
        80,
        2,
        "fix-build",
        1005,
        "deepseek-chat",
    )

    st.set_pending(False)
    st.try_start("s2", t2)
    noop = st.finish("s2", "noop", last_seq=3, now=t2)
    assert noop.status == "noop" and noop.last_seq == 3
    assert st.get_meta().pending_consolidation is False  # noop does not ask for consolidation

    t3 = t2 + timedelta(minutes=30)
    st.touch_checked("s2", t3)
    assert st.get_claim("s2").last_checked_at == t3
    assert set(st.claims()) == {"s1", "s2"}
    assert st.forget("s2") is True and st.forget("s2") is False
    assert set(st.claims()) == {"s1"}
    with pytest.raises(ValueError):
        st.finish("s1", "failed", 1, t3)


def test_backoff_doubles_and_parks(st: StateStore):
    base = 60
    delays = []
    for attempt in range(1, 4):
        assert st.try_start("s", T0) is True
        c = st.fail("s", f"boom {attempt}", T0, retry_base_s=base, retry_limit=4, jitter=0)
        assert c.status == "failed" and c.attempts == attempt and c.error == f"boom {attempt}"
        assert c.parked is False
        delays.append((c.next_retry_at - T0).total_seconds())
    assert delays == [60, 120, 240]
    parked = st.fail("s", "last", T0, retry_base_s=base, retry_limit=4)
    assert parked.attempts == 4 and parked.parked is True and parked.next_retry_at is None
    # success resets everything
    st.try_start("s", T0)
    ok = st.finish("s", "noop", 10, T0)
    assert (ok.attempts, ok.parked, ok.next_retry_at, ok.error) == (0, False, None, None)


def test_backoff_jitter_is_small(st: StateStore):
    for attempt in range(1, 6):
        c = st.fail("j", "x", T0, retry_base_s=10, retry_limit=99)
        nominal = 10 * 2 ** (attempt - 1)
        assert nominal <= (c.next_retry_at - T0).total_seconds() <= nominal * 1.1 + 1e-6


def test_fail_error_is_redacted_and_bounded(st: StateStore):
    key = "sk-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
    c = st.fail("s", f"401 for key {key} " + "x" * 10_000, T0, 1, 3)
    assert key not in c.error and len(c.error) <= 4100
    assert key.encode() not in st.db_path.read_bytes()
    # a key across the bound: cut first, its head ("sk-proj-A1b2C3d4E5A1", too short to be told
    # from text) was stored as it was; redacted first, none of it is
    key = "sk-proj-" + "A1b2C3d4E5" * 5
    c = st.fail("s", "y" * (MAX_ERROR_CHARS - 21) + " " + key, T0, 1, 3)
    assert "A1b2C3" not in c.error and len(c.error) <= MAX_ERROR_CHARS


def test_stale_recovery(st: StateStore):
    st.try_start("old", T0)
    st.try_start("fresh", T0 + timedelta(minutes=29))
    st.try_start("done", T0)
    st.finish("done", "done", 1, T0)
    now = T0 + timedelta(minutes=31)
    assert st.recover_stale(now, stale_after_s=1800) == ["old"]
    old = st.get_claim("old")
    assert (old.status, old.error, old.attempts, old.next_retry_at) == ("failed", STALE_ERROR, 1, now)
    assert st.get_claim("fresh").status == "running"
    assert st.get_claim("done").status == "done"
    assert st.recover_stale(now, stale_after_s=1800) == []
    # a stale running claim can also be taken over directly
    assert st.try_start("fresh", T0 + timedelta(minutes=29 + 31)) is True
    st.try_start("p", T0)
    st.recover_stale(now, 1800, retry_limit=1)
    assert st.get_claim("p").parked is True


def test_baseline_legacy_claims(st: StateStore):
    st.finish("legacy", "done", last_seq=-1, now=T0)
    c = st.baseline("legacy", 120, T0 + timedelta(days=1))
    assert (c.status, c.last_seq) == ("done", 120)
    new = st.baseline("unknown", 7, T0)
    assert (new.status, new.last_seq) == ("done", 7)


def test_naive_datetime_refused(st: StateStore):
    with pytest.raises(ValueError, match="naive"):
        st.try_start("s", datetime(2026, 1, 1))


_RACE = """
import sys
from datetime import datetime, timezone
from pathlib import Path
from dsh_memory.storage.state import StateStore
s = StateStore(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
won = s.try_start("contested", datetime(2026, 2, 1, tzinfo=timezone.utc))
print("WON" if won else "LOST", flush=True)
sys.stdin.read()  # stay alive: a claim whose owner died may be taken over (test_claims_heal.py)
"""


def test_concurrent_try_start_exactly_one_process_wins(tmp_path: Path):
    root = tmp_path / "memories"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_RACE), str(root)],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(5)
    ]
    try:
        for p in procs:  # all have opened (and maybe created/migrated) the DB concurrently
            assert p.stdout.readline().strip() == "ready"
        for p in procs:  # release them together
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.stdout.readline().strip() for p in procs]  # every owner still alive
        for p in procs:
            _out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sorted(results) == ["LOST"] * 4 + ["WON"]
    st = StateStore(root)
    assert st.get_claim("contested").status == "running"
    st.close()


def test_concurrent_threads_one_winner_and_no_lost_updates(st: StateStore):
    wins: list[bool] = []
    barrier = threading.Barrier(6)

    def worker(k: int) -> None:
        barrier.wait()
        wins.append(st.try_start("t", T0))
        for _ in range(20):
            st.record_usage("rollout_summaries/a.md", T0 + timedelta(seconds=k))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    count, last = st.usage()["rollout_summaries/a.md"]
    assert count == 120 and last == T0 + timedelta(seconds=5)


def test_migration_from_v1_keeps_data(tmp_path: Path):
    db = tmp_path / "m" / ".state" / "state.sqlite3"
    conn = connect(db)
    assert apply_migrations(conn, target=1) == 1
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.execute(
        "INSERT INTO claims (session_id, status, attempts, last_seq, parts, updated_at, slug)"
        " VALUES ('old', 'done', 0, 55, 2, '2025-12-01T00:00:00+00:00', 'legacy-slug')"
    )
    conn.execute("UPDATE pipeline SET pending_consolidation=1, phase2_failures=2")
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "usage" not in names
    conn.close()

    st = StateStore(tmp_path / "m")
    c = st.get_claim("old")
    assert st.schema_version() == SCHEMA_VERSION
    assert (c.status, c.last_seq, c.parts, c.slug) == ("done", 55, 2, "legacy-slug")
    assert (c.input_tokens, c.model, c.parked) == (0, "", False)
    meta = st.get_meta()
    assert meta.pending_consolidation is True and meta.phase2_failures == 2 and meta.last_phase2_outcome is None
    st.record_usage("rollout_summaries/x.md", T0)  # v2 table usable
    assert st.usage() == {"rollout_summaries/x.md": (1, T0)}
    st.close()
    # re-opening is a no-op migration
    st2 = StateStore(tmp_path / "m")
    assert st2.schema_version() == SCHEMA_VERSION and st2.get_claim("old").slug == "legacy-slug"
    st2.close()


def test_newer_schema_is_refused(tmp_path: Path):
    db = tmp_path / "m" / ".state" / "state.sqlite3"
    conn = connect(db)
    apply_migrations(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(ConfigError, match="newer"):
        StateStore(tmp_path / "m").claims()


def test_failed_migration_rolls_back(tmp_path: Path):
    conn = connect(tmp_path / "db.sqlite3")
    broken = MIGRATIONS[:1] + ["CREATE TABLE ok_table (x INTEGER); THIS IS NOT SQL"]
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, migrations=broken)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('claims', 'ok_table')").fetchone()[0] == 0
    conn.close()


def test_pipeline_meta(st: StateStore):
    m = st.get_meta()
    assert (
        m.last_phase1_at,
        m.last_phase2_at,
        m.phase2_error,
        m.phase2_failures,
        m.pending_consolidation,
        m.last_phase2_outcome,
    ) == (None, None, None, 0, False, None)
    st.set_phase1_ran(T0)
    st.set_pending(True)
    st.record_phase2_failure("bad json", T0 + timedelta(minutes=1))
    st.record_phase2_failure("bad json again", T0 + timedelta(minutes=2))
    m = st.get_meta()
    assert m.last_phase1_at == T0 and m.last_phase2_at is None
    assert (m.phase2_error, m.phase2_failures, m.pending_consolidation, m.last_phase2_outcome) == (
        "bad json again",
        2,
        True,
        "error",
    )
    t = T0 + timedelta(hours=1)
    st.record_phase2_success(t)
    m = st.get_meta()
    assert (m.last_phase2_at, m.phase2_error, m.phase2_failures, m.pending_consolidation, m.last_phase2_outcome) == (
        t,
        None,
        0,
        False,
        "consolidated",
    )
    st.record_phase2_outcome("skipped: cooldown")
    assert st.get_meta().last_phase2_outcome == "skipped: cooldown"
    assert st.get_meta().last_phase2_at == t


def test_overrides(st: StateStore):
    st.set_override("a", "include")
    st.set_override("b", "exclude")
    st.set_override("a", "exclude")
    assert st.overrides() == {"a": "exclude", "b": "exclude"}
    st.set_override("b", None)
    st.set_override("never", None)
    assert st.overrides() == {"a": "exclude"}
    with pytest.raises(ValueError):
        st.set_override("a", "maybe")


def test_usage_and_retired(st: StateStore):
    st.record_usage("rollout_summaries/a.md", T0)
    st.record_usage("rollout_summaries/a.md", T0 + timedelta(days=2))
    st.record_usage("rollout_summaries/a.md", T0 + timedelta(days=1))  # out of order: last_at stays max
    st.record_usage("rollout_summaries/b.md", T0)
    assert st.usage() == {"rollout_summaries/a.md": (3, T0 + timedelta(days=2)), "rollout_summaries/b.md": (1, T0)}
    st.mark_retired("old-slug", T0)
    st.mark_retired("other", T0 + timedelta(days=1))
    assert st.retired() == {"old-slug": T0, "other": T0 + timedelta(days=1)}
    st.unmark_retired("other")
    assert st.retired() == {"old-slug": T0}


def test_state_survives_reopen(tmp_path: Path):
    a = StateStore(tmp_path / "r")
    a.try_start("s", T0)
    a.fail("s", "x", T0, 30, 5, jitter=0)
    a.close()
    b = StateStore(tmp_path / "r")
    c = b.get_claim("s")
    assert c.status == "failed" and c.next_retry_at == T0 + timedelta(seconds=30)
    b.close()


def test_a_batch_is_claimed_in_one_go_and_split_between_runs(st: StateStore):
    """Two runs that planned the same sessions at once: the first claims them all up front, the
    second gets none of those (a fresh claim of a live owner wins) and the new one it alone saw."""
    assert st.try_start_many(["a", "b", "c"], T0) == ["a", "b", "c"]
    assert all(st.get_claim(s).status == "running" for s in "abc")
    assert st.try_start_many(["a", "b", "c", "d"], T0 + timedelta(seconds=1)) == ["d"]
    # the run that claimed up front takes its own claim again when it extracts the session…
    assert st.try_start("a", T0 + timedelta(seconds=5), reclaim=True) is True
    assert st.get_claim("a").started_at == T0 + timedelta(seconds=5)
    # …but never a live claim of another owner, reclaim or not
    assert st.try_start("x", T0, owner="otherhost:7:7") is True
    assert st.try_start("x", T0 + timedelta(seconds=1), reclaim=True) is False


@pytest.mark.parametrize(
    "value",
    ["garbage", "2020-13-45", "9999-12-31T23:59:59-14:00", 12345, 1.5, b"\x00\xff"],
    ids=["text", "no-date", "past-9999-in-utc", "integer", "real", "blob"],
)
def test_a_timestamp_that_is_not_one_reads_as_none(tmp_path: Path, value):
    """A `*_at` cell a hand edit or another tool left unreadable reads as None (no time), for
    claims and the pipeline row alike; was a ValueError/TypeError/OverflowError from every read
    (status, sessions, extract, the vault)."""
    st = StateStore(tmp_path / "m")
    st.finish("s", "done", 3, T0)
    st.record_phase2_failure("boom", T0)
    st.close()
    conn = sqlite3.connect(tmp_path / "m" / ".state" / "state.sqlite3")
    conn.execute("UPDATE claims SET started_at=?, next_retry_at=?, last_checked_at=?", (value,) * 3)
    conn.execute("UPDATE pipeline SET last_phase1_at=?, last_phase2_failure_at=?", (value,) * 2)
    conn.commit()
    conn.close()
    st = StateStore(tmp_path / "m")
    c = st.claims()["s"]
    assert (c.started_at, c.next_retry_at, c.last_checked_at, c.last_seq) == (None, None, None, 3)
    meta = st.get_meta()
    assert (meta.last_phase1_at, meta.last_phase2_failure_at, meta.phase2_failures) == (None, None, 1)
    st.close()


def test_a_deleted_pipeline_row_is_made_anew(tmp_path: Path):
    """The pipeline globals' one row, deleted by a hand edit, is there again at the next open (with
    a memory id), so its reads and writes work; was a TypeError from get_meta (`status`,
    `consolidate`), and every write of it a silent no-op."""
    st = StateStore(tmp_path / "m")
    st.finish("s", "done", 3, T0)
    st.close()
    conn = sqlite3.connect(tmp_path / "m" / ".state" / "state.sqlite3")
    conn.execute("DELETE FROM pipeline")
    conn.commit()
    conn.close()
    st = StateStore(tmp_path / "m")
    assert st.get_meta().memory_id and st.get_claim("s").status == "done"
    st.record_phase2_failure("boom", T0)
    assert st.get_meta().phase2_failures == 1
    st.close()


def test_a_running_claim_started_ahead_of_the_clock_is_taken_over(st: StateStore):
    """A running claim whose start was recorded a day ahead (the clock was ahead, then set back)
    and whose owner cannot be proven gone (another host) ages out like a stale one; was held
    until the clock reached its start. One a minute ahead (hosts' clocks apart) is still live."""
    remote = "another-host:1:2"
    st.try_start("ahead", T0 + timedelta(days=1), owner=remote)
    st.try_start("skewed", T0 + timedelta(minutes=1), owner=remote)
    assert st.try_start("skewed", T0) is False
    assert st.recover_stale(T0, stale_after_s=1800) == ["ahead"]
    assert st.get_claim("ahead").status == "failed" and st.get_claim("skewed").status == "running"


@pytest.mark.parametrize("value", ["many", b"\x00", 1e400], ids=["text", "blob", "infinity"])
def test_a_count_that_is_not_a_number_reads_as_the_column_default(tmp_path: Path, value):
    """Integer cells a hand edit left as text, bytes or infinity read as the column's default
    (-1 for the watermark, else 0); were str/bytes/float in Claim and PipelineMeta, and `status`
    failed summing the token counts (TypeError)."""
    st = StateStore(tmp_path / "m")
    st.finish("s", "done", 3, T0, usage={"input_tokens": 5})
    st.close()
    conn = sqlite3.connect(tmp_path / "m" / ".state" / "state.sqlite3")
    conn.execute("UPDATE claims SET attempts=?, last_seq=?, parts=?, input_tokens=?, output_tokens=?", (value,) * 5)
    conn.execute("UPDATE pipeline SET phase2_failures=?", (value,))
    conn.commit()
    conn.close()
    st = StateStore(tmp_path / "m")
    c = st.get_claim("s")
    assert (c.attempts, c.last_seq, c.parts, c.input_tokens, c.output_tokens) == (0, -1, 0, 0, 0)
    assert st.get_meta().phase2_failures == 0
    assert st.fail("s", "boom", T0, 60, 3).attempts == 1
    st.close()
