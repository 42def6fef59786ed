"""THE memory context: every entry point (flows, CLI, HTTP, MCP, `serve`, `status`) gets its
settings, its model route and its memory root's stores from `memory_context()`.

Settings resolve once, field by field: a saved Prefect Block > the environment > the default
(`settings_loader.resolve_settings`). So a `memory_root` pinned in the settings block is the root
the flows write *and* the root the read path serves.

    with memory_context() as ctx:
        ctx.store            # MemoryStore (files under the root)
        ctx.state            # StateStore (SQLite bookkeeping), opened on first use, closed on exit
        ctx.settings, ctx.route, ctx.resolved   # values and where each came from

A flow opens its context for the whole run (`with ctx.for_run():`): the tasks it calls get their
stores through `MemoryContext.of(settings)`, which hands them that run's state store instead of
opening another, so one run opens the state database once and closes it at its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.settings_loader import ResolvedSettings, resolve_settings

if TYPE_CHECKING:
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.store import MemoryStore


# Contexts a flow holds open for its run, by memory root (tasks run in this process's threads).
_RUNS: dict[Path, list[MemoryContext]] = {}
_RUNS_LOCK = threading.Lock()


class MemoryContext:
    """Resolved settings plus the stores of one memory root. Close it (or use `with`) to release
    the state database connections."""

    def __init__(self, resolved: ResolvedSettings):
        self.resolved = resolved
        self.settings: MemorySettings = resolved.settings
        self.route: ModelRoute = resolved.route
        self._borrowed = False

    @classmethod
    def of(cls, settings: MemorySettings, route: ModelRoute | None = None) -> MemoryContext:
        """A context over settings the caller already resolved (through `memory_context`, e.g.
        a flow's tasks, `serve` handing them to the app it mounts, or a test). Inside a run that
        holds its context open (`for_run`) on the same settings, the run's state store is shared:
        closing this context then leaves it open."""
        ctx = cls(ResolvedSettings(settings, route or ModelRoute()))
        with _RUNS_LOCK:
            run = next((r for r in _RUNS.get(settings.memory_root, []) if r.settings == settings), None)
        if run is not None:
            ctx.__dict__["state"] = run.state
            ctx._borrowed = True
        return ctx

    @contextmanager
    def for_run(self) -> Iterator[MemoryContext]:
        """Hold this context open for a flow run: its tasks share its state store; closed at the end."""
        with _RUNS_LOCK:
            _RUNS.setdefault(self.memory_root, []).append(self)
        try:
            yield self
        finally:
            with _RUNS_LOCK:
                runs = _RUNS.get(self.memory_root, [])
                if self in runs:
                    runs.remove(self)
                if not runs:
                    _RUNS.pop(self.memory_root, None)
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
        if "state" in self.__dict__:
            state = self.__dict__.pop("state")
            if not self._borrowed:
                state.close()

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
