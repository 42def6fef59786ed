"""No-op benchmark: `dsh-memory run` when there is nothing to do.

Run:  python bench/bench_noop.py [--sessions 10000] [--runs 5]

10,000 generated DSH sessions (bench/bench_ingest.py's generator: clones of the DSH fixtures
under fresh ids), all idle and all already processed in the state database (claims recorded with
the project's StateStore, consolidation done, no raw memories or notes waiting). Then the real
CLI, `python -m dsh_memory.cli run`, in a fresh process, with no Prefect API configured: it must
say "nothing to extract" and "skipped: nothing to consolidate" without starting any Prefect
engine. Wall time per invocation, median over --runs. Goal: <= 1 s.

The anchor, measured in the same run: a bare `os.walk` with one `stat` per file over the same
tree, in this process (ratio = CLI wall / anchor); the interpreter's own start (`python -c pass`)
is printed too, for scale. Nothing here is a test: it prints numbers. The temp dir is removed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_ingest import _templates, generate  # noqa: E402

from dsh_memory import readers  # noqa: E402
from dsh_memory.settings import SourceRoots  # noqa: E402
from dsh_memory.storage.state import StateStore  # noqa: E402

IDLE_AGE_SECONDS = 7200  # the sessions ended two hours ago: idle, not too old


def prepare(tmp: Path, n: int) -> dict[str, str]:
    """The generated tree, every session processed; returns the CLI's environment."""
    home = tmp / "dsh"
    templates = _templates()
    generate(home, n, templates)
    old = time.time() - IDLE_AGE_SECONDS
    for dirpath, _dirs, files in os.walk(home):
        for name in files:
            os.utime(os.path.join(dirpath, name), (old, old))
    # generate() gives session i the id UUID(int=i+1) and the template i % len(templates).
    refs = {r.id: r for r in readers.discover(SourceRoots(dsh_sessions=home / "sessions"), ("dsh",))}
    assert len(refs) == n, (len(refs), n)
    seqs = [readers.load(refs[_sid(i)]).last_seq for i in range(len(templates))]
    root = tmp / "memories"
    state = StateStore(root)
    now = datetime.now(UTC)
    for i in range(n):
        state.finish(_sid(i), "done", seqs[i % len(seqs)], now, slug=f"bench-{i}")
    state.record_phase2_success(now)  # consolidated: nothing pending
    state.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "CODEX_", "CLAUDE_", "PREFECT_"))}
    (tmp / "home").mkdir()
    env.update(
        HOME=str(tmp / "home"),
        DSH_HOME=str(home),
        CODEX_HOME=str(tmp / "none"),
        CLAUDE_CONFIG_DIR=str(tmp / "none"),
        DSH_MEMORY_ROOT=str(root),
    )
    return env


def _sid(i: int) -> str:
    return str(uuid.UUID(int=i + 1, version=4))


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the child: user + sys, result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(REPO))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r


def walk_stat(root: Path) -> int:
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(dirpath, name))
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-noop-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        env = prepare(tmp, args.sessions)
        print(
            f"setup: {args.sessions} sessions generated and recorded as processed in {time.perf_counter() - t0:.1f} s"
        )
        cli = [sys.executable, "-m", "dsh_memory.cli", "run"]
        timed(cli, env)  # warm the page cache and the bytecode
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu, r = timed(cli, env)
            if r.returncode != 0 or "nothing to extract" not in r.stdout or "nothing to consolidate" not in r.stdout:
                raise SystemExit(
                    f"`dsh-memory run` did not report a no-op (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
                )
            walls.append(wall)
            cpus.append(cpu)
        anchors = []
        for _ in range(args.runs):
            a0 = time.perf_counter()
            files = walk_stat(tmp / "dsh")
            anchors.append(time.perf_counter() - a0)
        starts = [timed([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)]
        wall, anchor, start = statistics.median(walls), statistics.median(anchors), statistics.median(starts)
        print(
            f"no-op `dsh-memory run` over {args.sessions} processed sessions: median {wall:.3f} s wall over "
            f"{args.runs} runs (min {min(walls):.3f}; CPU user+sys median {statistics.median(cpus):.3f} s) — "
            f"goal <= 1 s: {'OK' if wall <= 1 else 'MISSED'}"
        )
        print(
            f"anchor: bare os.walk + stat of the same tree ({files} files) {anchor:.3f} s in-process; "
            f"ratio {wall / anchor:.1f}x; interpreter start (python -c pass) {start:.3f} s; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )


if __name__ == "__main__":
    main()
