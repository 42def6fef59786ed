"""`dsh-memory import [claude|codex|all]`: what Claude Code and Codex already remember, as notes."""

from __future__ import annotations

from typing import Literal

import typer

from dsh_memory.cli._common import show


def register(app: typer.Typer) -> None:
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
        """

        def go() -> dict:
            from dsh_memory.context import memory_context
            from dsh_memory.imports import run_import

            with memory_context() as ctx:
                return run_import(ctx.store, ctx.settings, which, dry_run=dry_run).model_dump(mode="json")

        show(go, as_json, _print)


def _print(result: dict) -> None:
    for agent, folder in result["sources"].items():
        typer.echo(f"{agent}: {folder}")
    for r in result["rows"]:
        where = r["source"] + (f" # {r['part']}" if r["part"] else "")
        scope = f"project {r['project']}" if r["project"] else "global"
        version = f" v{r['version']}" if r["version"] else ""
        typer.echo(f"  {r['action']:<9} {where} ({scope}{version}): {r['reason']}")
    counts = {a: sum(1 for r in result["rows"] if r["action"] == a) for a in ("import", "update", "unchanged", "skip")}
    verb = "would import" if result["dry_run"] else "imported"
    typer.echo(
        f"{verb} {counts['import']} new and {counts['update']} changed, {counts['unchanged']} unchanged,"
        f" {counts['skip']} skipped" + (" (dry run: nothing written)" if result["dry_run"] else "")
    )
