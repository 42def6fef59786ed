"""`summary`, `list`, `read`, `search`, `add`: the read path on the command line.

Translation only: parse arguments, call one core function, print. No prefect import here, so
these commands stay fast enough for agent hooks (a session-start hook runs `summary --inject`).
"""

from __future__ import annotations

import typer

from dsh_memory.cli._common import emit_json, run


def _store():
    """The store and settings of THE memory context (saved block > environment > default)."""
    from dsh_memory.context import memory_context

    ctx = memory_context()
    return ctx.store, ctx.settings


def _print_match(m) -> None:
    head = f"{m.path}:{m.match_line}-{m.match_end_line}"
    if m.score is not None:
        head += f"  (score {m.score:.2f})"
    typer.echo(head)
    for i, line in enumerate(m.content.splitlines(), start=m.start_line):
        mark = ">" if m.match_line <= i <= m.match_end_line else " "
        typer.echo(f"{mark}{i:>6}  {line}")


def register(app: typer.Typer) -> None:
    @app.command("summary", rich_help_panel="Read memory")
    def summary_cmd(
        inject: bool = typer.Option(
            False,
            "--inject",
            help="Print the block a session-start hook injects (instructions + summary); nothing when memory is empty",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Show memory_summary.md (capped at max_summary_chars)."""

        def go():
            from dsh_memory.readpath import summary

            store, settings = _store()
            s = summary(store, settings.max_summary_chars)
            if as_json:
                data = s.model_dump()
                data["injection"] = s.injection()
                emit_json(data)
            elif inject:
                text = s.injection()
                if text:
                    typer.echo(text, nl=False)
            elif s.empty:
                typer.echo("(memory is empty: no memory_summary.md yet)", err=True)
            else:
                typer.echo(s.content)

        run(go, as_json)

    @app.command("list", rich_help_panel="Read memory")
    def list_cmd(
        path: str = typer.Argument("", help="Directory relative to the memory root"),
        cursor: str | None = typer.Option(None, "--cursor", help="next_cursor from the previous page"),
        max_results: int = typer.Option(200, "--max-results", min=1, max=2000),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """List one directory of the memory (shallow, sorted)."""

        def go():
            from dsh_memory.readpath import list_dir

            store, _ = _store()
            res = list_dir(store, path, cursor=cursor, max_results=max_results)
            if as_json:
                emit_json(res.model_dump())
                return
            for e in res.entries:
                size = "" if e.size is None else f"{e.size:>9}"
                typer.echo(
                    f"{'d' if e.type == 'directory' else 'f'} {size:>9}  {e.path}{'/' if e.type == 'directory' else ''}"
                )
            if res.next_cursor:
                typer.echo(f"… more: --cursor {res.next_cursor}", err=True)

        run(go, as_json)

    @app.command("read", rich_help_panel="Read memory")
    def read_cmd(
        path: str = typer.Argument(..., help="File relative to the memory root, e.g. MEMORY.md"),
        offset: int = typer.Option(0, "--offset", min=0, help="Lines to skip (start at line offset+1)"),
        max_lines: int = typer.Option(400, "--max-lines", min=1, max=5000),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Print a slice of one memory file (line-numbered)."""

        def go():
            from dsh_memory.readpath import read

            store, _ = _store()
            res = read(store, path, line_offset=offset, max_lines=max_lines)
            if as_json:
                emit_json(res.model_dump())
                return
            for i, line in enumerate(res.content.splitlines(), start=res.start_line):
                typer.echo(f"{i:>6}  {line}")
            if res.truncated:
                nxt = f" --offset {res.next_offset}" if res.next_offset is not None else ""
                typer.echo(f"… truncated at line {res.end_line} of {res.total_lines}{nxt}", err=True)

        run(go, as_json)

    @app.command("search", rich_help_panel="Read memory")
    def search_cmd(
        queries: list[str] = typer.Argument(..., help="One or more queries"),
        mode: str = typer.Option("any", "--mode", help="any | all_on_same_line | all_within_lines | ranked"),
        within_lines: int = typer.Option(5, "--within-lines", min=1, max=200, help="Window for all_within_lines"),
        normalized: bool = typer.Option(False, "--normalized", help="Ignore punctuation: foo-bar ≈ foo_bar ≈ foo bar"),
        case_sensitive: bool = typer.Option(False, "--case-sensitive"),
        context: int = typer.Option(0, "--context", min=0, max=20, help="Lines of context around matches"),
        path: str | None = typer.Option(None, "--path", help="Only search under this file or directory"),
        cursor: str | None = typer.Option(None, "--cursor", help="next_cursor from the previous page"),
        max_results: int = typer.Option(50, "--max-results", min=1, max=500),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Search the memory; every hit is printed as path:start-end for citation."""

        def go():
            from dsh_memory.readpath import search

            store, _ = _store()
            res = search(
                store,
                queries,
                mode=mode,
                within_lines=within_lines,
                case_sensitive=case_sensitive,
                normalized=normalized,
                context_lines=context,
                path_prefix=path,
                cursor=cursor,
                max_results=max_results,
            )
            if as_json:
                emit_json(res.model_dump())
                return
            if not res.matches:
                typer.echo("no matches", err=True)
            for m in res.matches:
                _print_match(m)
            if res.next_cursor:
                typer.echo(f"… more: --cursor {res.next_cursor}", err=True)

        run(go, as_json)

    @app.command("add", rich_help_panel="Read memory")
    def add_cmd(
        text: str = typer.Argument(..., help="The note: what to remember, forget or correct"),
        title: str | None = typer.Option(None, "--title", help="Short title (used in the file name)"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Add an ad hoc note; the next consolidation merges it into memory."""

        def go():
            from dsh_memory.readpath import add

            store, _ = _store()
            res = add(store, text, title=title)
            if as_json:
                emit_json(res.model_dump())
            else:
                typer.echo(res.path)

        run(go, as_json)
