"""`extract`, `run` and `demo`: run the pipeline flows in-process, showing progress on stderr."""

from __future__ import annotations

import os
import shlex
import shutil
import time
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import typer

from dsh_memory.cli._common import plain_console, prefect_env, prefect_env_defaults, run, say, show
from dsh_memory.cli._progress import with_progress
from dsh_memory.cli.consolidate import phase2_failure
from dsh_memory.errors import NotFoundError, UserInputError
from dsh_memory.models import extract_command


def _print_phase1(summary: dict, dry_run: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    console = plain_console()
    if summary.get("skipped_no_route"):
        console.print(Text.assemble(("Phase 1 skipped:", "yellow"), f" {summary.get('error')}"))
        return
    if dry_run:
        table = Table("session", "source", "action", "reason", title="Phase 1 plan (dry run)")
        for d in summary["decisions"]:
            table.add_row(*map(Text, (d["session"][:13], d["source"], d["action"], d["reason"])))
        console.print(table)
        return
    if summary["outcomes"]:
        table = Table("session", "source", "outcome", "slug", "tokens in/out", title="Phase 1")
        for o in summary["outcomes"]:
            cells = (o["session"][:13], o["source"], o["outcome"], o["slug"], f"{o['tokens_in']}/{o['tokens_out']}")
            table.add_row(*map(Text, cells))
        console.print(table)
        for o in summary["outcomes"]:
            if o["outcome"] in ("failed", "unreadable"):
                typer.echo(failure_line(o), err=True)
    else:
        console.print(
            f"Phase 1: nothing to extract ({summary['discovered']} sessions discovered; "
            "use --dry-run to see why each was skipped)"
        )


def failure_line(o: dict) -> str:
    """One line per failed session: what, why, and how to retry (the traceback is in the run log)."""
    sid, error = o["session"], " ".join(str(o.get("error") or "").split())[:240]
    if o["outcome"] == "unreadable":
        return f"failed: {sid}: unreadable log: {error}"
    if o.get("parked"):
        how = "parked after repeated failures; resumes when the model works again, or now: dsh-memory extract --retry-parked"
    else:
        how = f"retried automatically; now: {extract_command(sid)}"
    attempt = f" (attempt {o['attempts']})" if o.get("attempts") else ""
    return f"failed: {sid}{attempt}: {error} — {how}"


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        workdir: Path = typer.Option(
            Path("dsh-memory-demo"), "--workdir", help="Where the sample sessions and the memory are written."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Run the whole pipeline on the bundled sample sessions (DSH, Codex, Claude Code)."""
        workdir = workdir.resolve()
        env = run(lambda: _prepare_demo(workdir), as_json)
        os.environ.update(env)
        prefect_env_defaults()
        typer.echo(f"sample sessions: {workdir}  memory: {workdir / 'memories'}", err=True)

        _catch_up(backfill=True, force=True, label="demo", as_json=as_json, env=env)
        if as_json:
            return
        summary = workdir / "memories" / "memory_summary.md"
        if summary.exists():
            say(f"\nInjected summary ({summary}):\n")
            say(summary.read_text())
        typer.echo("To look at this memory (status, search, summary, sessions…), run:")
        for var, value in env.items():
            typer.echo(f"export {var}={shlex.quote(value)}")

    @app.command("extract")
    def extract_cmd(
        sessions: list[str] | None = typer.Argument(None, help="Session ids to extract (default: none; see --all)."),
        all_: bool = typer.Option(False, "--all", help="Extract every ready candidate session."),
        backfill: bool = typer.Option(False, "--backfill", help="Ignore the age limit (backfill history)."),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="List what would be extracted and why others are skipped."
        ),
        retry_parked: bool = typer.Option(
            False,
            "--retry-parked",
            help="Resume the sessions parked after repeated failures (fresh retry budget) and extract them.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Phase 1: extract rollout summaries and raw memories from finished sessions."""
        prefect_env_defaults()

        def go():
            from dsh_memory.context import memory_context
            from dsh_memory.serve import preflight

            if not sessions and not all_ and not retry_parked:
                raise UserInputError("give one or more SESSION ids, --all, or --retry-parked")
            ids = list(sessions) if sessions else None
            if retry_parked and not dry_run:  # every parked session: a fresh retry budget, due now
                with memory_context(writes=True) as ctx:
                    resumed = ctx.state.unpark(datetime.now(UTC)) if ctx.state_exists() else []
                if resumed:
                    typer.echo(f"dsh-memory: resumed {len(resumed)} parked sessions", err=True)
                if not sessions and not all_:
                    ids = resumed
                if not ids and not all_:
                    return {"resumed": []}  # nothing was parked
            # Phase 1's plan from stat and the state database, before any Prefect engine starts:
            # a dry run or nothing to do never starts one.
            with memory_context() as ctx:  # a plan reads; the flow it starts writes
                preview = preflight.preview_phase1(ctx, datetime.now(UTC), ids, backfill, not ids)
            ids = preview.session_ids  # a prefix `sessions` printed, made whole
            if dry_run or not preview.has_work:
                if not dry_run:
                    preview.result.counts = {}  # what the flow reports when it did nothing
                return preview.result.model_dump(mode="json")
            ctx.resolved.require_saved()  # work to write: not into a root the saved settings may not name
            prefect_env()
            from dsh_memory.flows.extract import extract_flow

            return with_progress(
                lambda: extract_flow(session_ids=ids, backfill=backfill, respect_idle=not ids), "extracting"
            ).model_dump(mode="json")  # a Phase1Result

        def text(summary: dict) -> None:
            if "resumed" in summary:
                typer.echo("no parked sessions", err=True)
            else:
                _print_phase1(summary, dry_run)

        def unknown(summary: dict) -> NotFoundError | None:
            # the known ones were processed; the exit code says some were not found
            ids = summary.get("unknown_ids")
            return NotFoundError(f"unknown session id(s): {', '.join(ids)}") if ids else None

        show(go, as_json, text, unknown)

    @app.command("run")
    def run_cmd(
        backfill: bool = typer.Option(False, "--backfill", help="Ignore the age limit in Phase 1."),
        force: bool = typer.Option(
            False, "--force", help="Consolidate even inside the cooldown / the back-off after failures."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Catch-up: Phase 1 over every candidate, then Phase 2 when pending."""
        prefect_env_defaults()
        _catch_up(backfill=backfill, force=force, label="catch-up", as_json=as_json)


def _catch_up(*, backfill: bool, force: bool, label: str, as_json: bool, env: dict[str, str] | None = None) -> None:
    """Run the catch-up flow in-process and print its outcome (with --json, `env` joins the
    printed result). Nothing to extract and no consolidation due: the answer comes from the
    state database at once, without starting Prefect."""

    def go():
        result = _nothing_to_catch_up(backfill=backfill, force=force)
        if result is None:
            prefect_env()
            from dsh_memory.flows.catch_up import catch_up_flow

            result = with_progress(
                lambda: catch_up_flow(backfill=backfill, force_consolidation=force).model_dump(mode="json"), label
            )
        return {**result, **({"env": env} if env else {})}

    def text(result: dict) -> None:
        p2 = result.get("phase2") or {}
        _print_phase1(result["phase1"], False)
        typer.echo(f"Phase 2: {p2.get('outcome', '?')}" + (f" ({p2.get('reason')})" if p2.get("reason") else ""))

    # as `consolidate` says it: recorded, its inputs stay
    show(go, as_json, text, lambda result: phase2_failure(result.get("phase2") or {}))


def _nothing_to_catch_up(*, backfill: bool, force: bool) -> dict | None:
    """The catch-up's result when it would do nothing (nothing to extract, Phase 2's gate
    closed), else None. Written like the flow's result; nothing is recorded."""
    from dsh_memory.context import memory_context
    from dsh_memory.serve import preflight

    now = datetime.now(UTC)
    with memory_context() as ctx:  # a plan reads; the flow it starts writes
        phase1 = preflight.preview_phase1(ctx, now, backfill=backfill)
        phase2 = None if phase1.has_work else preflight.phase2_skipped(ctx.settings, now, force)
        if phase2 is None:  # work to write: not into a root the saved settings may not name
            ctx.resolved.require_saved()
            return None
    phase1.result.counts = {}
    return {"phase1": phase1.result.model_dump(mode="json"), "phase2": phase2.model_dump(mode="json")}


def _prepare_demo(workdir: Path) -> dict[str, str]:
    """Copy the bundled sample sessions into `workdir` and return the environment that uses them
    (the memory root and the agents' folders: what `status`, `search`, `summary` and `sessions` read)."""
    if workdir.exists() and not workdir.is_dir():
        raise UserInputError(f"--workdir {workdir} is not a directory: give a folder (one that is missing is created)")
    workdir.mkdir(parents=True, exist_ok=True)
    samples = Path(str(files("dsh_memory") / "samples"))
    env = {"DSH_MEMORY_ROOT": str(workdir / "memories")}
    for var, sub in (("DSH_HOME", "dsh"), ("CODEX_HOME", "codex"), ("CLAUDE_CONFIG_DIR", "claude")):
        dst = workdir / sub
        if not dst.exists():
            shutil.copytree(samples / sub, dst)
            old = time.time() - 3600  # the sample sessions ended an hour ago: idle, ready to extract
            for p in dst.rglob("*"):
                os.utime(p, (old, old))
        env[var] = str(dst)
    return env
