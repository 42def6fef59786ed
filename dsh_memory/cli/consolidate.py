"""`consolidate` (Phase 2 now), `forget SESSION` (drop a session's memory inputs), `forget --project
ROOT` (retire a project's memory), `restore NAME` (bring a retired rollout summary back) and
`import [claude|codex|all]` (what Claude Code and Codex already remember, as notes for it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import typer

from dsh_memory.cli._common import prefect_env, show
from dsh_memory.cli._progress import with_count, with_progress
from dsh_memory.errors import DshMemoryError, UserInputError


def _print_phase2(s: dict) -> None:
    typer.echo(f"Phase 2: {s.get('outcome')}" + (f" ({s['mode']})" if s.get("mode") else ""))
    if s.get("error"):
        typer.echo(f"  error: {s['error']}")
    elif s.get("reason"):
        typer.echo(f"  {s['reason']}")
    inputs = s.get("inputs") or {}
    if inputs:
        typer.echo(
            f"  input: {inputs['raw_blocks']}/{inputs['raw_blocks_total']} raw blocks, "
            f"{inputs['notes']}/{inputs['notes_total']} notes, {inputs['summaries']} summaries "
            f"({inputs['forgetting_candidates']} forgetting candidates), {inputs['skills']} skills"
        )
    model = s.get("model") or {}
    if model:
        typer.echo(
            f"  model: {model.get('provider')}/{model.get('model')}, effort "
            f"{model.get('reasoning_effort') or 'provider default'}, max_tokens {model.get('max_tokens_tried')}"
        )
    c = s.get("changes") or {}
    if c:
        typer.echo(f"  wrote: {', '.join(c['files_written']) or 'nothing'}")
        if c["skills_written"] or c["skills_removed"]:
            typer.echo(
                f"  skills: +{', '.join(c['skills_written']) or '-'}"
                f"  removed (kept in skills/.removed/): {', '.join(c['skills_removed']) or '-'}"
            )
        for err in c["skill_errors"]:
            typer.echo(f"  skill skipped: {err}")
        if c["retired"]:
            typer.echo(f"  retired: {', '.join(c['retired'])}")
        if c.get("items_retired"):
            typer.echo(f"  handbook items retired into MEMORY.archive.md (with why): {c['items_retired']}")
        typer.echo(f"  archived: {c['raw_archived']} raw blocks, {c['notes_archived']} notes")


def phase2_failure(p2: dict) -> DshMemoryError | None:
    """Phase 2's error, recorded in the state (its raw memories and notes stay), as the exit code."""
    return DshMemoryError(f"Phase 2 failed: {p2.get('error')}") if p2.get("outcome") == "error" else None


def _print_import(result: dict) -> None:
    for agent, folder in result["sources"].items():
        typer.echo(f"{agent}: {folder}")
    for r in result["rows"]:
        where = r["source"] + (f" # {r['part']}" if r["part"] else "")
        scope = f"project {r['project']}" if r["project"] else "global"
        version = f" v{r['version']}" if r["version"] else ""
        typer.echo(f"  {r['action']:<9} {where} ({scope}{version}): {r['reason']}")
    from dsh_memory.imports.sources import CANNOT_READ

    counts = {a: sum(1 for r in result["rows"] if r["action"] == a) for a in ("import", "update", "unchanged", "skip")}
    unreadable = sum(1 for r in result["rows"] if r["action"] == "skip" and r["reason"].startswith(CANNOT_READ))
    verb = "would import" if result["dry_run"] else "imported"
    typer.echo(
        f"{verb} {counts['import']} new and {counts['update']} changed, {counts['unchanged']} unchanged,"
        f" {counts['skip']} skipped"
        + (f" ({unreadable} could not be read)" if unreadable else "")
        + (" (dry run: nothing written)" if result["dry_run"] else "")
    )


def register(app: typer.Typer) -> None:
    @app.command("consolidate")
    def consolidate_cmd(
        force: bool = typer.Option(
            False, "--force", help="Run inside the cooldown and the back-off after repeated failures."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the outcome summary as JSON."),
    ) -> None:
        """Phase 2: fold raw memories and ad hoc notes into MEMORY.md and memory_summary.md."""

        def go() -> dict:
            from dsh_memory.context import memory_context
            from dsh_memory.serve.preflight import phase2_skipped

            with memory_context() as ctx:  # the gate closed: said at once, no Prefect started
                skipped = phase2_skipped(ctx.settings, datetime.now(UTC), force)
            if skipped is not None:
                return skipped.model_dump(mode="json")
            ctx.resolved.require_saved()  # work to write: not into a root the saved settings may not name
            prefect_env()
            from dsh_memory.flows.consolidate import consolidate_flow

            result = with_progress(lambda: consolidate_flow(force=force), "consolidating")
            return result.model_dump(mode="json")  # a Phase2Result

        show(go, as_json, _print_phase2, phase2_failure)

    @app.command("forget")
    def forget_cmd(
        session: str | None = typer.Argument(None, help="Session id whose memory inputs to drop."),
        project: str | None = typer.Option(
            None, "--project", metavar="ROOT", help="Retire everything this repository has in memory instead."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Drop a session's extraction record and retire its rollout summaries into .retired/.

        Its unconsolidated raw memories move to the archive and the session is excluded from
        future extraction. What MEMORY.md and the summary learned from it stays (a consolidation
        keeps it): edit them to drop it.
        Refused (exit 5) while the session is being extracted. With --project ROOT: every rollout summary, raw block and note of that repository is
        retired or archived, its handbook groups and summary part are cut out into one retired
        summary, and its sessions are excluded (`dsh-memory restore NAME` brings a summary back;
        .retired/ keeps the newest 2,000 retired summaries and every one MEMORY.md names).
        """

        def go() -> dict:
            from dsh_memory.consolidation.forget import forget_project, forget_session
            from dsh_memory.context import memory_context

            if (session is None) == (project is None):
                raise UserInputError("forget takes a session id or --project ROOT (one of the two)")
            with memory_context(writes=True) as ctx:
                if project is not None:
                    return forget_project(ctx.store, ctx.state, project, datetime.now(UTC), ctx.settings.roots)
                return forget_session(ctx, session, datetime.now(UTC))

        def text(result: dict) -> None:
            retired = f" ({', '.join(result['retired'])})" if result["retired"] else ""
            if project is not None:
                typer.echo(
                    f"forgot project {result['project']}: retired {len(result['retired'])} summaries{retired}, "
                    f"archived {result['raw_blocks_archived']} raw blocks and {result['notes_archived']} notes,"
                    f" excluded {len(result['sessions_excluded'])} sessions"
                )
            else:
                typer.echo(
                    f"forgot session {result['session_id']}: extraction record {'dropped' if result['claim_dropped'] else 'absent'}, "
                    f"retired {len(result['retired'])} rollout summaries{retired}; it is not extracted again"
                )

        show(go, as_json, text)

    @app.command("restore")
    def restore_cmd(
        name: str = typer.Argument(
            ..., help="Name of a summary under rollout_summaries/.retired/ (with or without .md)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Move a retired rollout summary back among the active ones (undo forgetting).

        The restore counts as a use, so forgetting leaves it alone for max_unused_days.
        """

        def go() -> dict:
            from dsh_memory.consolidation.forget import restore_summary
            from dsh_memory.context import memory_context

            with memory_context(writes=True) as ctx:
                return restore_summary(ctx.store, ctx.state, name, datetime.now(UTC))

        show(go, as_json, lambda r: typer.echo(f"restored {r['restored']} as {r['path']}"))

    @app.command("import")
    def import_cmd(
        which: Literal["claude", "codex", "all"] = typer.Argument("all", help="Whose memory: claude, codex or all."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be imported; write nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Import Claude Code auto memory and Codex memories as evidence for the next consolidation.

        Reads $CLAUDE_CONFIG_DIR/projects/*/memory/*.md (~/.claude) and $CODEX_HOME/memories/
        (~/.codex: MEMORY.md task groups, memory_summary.md, rollout_summaries/). Each file (each
        Codex task group) becomes an ad hoc note with its provenance (agent, source, sha256, mtime)
        and its project, redacted; an unchanged one is skipped, a changed one imported again as a
        newer version. The sources are never modified. Projects in exclude_projects are skipped.
        stderr counts the pieces as they go (a live count on a terminal, else a line every 100).
        """

        def go() -> dict:
            from dsh_memory.context import memory_context
            from dsh_memory.imports import PHASE, run_import

            with memory_context(writes=not dry_run) as ctx:
                result = with_count(
                    lambda: run_import(ctx.store, ctx.settings, which, dry_run=dry_run), PHASE, "pieces"
                )
            return result.model_dump(mode="json")

        show(go, as_json, _print_import)
