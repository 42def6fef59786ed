"""A small storm against a real `dsh-memory serve` (bench/bench_storm.py at 5 sessions × 20
turn ends over 5 s, attached to the suite's Prefect server, the fake model on loopback): no turn
end dropped, each session extracted exactly once by the debounced extract-session runs (fewer
runs than sessions, none failed), every session searchable, no consolidation run created only
to be cancelled, and one new turn on an extracted session
extracted and searchable (issue #19: it stayed stale, "rechecked recently"). No timing asserts:
the bench prints the times."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_api")]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_storm", REPO / "bench" / "bench_storm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_storm"] = module
    spec.loader.exec_module(module)
    return module


def test_a_small_storm_on_a_real_stack(prefect_api, tmp_path):
    bench = _bench()
    sessions = 5
    o = bench.run_storm(
        sessions=sessions,
        turns=20,
        seconds=5,
        debounce=6,  # longer than the whole storm: no session can go quiet for a debounce mid-storm
        latency=0.2,
        follow_ups=1,
        api_url=prefect_api,
        work=tmp_path,
        wait_seconds=300,
        anchor=False,
        echo=lambda *_: None,
    )
    assert o["statuses"] == {202: sessions * 20}
    assert o["last_forwarded"] == sessions, o  # every session's LAST turn end reached Prefect
    assert o["extractions_per_session"] == {1: sessions}, o  # once per quiet period
    assert set(o["run_states"]) == {"COMPLETED"}, o
    assert (o["extracted"], o["searchable"]) == (sessions, sessions), o
    assert o["fresh"][0] != float("inf"), o  # the new turn's part became searchable
    assert "CANCELLED" not in o["consolidate_runs"], o
