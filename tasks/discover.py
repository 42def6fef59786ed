"""Task: stat-only discovery of session logs under the configured roots."""

from __future__ import annotations

from prefect import task

from dsh_memory import readers
from dsh_memory.models import SessionRef
from dsh_memory.settings import MemorySettings


@task(name="discover-sessions")
def discover_sessions(settings: MemorySettings) -> list[SessionRef]:
    return readers.discover(settings.roots)
