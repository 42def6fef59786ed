"""Memory from real sessions: the whole pipeline over `../shared/realq`, scored against its labels.

    python bench/bench_real.py                     # the local model (bundled Qwen, or DSH_MEMORY_MODEL_PATH)
    python bench/bench_real.py --provider fake     # the fake endpoint: a model that writes memory, noisily
    python bench/bench_real.py --provider endpoint # the configured endpoint (DSH_MEMORY_API_KEY …)
    options: --data DIR (the realq folder), --keep DIR (keep the memory root), --json FILE,
             --skip-quality (not also bench_quality), --threads N

`../shared/realq` holds 17 real Claude Code transcripts and Codex rollouts from public
repositories, laid out as the agents store them, with hand labels (durable items a careful
engineer would keep, one-off instructions that must not become rules) and a reference scorer.
It is benchmark material, not test input: without it this prints one line and exits 0.

One run: Phase 1 per session (timed, in-process on an ephemeral Prefect), Phase 2 once (forced),
then the reference scorer over the memory root: recall of labelled items in MEMORY.md + summary
(injected) and anywhere (rollout summaries too), MEMORY.md bullets that are noise (markers,
exploration, one-off instructions), misscoped global lines, characters and seconds per session.
In the same run, bench_quality on the bundled demo samples and the synthetic set, so nothing it
measures regresses. Each figure is printed beside its goal (issue 24).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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
GOALS = {  # measure: (goal, "≥" or "≤")
    "recall_injected": (0.50, "≥"),
    "recall_any": (0.65, "≥"),
    "noise_rate": (0.05, "≤"),
    "misscoped_global": (0, "≤"),
    "chars_per_session": (2500, "≤"),
    "recap_chars_per_session": (4000, "≤"),
    "phase1_seconds_per_session": (60, "≤"),
}


def scorer(data: Path):
    """The reference scorer's module (realq/score.py), loaded from the data folder."""
    spec = importlib.util.spec_from_file_location("realq_score", data / "score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def session_ids(data: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["session"] for p in (data / "labels").glob("*.json"))


def run(data: Path, provider: str, workdir: Path, threads: int | None = None) -> dict:
    """The pipeline over the real sessions with `provider`; the scorer's figures plus timings."""
    sessions = data / "sessions"
    with ExitStack() as stack:
        env = {
            "DSH_HOME": str(workdir / "dsh"),
            "DSH_MEMORY_ROOT": str(workdir / "memories"),
            "CODEX_HOME": str(sessions / "codex"),
            "CLAUDE_CONFIG_DIR": str(sessions / "claude"),
            "DSH_MEMORY_IDLE_SECONDS": "0",  # the files are new copies: nothing is being written
            **bench_quality.provider_env(provider, stack, threads=threads),
        }
        with bench_quality.environment(env):
            started = time.monotonic()
            done = bench_quality.run_pipeline(session_ids(data))
            wall = time.monotonic() - started
    result = scorer(data).main(str(data / "labels"), done["root"], as_json=False)
    runs = done["runs"]
    extracted = [r for r in runs.values() if r["outcome"] == "extracted"]
    result.update(
        provider=done["provider"],
        model=done["model"],
        outcomes={o: sum(r["outcome"] == o for r in runs.values()) for o in {r["outcome"] for r in runs.values()}},
        phase1_seconds_per_session=round(sum(r["seconds"] for r in runs.values()) / max(1, len(runs)), 1),
        phase1_seconds_per_extracted=round(sum(r["seconds"] for r in extracted) / max(1, len(extracted)), 1),
        phase2_seconds=done["phase2"]["seconds"],
        wall_seconds=round(wall, 1),
        root=done["root"],
    )
    return result


def table(result: dict) -> str:
    rows = ["| measure | this run | goal |", "|---|---|---|"]
    for key, (goal, way) in GOALS.items():
        value = result.get(key)
        if value is None:
            continue
        ok = value >= goal if way == "≥" else value <= goal
        rows.append(f"| {key} | {value} | {way} {goal} {'(met)' if ok else '(not met)'} |")
    rows.append(f"| noise by kind | {result.get('noise')} of {result.get('bullets')} bullets | |")
    rows.append(f"| outcomes | {result.get('outcomes')} | |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=("local", "endpoint", "fake"), default="local")
    ap.add_argument("--data", type=Path, default=DATA, help="the realq folder (sessions/, labels/, score.py)")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--skip-quality", action="store_true", help="do not also run bench_quality")
    ap.add_argument("--threads", type=int, help="llama.cpp threads for the local model")
    args = ap.parse_args(argv)
    if not (args.data / "labels").is_dir() or not (args.data / "score.py").is_file():
        print(f"bench_real: no real-session set at {args.data} (labels/ and score.py): nothing to measure")
        return 0
    bench_quality.cli_setup(args.keep)
    with tempfile.TemporaryDirectory(prefix="dsh-real-") as tmp:
        result = run(args.data, args.provider, args.keep or Path(tmp), args.threads)
        print(f"real sessions, {result['provider']}/{result['model']}:")
        print(table(result))
        out = {"real": result}
        if not args.skip_quality:
            quality = bench_quality.run(args.provider, threads=args.threads)
            print("\nbench_quality, same run (demo samples + synthetic set):")
            print(bench_quality.metrics.table(quality))
            out["quality"] = quality
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
