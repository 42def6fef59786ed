"""The debounce as data (dsh_memory/storage/turn_ends.py): each session's newest turn end is
recorded beside Phase 1's claims; a session is due once quiet for the debounce, and a turn end
newer than the one a run handled keeps it pending."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsh_memory.storage.state import StateStore
from dsh_memory.storage.turn_ends import TurnEnds

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def _ends(tmp_path) -> TurnEnds:
    return TurnEnds(StateStore(tmp_path))


def test_a_session_is_due_once_quiet_for_the_debounce(tmp_path):
    ends = _ends(tmp_path)
    ends.record([("a", T0), ("b", T0 + timedelta(seconds=5))])
    assert ends.due(T0 + timedelta(seconds=19), 20) == {}
    assert list(ends.due(T0 + timedelta(seconds=20), 20)) == ["a"]
    assert list(ends.due(T0 + timedelta(seconds=30), 20)) == ["a", "b"]  # oldest first
    assert ends.next_due(20) == T0 + timedelta(seconds=20)
    assert ends.pending() == 2


def test_only_the_newest_turn_end_counts(tmp_path):
    ends = _ends(tmp_path)
    ends.record([("a", T0 + timedelta(seconds=10))])
    ends.record([("a", T0)])  # an older one, delivered late: ignored
    assert ends.due(T0 + timedelta(seconds=25), 20) == {}
    assert ends.next_due(20) == T0 + timedelta(seconds=30)


def test_a_turn_end_after_the_run_saw_the_session_keeps_it_pending(tmp_path):
    ends = _ends(tmp_path)
    ends.record([("a", T0), ("b", T0)])
    seen = ends.due(T0 + timedelta(seconds=20), 20)
    ends.record([("a", T0 + timedelta(seconds=21))])  # while the run extracts
    ends.handled(seen)
    assert ends.pending() == 1
    assert ends.due(T0 + timedelta(seconds=40), 20) == {}
    assert list(ends.due(T0 + timedelta(seconds=41), 20)) == ["a"]
    ends.handled(ends.due(T0 + timedelta(seconds=41), 20))
    assert (ends.pending(), ends.next_due(20)) == (0, None)


def test_recorded_turn_ends_survive_a_new_store(tmp_path):
    _ends(tmp_path).record([("a", T0)])
    assert list(_ends(tmp_path).due(T0 + timedelta(hours=1), 20)) == ["a"]


def test_a_turn_end_that_is_not_a_number_fails_nothing_and_is_recorded_over(tmp_path):
    """Times a hand edit left as text or bytes: `next_due` (read by every extract-session run) was a
    TypeError, so every run failed; a text turn end also outranked every real one (SQLite orders
    text after numbers), so the session was never due again. They count as 0 now."""
    import sqlite3

    ends = _ends(tmp_path)
    ends.record([("text", T0), ("bytes", T0), ("handled-text", T0)])
    conn = sqlite3.connect(tmp_path / ".state" / "state.sqlite3")
    conn.execute("UPDATE turn_ends SET ended_at = 'soon' WHERE session_id = 'text'")
    conn.execute("UPDATE turn_ends SET ended_at = x'00ff' WHERE session_id = 'bytes'")
    conn.execute("UPDATE turn_ends SET handled_at = 'done' WHERE session_id = 'handled-text'")
    conn.commit()
    conn.close()
    later = T0 + timedelta(seconds=30)
    assert ends.due(later, 20) == {"handled-text": T0.timestamp()} and ends.pending() == 1
    assert ends.next_due(20) == T0 + timedelta(seconds=20)
    ends.handled(ends.due(later, 20))
    assert ends.next_due(20) is None and ends.pending() == 0
    ends.record([("text", later), ("bytes", later)])
    assert sorted(ends.due(later + timedelta(seconds=20), 20)) == ["bytes", "text"]
    ends.state.close()
