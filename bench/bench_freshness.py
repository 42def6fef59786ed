"""Freshness at injection: what checking a project's lines against its working tree costs.

Run:  python bench/bench_freshness.py [--items 1000] [--runs 20]

A project (a folder with a Makefile, a package.json and files) and a memory_summary.md whose
project part holds --items lines, each citing a path (half of them deleted since), a make target
or a package script; MEMORY.md holds the same items with their `[source: …]` (half learned 200
days ago, half 10), so every line is also dated (`readpath.learned`). Measured in one process,
median of --runs, each on a fresh summary cache: `summary(store, cwd=project, stale_after_days=90)`
(composes the global and project parts, flags stale lines and says how old the old ones are) and,
as the anchor, the same call with the check off (the flagging function replaced by the identity).
Also the one-time cost of dating MEMORY.md's items (once per MEMORY.md version, then cached).
Goal (issue 27): <= 20 ms added with 1,000 items. Prints the figures; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 1, tzinfo=UTC)
OLD, NEW = (NOW - timedelta(days=200)).date().isoformat(), (NOW - timedelta(days=10)).date().isoformat()
sys.path.insert(0, str(REPO))

from dsh_memory.readpath import freshness, learned, summary  # noqa: E402
from dsh_memory.storage.store import MemoryStore  # noqa: E402


def _setup(tmp: Path, items: int) -> tuple[MemoryStore, Path]:
    project = tmp / "project"
    (project / "src").mkdir(parents=True)
    (project / "Makefile").write_text("".join(f"t{i}:\n\ttrue\n" for i in range(0, items, 2)))
    (project / "package.json").write_text(json.dumps({"scripts": {f"s{i}": "x" for i in range(0, items, 2)}}))
    lines = []
    for i in range(items):
        kind = i % 3
        if kind == 0:
            if i % 2 == 0:
                (project / "src" / f"m{i}.py").write_text("")
            lines.append(f"- `src/m{i}.py` defines `f{i}`")
        elif kind == 1:
            lines.append(f"- Checks that passed: `make t{i}`")
        else:
            lines.append(f"- Checks that passed: `npm run s{i}`")
    store = MemoryStore(tmp / "mem")
    store.ensure_layout()
    store.atomic_write(
        "memory_summary.md", f"v1\n\n# Scope: global\n- one rule\n\n# Scope: project {project}\n" + "\n".join(lines)
    )
    tasks = [
        f"- rollout_summaries/old.md (session=a, source=dsh, updated={OLD})",
        f"- rollout_summaries/new.md (session=b, source=dsh, updated={NEW})",
    ]
    handbook = [f"{ln} [source: {'old' if i % 2 else 'new'}]" for i, ln in enumerate(lines)]
    store.atomic_write(
        "MEMORY.md",
        f"# Task Group: {project}\nscope: project {project}\napplies_to: cwd={project}; reuse_rule=this project only\n\n"
        "## Project facts\n" + "\n".join(handbook) + "\n\n## Tasks\n" + "\n".join(tasks) + "\n",
    )
    return store, project


def _time(store: MemoryStore, project: Path, runs: int, days: int = 90) -> tuple[float, float]:
    """(wall, CPU) milliseconds, medians of `runs` calls: the CPU figure is this process's own
    work, which a loaded machine (other jobs on the 2 cores) does not inflate."""
    summary_module = sys.modules["dsh_memory.readpath.summary"]  # the package exports the function
    wall, cpu = [], []
    for _ in range(runs):
        summary_module._cache.clear()
        started, started_cpu = time.perf_counter(), time.process_time()
        summary(store, 1_000_000, cwd=str(project), stale_after_days=days, now=NOW)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dsh-fresh-") as tmp:
        store, project = _setup(Path(tmp), args.items)
        dating = []
        for _ in range(args.runs):
            learned._dates_cache.clear()
            started = time.perf_counter()
            learned.learned_dates(store)
            dating.append(time.perf_counter() - started)
        first = summary(store, 1_000_000, cwd=str(project), stale_after_days=90, now=NOW)
        checked = _time(store, project, args.runs)
        paths_only = _time(store, project, args.runs, days=0)
        summary_module = sys.modules["dsh_memory.readpath.summary"]  # where the check calls it
        summary_module.flag_stale = lambda text, root, *rest: (text, {})
        try:
            anchor = _time(store, project, args.runs)
        finally:
            summary_module.flag_stale = freshness.flag_stale
    print(f"freshness, {args.items} items ({first.stale} flagged stale, {first.aged} dated old), wall / CPU ms:")
    print(
        f"  summary with the check {checked[0]:.1f} / {checked[1]:.1f}; without (anchor) {anchor[0]:.1f} / {anchor[1]:.1f}"
    )
    print(
        f"  added {checked[0] - anchor[0]:.1f} / {checked[1] - anchor[1]:.1f} (goal <= 20);"
        f" of which the age notes {checked[1] - paths_only[1]:.1f} CPU"
    )
    print(f"  dating MEMORY.md's items (once per MEMORY.md version): {statistics.median(dating) * 1000:.1f} wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
