"""bench/bench_scope.py in the suite, against the scripted fake endpoint on a real Prefect
server: the real flows over the labelled cross-project set (bench/scope/). The fake's Phase 1
tags every rule global, as an over-eager model would; the deterministic rule has to keep the
project-only ones in their project. Timings are printed, never asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_scope", REPO / "bench" / "bench_scope.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scope"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("prefect_api")
def test_the_scope_bench_runs_on_the_fake_endpoint(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = bench.run("fake", workdir=tmp_path / "run", budget=1200)
    print(bench.table(result))
    assert result["sessions"] == 5 and result["projects"] == 4 and result["phase2"]["outcome"] == "consolidated"
    assert set(result["outcomes"].values()) == {"extracted"}
    assert result["leak_rate"] == 0.0, result["leaks"]
    assert result["search_leak_rate"] == 0.0, result["search_leaks"]
    assert result["global_presence"] >= 0.9, result["global_missing"]
    assert result["own_recall"] == 1.0
    assert result["largest_injection_chars"] <= 1200 and result["other_projects_line"]
    # Phase 1 wrote the project on every raw block and every recap (provenance)
    import json

    from dsh_memory.storage.store import MemoryStore

    labels = json.loads((REPO / "bench" / "scope" / "labels.json").read_text())
    want = {sid: labels["projects"][v["project"]] for sid, v in labels["sessions"].items()}
    store = MemoryStore(tmp_path / "run" / "memories")
    assert {b.session_id: b.project for b in store.read_raw_archive_blocks()} == want
    assert {i.provenance["session_id"]: i.provenance["project"] for i in store.list_rollout_summaries()} == want


def test_the_metrics_see_a_leak_and_a_missing_global_rule(bench, tmp_path):
    """measure() on a hand-written memory root where one project rule sits in the global part and
    one global rule is missing: the metrics must say so."""
    from dsh_memory.storage.store import MemoryStore

    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    store.atomic_write(
        "memory_summary.md",
        "v1\n\n# Scope: global\n- Use pnpm, not npm.\n- commit messages in English\n\n"
        "# Scope: project /p/a\n- pnpm, not npm\n\n# Scope: project /p/b\n- tabs, not spaces\n",
    )
    labels = {
        "projects": {"a": "/p/a", "b": "/p/b"},
        "project_rules": {"a": ["pnpm, not npm"], "b": ["tabs, not spaces"]},
        "global_rules": ["commit messages in English", "no emojis"],
    }
    r = bench.measure(store, labels, 3000)
    assert r["leak_rate"] == 0.5 and r["leaks"] == ["'pnpm, not npm' → b"]
    assert r["search_leak_rate"] == 0.5 and r["global_presence"] == 0.5 and r["own_recall"] == 1.0


@pytest.mark.usefixtures("prefect_api")
def test_a_phase2_model_that_ignores_scopes_is_repaired(bench, tmp_path, monkeypatch):
    """The fake's Phase 2 writes one `applies_to: cwd=.*` group and one flat summary with every
    rule in it; the scope guard moves the project-only rules back before the files are written."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = bench.run("fake", workdir=tmp_path / "run", budget=1200, naive_phase2=True)
    print(bench.table(result))
    assert result["phase2"]["outcome"] == "consolidated"
    assert result["leak_rate"] == 0.0, result["leaks"]
    assert result["search_leak_rate"] == 0.0, result["search_leaks"]
    assert result["global_presence"] >= 0.9 and result["own_recall"] == 1.0
