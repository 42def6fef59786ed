"""`replay`: would memory have helped? A thin adapter over `dsh_memory.replay.core.replay`:
parse the options, show one progress bar over the history, print the figures."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import typer

from dsh_memory.cli._common import prefect_env, show
from dsh_memory.cli._progress import quiet_console, with_count
from dsh_memory.errors import UserInputError

MAX_SHOWN = 20  # restated / new rules listed in the text output (all of them with --json)


def parse_since(value: str | None) -> datetime | None:
    """`--since`: an ISO date or date-time (UTC when it names no zone)."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise UserInputError(f"--since {value!r}: not a date (use YYYY-MM-DD or an ISO date-time)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _when(value: str | None) -> str:
    return (value or "")[:10]


def _print(r: dict) -> None:
    from dsh_memory.replay.core import MAX_SESSIONS

    s = r["summary"]
    typer.echo(
        f"Replayed {r['sessions']} sessions ({'every project' if r['scope'] == 'all' else r['scope']}) "
        + (f"and {r['context_sessions']} of other projects for their global rules " if r["context_sessions"] else "")
        + f"in {r['seconds']} s: {r['extracted']} extracted, {r['consolidations']} consolidations"
        + (f", {r['failed']} failed extractions" if r["failed"] else "")
        + f"; rules compared by {r['matcher']}."
    )
    if r["left_out"] and not (r["last"] and r["sessions"] >= r["last"]):  # else --last found its sessions
        typer.echo(f"({r['left_out']} older session logs left out: a replay reads the {MAX_SESSIONS:,} most recent)")
    if len(r["projects"]) > 1:
        typer.echo(f"\n{'project':<32} sessions  restated  anticipated  missed  new rules")
        for p in r["projects"]:
            name = p["project"] or "(no cwd)"
            name = name if len(name) <= 32 else "…" + name[-31:]  # the path's end names it
            typer.echo(
                f"{name:<32} {p['sessions']:>8}  {p['restated']:>8}  {p['anticipated']:>11}  "
                f"{p['missed']:>6}  {p['new_rules']:>9}"
            )
    missed = [i for i in r["restated_items"] if not i["anticipated"]]
    if missed:
        typer.echo("\nMissed (said again, not in the memory injected at that session's start):")
    for item in missed[:MAX_SHOWN]:
        e = item["earlier"]
        other = "" if item["same_project"] else " (another project)"
        typer.echo(f"  {_when(item['started'])} {item['session'][:13]}: {item['text']}")
        typer.echo(f"     first {_when(e['started'])} {e['session'][:13]}{other}: {e['text']}")
    held = [i for i in r["restated_items"] if i["anticipated"]]
    if held:
        typer.echo("\nAnticipated (said again, though the injected memory held it):")
    for item in held[:MAX_SHOWN]:
        typer.echo(f"  {_when(item['started'])} {item['session'][:13]}: {item['text']}")
        typer.echo(f"     memory: {item['held_by'][:200]}")
    if r["new_rules"]:
        typer.echo(f"\nNew rules (first stated there): {len(r['new_rules'])}")
    for rule in r["new_rules"][:MAX_SHOWN]:
        typer.echo(f"  {_when(rule['started'])} {rule['session'][:13]}: {rule['text']}")
    if len(r["new_rules"]) > MAX_SHOWN or len(missed) > MAX_SHOWN or len(held) > MAX_SHOWN:
        typer.echo("  … (all of them: --json)")
    typer.echo(
        f"\nTotal: {s['restated']} restated, {s['anticipated']} anticipated, {s['missed']} missed, "
        f"{s['new_rules']} new rules."
    )


def register(app: typer.Typer) -> None:
    @app.command("replay")
    def replay_cmd(
        cwd: Path | None = typer.Option(
            None,
            "--cwd",
            help="Replay this directory's project (default: the current directory's), with other projects'"
            " sessions that state a global rule (not reported).",
        ),
        all_: bool = typer.Option(False, "--all", help="Replay every project's sessions, in one history."),
        since: str | None = typer.Option(
            None, "--since", help="Only sessions started on or after DATE (YYYY-MM-DD); memory starts empty there."
        ),
        last: int | None = typer.Option(
            None,
            "--last",
            min=1,
            help="Only the last N sessions (of the project, with --cwd); memory starts empty at the first of them.",
        ),
        keep: Path | None = typer.Option(
            None,
            "--keep",
            help="Build the replay's memory in DIR/memories, new or empty, and keep it (default: a temporary folder).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Would memory have helped? The rules you had to say again, and which memory held.

        Replays your sessions in time order through the pipeline, in a temporary memory root (the
        live memory is never written; only the report, in its .state/replay.json for the vault),
        and finds the standing instructions you typed again in a
        later session; for each, whether the memory injected at that session's start held it.
        With --cwd, a global rule first said in another project's session counts too."""

        def go() -> dict:
            from dsh_memory.context import memory_context
            from dsh_memory.replay.core import PHASE, replay

            if all_ and cwd is not None:
                raise UserInputError("give --cwd DIR or --all, not both")
            when = parse_since(since)
            where = None if all_ else str((cwd or Path(os.getcwd())).expanduser().resolve())
            prefect_env()
            with memory_context(writes=True) as ctx:
                from dsh_memory.flows.extract import extract_flow  # noqa: F401 (Prefect's logging set up from here on)

                quiet_console()
                result = with_count(
                    lambda: replay(ctx, cwd=where, since=when, last=last, workdir=keep),
                    PHASE,
                    "sessions",
                    of_total=True,
                )
            return result.model_dump(mode="json")

        show(go, as_json, _print)
