"""A storm of turn ends against a real `dsh-memory serve` (issue #19).

N sessions × M turn ends over S seconds: each turn appends one turn to the session's DSH log,
then POSTs its turn end to the stack's receiver. The model is the fake OpenAI-compatible server
on loopback (`--latency` per call). Printed, with the load average next to them:

- receiver latency p50/p99 (client side), answers other than 202;
- turn ends forwarded vs sent, and sessions whose LAST turn end reached Prefect (0 dropped);
- extractions per session (rollout-summary parts: each session once per quiet period), the
  debounced extract-session runs it took and their states, consolidate runs;
- peak processes and peak RSS of the stack (serve and every descendant, sampled every 0.5 s);
- per session, time from its last turn end to its rollout summary (p50/max), and to the last
  summary of all; every session searchable through the stack's RPC at the end;
- one new turn on K already-extracted sessions: time until its new part is searchable.

The anchor, measured in the same run before the storm: ONE session, one turn end, on the idle
stack — the same path with nothing else going on. Ratios are storm ÷ anchor.

    python bench/bench_storm.py [--sessions 100] [--turns 50] [--seconds 30] [--debounce 20]

Goals (100 × 50 / 30 s, debounce 20 s, on 2 cores): 0 dropped, p99 < 50 ms, each session
extracted exactly once, ≤ 6 processes and ≤ 1 GB, last turn end → searchable p50 ≤ 35 s and
max ≤ 45 s, one new turn on a finished session searchable ≤ 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _storm_stack import Sampler, Stack  # noqa: E402

PROJECT = "--home-bench-src-storm--"
SENDERS = 16  # threads sending turn ends at once


def sid(i: int) -> str:
    return str(uuid.UUID(int=(0x5708 << 112) + i + 1))


class Sessions:
    """DSH session logs the storm appends to, one turn per turn end."""

    def __init__(self, home: Path, n: int):
        self.home, self.n = home, n
        self.seq = [0] * n
        self.turn = [0] * n
        self.locks = [threading.Lock() for _ in range(n)]
        t0 = int(time.time() * 1000)
        for i in range(n):
            d = self.path(i).parent
            d.mkdir(parents=True)
            head = {"type": "session", "version": 4, "id": sid(i), "createdAt": t0, "cwd": "/home/bench/src/storm"}
            self.path(i).write_text(json.dumps({**head, "isSeeded": False, "delegationDepth": 0}) + "\n")

    def path(self, i: int) -> Path:
        return self.home / "sessions" / PROJECT / sid(i) / "session.v4.jsonl"

    def append_turn(self, i: int, text: str) -> dict:
        """Append one whole turn; returns its turn-end body."""
        now = int(time.time() * 1000)
        self.turn[i] += 1
        turn, s = self.turn[i], self.seq[i]
        # A project rule in every prompt (the no-op gate sends the session to the model) naming the
        # session's token, which the fake model's summary repeats (grounded: the clean-up keeps it).
        text = f"{text}: {rule(i, 'follow-up' in text)}"
        user = {"id": f"u{s}", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": text}]}
        reply = {"id": f"a{s}", "role": "assistant", "source": {"kind": "model"}}
        reply["content"] = [{"type": "text", "text": f"Done: {text}"}]
        lines = [
            {"type": "turn/start", "seq": s, "time": now, "data": {"turn": turn}},
            {"type": "user/message", "seq": s + 1, "time": now, "surfaceOp": "append", "data": user},
            {
                "type": "assistant/message",
                "seq": s + 2,
                "time": now,
                "surfaceOp": "append",
                "data": {"turn": turn, "step": 1, "message": reply},
            },
            {"type": "turn/end", "seq": s + 3, "time": now, "data": {"turn": turn, "reason": {"kind": "completed"}}},
        ]
        with open(self.path(i), "a") as f:
            f.write("".join(json.dumps(x) + "\n" for x in lines))
        self.seq[i] = s + 4
        header = {"cwd": "/home/bench/src/storm", "origin": "user", "delegationDepth": 0}
        return {"sessionId": sid(i), "turn": turn, "reason": {"kind": "completed"}, "seq": s + 3, "header": header}


def rule(i: int, follow_up: bool) -> str:
    if follow_up:
        return f"in followtok{i}x always run `make lint` before you push."
    return f"in stormtok{i}x always run `make test` before you commit."


def model_reply(request: dict):
    """Phase 1: the session's rule, repeated (a follow-up's rule for a new part); Phase 2: a small
    handbook."""
    from dsh_memory.testing.fake_openai import Reply

    text = json.dumps(request.get("messages"))
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool({"memory_md": "# Memory\n\n- storm bench\n", "memory_summary_md": "v1\n- storm bench\n"})
    i = int(text.split("storm session ", 1)[1].split(" ", 1)[0]) if "storm session " in text else -1
    said = rule(i, f"followtok{i}x" in text)
    return Reply.tool(
        {
            "raw_memory": f"- {said[0].upper()}{said[1:]}",
            "rollout_summary": said.capitalize(),
            "rollout_slug": f"storm-{i}",
        }
    )


def summary_time(root: Path, i: int, part: int = 1) -> float | None:
    """When session i's rollout summary (part `part`) was written, or None."""
    name = f"storm-{i}.md" if part == 1 else f"storm-{i}-part{part}.md"
    try:
        return (root / "rollout_summaries" / name).stat().st_mtime
    except OSError:
        return None


TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def wait_for(predicate, timeout: float, every: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


def run_storm(
    sessions: int = 100,
    turns: int = 50,
    seconds: float = 30.0,
    debounce: int = 20,
    latency: float = 0.5,
    follow_ups: int = 3,
    api_url: str | None = None,
    work: Path | None = None,
    wait_seconds: float = 900.0,
    anchor: bool = True,
    echo=print,
) -> dict:
    """Run the storm; returns every number the bench prints (the test asserts on them)."""
    from dsh_memory.testing.fake_openai import FakeOpenAIServer

    work = work or Path(tempfile.mkdtemp(prefix="dsh-bench-storm-"))
    n = sessions + 1  # session `sessions` is the anchor
    logs = Sessions(work / "dsh", n)
    out: dict = {"load_before": os.getloadavg()}
    with FakeOpenAIServer(latency_seconds=latency, handler=model_reply) as fake:
        stack = Stack(work, fake.base_url, debounce, api_url)
        echo(f"starting dsh-memory serve (work dir {work}) …")
        stack.start()
        sampler = Sampler(stack.proc.pid)
        sampler.start()
        hook = stack.base + "/hooks/turn-end"
        started = _iso(time.time())
        try:
            # -- the anchor: one session, one turn end, on the idle stack ---------------------
            out["anchor_seconds"] = float("nan")
            if anchor:
                a = sessions
                t_anchor = time.time()
                r = httpx.post(hook, json=logs.append_turn(a, f"storm session {a} turn 1"), timeout=10)
                assert r.status_code == 202, r.text
                wait_for(lambda: summary_time(stack.root, a) is not None, wait_seconds)
                out["anchor_seconds"] = (summary_time(stack.root, a) or float("nan")) - t_anchor
                echo(f"anchor: one turn end → summary in {out['anchor_seconds']:.1f} s (debounce {debounce} s)")

            # -- the storm -------------------------------------------------------------------
            plan = sorted(
                (j * seconds / turns + (i / sessions) * (seconds / turns), i)
                for i in range(sessions)
                for j in range(turns)
            )
            latencies: list[float] = []
            statuses: dict[int, int] = {}
            last_sent: dict[int, tuple[float, int]] = {}
            # One HTTP client per sender thread, made before the clock starts: building one loads the
            # CA bundle, which would stall the other senders' timed requests (the bench's own GIL).
            made = [httpx.Client(timeout=30) for _ in range(SENDERS)]
            clients: queue.SimpleQueue = queue.SimpleQueue()
            for client in made:
                clients.put(client)
            t0 = time.monotonic()
            wall0 = time.time()
            local = threading.local()

            def fire(item):
                due, i = item
                delay = t0 + due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                client = getattr(local, "client", None) or clients.get_nowait()
                local.client = client
                with logs.locks[i]:
                    body = logs.append_turn(i, f"storm session {i} turn {logs.turn[i] + 1}")
                    s = time.perf_counter()
                    resp = client.post(hook, json=body)
                    latencies.append(time.perf_counter() - s)
                    statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
                    if resp.status_code == 202 and resp.json().get("triggered"):
                        last_sent[i] = (time.time(), body["seq"])

            with ThreadPoolExecutor(max_workers=SENDERS) as pool:
                list(pool.map(fire, plan))
            for client in made:
                client.close()
            out["storm_wall"] = time.time() - wall0
            out["load_after_storm"] = os.getloadavg()
            out["sent"] = len(plan)
            out["statuses"] = statuses
            qs = statistics.quantiles(latencies, n=100)
            out["p50_ms"], out["p99_ms"] = statistics.median(latencies) * 1000, qs[98] * 1000
            echo(f"storm: {len(plan)} turn ends in {out['storm_wall']:.1f} s; waiting for the summaries …")

            # -- every session extracted ---------------------------------------------------------
            wait_for(lambda: all(summary_time(stack.root, i) for i in range(sessions)), wait_seconds, 0.5)
            done = {i: summary_time(stack.root, i) for i in range(sessions)}
            lag = [done[i] - last_sent[i][0] for i in range(sessions) if done[i] and i in last_sent]
            out["extracted"] = sum(1 for v in done.values() if v)
            out["lag_p50"], out["lag_max"] = (statistics.median(lag), max(lag)) if lag else (float("nan"),) * 2
            last_turn_end = max(t for t, _ in last_sent.values())
            out["last_summary_after_last_turn_end"] = max(v for v in done.values() if v) - last_turn_end
            out["searchable"] = sum(stack.searchable(f"stormtok{i}x") for i in range(sessions))
            out["load_after_extraction"] = os.getloadavg()

            # -- one new turn on K extracted sessions ----------------------------------------------
            time.sleep(max(0, debounce / 2 - 5))  # let the storm's logs age as a quiet session's would
            fresh = []
            for i in range(min(follow_ups, sessions)):
                t = time.time()
                r = httpx.post(hook, json=logs.append_turn(i, f"storm session {i} follow-up"), timeout=10)
                assert r.status_code == 202, r.text
                ok = wait_for(lambda i=i: stack.searchable(f"followtok{i}x"), debounce + 180, 0.5)
                fresh.append(time.time() - t if ok else float("inf"))
            out["fresh"] = fresh

            # -- Prefect's view ----------------------------------------------------------------
            last_events = {i: stack.last_turn_end_event(sid(i)) for i in range(sessions)}  # read once
            forwarded_last = 0
            for i, event in last_events.items():
                if _seq(event) == last_sent.get(i, (0, -1))[1] + 4 * (i < follow_ups):
                    forwarded_last += 1
            out["last_forwarded"] = forwarded_last
            out["events_forwarded"] = stack.events_received()

            # this stack's runs that were due (the interval schedule's upcoming ones apart), once
            # they have settled: a run woken after the last extraction (it finds nothing due) may
            # still be queued for the deployment's one slot or running when the last session
            # became searchable
            def due_runs() -> list[dict]:
                now = _iso(time.time())
                return [
                    r
                    for r in stack.runs("extract-session")
                    if started <= r["expected_start_time"] <= now and r.get("deployment_id")
                ]

            wait_for(lambda: all(r["state"]["type"] in TERMINAL for r in due_runs()), debounce + 180, 1.0)
            runs = due_runs()
            parts = [_parts(stack.root, i) - (1 if i < follow_ups else 0) for i in range(sessions)]
            out["extractions_per_session"] = {k: parts.count(k) for k in sorted(set(parts))}
            out["runs"] = len(runs)
            out["run_states"] = _count(r["state"]["type"] for r in runs)
            out["timeline"] = timeline(last_sent, last_events, done, debounce)
            # requested runs only: the interval schedule's upcoming runs (auto-scheduled) are not requests
            cons = [r for r in stack.runs("consolidate") if not r.get("auto_scheduled")]
            out["consolidate_runs"] = _count(r["state"]["type"] for r in cons)
        finally:
            sampler.stop.set()
            out["peak_procs"], out["peak_rss_gb"] = sampler.peak_procs, sampler.peak_rss / 2**30
            out["forwarder"] = _forwarder_line(stack.log_path)
            stack.stop()
    out["load_end"] = os.getloadavg()
    return out


def _ts(value: str | None) -> float | None:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def _seq(event: dict | None) -> int | None:
    return event["payload"].get("seq") if event else None


def _iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat()


def _parts(root: Path, i: int) -> int:
    """How many times session i was extracted: its rollout summary parts."""
    return len(list((root / "rollout_summaries").glob(f"storm-{i}.md"))) + len(
        list((root / "rollout_summaries").glob(f"storm-{i}-part*.md"))
    )


def timeline(last_sent: dict, last_events: dict, done: dict, debounce: float) -> dict:
    """Where a session's last turn end → summary went, p50/max over sessions (s):
    - `forward`: last turn end sent → its event received by Prefect (the receiver's coalescing);
    - `after debounce`: the debounce over → the session's summary written (waiting for the
      debounced run, its start, its plan, the model)."""
    parts: dict[str, list[float]] = {"forward": [], "after debounce": []}
    for i in last_sent:
        if not done.get(i):
            continue
        event = last_events.get(i)
        if event and _seq(event) == last_sent[i][1]:  # not a follow-up's since
            parts["forward"].append(_ts(event["received"]) - last_sent[i][0])
        parts["after debounce"].append(done[i] - last_sent[i][0] - debounce)
    return {k: (statistics.median(v), max(v)) for k, v in parts.items() if v}


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _forwarder_line(log: Path) -> str:
    lines = [x for x in log.read_text().splitlines() if "forwarding" in x or "not forwarded" in x]
    return lines[-1] if lines else ""


def report(o: dict, sessions: int, turns: int, seconds: float, debounce: int, echo=print) -> None:
    load = "/".join(f"{x:.1f}" for x in o["load_before"])
    echo(f"\n== storm: {sessions} sessions × {turns} turn ends over {seconds:.0f} s, debounce {debounce} s ==")
    echo(
        f"load average (1/5/15 min) before {load}; after the storm {o['load_after_storm'][0]:.1f}; "
        f"after extraction {o['load_after_extraction'][0]:.1f}"
    )
    echo(
        f"receiver latency      : p50 {o['p50_ms']:.1f} ms, p99 {o['p99_ms']:.1f} ms (goal < 50 ms); answers {o['statuses']}"
    )
    echo(
        f"sent / forwarded      : {o['sent']} turn ends sent, {o['events_forwarded']} events forwarded to Prefect "
        "(coalesced; the anchor's and follow-ups' included)"
    )
    echo(
        f"sent / last forwarded : {o['sent']} sent; {o['last_forwarded']}/{sessions} sessions' LAST turn end reached Prefect "
        f"(dropped: {sessions - o['last_forwarded']}, goal 0)"
    )
    echo(
        f"extractions           : {o['extractions_per_session']} (extractions → sessions; goal: all exactly 1) "
        f"by {o['runs']} extract-session runs, states {o['run_states']}"
    )
    echo(f"consolidate runs      : {o['consolidate_runs']}")
    echo(f"peak stack            : {o['peak_procs']} processes, {o['peak_rss_gb']:.2f} GiB RSS (goal ≤ 6, ≤ 1 GB)")
    echo(
        f"last turn end → summary: p50 {o['lag_p50']:.1f} s, max {o['lag_max']:.1f} s "
        f"(goal p50 ≤ {debounce + 15} s, max ≤ {debounce + 25} s); "
        f"all {o['extracted']}/{sessions} extracted, {o['searchable']}/{sessions} searchable"
    )
    echo(f"last summary after the last turn end: {o['last_summary_after_last_turn_end']:.1f} s")
    steps = "; ".join(f"{k} p50 {a:.1f} s, max {b:.1f} s" for k, (a, b) in o.get("timeline", {}).items())
    echo(f"  where it went       : {steps} (see timeline())")
    echo(
        f"anchor (1 session, idle stack): {o['anchor_seconds']:.1f} s → storm max ÷ anchor "
        f"{o['lag_max'] / o['anchor_seconds']:.2f}, p50 ÷ anchor {o['lag_p50'] / o['anchor_seconds']:.2f}"
    )
    fresh = ", ".join(f"{x:.1f}" for x in o["fresh"])
    if not o["fresh"]:
        return
    echo(
        f"one new turn → searchable: {fresh} s (goal ≤ {debounce + 10} s; anchor ratio "
        f"{max(o['fresh']) / o['anchor_seconds']:.2f})"
    )


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--debounce", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.5, help="fake model seconds per call")
    ap.add_argument("--follow-ups", type=int, default=3)
    args = ap.parse_args()
    o = run_storm(args.sessions, args.turns, args.seconds, args.debounce, args.latency, args.follow_ups)
    report(o, args.sessions, args.turns, args.seconds, args.debounce)


if __name__ == "__main__":
    main()
