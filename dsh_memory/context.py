"""THE memory context: every entry point (flows, CLI, HTTP, MCP, `serve`, `status`) gets its
settings, model route and memory root's stores (`ctx.store`, `ctx.state`) from
`memory_context()`. Settings resolve once, field by field (saved Prefect Block > environment >
default), so a `memory_root` pinned in the block is the root the flows write *and* the read path serves.

A flow holds its context open for the run (`with ctx.for_run():`): the stores its tasks get through
`MemoryContext.of(settings)` share that run's state store, so a run opens the database once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.settings_loader import ResolvedSettings, resolve_settings

if TYPE_CHECKING:
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.store import MemoryStore


# Contexts flows hold open for their runs (tasks run in this process's threads).
_RUNS: list[MemoryContext] = []
_RUNS_LOCK = threading.Lock()


class MemoryContext(AbstractContextManager["MemoryContext"]):
    """Resolved settings plus the stores of one memory root. Close it (or use `with`) to release
    the state database connections."""

    def __init__(self, resolved: ResolvedSettings):
        self.resolved = resolved
        self.settings: MemorySettings = resolved.settings
        self.route: ModelRoute = resolved.route
        self._borrowed = False

    @classmethod
    def of(cls, settings: MemorySettings, route: ModelRoute | None = None) -> MemoryContext:
        """A context over settings the caller already resolved (a flow's tasks, the app `serve`
        mounts, a test). Inside a run held open (`for_run`) on the same settings, it shares the
        run's state store, which closing this context leaves open."""
        ctx = cls(ResolvedSettings(settings, route or ModelRoute()))
        with _RUNS_LOCK:
            run = next((r for r in _RUNS if r.settings == settings), None)
        if run is not None:
            ctx.__dict__["state"] = run.state
            ctx._borrowed = True
        return ctx

    @contextmanager
    def for_run(self) -> Iterator[MemoryContext]:
        """Hold this context open for a flow run: its tasks share its state store; closed at the end."""
        with _RUNS_LOCK:
            _RUNS.append(self)
        try:
            yield self
        finally:
            with _RUNS_LOCK:
                _RUNS.remove(self)
            self.close()

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
        state = self.__dict__.pop("state", None)  # the cached_property, when it was opened
        if state is not None and not self._borrowed:
            state.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_context(
    env: Mapping[str, str] | None = None, *, memory_root: str | Path | None = None, writes: bool = False
) -> MemoryContext:
    """Resolve settings (block > env > default) and open the memory root they name.
    `memory_root` overrides the root for this run (a flow parameter, a test). A caller that
    `writes` memory is refused (ServiceUnavailableError) when the Prefect API does not answer the
    saved settings' lookup; a reader goes on with the environment and defaults (`resolve_settings`)."""
    resolved = resolve_settings(env, writes=writes)
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
