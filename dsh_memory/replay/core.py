"""`replay()`: would memory have helped? The user's own history, replayed through the real pipeline
(what users see: docs/cli.md, "Would memory have helped?").

1. The history (`_history`): every session Phase 1 would extract, of one project or all, oldest
   first; `since` / `last` narrow it. With `cwd`, the other projects' sessions that state a global
   rule are read too, as *context*: the live pipeline injects their global memory into the
   project's sessions. They are extracted, never reported.
2. The rules (`_classify`): each session's standing instructions (`rules.py`, Phase 1's own
   classifier); one that says again a rule of an earlier session is *restated*, else *new*.
3. The memory at each restating session's start, rebuilt in a temporary root (`rebuild.py`), and
   whether the summary injected there held the rule ("anticipated"). The live memory root is
   never written, except the last replay's report (`result.save_report`, for the vault).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory import readers, scope
from dsh_memory.context import MemoryContext
from dsh_memory.errors import DshMemoryError, NotFoundError
from dsh_memory.replay.rebuild import rebuild
from dsh_memory.replay.result import HistorySession, ProjectTotals, ReplayResult, Restated, Said, save_report
from dsh_memory.replay.rules import Matcher, standing_instructions, terms

log = logging.getLogger(__name__)

MAX_SESSIONS = 5000  # a history is untrusted input: the most recent ones, the older left out and counted


def replay(
    ctx: MemoryContext,
    *,
    cwd: str | None = None,
    since: datetime | None = None,
    last: int | None = None,
    workdir: Path | None = None,
) -> ReplayResult:
    """Replay the history of `cwd`'s project (None: every project) and return what memory would
    have saved. `workdir`: keep the temporary memory root there (default: a temporary folder,
    removed afterwards). Also saved as the last replay of `ctx`'s memory root."""
    from dsh_memory.readpath import embedder

    started = time.monotonic()
    settings = ctx.settings
    matcher = Matcher(embedder.for_mode(settings.semantic_search))
    where = scope.locate(cwd) if cwd else None
    history, left_out = _history(ctx, where, since)
    history = _window(history, last)
    own = [s for s in history if not s.context]
    result = ReplayResult(
        scope=(where[0] or "all") if where else "all",
        since=since,
        last=last,
        sessions=len(own),
        context_sessions=len(history) - len(own),
        left_out=left_out,
        matcher=matcher.how,
    )
    result.projects = [ProjectTotals(project=p) for p in dict.fromkeys(s.project for s in own)]
    _classify(history, matcher, result)
    with _memory_root(workdir) as root:
        rebuild(history, root, ctx, matcher, result)
    result.tally()
    for p in result.projects:
        p.sessions = sum(1 for s in own if s.project == p.project)
    result.finished_at = datetime.now(UTC)
    result.seconds = round(time.monotonic() - started, 1)
    save_report(ctx.memory_root, result)
    return result


def _start_of(session, ref) -> datetime:
    when = session.created_at or next((e.time for e in session.events if e.time), None) or ref.updated_at
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _history(
    ctx: MemoryContext, where: tuple[str | None, bool] | None, since: datetime | None, limit: int = MAX_SESSIONS
) -> tuple[list[HistorySession], int]:
    """The sessions to replay, oldest first (see the module docstring; with `where`, the other
    projects' sessions that state a global rule are read too, as context), at most the `limit`
    most recently written (the logs are read newest first); and how many older ones that left out."""
    settings = ctx.settings
    out: list[HistorySession] = []
    refs = sorted(readers.discover(settings.roots), key=lambda r: r.mtime_ns, reverse=True)
    for n, ref in enumerate(refs):
        if len(out) >= limit:
            return sorted(out, key=lambda s: (s.started, s.id)), len(refs) - n
        if ref.collision_with is not None or ref.hint_root is False:
            continue
        if since is not None and ref.updated_at < since:  # it ended before `since`
            continue
        try:
            session = readers.load(ref)
        except (DshMemoryError, OSError, ValueError) as exc:  # Phase 1 would count it unreadable
            log.warning("replay: %s unreadable: %s", ref.id, type(exc).__name__)
            continue
        if not session.extractable or scope.excluded_by(session.cwd, settings.exclude_projects):
            continue
        when = _start_of(session, ref)
        if since is not None and when < since:
            continue
        project = scope.project_root(session.cwd)
        context = where is not None and not scope.matches(project, *where)
        rules = standing_instructions(session)
        if context and not (rules := _global_rules(rules, project)):
            continue  # another project's session: nothing of it reaches this project's memory
        out.append(HistorySession(session.id, when, session.cwd, project, rules, context=context))
    if where is not None and all(s.context for s in out):
        raise NotFoundError(f"no session to replay in {where[0]} (use --all for every project)")
    return sorted(out, key=lambda s: (s.started, s.id)), 0


def _global_rules(rules: list[str], project: str | None) -> list[str]:
    """The rules of another project's session that the live pipeline injects into every project:
    those the user stated as general (Phase 1's scoping tags their items `[scope: global]`:
    `phase1/scoping.py`, `scope.stated_as_general`); all of them without a project (their items
    have none to stay in)."""
    return rules if project is None else [r for r in rules if scope.stated_as_general(r)]


def _window(history: list[HistorySession], last: int | None) -> list[HistorySession]:
    """`history` up to its last reported session (a context session after it reaches no memory
    that is checked); with `last`, from the first of the last `last` reported sessions (the
    memory starts empty there, as with `since`)."""
    own = [i for i, s in enumerate(history) if not s.context]
    if last is not None:
        own = own[-last:] if last > 0 else []
    return history[(own[0] if last is not None else 0) : own[-1] + 1] if own else []


def _classify(history: list[HistorySession], matcher: Matcher, result: ReplayResult) -> None:
    """Each rule of each reported session: restated (it matches a rule of an earlier session, a
    context session's included; its first statement is kept) or new. Two rules that share no term
    never match, so each is compared only with the earlier ones sharing a term (an index by term)."""
    earlier: list[tuple[Said, Said]] = []  # (a statement, the first statement of its rule)
    by_term: dict[str, list[int]] = {}  # term → indexes into `earlier`
    for s in history:
        mine: list[tuple[Said, Said]] = []
        for text in s.rules:
            said = Said(session=s.id, started=s.started, project=s.project, text=text)
            candidates = sorted({i for t in terms(text) for i in by_term.get(t, ())})
            hit = next(
                ((earlier[i][1], how) for i in candidates if (how := matcher.same(text, earlier[i][0].text))), None
            )
            first, how = hit or (said, "")
            mine.append((said, first))
            if s.context:  # another project's: an earlier statement for the project's, not counted
                continue
            if hit is None:
                result.new_rules.append(said)
                continue
            item = Restated(**said.model_dump(), earlier=first, same_project=first.project == s.project, matched_by=how)
            s.restated.append(item)
            result.restated_items.append(item)
        for said, first in mine:
            for t in terms(said.text):
                by_term.setdefault(t, []).append(len(earlier))
            earlier.append((said, first))


@contextmanager
def _memory_root(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        root = Path(workdir).expanduser() / "memories"
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="dsh-memory-replay-") as tmp:
        yield Path(tmp) / "memories"
