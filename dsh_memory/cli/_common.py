"""Shared CLI plumbing: error → exit-code mapping in one place, JSON output."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import typer

from dsh_memory.errors import DshMemoryError


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def run(fn: Callable[[], Any]) -> Any:
    """Call `fn`; turn our errors into a one-line message on stderr and the mapped exit code."""
    try:
        return fn()
    except DshMemoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def prefect_env() -> None:
    """Environment for running flows in-process (before prefect is imported)."""
    # The first ephemeral start migrates a fresh database (~30 s here): allow for it.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
