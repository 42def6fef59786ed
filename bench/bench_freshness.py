"""Freshness at injection: what checking a project's lines against its working tree costs.

Run:  python bench/bench_freshness.py [--items 1000] [--runs 20]

A project (a folder with a Makefile, a package.json and files) and a memory_summary.md whose
project part holds --items lines, each citing a path (half of them deleted since), a make target
or a package script. Measured in one process, median of --runs, each on a fresh summary cache:
`summary(store, cwd=project)` (composes the global and project parts, then flags stale lines)
and, as the anchor, the same call with the freshness check off (the flagging function replaced by
the identity). Goal (issue 27): <= 20 ms added with 1,000 items. Prints the figures and the ratio;
nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsh_memory.readpath import freshness, summary  # noqa: E402
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
    return store, project


def _time(store: MemoryStore, project: Path, runs: int) -> float:
    summary_module = sys.modules["dsh_memory.readpath.summary"]  # the package exports the function
    out = []
    for _ in range(runs):
        summary_module._cache.clear()
        started = time.perf_counter()
        summary(store, 1_000_000, cwd=str(project))
        out.append(time.perf_counter() - started)
    return statistics.median(out) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dsh-fresh-") as tmp:
        store, project = _setup(Path(tmp), args.items)
        flagged = summary(store, 1_000_000, cwd=str(project)).stale
        checked = _time(store, project, args.runs)
        real = freshness.flag_stale
        freshness.flag_stale = lambda text, root: (text, 0)
        try:
            anchor = _time(store, project, args.runs)
        finally:
            freshness.flag_stale = real
    added = checked - anchor
    print(f"freshness, {args.items} items ({flagged} flagged): summary with the check {checked:.1f} ms,")
    print(f"  without (anchor) {anchor:.1f} ms; added {added:.1f} ms (goal <= 20), ratio {checked / anchor:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
