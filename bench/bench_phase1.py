"""Phase 1 throughput: 200 sessions (copies of a bundled DSH sample: tool use, a user rule) through
the fake LLM (a process of its own, as a real endpoint), answering with lines quoted from each
session, at a fixed 1.0 s latency.

Prints wall time ÷ ideal (200 × 1.0 s / concurrency 8; goal ≤ 1.10) and client CPU seconds per
session, measured in one run against a real `prefect server start` on 127.0.0.1.

The measured run is a running stack's: a warm-up run first extracts one other session, so the
process has imported what a run uses and the freshly started server has answered each kind of
request once (its first answer to the global limit's upsert, lease and release, to task runs'
events and artifacts takes ≈1-3 s more on 2 loaded cores; a serving server has long paid it).
`--cold` warms up with a dry run only (imports and the flow's registration), as before.

Where the time goes: from the call to the first model request, the rate of the requests after it
against the fake's (N - 1 requests over (N / concurrency - 1) × latency), and from the last answer
to the return.

    python bench/bench_phase1.py [--sessions 200] [--latency 1.0] [--concurrency 8] [--cold]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sessions import FakeModelProcess, bench_env, clone_dsh_sample  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--cold", action="store_true", help="warm up with a dry run only (a fresh server's first requests)")
    args = ap.parse_args()

    from dsh_memory.serve.prefect_server import PrefectServer

    work = Path(tempfile.mkdtemp(prefix="dsh-bench-p1-"))
    clone_dsh_sample(work / "dsh", args.sessions, prefix="bench")
    warm = [] if args.cold else clone_dsh_sample(work / "dsh", 1, prefix="warm", id_tag=0xC4A06)

    with (
        PrefectServer(work / "prefect").start() as server,
        FakeModelProcess(latency=args.latency) as fake,  # its own process, as a real endpoint
    ):
        os.environ.update(PREFECT_API_URL=server.api_url, **bench_env(work, fake.base_url, args.concurrency))
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            from dsh_memory.flows.extract import extract_flow

            extract_flow(session_ids=[], dry_run=True)  # warm-up: imports, flow registration
            if not args.cold:  # and a run's every kind of request to the server (module docstring)
                warmed = extract_flow(session_ids=warm, respect_idle=False)
                assert len(warmed.extracted) == 1, warmed.counts
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.monotonic()
            summary = extract_flow()
            wall = time.monotonic() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    extracted = len(summary.extracted)
    if extracted != args.sessions:
        print(f"outcomes: {summary.counts}", file=sys.stderr)
    ideal = args.sessions * args.latency / args.concurrency
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(f"sessions extracted      : {extracted}/{args.sessions} (max in flight at the model: {fake.max_in_flight})")
    print(f"wall time               : {wall:.1f} s   ideal {ideal:.1f} s   ratio {wall / ideal:.3f} (goal <= 1.10)")
    print(f"client CPU per session  : {cpu / args.sessions * 1000:.0f} ms")
    arrivals = [a - t0 for a in fake.arrivals if a >= t0]  # the measured run's
    if arrivals:
        first, last = min(arrivals), max(arrivals)
        rate = (len(arrivals) - 1) / (last - first) if last > first else 0.0
        waves = -(-len(arrivals) // args.concurrency)
        ideal_rate = (len(arrivals) - 1) / ((waves - 1) * args.latency) if waves > 1 else 0.0
        print(
            f"where the time goes     : first model call after {first:.2f} s; calls then arrive at "
            f"{rate:.2f}/s (ideal {ideal_rate:.2f}/s: {(len(arrivals) - 1) / ideal_rate if ideal_rate else 0:.1f} s "
            f"vs {last - first:.1f} s); run ends {wall - last - args.latency:.2f} s after the last answer"
        )
    print(
        f"load average            : {os.getloadavg()[0]:.1f} (1 min, {os.cpu_count()} cores)"
        f"{'; cold: a fresh server, dry-run warm-up only' if args.cold else ''}"
    )


if __name__ == "__main__":
    main()
