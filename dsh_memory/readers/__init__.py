"""Session readers: stat-only discovery, then read, for every supported agent.

Each source module exposes the same two functions:
    discover(root: Path) -> list[SessionRef]   # stat/listdir only, never reads file content
    load(ref: SessionRef) -> Session           # raises SessionReadError naming file + reason
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

from dsh_memory.errors import NotFoundError
from dsh_memory.models import SOURCES, Session, SessionRef, SourceKind
from dsh_memory.settings import SourceRoots

_MODULES: dict[SourceKind, str] = {
    "dsh": "dsh_memory.readers.dsh",
    "codex": "dsh_memory.readers.codex",
    "claude": "dsh_memory.readers.claude",
}
_ROOT_FIELD: dict[SourceKind, str] = {
    "dsh": "dsh_sessions",
    "codex": "codex_sessions",
    "claude": "claude_projects",
}


def _module(source: SourceKind):
    return importlib.import_module(_MODULES[source])


def discover(roots: SourceRoots, sources: Iterable[SourceKind] = SOURCES) -> list[SessionRef]:
    """Every session log under the configured roots (missing roots are simply empty)."""
    refs: list[SessionRef] = []
    for source in sources:
        root: Path | None = getattr(roots, _ROOT_FIELD[source])
        if root is None or not root.is_dir():
            continue
        refs.extend(_module(source).discover(root))
    return refs


def load(ref: SessionRef) -> Session:
    return _module(ref.source).load(ref)


def find(roots: SourceRoots, session_id: str, sources: Iterable[SourceKind] = SOURCES) -> SessionRef:
    """The ref of one session by id (exact, or a unique prefix of at least 6 characters)."""
    refs = discover(roots, sources)
    exact = [r for r in refs if r.id == session_id]
    if exact:
        return exact[0]
    if len(session_id) >= 6:
        pref = [r for r in refs if r.id.startswith(session_id)]
        if len(pref) == 1:
            return pref[0]
        if len(pref) > 1:
            raise NotFoundError(f"session id prefix {session_id!r} is ambiguous ({len(pref)} sessions)")
    raise NotFoundError(f"no session with id {session_id!r} under the configured roots")
