"""The `dsh-memory` command line. Each submodule registers its own commands on `app`.

Adapters only translate: parse arguments, call one core function, print, map errors to exit
codes (see `_common.run`). Heavy imports (prefect, httpx…) happen inside the commands.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os

import typer
from typer.core import TyperGroup

from dsh_memory import __version__
from dsh_memory.cli._common import READER_GONE_EXIT, reader_gone, shown_record


class _Commands(TyperGroup):
    """Every command: when the reader of its output goes away, a quiet exit 141 (`_common.reader_gone`)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            reader_gone()


app = typer.Typer(
    cls=_Commands,
    name="dsh-memory",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dsh-memory {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Long-term memory for coding agents: extract, consolidate and serve what a future agent should know.

    Exit codes (the same with --json): 0 ok · 1 failed · 2 bad input or usage · 3 not found · 4 configuration · 5 already running · 6 Prefect API unavailable · 130 interrupted · 141 the output's reader went away (`| head`).
    """
    if logging.lastResort is not None:  # warnings of commands without Prefect's logging
        logging.lastResort.addFilter(shown_record)  # (once: addFilter skips a filter it holds)
    # PREFECT_API_URL unset and `dsh-memory serve` running: every command uses the stack's
    # Prefect API (its settings blocks, its run history, its server for flows run here).
    from dsh_memory.serve.stack_state import use_running_stack

    use_running_stack()


# Command modules, in the order they appear in --help.
_MODULES = "sessions pipeline replay consolidate stack readpath servers admin hooks".split()


def _reflow(typer_app: typer.Typer) -> None:
    """Each command's help as whole paragraphs: typer keeps a docstring's single line breaks, and a
    terminal narrower than the docstring then wraps each line again (ragged at 80 columns)."""
    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback) or ""
        info.help = "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))
    for group in typer_app.registered_groups:
        _reflow(group.typer_instance)


for _name in _MODULES:
    importlib.import_module(f"dsh_memory.cli.{_name}").register(app)
_reflow(app)


def _on_devnull(fd: int) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(os.devnull))
    except OSError:
        return False


def main() -> None:  # console-script entry point
    already = _on_devnull(1)
    try:
        app()
    except SystemExit as exc:
        # rich (typer's --help) meets a reader that went away by pointing stdout at /dev/null and
        # exiting 1: say it as every command does (`_common.reader_gone`)
        if exc.code == 1 and not already and _on_devnull(1):
            raise SystemExit(READER_GONE_EXIT) from None
        raise
