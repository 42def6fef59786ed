"""`serve` (the one-command local stack) and `status` (from local state + Prefect run history)."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import typer

from dsh_memory.cli._common import plain_console, run, say, show, visible_console


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if hasattr(v, "isoformat"):
        return v.isoformat(timespec="seconds")
    return str(v)


def _print_health(console: Any, local: dict) -> None:
    """Memories per project (`readpath.health`): items, uses, never used, may be stale, old, left out."""
    rows = local.get("projects") or {}
    if not rows:
        return
    console.print("memories per project:")
    for name, r in rows.items():
        console.print(
            f"  {name}: {r['handbook_items']} handbook items ({r.get('stale', 0)} may be stale,"
            f" {r.get('aged', 0)} older than stale_after_days) · {r['sessions']} session recaps"
            f" ({r.get('uses', 0)} uses, {r.get('never_used', 0)} never used) · {r['pending_raw']} raw waiting"
            f" · {r.get('left_out', 0)} lines left out of injection"
        )
    files = local.get("memory_files") or []
    recaps = [f for f in files if f["path"].startswith("rollout_summaries/")]
    if recaps:
        console.print(
            f"session recaps: {len(recaps)} · used {sum(f['uses'] for f in recaps)} times"
            f" · never used {sum(1 for f in recaps if f['never_used'])}"
            f" · with items that may be stale {sum(1 for f in recaps if f['stale'])}"
            " (per file: `dsh-memory status --json`, memory_files)"
        )


def _print_status(data: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    console = plain_console()
    local, server = data["local"], data["server"]
    console.print(Text.assemble(("memory root", "bold"), f" {local['memory_root']}"))
    if not local.get("initialized"):
        console.print("no pipeline state yet (nothing extracted): run `dsh-memory run` or `dsh-memory serve`")
    else:
        c = local["counts"]
        console.print(
            f"sessions: processed {c.get('done', 0)} · noop {c.get('noop', 0)} · failed {c.get('failed', 0)}"
            f" · parked {c.get('parked', 0)} · running {c.get('running', 0)}"
        )
        if c.get("parked"):
            console.print(
                f"  {c['parked']} parked after repeated failures: they resume when the model works again,"
                " or now with `dsh-memory extract --retry-parked`"
            )
        console.print(
            f"phase 1 running: {local['phase1_running']}   phase 2 running: {local['phase2_running']}"
            f"   pending consolidation: {local['pending_consolidation']}"
        )
        console.print(
            f"last phase 1: {_fmt(local['last_phase1_at'])}   last phase 2: {_fmt(local['last_phase2_at'])}"
            f" ({local.get('last_phase2_outcome') or '-'})"
        )
        if local.get("phase2_error"):
            console.print(
                Text.assemble(
                    ("phase 2 error", "red"),
                    f" ({local['phase2_consecutive_failures']} in a row): {local['phase2_error']}",
                )
            )
        if local.get("phase2_backoff_until"):
            console.print(
                f"  automatic consolidation backs off until {_fmt(local['phase2_backoff_until'])}, then tries again"
                " by itself (now: `dsh-memory consolidate --force`)"
            )
        if local.get("models"):
            console.print("models: " + ", ".join(local["models"]))
        for f in local.get("failures", [])[:5]:
            console.print(
                f"  failed {f['session'][:13]} attempts={f['attempts']}{' parked' if f['parked'] else ''}: {f['error'][:80]}"
            )
    excluded = local.get("excluded") or {}
    if excluded.get("patterns"):
        console.print(f"excluded (exclude_projects, {excluded['patterns']} patterns): {excluded['sessions']} sessions")
    _print_health(console, local)
    stack = data.get("stack")
    if stack:
        console.print(
            Text.assemble(
                ("stack", "bold"),
                f" dsh-memory serve running (pid {stack['pid']}, since {stack['started_at']}): "
                f"Prefect UI {stack['ui_url']} · memory API {stack['http_url']}",
            )
        )
    else:
        console.print("stack: not running (`dsh-memory serve` starts it)")
    if not server.get("available"):
        console.print(Text.assemble(("Prefect:", "yellow"), f" {server.get('reason')}"))
        return
    console.print(Text.assemble(("Prefect", "bold"), f" {server['api_url']}  in flight: {len(server['in_flight'])}"))
    for title, key in (("last runs", "last_runs"), ("next scheduled", "next_scheduled"), ("in flight", "in_flight")):
        rows = server.get(key) or []
        if not rows:
            continue
        table = Table("flow", "run", "state", "start/expected", "end", title=title)
        for r in rows:
            cells = (r["flow"], r["name"], r["state"] or "-", _fmt(r["start"] or r["expected_start"]), _fmt(r["end"]))
            table.add_row(*map(Text, cells))
        console.print(table)


def _print_deploy(data: dict) -> None:
    for name in data["pools_created"]:
        typer.echo(f"created work pool {name} (process)")
    typer.echo(f"deployed to {data['api_url']}: " + ", ".join(data["deployments"]))
    for note in data["notes"]:
        typer.echo(f"note: {note}")
    typer.echo(
        "start the workers: the main pool's beside the memory root, with its DSH_MEMORY_* environment; "
        "the extract pool's on any machine with dsh-memory, a model route and this Prefect API (no memory root):"
    )
    for cmd in data["worker_commands"]:
        typer.echo(f"  {cmd}")


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status_cmd(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
        """Pipeline status: runs in flight, pending consolidation, last runs, session counts, next runs."""

        def go():
            from dsh_memory.context import memory_context
            from dsh_memory.serve.status import status

            with memory_context() as ctx:
                return status(ctx)

        show(go, as_json, _print_status)

    @app.command("serve")
    def serve_cmd(
        host: str = typer.Option("127.0.0.1", "--host", help="Loopback interface for the memory API / MCP / hooks."),
        port: int = typer.Option(
            8765, "--port", min=1, max=65535, help="Port of the memory API / MCP / turn-end hook."
        ),
        prefect_port: int = typer.Option(
            4200,
            "--prefect-port",
            min=1,
            max=65535,
            help="Port of the local Prefect server (when one is started); a busy port is an error, never moved.",
        ),
        no_boot: bool = typer.Option(False, "--no-boot-catch-up", help="Do not run the catch-up at start."),
    ) -> None:
        """Run the local stack: Prefect server (unless PREFECT_API_URL is set), deployments, HTTP app, boot catch-up.

        One stack per Prefect home (DSH_MEMORY_PREFECT_HOME, default ~/.dsh-memory/prefect): a second
        serve exits 5 and says where the running one is; other commands find it through its state file.
        """
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
        visible_console()  # before Prefect's logging, so its records too
        from dsh_memory.serve.stack import serve_stack

        run(lambda: serve_stack(host, port, prefect_port, not no_boot, echo=lambda m: say(m, err=True)))

    @app.command("deploy")
    def deploy_cmd(
        pool: str = typer.Option("dsh-memory", "--pool", help="Work pool of catch-up, extract-session, consolidate."),
        extract_pool: str = typer.Option(
            "dsh-memory-extract", "--extract-pool", help="Work pool of extract-transcripts (workers on any machine)."
        ),
        result_storage: str = typer.Option(
            "",
            "--result-storage",
            help="Block (TYPE/NAME, e.g. s3-bucket/dsh-results) where extract workers write their results.",
        ),
        extract_only: bool = typer.Option(
            False, "--extract-only", help="Only the extract pool and extract-transcripts (a `serve` host)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Deploy every prefect.yaml deployment to work pools (created when missing) as `<name>-pool`.

        The worker mode, beside `serve` (never the same deployment names): settings applied (turn-end
        debounce, catch-up and consolidate intervals, flow_run_limit as a new main pool's concurrency
        limit); prints the `prefect worker start` commands.
        Needs PREFECT_API_URL (or a running `serve`, whose server takes --extract-only alone).
        """

        def go():
            from dsh_memory.context import memory_context
            from dsh_memory.serve.deployments import deploy

            report = deploy(
                memory_context(writes=True).settings,  # settings only: no store is opened
                pool=pool,
                extract_pool=extract_pool,
                result_storage=result_storage or None,
                extract_only=extract_only,
            )
            return asdict(report)

        show(go, as_json, _print_deploy)
