"""Shared CLI plumbing: error → exit-code mapping in one place, JSON output."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import typer

from dsh_memory.errors import DshMemoryError


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def _interrupt(signum, frame):
    from dsh_memory import cancel

    cancel.CANCELLED.set()  # first: worker threads stop between model tokens
    raise KeyboardInterrupt


def run(fn: Callable[[], Any]) -> Any:
    """Call `fn`; turn our errors into a one-line message on stderr and the mapped exit code.
    Ctrl-C / SIGTERM cancel in-process work (worker threads stop between model tokens)."""
    import signal

    from dsh_memory import cancel

    previous = {}
    if _main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, _interrupt)
    try:
        return fn()
    except DshMemoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        cancel.CANCELLED.set()
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def prefect_env() -> None:
    """Environment for running flows in-process (before prefect is imported)."""
    # The first ephemeral start migrates a fresh database (~30 s here): allow for it.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
