"""Phase 1 on workers vs in this process: the cost of the split (issue 15).

    python bench/bench_scale_out.py [--sessions 300] [--latency 0.5] [--workers 3] [--concurrency 6]

One real Prefect server, the fake model in its own process answering in `--latency` seconds,
clones of a bundled DSH sample (bench/_sessions.py, as bench_phase1 uses).
Anchor, measured first in the same run: the extract flow in this process (`concurrency` model
calls at a time). Then the same sessions into a fresh memory root with `extract_on_workers`:
`dsh-memory deploy`'s extract-transcripts-pool on `--workers` real process workers (`--limit`
runs at a time each, `concurrency` calls per run), results through a shared LocalFileSystem block.
Prints both walls, their ratio, and each against its ideal (sessions x latency / parallel calls).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sessions import FakeModelProcess, bench_env, clone_dsh_sample  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--limit", type=int, default=2, help="flow runs at a time per worker (prefect worker --limit)")
    args = ap.parse_args()

    from dsh_memory.serve.prefect_server import PrefectServer
    from dsh_memory.testing.workers import running_workers, wait_for_workers, worker_env

    work = Path(tempfile.mkdtemp(prefix="dsh-bench-scale-"))
    clone_dsh_sample(work / "dsh", args.sessions, prefix="scale")

    with (
        PrefectServer(work / "prefect").start() as server,
        FakeModelProcess(latency=args.latency) as fake,  # its own process, as a real endpoint
    ):
        os.environ.update(
            PREFECT_API_URL=server.api_url,
            PREFECT_HOME=str(work / "client"),
            DSH_MEMORY_IGNORE_BLOCKS="1",
            **bench_env(work, fake.base_url, args.concurrency),  # DSH_MEMORY_ROOT: set per timed run
        )
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()
        from prefect.filesystems import LocalFileSystem

        from dsh_memory.flows.extract import extract_flow
        from dsh_memory.serve.deployments import deploy
        from dsh_memory.settings import MemorySettings

        def timed(root: str) -> tuple[float, dict]:
            os.environ["DSH_MEMORY_ROOT"] = root
            t0 = time.perf_counter()
            result = extract_flow()
            return time.perf_counter() - t0, result.counts or {}

        extract_flow(session_ids=[], dry_run=True)  # warm-up: imports, flow registration
        anchor, counts_a = timed(str(work / "memories-here"))

        LocalFileSystem(basepath=str(work / "results")).save("bench-results", overwrite=True)
        deploy(MemorySettings.from_env(), result_storage="local-file-system/bench-results")
        env = worker_env(dict(os.environ), server.api_url)  # INFO: a timeline in worker-logs/ (not printed)
        specs = [(f"w{i}", "dsh-memory-extract", env) for i in range(args.workers)]
        with running_workers(specs, work / "worker-logs", limit=args.limit) as procs:
            wait_for_workers("dsh-memory-extract", [name for name, _, _ in specs], procs)
            os.environ["DSH_MEMORY_EXTRACT_ON_WORKERS"] = "1"
            split, counts_w = timed(str(work / "memories-workers"))
    calls = len(fake.arrivals)

    n, lat, c = args.sessions, args.latency, args.concurrency
    ideal_here = n * lat / c
    ideal_workers = n * lat / (c * min(args.workers * args.limit, c))  # runs in flight x calls per run
    print(
        f"sessions {n}, latency {lat}s, concurrency {c}, {args.workers} workers x {args.limit} runs; model calls {calls}"
    )
    print(f"in this process : {anchor:6.1f} s wall  {counts_a}  ÷ ideal {ideal_here:.1f} s = {anchor / ideal_here:.2f}")
    print(
        f"on workers      : {split:6.1f} s wall  {counts_w}  ÷ ideal {ideal_workers:.1f} s = {split / ideal_workers:.2f}"
    )
    print(f"workers ÷ in-process wall: {split / anchor:.2f}")


if __name__ == "__main__":
    main()
