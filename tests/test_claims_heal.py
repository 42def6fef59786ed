"""Claims heal themselves: a running claim whose owner process is gone is taken over at once
(no 30-minute wait); a live owner keeps (and renews) it; parked sessions resume on request or
when their route works again."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from dsh_memory.storage.state import StateStore
from dsh_memory.storage.state_schema import DEAD_OWNER_ERROR, current_owner, owner_is_gone

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _claim_in_child(root, session_id: str, hold: bool) -> subprocess.Popen:
    """Another process claims `session_id`; with `hold` it stays alive until killed."""
    code = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from dsh_memory.storage.state import StateStore\n"
        "s = StateStore(sys.argv[1])\n"
        "assert s.try_start(sys.argv[2], datetime.now(UTC))\n"
        "s.close()\n"
        "print('claimed', flush=True)\n"
        "if sys.argv[3] == '1':\n"
        "    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(root), session_id, "1" if hold else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "claimed"
    return proc


def test_a_dead_owners_claim_is_taken_over_at_once(tmp_path):
    _claim_in_child(tmp_path, "s1", hold=False).wait()
    state = StateStore(tmp_path)
    claim = state.get_claim("s1")
    assert claim.status == "running" and owner_is_gone(claim.owner)
    now = datetime.now(UTC)
    assert state.recover_stale(now, stale_after_s=1800) == ["s1"]
    assert state.get_claim("s1").error == DEAD_OWNER_ERROR
    assert state.try_start("s1", now, stale_after_s=1800)
    assert state.get_claim("s1").owner == current_owner()


def test_try_start_takes_over_a_dead_owner_directly(tmp_path):
    _claim_in_child(tmp_path, "s2", hold=False).wait()
    assert StateStore(tmp_path).try_start("s2", datetime.now(UTC), stale_after_s=1800)


def test_a_live_owner_keeps_its_claim_and_renews_it(tmp_path):
    proc = _claim_in_child(tmp_path, "s3", hold=True)
    try:
        state = StateStore(tmp_path)
        claim = state.get_claim("s3")
        assert not owner_is_gone(claim.owner)
        now = datetime.now(UTC)
        assert not state.try_start("s3", now, stale_after_s=1800)
        assert state.recover_stale(now, stale_after_s=1800) == []
        # A claim not renewed for stale_after_s still ages out (an owner can hang).
        assert state.recover_stale(now + timedelta(hours=1), stale_after_s=1800) == ["s3"]
    finally:
        proc.stdin.close()
        proc.wait()


def test_renew_moves_only_the_owners_claims(tmp_path):
    state = StateStore(tmp_path)
    assert state.try_start("mine", NOW)
    assert state.try_start("theirs", NOW, owner="otherhost:1:1")
    later = NOW + timedelta(minutes=20)
    assert state.renew(["mine", "theirs"], later) == 1
    assert state.get_claim("mine").started_at == later
    assert state.get_claim("theirs").started_at == NOW
    assert not owner_is_gone("otherhost:1:1")  # a remote owner is never declared gone: it ages out


def test_parked_sessions_resume(tmp_path):
    state = StateStore(tmp_path)
    for sid, provider in (("a", "openai"), ("b", "local"), ("c", "")):
        for _ in range(3):
            state.fail(sid, "HTTP 500", NOW, retry_base_s=60, retry_limit=3, provider=provider, model="m")
    assert [c.session_id for c in state.parked()] == ["a", "b", "c"]
    # The openai route works again: its sessions (and those of an unknown route) resume.
    assert sorted(state.unpark(NOW, provider="openai", model="m")) == ["a", "c"]
    a = state.get_claim("a")
    assert (a.parked, a.attempts, a.next_retry_at, a.status) == (False, 0, NOW, "failed")
    assert [c.session_id for c in state.parked()] == ["b"]
    assert state.unpark(NOW) == ["b"]  # explicit: everything parked
    assert state.parked() == []
