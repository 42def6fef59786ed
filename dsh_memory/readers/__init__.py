"""Session readers: stat-only discovery, then read, for every supported agent.

Each source module exposes the same two functions:
    discover(root: Path) -> list[SessionRef]   # stat/listdir only, never reads file content
    load(ref: SessionRef) -> Session           # raises SessionReadError naming file + reason
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from pathlib import Path

from dsh_memory.errors import NotFoundError, SessionReadError
from dsh_memory.models import SOURCES, Session, SessionRef, SourceKind
from dsh_memory.settings import SourceRoots

_ROOT_FIELD: dict[SourceKind, str] = {
    "dsh": "dsh_sessions",
    "codex": "codex_sessions",
    "claude": "claude_projects",
}


def _module(source: SourceKind):
    return importlib.import_module(f"{__name__}.{source}")


log = logging.getLogger("dsh_memory.readers")


def discover(roots: SourceRoots, sources: Iterable[SourceKind] = SOURCES) -> list[SessionRef]:
    """Every session log under the configured roots (missing roots are simply empty), with
    session ids made unique (`separate_ids`)."""
    refs: list[SessionRef] = []
    for source in sources:
        root: Path | None = getattr(roots, _ROOT_FIELD[source])
        if root is None or not root.is_dir():
            continue
        refs.extend(_module(source).discover(root))
    return separate_ids(refs)


def separate_ids(refs: list[SessionRef]) -> list[SessionRef]:
    """A session id is the key of a session's claim, summaries and raw memories, so two logs must
    never share one. When they do (reported as a warning):
    - in different sources (a DSH and a Claude Code session): the first in source order (DSH,
      Codex, Claude) keeps the id, the others are namespaced as `<source>:<id>`;
    - in the same source (a copied session folder): the first path keeps the id; the others carry
      `collision_with` and are never extracted.
    Deterministic (source order, then path), so a session keeps its id from run to run."""
    groups: dict[str, list[SessionRef]] = {}
    for ref in refs:
        groups.setdefault(ref.id, []).append(ref)
    replaced: dict[int, SessionRef] = {}
    for sid, group in groups.items():
        group = sorted(group, key=lambda r: (SOURCES.index(r.source), str(r.path)))
        owners = {group[0].source: group[0]}
        for ref in group[1:]:
            first = owners.setdefault(ref.source, ref)
            if first is not ref:
                log.warning(
                    "%s: session id %s is already used by %s: not extracted (it would overwrite that "
                    "session's memory); remove or rename one of the copies",
                    ref.path,
                    sid,
                    first.path,
                )
                replaced[id(ref)] = ref.model_copy(update={"collision_with": first.path})
            else:
                log.warning(
                    "%s: session id %s is also used by %s: this %s session is kept apart as %s:%s",
                    ref.path,
                    sid,
                    group[0].path,
                    ref.source,
                    ref.source,
                    sid,
                )
                replaced[id(ref)] = ref.model_copy(update={"id": f"{ref.source}:{sid}"})
    return [replaced.get(id(r), r) for r in refs]


def load(ref: SessionRef) -> Session:
    """The session of `ref`, its private spans dropped (`transcript/private.py`): every stage reads
    sessions through here, so none sees what the user marked `<private>`. A log whose records have
    shapes its reader does not expect (a dict where a string belongs) is a SessionReadError too,
    so it fails alone, like any unreadable log."""
    from dsh_memory.transcript.private import without_private

    try:
        session = _module(ref.source).load(ref)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError) as exc:  # incl. pydantic's
        if isinstance(exc, SessionReadError):
            raise
        first = (str(exc).splitlines() or [""])[0][:200]
        raise SessionReadError(ref.path, f"a record of an unexpected shape ({type(exc).__name__}: {first})") from exc
    return without_private(session)


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
