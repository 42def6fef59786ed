"""`dsh-memory sessions` and `dsh-memory render`: look at what the pipeline would read.

Light imports only (no prefect): discovery, readers, the renderer and rich for the table.
Roots come from the environment (DSH_HOME, CODEX_HOME, CLAUDE_CONFIG_DIR).
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any

import typer

from dsh_memory.cli._common import emit_json, run


class SourceOption(str, Enum):
    dsh = "dsh"
    codex = "codex"
    claude = "claude"


def list_sessions(source: str | None = None) -> list[dict[str, Any]]:
    """One row per discovered session log, newest activity first; unreadable ones carry `error`."""
    from dsh_memory import readers
    from dsh_memory.models import SOURCES
    from dsh_memory.settings import SourceRoots

    roots = SourceRoots.from_env()
    refs = readers.discover(roots, (source,) if source else SOURCES)
    rows: list[dict[str, Any]] = []
    for ref in refs:
        row: dict[str, Any] = {
            "id": ref.id,
            "source": ref.source,
            "path": str(ref.path),
            "cwd": None,
            "events": None,
            "human_prompts": None,
            "last_seq": None,
            "last_activity": ref.updated_at.isoformat(),
            "root": ref.hint_root,
            "interactive": None,
            "extractable": None,
            "title": None,
            "warnings": 0,
            "error": None,
        }
        try:
            s = readers.load(ref)
        except Exception as exc:  # one bad log must not hide the others
            row["error"] = str(exc) if hasattr(exc, "reason") else f"{type(exc).__name__}: {exc}"
        else:
            last = s.updated_at or ref.updated_at
            row.update(
                cwd=s.cwd,
                events=len(s.events),
                human_prompts=len(s.human_prompts),
                last_seq=s.last_seq,
                last_activity=last.isoformat(),
                root=s.is_root,
                interactive=s.interactive,
                extractable=s.extractable,
                title=s.title,
                warnings=len(s.warnings),
            )
        rows.append(row)
    rows.sort(key=lambda r: (r["last_activity"] or "", r["id"]), reverse=True)
    return rows


def render_session(session_id: str, budget_tokens: int | None, since_seq: int | None):
    """The redacted transcript of one session (exact id or unique prefix)."""
    from dsh_memory import readers
    from dsh_memory.errors import UserInputError
    from dsh_memory.render import render_transcript
    from dsh_memory.settings import SourceRoots

    if budget_tokens is not None and budget_tokens < 1:
        raise UserInputError("--budget-tokens must be a positive number of tokens")
    ref = readers.find(SourceRoots.from_env(), session_id)
    return render_transcript(readers.load(ref), budget_tokens=budget_tokens, since_seq=since_seq)


def _print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} session log(s)", show_lines=False)
    for col in ("id", "source", "cwd", "events", "last seq", "last activity", "kind", "status"):
        table.add_column(col, overflow="fold")
    for r in rows:
        kind = "?" if r["root"] is None else ("root" if r["root"] else "subagent")
        if r["error"]:
            status = f"[red]unreadable: {r['error']}[/red]"
        elif r["extractable"]:
            status = "extractable"
        elif r["interactive"] is False:
            status = "non-interactive"
        else:
            status = "skipped" if not r["root"] else "no human prompt"
        if r["warnings"]:
            status += f" ({r['warnings']} warning{'s' if r['warnings'] != 1 else ''})"
        table.add_row(
            r["id"],
            r["source"],
            r["cwd"] or "",
            "" if r["events"] is None else str(r["events"]),
            "" if r["last_seq"] is None else str(r["last_seq"]),
            (r["last_activity"] or "")[:19],
            kind,
            status,
        )
    Console(soft_wrap=False).print(table)


def register(app: typer.Typer) -> None:
    @app.command("sessions")
    def sessions_cmd(
        source: SourceOption | None = typer.Option(None, "--source", help="Only this agent's sessions."),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
    ) -> None:
        """List discovered sessions (DSH, Codex, Claude Code); unreadable logs show their error."""
        rows = run(lambda: list_sessions(source.value if source else None))
        if as_json:
            emit_json(rows)
        else:
            _print_table(rows)

    @app.command("render")
    def render_cmd(
        session: str = typer.Argument(..., help="Session id (or a unique prefix of 6+ characters)."),
        budget_tokens: int | None = typer.Option(None, "--budget-tokens", help="Token budget (default: none)."),
        since_seq: int | None = typer.Option(None, "--since-seq", help="Only events with seq > N (a delta)."),
        as_json: bool = typer.Option(False, "--json", help="Print the transcript and its stats as JSON."),
    ) -> None:
        """Print the redacted transcript Phase 1 would see for SESSION."""
        tr = run(lambda: render_session(session, budget_tokens, since_seq))
        if as_json:
            emit_json(tr.model_dump(mode="json"))
            return
        sys.stdout.write(tr.text + "\n")
        stats = (
            f"{tr.tokens} tokens · {tr.events_rendered}/{tr.events_total} events"
            + (f" · {tr.events_omitted} omitted" if tr.events_omitted else "")
            + (f" · {tr.tool_outputs_shortened} tool outputs shortened" if tr.tool_outputs_shortened else "")
            + (" · human prompts alone exceed the budget" if tr.prompts_exceed_budget else "")
        )
        typer.echo(stats, err=True)
