"""Memory quality on the labelled set: is what the pipeline writes worth injecting into an agent?

    python bench/bench_quality.py                    # the local model (bundled Qwen, or DSH_MEMORY_MODEL_PATH)
    python bench/bench_quality.py --provider endpoint  # the configured endpoint (DSH_MEMORY_API_KEY …)
    python bench/bench_quality.py --provider fake      # the scripted fake server (noisy small-model answers)
    python bench/bench_quality.py --only samples       # just the 5 bundled demo sessions
    options: --json FILE (metrics as JSON), --keep DIR (keep the memory root), --threads N

The set: the bundled demo sessions (dsh_memory/samples) and the labelled sessions of
bench/quality/ (labels.json says, per session, the facts a future agent must find, what must not
appear, whether it is trivial, whether a skill should come out of it). The real flows run
in-process: Phase 1 once per session (timed), then Phase 2 once (forced, timed). Metrics
(bench/quality/metrics.py): fact recall through the product's own search, groundedness,
repeated and cut-off lines, boilerplate, point-of-view errors, trivial sessions that produced
memory, seconds per session and for Phase 2, peak RSS. Prints one table with the goals.

Run the local model on a quiet machine: 2 threads on 2 cores slow down several-fold under load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from quality import metrics  # noqa: E402
from quality.fake_answers import fake_handler  # noqa: E402

SAMPLES = REPO / "dsh_memory" / "samples"
SESSIONS = REPO / "bench" / "quality" / "sessions"
LABELS = REPO / "bench" / "quality" / "labels.json"
HOMES = {"DSH_HOME": "dsh", "CODEX_HOME": "codex", "CLAUDE_CONFIG_DIR": "claude"}


def load_labels(only: str | None = None) -> dict[str, dict]:
    labels = json.loads(LABELS.read_text())
    if only in ("samples", "bench"):
        return {k: v for k, v in labels.items() if v.get("set") == only}
    if only:
        return {k: v for k, v in labels.items() if k.startswith(only)}
    return labels


def prepare(workdir: Path, sources: tuple[Path, ...] = (SAMPLES, SESSIONS)) -> dict[str, str]:
    """Session homes with the sessions of `sources` (the samples and the labelled sessions; aged an
    hour: idle) and the env."""
    env = {}
    old = time.time() - 3600
    for var, sub in HOMES.items():
        dst = workdir / sub
        for src in (s / sub for s in sources):
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
        dst.mkdir(parents=True, exist_ok=True)
        for p in dst.rglob("*"):
            os.utime(p, (old, old))
        env[var] = str(dst)
    env.update(
        DSH_MEMORY_ROOT=str(workdir / "memories"),
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        DSH_MEMORY_PHASE2_COOLDOWN_SECONDS="0",
        DSH_MEMORY_CONCURRENCY="1",
    )
    return env


def provider_env(provider: str, stack: ExitStack, handler=None, threads: int | None = None) -> dict[str, str]:
    """The model route for one run. `fake` starts the scripted server (closed by `stack`)."""
    clear = {k: "" for k in ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY", "DSH_MEMORY_BASE_URL")}
    if provider == "local":
        env = {**clear, "DSH_MEMORY_PROVIDER": "local"}
        if threads:
            env["DSH_MEMORY_LOCAL_THREADS"] = str(threads)
        return env
    if provider == "endpoint":
        if not (os.environ.get("DSH_MEMORY_API_KEY") or os.environ.get("DEEPSEEK_API_KEY")):
            if not os.environ.get("DSH_MEMORY_BASE_URL"):
                raise SystemExit("--provider endpoint needs DSH_MEMORY_API_KEY (or DSH_MEMORY_BASE_URL)")
        return {"DSH_MEMORY_PROVIDER": "openai"}
    if provider == "fake":
        from dsh_memory.testing.fake_openai import FakeOpenAIServer

        srv = stack.enter_context(FakeOpenAIServer(handler=handler or fake_handler))
        return {
            "DSH_MEMORY_PROVIDER": "openai",
            "DSH_MEMORY_BASE_URL": srv.base_url,
            "DSH_MEMORY_API_KEY": "bench-key",
            "DSH_MEMORY_MODEL": "fake-model",
        }
    raise SystemExit(f"unknown provider {provider!r}")


def run_pipeline(session_ids: list[str]) -> dict:
    """Phase 1 per session (timed), a snapshot of the raw blocks, then Phase 2 (timed)."""
    from dsh_memory.flows.consolidate import consolidate_flow
    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.settings_loader import resolve_settings
    from dsh_memory.storage.store import MemoryStore

    settings = resolve_settings().settings
    store = MemoryStore(settings.memory_root)
    runs: dict[str, dict] = {}
    provider = model = ""
    for sid in session_ids:
        started = time.monotonic()
        result = extract_flow(session_ids=[sid], backfill=True, respect_idle=False)
        outcome = next((o for o in result.outcomes if o.session == sid), None)
        runs[sid] = {
            "seconds": round(time.monotonic() - started, 1),
            "outcome": outcome.outcome if outcome else "missing",
            "error": outcome.error if outcome else "",
            "tokens_in": outcome.tokens_in if outcome else 0,
            "tokens_out": outcome.tokens_out if outcome else 0,
        }
        provider, model = result.provider or provider, result.model or model
    raw = {b.session_id: b.body for b in store.read_raw_blocks()}
    started = time.monotonic()
    p2 = consolidate_flow(force=True)
    phase2_seconds = round(time.monotonic() - started, 1)
    return {
        "runs": runs,
        "raw": raw,
        "phase2": {"seconds": phase2_seconds, "outcome": p2.outcome, "error": p2.error or ""},
        "provider": provider,
        "model": model,
        "root": str(settings.memory_root),
        "roots": settings.roots,
    }


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """`env` set in os.environ for the block, the previous values back afterwards."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def peak_rss_mib() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


def run(
    provider: str = "local",
    *,
    only: str | None = None,
    workdir: Path | None = None,
    handler=None,
    threads: int | None = None,
) -> dict:
    """Run the pipeline over the labelled set with `provider` and return the metrics (a dict).
    The caller owns the Prefect API (tests) or gets an ephemeral one (the CLI)."""
    labels = load_labels(only)
    with ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsh-quality-")))
        env = {**prepare(tmp), **provider_env(provider, stack, handler, threads)}
        with environment(env):
            done = run_pipeline(list(labels))
            from dsh_memory.storage.store import MemoryStore

            result = metrics.measure(MemoryStore(Path(done["root"])), labels, done, done["roots"])
    result["provider"], result["model"] = done["provider"], done["model"]
    result["peak_rss_mib"] = peak_rss_mib()
    return result


def cli_setup(keep: Path | None) -> None:
    """A quiet ephemeral Prefect for a bench run from the command line; the --keep folder made."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if keep:
        keep.mkdir(parents=True, exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", choices=("local", "endpoint", "fake"), default="local")
    ap.add_argument("--only", help="'samples', 'bench' or a session id prefix")
    ap.add_argument("--json", type=Path, help="also write the metrics here")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it (memory root: KEEP/memories)")
    ap.add_argument("--threads", type=int, help="llama.cpp threads for the local model")
    args = ap.parse_args(argv)
    cli_setup(args.keep)
    result = run(args.provider, only=args.only, workdir=args.keep, threads=args.threads)
    print(metrics.table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
