"""THE memory context: every entry point (flows, CLI, HTTP, MCP, `serve`, `status`) gets its
settings, its model route and its memory root's stores from `memory_context()`.

Settings resolve once, field by field: a saved Prefect Block > the environment > the default
(`settings_loader.resolve_settings`). So a `memory_root` pinned in the settings block is the root
the flows write *and* the root the read path serves.

    with memory_context() as ctx:
        ctx.store            # MemoryStore (files under the root)
        ctx.state            # StateStore (SQLite bookkeeping), opened on first use, closed on exit
        ctx.settings, ctx.route, ctx.resolved   # values and where each came from
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.settings_loader import ResolvedSettings, resolve_settings

if TYPE_CHECKING:
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.store import MemoryStore


class MemoryContext:
    """Resolved settings plus the stores of one memory root. Close it (or use `with`) to release
    the state database connections."""

    def __init__(self, resolved: ResolvedSettings):
        self.resolved = resolved
        self.settings: MemorySettings = resolved.settings
        self.route: ModelRoute = resolved.route

    @classmethod
    def of(cls, settings: MemorySettings, route: ModelRoute | None = None) -> MemoryContext:
        """A context over settings the caller already resolved (through `memory_context`, e.g.
        `serve` handing them to the app it mounts, or a test building them by hand)."""
        return cls(ResolvedSettings(settings, route or ModelRoute()))

    @property
    def memory_root(self) -> Path:
        return self.settings.memory_root

    @cached_property
    def store(self) -> MemoryStore:
        from dsh_memory.storage.store import MemoryStore

        return MemoryStore(self.settings.memory_root)

    @cached_property
    def state(self) -> StateStore:
        from dsh_memory.storage.state import StateStore

        return StateStore(self.settings.memory_root)

    def state_exists(self) -> bool:
        """Whether the state database exists (read-only callers must not create it)."""
        from dsh_memory.storage.state import StateStore

        return StateStore(self.settings.memory_root).db_path.exists()

    def close(self) -> None:
        if "state" in self.__dict__:
            self.__dict__.pop("state").close()

    def __enter__(self) -> MemoryContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_context(env: Mapping[str, str] | None = None, *, memory_root: str | Path | None = None) -> MemoryContext:
    """Resolve settings (block > env > default) and open the memory root they name.
    `memory_root` overrides the root for this run (a flow parameter, a test)."""
    resolved = resolve_settings(env)
    if memory_root:
        root = Path(memory_root).expanduser()
        resolved.settings = resolved.settings.model_copy(update={"memory_root": root})
    return MemoryContext(resolved)


def context_of(settings: MemoryContext | MemorySettings | None = None) -> MemoryContext:
    """The memory context an adapter serves: the one given, one over plain settings, or THE
    resolution (`memory_context()`: saved block > environment > default)."""
    if isinstance(settings, MemoryContext):
        return settings
    if settings is None:
        return memory_context()
    return MemoryContext.of(settings)
