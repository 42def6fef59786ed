"""`extract`, `run` and `demo`: run the pipeline flows in-process with a progress bar."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from dsh_memory.cli._common import emit_json, prefect_env, run


def _with_progress(fn, label: str, quiet: bool):
    from dsh_memory import progress

    if quiet:
        return fn()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        transient=True,
    ) as bar:
        task_id = bar.add_task("", total=None)

        def listener(phase: str, n: int, total: int, name: str) -> None:
            bar.update(task_id, advance=n, total=total or None, description=name[:12])

        progress.add_listener(listener)
        try:
            return fn()
        finally:
            progress.remove_listener(listener)


def _print_phase1(summary: dict, dry_run: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if summary.get("skipped_no_route"):
        console.print(f"[yellow]Phase 1 skipped:[/] {summary.get('error')}")
        return
    if dry_run:
        table = Table("session", "source", "action", "reason", title="Phase 1 plan (dry run)")
        for d in summary["decisions"]:
            table.add_row(d["session"][:13], d["source"], d["action"], d["reason"])
        console.print(table)
        return
    if summary["outcomes"]:
        table = Table("session", "source", "outcome", "slug", "tokens in/out", "error", title="Phase 1")
        for o in summary["outcomes"]:
            table.add_row(
                o["session"][:13],
                o["source"],
                o["outcome"],
                o["slug"],
                f"{o['tokens_in']}/{o['tokens_out']}",
                o["error"][:60],
            )
        console.print(table)
    else:
        console.print(
            f"Phase 1: nothing to extract ({summary['discovered']} sessions discovered; "
            "use --dry-run to see why each was skipped)"
        )


def register(app: typer.Typer) -> None:
    register_demo(app)

    @app.command("extract")
    def extract_cmd(
        sessions: list[str] | None = typer.Argument(None, help="Session ids to extract (default: none; see --all)."),
        all_: bool = typer.Option(False, "--all", help="Extract every ready candidate session."),
        backfill: bool = typer.Option(False, "--backfill", help="Ignore the age limit (backfill history)."),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="List what would be extracted and why others are skipped."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Phase 1: extract rollout summaries and raw memories from finished sessions."""
        if not sessions and not all_:
            typer.echo("error: give one or more SESSION ids, or --all", err=True)
            raise typer.Exit(2)
        prefect_env()

        def go():
            from dsh_memory.flows.extract import extract_flow

            return extract_flow(
                session_ids=list(sessions) if sessions else None,
                backfill=backfill,
                dry_run=dry_run,
                respect_idle=not sessions,
            )

        summary = run(lambda: _with_progress(go, "extracting", as_json or dry_run))
        if summary.get("unknown_ids"):
            typer.echo(f"error: unknown session id(s): {', '.join(summary['unknown_ids'])}", err=True)
        if as_json:
            emit_json(summary)
        else:
            _print_phase1(summary, dry_run)
        if summary.get("unknown_ids"):
            raise typer.Exit(3)

    @app.command("run")
    def run_cmd(
        backfill: bool = typer.Option(False, "--backfill", help="Ignore the age limit in Phase 1."),
        force: bool = typer.Option(False, "--force", help="Consolidate even inside the cooldown / failure pause."),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Catch-up: Phase 1 over every candidate, then Phase 2 when pending."""
        prefect_env()

        _catch_up(backfill=backfill, force=force, label="catch-up", as_json=as_json)


def _catch_up(*, backfill: bool, force: bool, label: str, as_json: bool) -> dict | None:
    """Run the catch-up flow in-process and print its outcome; the result (None with --json)."""

    def go():
        from dsh_memory.flows.catch_up import catch_up_flow

        return catch_up_flow(backfill=backfill, force_consolidation=force)

    result = run(lambda: _with_progress(go, label, as_json))
    if as_json:
        emit_json(result)
        return None
    _print_phase1(result["phase1"], False)
    p2 = result.get("phase2") or {}
    typer.echo(f"Phase 2: {p2.get('outcome', '?')}" + (f" ({p2.get('reason')})" if p2.get("reason") else ""))
    return result


def _prepare_demo(workdir: Path) -> dict[str, str]:
    """Copy the bundled sample sessions into `workdir` and return the environment that uses them."""
    import shutil
    import time
    from importlib.resources import files

    samples = Path(str(files("dsh_memory") / "samples"))
    env = {}
    for var, sub in (("DSH_HOME", "dsh"), ("CODEX_HOME", "codex"), ("CLAUDE_CONFIG_DIR", "claude")):
        dst = workdir / sub
        if not dst.exists():
            shutil.copytree(samples / sub, dst)
            old = time.time() - 3600  # the sample sessions ended an hour ago: idle, ready to extract
            for p in dst.rglob("*"):
                os.utime(p, (old, old))
        env[var] = str(dst)
    env["DSH_MEMORY_ROOT"] = str(workdir / "memories")
    return env


def register_demo(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        workdir: Path = typer.Option(
            Path("dsh-memory-demo"), "--workdir", help="Where the sample sessions and the memory are written."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Run the whole pipeline on the bundled sample sessions (DSH, Codex, Claude Code)."""
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        os.environ.update(_prepare_demo(workdir))
        prefect_env()
        typer.echo(f"sample sessions: {workdir}  memory: {workdir / 'memories'}", err=True)

        if _catch_up(backfill=True, force=True, label="demo", as_json=as_json) is None:
            return
        summary = workdir / "memories" / "memory_summary.md"
        if summary.exists():
            typer.echo(f"\nInjected summary ({summary}):\n")
            typer.echo(summary.read_text())
