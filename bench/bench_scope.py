"""Project-scoped memory on a labelled cross-project set: does each project get its own rules, the
global preferences, and nothing of the other projects'?

    python bench/bench_scope.py                       # the local model (bundled Qwen, or DSH_MEMORY_MODEL_PATH)
    python bench/bench_scope.py --provider fake       # the scripted fake endpoint (bench/scope/fake_answers.py)
    python bench/bench_scope.py --provider fake --naive-phase2   # … whose Phase 2 ignores scopes
    python bench/bench_scope.py --provider endpoint   # the configured endpoint (DSH_MEMORY_API_KEY …)
    options: --only N (the first N sessions), --budget CHARS (max_summary_chars), --json FILE, --keep DIR

The set (bench/scope/, written by make_sessions.py): five sessions from four projects (DSH,
Codex, Claude Code) with rules the user gave for one repository and preferences stated for every
repository, plus one rule that recurs in two projects. The real flows run in-process (Phase 1 per
session, then Phase 2, forced); then, for every project, the injection a session starting there
gets (`summary(cwd=…)`, what `summary --inject --from-hook`, the MCP resource and the RPC return)
and a scoped search for every other project's rules. Metrics:

- leak rate: (project rule, other project) pairs where the rule reaches the other project's
  injection, over all such pairs (goal 0); the same for scoped search hits;
- global presence: (global rule, project) pairs where the rule is in the project's injection
  (goal ≥ 0.9); own-project recall: each project rule in its own project's injection;
- the largest injected summary against the budget (goal ≤ 1.0), and against the unscoped summary
  (every project) measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_quality  # noqa: E402
from bench_quality import cli_setup, environment, peak_rss_mib, provider_env, run_pipeline  # noqa: E402
from scope.fake_answers import fake_handler, naive_handler  # noqa: E402

SET = REPO / "bench" / "scope"


def prepare(workdir: Path, budget: int) -> dict[str, str]:
    return {**bench_quality.prepare(workdir, (SET / "sessions",)), "DSH_MEMORY_MAX_SUMMARY_CHARS": str(budget)}


def measure(store, labels: dict, budget: int) -> dict:
    """The metrics of the module docstring over a consolidated memory root."""
    from dsh_memory.readpath import search, summary

    projects = labels["projects"]
    injections = {name: summary(store, budget, cwd=cwd) for name, cwd in projects.items()}
    text = {name: s.content.lower() for name, s in injections.items()}
    leaks, search_leaks, pairs, own, own_total = [], [], 0, 0, 0
    for name, rules in labels["project_rules"].items():
        for rule in rules:
            own_total += 1
            own += rule.lower() in text[name]
            for other, cwd in projects.items():
                if other == name:
                    continue
                pairs += 1
                if rule.lower() in text[other]:
                    leaks.append(f"{rule!r} → {other}")
                hits = search(store, [rule], mode="any", cwd=cwd).matches
                if hits:
                    search_leaks.append(f"{rule!r} → {other} ({hits[0].path}:{hits[0].match_line})")
    present, missing = 0, []
    for rule in labels["global_rules"]:
        for name in projects:
            if rule.lower() in text[name]:
                present += 1
            else:
                missing.append(f"{rule!r} ∉ {name}")
    unscoped = summary(store, 10**7)
    largest = max(len(s.content) for s in injections.values())
    return {
        "projects": len(projects),
        "leak_rate": round(len(leaks) / pairs, 3) if pairs else 0.0,
        "leaks": leaks,
        "search_leak_rate": round(len(search_leaks) / pairs, 3) if pairs else 0.0,
        "search_leaks": search_leaks,
        "global_presence": round(present / (len(labels["global_rules"]) * len(projects)), 3),
        "global_missing": missing,
        "own_recall": round(own / own_total, 3) if own_total else 0.0,
        "largest_injection_chars": largest,
        "budget_chars": budget,
        "injection_vs_budget": round(largest / budget, 3),
        "unscoped_summary_chars": len(unscoped.content),
        "other_projects_line": all(("other projects with memories" in t) for t in text.values() if len(projects) > 1),
    }


def run(
    provider: str = "local",
    *,
    only: int | None = None,
    budget: int = 3000,
    workdir: Path | None = None,
    threads: int | None = None,
    naive_phase2: bool = False,
) -> dict:
    labels = json.loads((SET / "labels.json").read_text())
    sessions = list(labels["sessions"])[:only] if only else list(labels["sessions"])
    if only:  # the projects of the sessions run, and their rules only
        kept = {labels["sessions"][s]["project"] for s in sessions}
        labels["projects"] = {k: v for k, v in labels["projects"].items() if k in kept}
        labels["project_rules"] = {k: v for k, v in labels["project_rules"].items() if k in kept}
    with ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsh-scope-")))
        env = {
            **prepare(tmp, budget),
            **provider_env(provider, stack, naive_handler if naive_phase2 else fake_handler, threads),
        }
        with environment(env):
            done = run_pipeline(sessions)
            from dsh_memory.storage.store import MemoryStore

            result = measure(MemoryStore(Path(done["root"])), labels, budget)
    seconds = [r["seconds"] for r in done["runs"].values()]
    result.update(
        naive_phase2=naive_phase2,
        provider=done["provider"],
        model=done["model"],
        sessions=len(sessions),
        outcomes={sid: r["outcome"] for sid, r in done["runs"].items()},
        seconds_per_session=round(sum(seconds) / len(seconds), 1) if seconds else 0.0,
        phase2=done["phase2"],
        peak_rss_mib=peak_rss_mib(),
    )
    return result


def table(r: dict) -> str:
    rows = [
        ("leak rate (project rule in another project's injection)", r["leak_rate"], "= 0"),
        ("leak rate, scoped search", r["search_leak_rate"], "= 0"),
        ("global preferences in every project's injection", r["global_presence"], "≥ 0.9"),
        ("project rules in their own project's injection", r["own_recall"], "(report)"),
        (
            "largest injection ÷ budget",
            f"{r['injection_vs_budget']} ({r['largest_injection_chars']}/{r['budget_chars']})",
            "≤ 1.0",
        ),
        ("unscoped summary (every project), chars", r["unscoped_summary_chars"], "(anchor)"),
        ("other projects named in each injection", r["other_projects_line"], "yes"),
        ("sessions / projects", f"{r['sessions']} / {r['projects']}", ""),
        ("seconds per session (Phase 1)", r["seconds_per_session"], ""),
        ("Phase 2", f"{r['phase2']['outcome']} in {r['phase2']['seconds']} s", ""),
    ]
    naive = ", Phase 2 ignoring scopes" if r.get("naive_phase2") else ""
    out = [f"bench_scope: provider {r['provider']} ({r['model']}{naive})", ""]
    out += [f"{k:<58} {v!s:<24} {g}" for k, v, g in rows]
    for key in ("leaks", "search_leaks", "global_missing"):
        if r[key]:
            out.append(f"{key}: " + "; ".join(r[key]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=("local", "endpoint", "fake"), default="local")
    ap.add_argument("--only", type=int, help="run only the first N sessions of the set")
    ap.add_argument("--budget", type=int, default=3000, help="max_summary_chars for the run")
    ap.add_argument("--json", type=Path, help="also write the metrics here")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it (memory root: KEEP/memories)")
    ap.add_argument("--threads", type=int, help="llama.cpp threads for the local model")
    ap.add_argument("--naive-phase2", action="store_true", help="fake: Phase 2 answers ignore scopes")
    args = ap.parse_args(argv)
    cli_setup(args.keep)
    result = run(
        args.provider,
        only=args.only,
        budget=args.budget,
        workdir=args.keep,
        threads=args.threads,
        naive_phase2=args.naive_phase2,
    )
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
