"""Phase 1 throughput: 200 generated sessions through the fake LLM at a fixed 1.0 s latency.

Prints wall time ÷ ideal (200 × 1.0 s / concurrency 8; goal ≤ 1.10) and client CPU seconds per
session, measured in one run against a real `prefect server start` on 127.0.0.1.

    python bench/bench_phase1.py [--sessions 200] [--latency 1.0] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_sessions(home: Path, n: int) -> None:
    t0 = int(time.time() * 1000) - 7200_000
    for i in range(n):
        sid = str(uuid.UUID(int=i + 1))
        d = home / "sessions" / "--home-bench-src-proj--" / sid
        d.mkdir(parents=True)
        lines = [
            {
                "type": "session",
                "version": 4,
                "id": sid,
                "createdAt": t0,
                "cwd": "/home/bench/src/proj",
                "isSeeded": False,
                "delegationDepth": 0,
            }
        ]
        seq = 0
        for turn in range(1, 4):
            lines.append({"type": "turn/start", "seq": seq, "time": t0 + seq, "data": {"turn": turn}})
            seq += 1
            lines.append(
                {
                    "type": "user/message",
                    "seq": seq,
                    "time": t0 + seq,
                    "surfaceOp": "append",
                    "data": {
                        "id": f"u{seq}",
                        "role": "user",
                        "source": {"kind": "user"},
                        "content": [{"type": "text", "text": f"Session {i} turn {turn}: please fix test_{turn}."}],
                    },
                }
            )
            seq += 1
            lines.append(
                {
                    "type": "assistant/message",
                    "seq": seq,
                    "time": t0 + seq,
                    "surfaceOp": "append",
                    "data": {
                        "turn": turn,
                        "step": 1,
                        "message": {
                            "id": f"a{seq}",
                            "role": "assistant",
                            "content": [{"type": "text", "text": "Fixed; `make test` passes. " * 20}],
                            "source": {"kind": "model"},
                        },
                    },
                }
            )
            seq += 1
            lines.append(
                {
                    "type": "turn/end",
                    "seq": seq,
                    "time": t0 + seq,
                    "data": {"turn": turn, "reason": {"kind": "completed"}},
                }
            )
            seq += 1
        path = d / "session.v4.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        old = time.time() - 3600
        os.utime(path, (old, old))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    from dsh_memory.serve.prefect_server import PrefectServer
    from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

    work = Path(tempfile.mkdtemp(prefix="dsh-bench-p1-"))
    make_sessions(work / "dsh", args.sessions)

    def reply(request: dict) -> Reply:
        text = request["messages"][-1]["content"]
        n = text.split("Session ", 1)[1].split(" ", 1)[0] if "Session " in text else "x"
        return Reply.tool(
            {"raw_memory": "- use make test", "rollout_summary": "fixed tests", "rollout_slug": f"fix-tests-{n}"}
        )

    with (
        PrefectServer(work / "prefect").start() as server,
        FakeOpenAIServer(latency_seconds=args.latency, handler=reply) as fake,
    ):
        os.environ.update(
            PREFECT_API_URL=server.api_url,
            DSH_HOME=str(work / "dsh"),
            CODEX_HOME=str(work / "none"),
            CLAUDE_CONFIG_DIR=str(work / "none"),
            DSH_MEMORY_ROOT=str(work / "memories"),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="bench",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_CONCURRENCY=str(args.concurrency),
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
            PREFECT_LOGGING_LEVEL="WARNING",
        )
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            from dsh_memory.flows.extract import extract_flow

            extract_flow(session_ids=[], dry_run=True)  # warm-up: imports, flow registration
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            summary = extract_flow()
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    extracted = len(summary.extracted)
    ideal = args.sessions * args.latency / args.concurrency
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(f"sessions extracted      : {extracted}/{args.sessions} (max in flight at the model: {fake.max_in_flight})")
    print(f"wall time               : {wall:.1f} s   ideal {ideal:.1f} s   ratio {wall / ideal:.3f} (goal <= 1.10)")
    print(f"client CPU per session  : {cpu / args.sessions * 1000:.0f} ms")


if __name__ == "__main__":
    main()
