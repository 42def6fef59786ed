"""Task: stat-only discovery of session logs under the configured roots."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from dsh_memory import readers
from dsh_memory.models import SessionRef
from dsh_memory.settings import MemorySettings


@task(name="discover-sessions", cache_policy=NO_CACHE)
def discover_sessions(settings: MemorySettings) -> list[SessionRef]:
    return readers.discover(settings.roots)
