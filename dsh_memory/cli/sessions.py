"""`dsh-memory sessions` and `dsh-memory render`: look at what the pipeline would read. Light
imports (discovery, readers, the renderer, rich); prefect only when PREFECT_API_URL is set, to
read the settings blocks the way `status` does.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import typer

from dsh_memory import readers
from dsh_memory.cli._common import plain_console, show
from dsh_memory.errors import UserInputError
from dsh_memory.models import SOURCES
from dsh_memory.scope import excluded_by


def list_sessions(source: str | None = None) -> list[dict[str, Any]]:
    """One row per discovered session log, newest activity first; unreadable ones carry `error`.
    `state` is the session's extraction record as `status` counts it (done, noop, failed,
    parked, running), "excluded" (exclude_projects, or forgotten), None when never touched."""
    from dsh_memory.context import memory_context

    with memory_context() as ctx:
        refs = readers.discover(ctx.settings.roots, (source,) if source else SOURCES)
        # as `status` reads them; no state DB yet (never created here): nothing was processed
        states = {sid: c.shown_status for sid, c in ctx.state.claims().items()} if ctx.state_exists() else {}
        forgotten = {sid for sid, v in ctx.state.overrides().items() if v == "exclude"} if ctx.state_exists() else set()
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
            "state": states.get(ref.id),
            "title": None,
            "warnings": 0,
            "error": None,
        }
        cwd = _excluded_cwd(ctx.settings, ref)
        if cwd:  # exclude_projects: its header names where it ran, nothing more is read
            row.update(cwd=cwd, state="excluded", extractable=False)
            rows.append(row)
            continue
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
            del s  # before the next log is read: one session in memory at a time
        if ref.id in forgotten:  # `forget`: never extracted again
            row.update(state="excluded", extractable=False)
        rows.append(row)
    rows.sort(key=lambda r: (r["last_activity"] or "", r["id"]), reverse=True)
    return rows


def _excluded_cwd(settings, ref) -> str | None:
    """The header's cwd of `ref` when its project is in `exclude_projects`, else None."""
    from dsh_memory.readers.header import session_cwd

    if not settings.exclude_projects:
        return None
    cwd = session_cwd(ref)
    return cwd if excluded_by(cwd, settings.exclude_projects) else None


def render_session(session_id: str, budget_tokens: int | None, since_seq: int | None):
    """The redacted transcript of one session (exact id or unique prefix)."""
    from dsh_memory.context import memory_context
    from dsh_memory.transcript.render import render_transcript

    if budget_tokens is not None and budget_tokens < 1:
        raise UserInputError("--budget-tokens must be a positive number of tokens")
    settings = memory_context().settings
    ref = readers.find(settings.roots, session_id)
    if _excluded_cwd(settings, ref):
        raise UserInputError(f"session {ref.id} belongs to a project in exclude_projects: it is never read")
    return render_transcript(readers.load(ref), budget_tokens=budget_tokens, since_seq=since_seq)


STATE_LABELS = {"done": "processed", "noop": "processed (noop)"}  # any other state shows as itself


MIN_STATUS_AND_CWD = 40  # columns left for status + cwd before ids are shortened


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix (at least 8 characters) that is still unique among
    `ids`; `render` and `extract` accept such prefixes."""
    n = 8
    while n < max((len(i) for i in ids), default=0) and len({i[:n] for i in ids}) < len(set(ids)):
        n += 1
    return {i: i[:n] for i in ids}


def _status(r: dict[str, Any]):
    """The status cell (a rich Text: an unreadable log's in red)."""
    from rich.text import Text

    if r["error"]:
        return Text(f"unreadable: {r['error']}", style="red")
    if r["state"]:
        status = STATE_LABELS.get(r["state"], r["state"])
    elif r["extractable"]:
        status = "extractable"
    elif r["interactive"] is False:
        status = "non-interactive"
    else:
        status = "skipped" if not r["root"] else "no human prompt"
    if r["warnings"]:
        status += f" ({r['warnings']} warning{'s' if r['warnings'] != 1 else ''})"
    return Text(status)


def _tail(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def _print_table(rows: list[dict[str, Any]]) -> None:
    """One line per session at any width: full ids on a wide terminal, otherwise (80 columns…)
    the shortest unique prefixes of 8+ characters; long cells cut with "…". `--json` has
    everything in full."""
    from rich.table import Table
    from rich.text import Text

    cells = []
    for r in rows:
        kind = "?" if r["root"] is None else ("root" if r["root"] else "subagent")
        events = "" if r["events"] is None else str(r["events"])
        when = (r["last_activity"] or "")[:16].replace("T", " ")
        cells.append((r["id"], r["source"], kind, events, when, _status(r), r["cwd"] or ""))
    headers = ("id", "source", "kind", "events", "last activity", "status", "cwd")
    console = plain_console(fit=True)
    gaps = 2 * (len(headers) - 1)

    def measure() -> list[int]:
        widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
        widths[5] = max([len(headers[5]), *(c[5].cell_len for c in cells)])
        return widths

    widths = measure()
    if console.width - sum(widths[:5]) - gaps < MIN_STATUS_AND_CWD:  # full ids only when they fit
        short = short_ids([r["id"] for r in rows])
        cells = [(short[c[0]], *c[1:]) for c in cells]
        widths = measure()
    # The first five columns keep their width; status, then cwd, give way (cut with "…").
    room = console.width - sum(widths[:5]) - gaps
    widths[5] = max(min(widths[5], room - min(widths[6], 12)), min(widths[5], 11))
    widths[6] = max(min(room - widths[5], widths[6]), 3)
    cells = [(*c[:6], _tail(c[6], widths[6])) for c in cells]  # a folder's end says more than its start
    table = Table(title=f"{len(rows)} session log(s)", box=None, padding=(0, 1), pad_edge=False)
    for header, width in zip(headers, widths, strict=True):
        table.add_column(header, no_wrap=True, overflow="ellipsis", width=width)
    for c in cells:
        table.add_row(*map(Text, c[:5]), c[5], Text(c[6]))
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("sessions")
    def sessions_cmd(
        source: Literal["dsh", "codex", "claude"] | None = typer.Option(
            None, "--source", help="Only this agent's sessions."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
    ) -> None:
        """List discovered sessions (DSH, Codex, Claude Code) and whether each was processed."""
        show(lambda: list_sessions(source), as_json, _print_table)

    @app.command("render")
    def render_cmd(
        session: str = typer.Argument(..., help="Session id (or a unique prefix of 6+ characters)."),
        budget_tokens: int | None = typer.Option(None, "--budget-tokens", help="Token budget (default: none)."),
        since_seq: int | None = typer.Option(None, "--since-seq", help="Only events with seq > N (a delta)."),
        as_json: bool = typer.Option(False, "--json", help="Print the transcript and its stats as JSON."),
    ) -> None:
        """Print the redacted transcript Phase 1 would see for SESSION."""

        def text(tr: dict[str, Any]) -> None:
            sys.stdout.write(tr["text"] + "\n")
            stats = (
                f"{tr['tokens']} tokens · {tr['events_rendered']}/{tr['events_total']} events"
                + (f" · {tr['events_omitted']} omitted" if tr["events_omitted"] else "")
                + (f" · {tr['tool_outputs_shortened']} tool outputs shortened" if tr["tool_outputs_shortened"] else "")
                + (" · human prompts alone exceed the budget" if tr["prompts_exceed_budget"] else "")
            )
            typer.echo(stats, err=True)

        show(lambda: render_session(session, budget_tokens, since_seq).model_dump(mode="json"), as_json, text)
