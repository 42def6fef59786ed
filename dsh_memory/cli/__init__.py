"""The `dsh-memory` command line. Each submodule registers its own commands on `app`.

Adapters only translate: parse arguments, call one core function, print, map errors to exit
codes (see `_common.run`). Heavy imports (prefect, httpx…) happen inside the commands.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="dsh-memory",
    help="Long-term memory for coding agents: extract, consolidate and serve what a future agent should know.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules, in the order they appear in --help.
_MODULES = ["sessions", "pipeline", "consolidate", "stack", "readpath", "servers", "admin", "hooks"]


def _register() -> None:
    import importlib

    for name in _MODULES:
        try:
            mod = importlib.import_module(f"dsh_memory.cli.{name}")
        except ModuleNotFoundError as exc:  # a module not written yet
            if exc.name == f"dsh_memory.cli.{name}":
                continue
            raise
        mod.register(app)


_register()


def main() -> None:  # console-script entry point
    app()
