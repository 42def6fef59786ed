"""`dsh-memory replay` measured: on the real sessions of `../shared/realq`, and its cost on a history.

    python bench/bench_replay.py                        # the local model (bundled Qwen)
    python bench/bench_replay.py --provider fake        # the fake endpoint (--latency s per call)
    options: --data DIR (the realq folder), --sessions N (the timed history, default 50; 0: none),
             --no-compare, --skip-realq, --threads N, --json FILE

1. realq: every session of `../shared/realq` (17 public Claude Code / Codex sessions; several
   share a repository) replayed with `--all` through the real pipeline: standing instructions
   restated, anticipated, missed, new rules, per project. Without the folder this part prints one
   line and is skipped (exit 0).
2. Cost: a generated history of N DSH sessions in two repositories, each typing one of five
   rules (the first five new, every later one a restatement in one of two wordings: the worst
   case, nearly every session needs the memory at its start). Its replay's wall time against
   Phase 1 alone over the same sessions (one extract run, a fresh root), same model, same
   process: the issue's goal is that the replay takes no longer than Phase 1 for them. With
   `--no-compare` (the local model's hour), Phase 1 is timed as the replay's own extract run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_quality  # noqa: E402

DATA = REPO.parent / "shared" / "realq"
RULES = [  # (first wording, second wording): the second restates the first in other words
    ("Never mock our own code in the tests.", "Don't mock our own modules, the tests use the real parts."),
    ("Always run `make lint` before committing.", "Remember: always run make lint before each commit."),
    ("Don't use npm in this repo, use pnpm.", "Please never use npm here, pnpm only."),
    ("Never push to main directly.", "Don't push directly to main, open a PR."),
    ("Commit messages must be one short line.", "Always keep the commit message to one short line."),
]


def _fake_answer(request: dict):
    """A model that keeps the user's lines as memory, and a summary of every memory line."""
    from dsh_memory.testing.fake_openai import Reply

    text = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        lines = list(dict.fromkeys(ln for ln in text.splitlines() if ln.startswith("- ")))[:60]
        body = "\n".join(lines) + "\n"
        return Reply.tool({"memory_md": "# Memory\n\n" + body, "memory_summary_md": "v1\n" + body})
    said = [ln.split("] ", 1)[1] for ln in text.splitlines() if ln.startswith("[user] ")]
    raw = "\n".join(f"- {s}" for s in said[:6]) or "- nothing"
    return Reply.tool({"raw_memory": raw, "rollout_summary": "## Task\nA fix.\n", "rollout_slug": "a fix"})


def provider_env(provider: str, stack: ExitStack, latency: float, threads: int | None) -> dict[str, str]:
    if provider != "fake":
        return bench_quality.provider_env(provider, stack, threads=threads)
    from dsh_memory.testing.fake_openai import FakeOpenAIServer

    srv = stack.enter_context(FakeOpenAIServer(handler=_fake_answer, latency_seconds=latency))
    return {
        "DSH_MEMORY_PROVIDER": "openai",
        "DSH_MEMORY_BASE_URL": srv.base_url,
        "DSH_MEMORY_API_KEY": "bench-key",
        "DSH_MEMORY_MODEL": "fake-model",
    }


def _replay(workdir: Path):
    from dsh_memory.context import memory_context
    from dsh_memory.replay.core import replay

    with memory_context() as ctx:
        return replay(ctx, cwd=None, workdir=workdir)


def bench_realq(data: Path, workdir: Path, model_env: dict[str, str]) -> dict:
    sessions = data / "sessions"
    env = {
        "DSH_HOME": str(workdir / "dsh"),
        "DSH_MEMORY_ROOT": str(workdir / "live"),
        "CODEX_HOME": str(sessions / "codex"),
        "CLAUDE_CONFIG_DIR": str(sessions / "claude"),
        **model_env,
    }
    with bench_quality.environment(env):
        return _replay(workdir / "replay").model_dump(mode="json")


def make_history(home: Path, n: int) -> list[str]:
    from dsh_memory.testing.sessions import write_session

    projects = [home / "src" / "api", home / "src" / "web"]
    for p in projects:
        (p / ".git").mkdir(parents=True)
    ids = []
    for i in range(n):
        first, again = RULES[i % len(RULES)]
        rule = first if (i // len(RULES)) % 2 == 0 else again
        prompts = [f"Fix issue #{i + 1} in the parser: the dates come out a day late.", rule]
        days_ago = n - i
        ids.append(write_session(home / "dsh", projects[i % 2], i + 1, prompts, days_ago, "Fixed; `make test` passes."))
    return ids


def cpu_seconds() -> float:
    """CPU time of this process (all its threads: the local model's too) and of its running
    children (the Prefect server): beside the wall time, a figure a shared machine's load bends
    less, as the other jobs take the cores from one part or the other."""
    t = os.times()
    total = t.user + t.system
    for children in Path("/proc/self/task").glob("*/children"):  # Linux; elsewhere this process only
        for pid in children.read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def _warm_model() -> None:
    """Load the local model and run one short decode before either is timed: its load, its
    context and its pages read in are neither's cost (the replay, timed first, paid them alone,
    and the assembly of the bundled model into a fresh cache)."""
    from dsh_memory.llm.factory import make_llm
    from dsh_memory.settings_loader import resolve_settings

    llm = make_llm(resolve_settings().route, "phase1")
    if hasattr(llm, "render_prompt"):  # the local model (an endpoint's warm-up is the server's)
        llm.complete([{"role": "user", "content": "Say ok."}], max_tokens=4)


def bench_cost(n: int, workdir: Path, model_env: dict[str, str], compare: bool = True) -> dict:
    """The replay of a generated history vs Phase 1 alone over the same sessions (`compare`),
    or vs the replay's own Phase 1 run over them (without `compare`: half the time)."""
    from prefect import flow

    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.llm.model_files import default_cache_dir

    flow(name="bench-warm-up")(lambda: None)()  # the Prefect server's start is neither's cost

    ids = make_history(workdir, n)
    env = {
        "XDG_CACHE_HOME": str(default_cache_dir().parents[1]),  # the assembled local model, not a new copy
        "HOME": str(workdir),
        "DSH_HOME": str(workdir / "dsh"),
        "DSH_MEMORY_ROOT": str(workdir / "live"),
        "CODEX_HOME": str(workdir / "none"),
        "CLAUDE_CONFIG_DIR": str(workdir / "none"),
        **model_env,
    }
    with bench_quality.environment(env):
        _warm_model()
        started, cpu = time.monotonic(), cpu_seconds()
        result = _replay(workdir / "replay")
        replay_s, replay_cpu = time.monotonic() - started, cpu_seconds() - cpu
        phase1_cpu = None
        if compare:
            started, cpu = time.monotonic(), cpu_seconds()
            p1 = extract_flow(session_ids=ids, backfill=True, respect_idle=False, memory_root=str(workdir / "phase1"))
            phase1_s, counts, phase1_cpu = time.monotonic() - started, p1.counts, cpu_seconds() - cpu
        else:
            phase1_s, counts = result.phase1_seconds, {"extracted (in the replay)": result.extracted}
    return {
        "sessions": n,
        "replay_seconds": round(replay_s, 1),
        "phase1_seconds": round(phase1_s, 1),
        "ratio": round(replay_s / phase1_s, 2) if phase1_s else None,
        "replay_cpu_seconds": round(replay_cpu, 1),
        "phase1_cpu_seconds": round(phase1_cpu, 1) if phase1_cpu is not None else None,
        "cpu_ratio": round(replay_cpu / phase1_cpu, 2) if phase1_cpu else None,
        "phase1_counts": counts,
        "phase1_alone": compare,
        "replay": result.model_dump(
            mode="json",
            include={"summary", "extracted", "failed", "consolidations", "seconds", "phase1_seconds", "phase2_seconds"},
        ),
    }


def _print_realq(r: dict) -> None:
    s = r["summary"]
    print(
        f"realq: {r['sessions']} sessions, {len(r['projects'])} projects, {r['seconds']} s "
        f"({r['extracted']} extracted, {r['consolidations']} consolidations; rules compared by {r['matcher']}): "
        f"restated {s['restated']}, anticipated {s['anticipated']}, missed {s['missed']}, new rules {s['new_rules']}"
    )
    for p in r["projects"]:
        print(f"  {p['project']}: {p['sessions']} sessions, {p['restated']} restated, {p['new_rules']} new rules")
    for i in r["restated_items"]:
        state = "anticipated" if i["anticipated"] else "missed"
        print(f"  {state}: {i['text']!r} (first: {i['earlier']['text']!r})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=("local", "endpoint", "fake"), default="local")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--latency", type=float, default=1.0, help="fake provider: seconds per model call")
    ap.add_argument("--skip-realq", action="store_true")
    ap.add_argument(
        "--no-compare", action="store_true", help="time Phase 1 as the replay's own extract run, not a second run"
    )
    ap.add_argument("--threads", type=int)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    bench_quality.cli_setup(None)
    out: dict = {"provider": args.provider}
    with ExitStack() as stack:
        model_env = provider_env(args.provider, stack, args.latency, args.threads)
        if args.skip_realq:
            pass
        elif not (args.data / "sessions").is_dir():
            print(f"realq: {args.data} not found: the real-session part is skipped")
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsh-replay-realq-")))
            out["realq"] = bench_realq(args.data, tmp, model_env)
            _print_realq(out["realq"])
        if args.sessions > 0:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsh-replay-cost-")))
            out["cost"] = c = bench_cost(args.sessions, tmp, model_env, compare=not args.no_compare)
            s = c["replay"]["summary"]
            rp = c["replay"]
            print(
                f"cost: {c['sessions']} sessions ({args.provider}): replay {c['replay_seconds']} s "
                f"(its Phase 1 run {rp['phase1_seconds']} s, consolidating {rp['phase2_seconds']} s; "
                f"{rp['extracted']} extracted, {rp['consolidations']} consolidations; "
                f"restated {s['restated']}, anticipated {s['anticipated']}, missed {s['missed']}, "
                f"new rules {s['new_rules']}) vs Phase 1 {'alone' if c['phase1_alone'] else 'in it'} "
                f"{c['phase1_seconds']} s {c['phase1_counts']}: "
                f"ratio {c['ratio']} (goal ≤ 1.0); CPU {c['replay_cpu_seconds']} s vs {c['phase1_cpu_seconds']} s: "
                f"ratio {c['cpu_ratio']}"
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
