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
