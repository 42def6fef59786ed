"""bench/bench_quality.py runs in the suite against the scripted fake endpoint: the real flows over
the labelled set, every metric computed. The fake answers like a small model (boilerplate, loops,
cut-off lines, the agent's actions given to the user, a memory for "hi"); what reaches the memory
root is what the deterministic clean-up and the no-op gate leave. Timings are printed, never
asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_quality", REPO / "bench" / "bench_quality.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("prefect_api")
def test_the_quality_bench_runs_on_the_fake_endpoint(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = bench.run("fake", workdir=tmp_path / "run")
    print(bench.metrics.table(result))
    assert result["sessions"] == 15 and result["provider"] == "openai" and result["phase2_outcome"] == "consolidated"
    for key in ("seconds_per_session_mean", "phase2_seconds", "peak_rss_mib", "bullets"):
        assert isinstance(result[key], int | float)
    # What the clean-up and the gate guarantee whatever the model wrote:
    assert result["boilerplate_lines"] == 0, result["boilerplate"]
    assert result["repeated_lines"] == 0, result["repeated"]
    assert result["cut_off_lines"] == 0, result["cut_off"]
    assert result["trivial_with_memory"] == 0, result["trivial_sessions"]
    assert result["forbidden_hits"] == 0, result["forbidden"]
    assert result["groundedness"] >= 0.9, result["ungrounded"]
    assert result["fact_recall"] >= 0.8, result["missed_facts"]
    assert result["outcomes"] == {"extracted": 12, "noop": 3}


def test_metrics_see_what_they_measure(bench):
    m = bench.metrics
    assert m.repeated("- a line that loops on itself.\n- a line that loops on itself.\n") == [
        "a line that loops on itself."
    ]
    assert m.cut_off("- ## User prefe\n- Use `make test`.\n", {"use", "make", "test", "user"}) == ["- ## User prefe"]
    assert m.cut_off("- Pin `urllib3<2 in requirements\n", {"pin"}) != []
    assert m.pov_errors('- I used the `hi!` command.\n- The user said: "I apply."\n- The user ran `make`.\n') == [
        "- I used the `hi!` command.",
        "- The user ran `make`.",
    ]
    assert m.grounded("Always use the --units flag for the weather forecast", {"make", "test"}) is False
    assert m.grounded("`make test` passes", {"make", "test", "passes"}) is True
