"""`replay()`: would memory have helped? The user's own history, replayed through the real pipeline.

1. The history: every extractable session under the configured roots (the ones Phase 1 would
   read: root, interactive, with a typed prompt, not in `exclude_projects`), of one project
   (`cwd`) or all of them, ordered by when each started; `since` / `last` narrow it (the memory
   then starts empty at the first session kept).
2. The rules: each session's standing instructions (`rules.standing_instructions`, Phase 1's
   classifier). One that states again a rule of an earlier session (`rules.Matcher`) is
   *restated*; one said for the first time is a *new rule*.
3. The memory at each session's start: only sessions that restate something need it. Before
   each of them, the sessions that started before it and are not extracted yet go through the
   real `extract` flow, then the real `consolidate` flow (forced), both into one temporary
   memory root (a flow parameter: a saved settings block's root never applies); then the
   summary that `summary --inject --cwd` would have injected there. So N sessions cost at most
   N extractions (those after the last restatement cost none), one consolidation per session
   that restates, and the live memory root and its state are never written — except the report
   of the last replay (`result.save_report`, for the vault).
4. Held in time ("anticipated"): a line of that injected summary states the rule, in the
   earlier session's words or the restatement's.

Its flow runs are tagged `dsh-memory-replay` (and the extract runs named `replay/extract/…`).
Progress: `progress.report("replay", …)` once per session the replay has dealt with (Phase 1's
own per-session reports are relayed), so the CLI shows one bar over the whole history.
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory import progress, readers, scope
from dsh_memory.context import MemoryContext
from dsh_memory.errors import DshMemoryError, NoModelRouteError, NotFoundError
from dsh_memory.readers import header
from dsh_memory.replay.result import ProjectTotals, ReplayResult, Restated, Said, save_report
from dsh_memory.replay.rules import Matcher, standing_instructions, terms

log = logging.getLogger(__name__)

PHASE = "replay"
RUN_TAG = "dsh-memory-replay"  # on the replay's flow runs in Prefect: not the live pipeline's
MAX_SESSIONS = 5000  # a history is untrusted input: the most recent ones, the older left out and counted
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


@dataclass
class _Session:
    id: str
    started: datetime
    cwd: str | None
    project: str | None
    rules: list[str] = field(default_factory=list)
    restated: list[Restated] = field(default_factory=list)


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
    if last is not None:
        history = history[-last:] if last > 0 else []
    result = ReplayResult(
        scope=(where[0] or "all") if where else "all",
        since=since,
        last=last,
        sessions=len(history),
        left_out=left_out,
        matcher=matcher.how,
    )
    result.projects = [ProjectTotals(project=p) for p in dict.fromkeys(s.project for s in history)]
    _classify(history, matcher, result)
    with _memory_root(workdir) as root:
        _rebuild(history, root, settings.max_summary_chars, matcher, result)
    result.tally()
    for p in result.projects:
        p.sessions = sum(1 for s in history if s.project == p.project)
    result.finished_at = datetime.now(UTC)
    result.seconds = round(time.monotonic() - started, 1)
    save_report(ctx.memory_root, result)
    return result


def _start_of(session, ref) -> datetime:
    when = session.created_at or next((e.time for e in session.events if e.time), None) or ref.updated_at
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _history(
    ctx: MemoryContext, where: tuple[str | None, bool] | None, since: datetime | None, limit: int = MAX_SESSIONS
) -> tuple[list[_Session], int]:
    """The sessions to replay, oldest first (see the module docstring), at most the `limit` most
    recently written (the logs are read newest first); and how many older ones that left out."""
    settings = ctx.settings
    out: list[_Session] = []
    refs = sorted(readers.discover(settings.roots), key=lambda r: r.mtime_ns, reverse=True)
    for n, ref in enumerate(refs):
        if len(out) >= limit:
            return sorted(out, key=lambda s: (s.started, s.id)), len(refs) - n
        if ref.collision_with is not None or ref.hint_root is False:
            continue
        if since is not None and ref.updated_at < since:  # it ended before `since`
            continue
        if where is not None and (head := header.session_cwd(ref)) and not _in(where, head):
            continue  # another project's, known from its header: not read
        try:
            session = readers.load(ref)
        except (DshMemoryError, OSError, ValueError) as exc:  # Phase 1 would count it unreadable
            log.warning("replay: %s unreadable: %s", ref.id, type(exc).__name__)
            continue
        if not session.extractable or scope.excluded_by(session.cwd, settings.exclude_projects):
            continue
        project = scope.project_root(session.cwd)
        if where is not None and not _in(where, session.cwd):
            continue
        when = _start_of(session, ref)
        if since is not None and when < since:
            continue
        out.append(_Session(session.id, when, session.cwd, project, standing_instructions(session)))
    if where is not None and not out:
        raise NotFoundError(f"no session to replay in {where[0]} (use --all for every project)")
    return sorted(out, key=lambda s: (s.started, s.id)), 0


def _in(where: tuple[str | None, bool], cwd: str | None) -> bool:
    return scope.matches(scope.project_root(cwd), where[0], where[1])


def _classify(history: list[_Session], matcher: Matcher, result: ReplayResult) -> None:
    """Each rule of each session: restated (it matches a rule of an earlier session; its first
    statement is kept) or new. Two rules that share no term never match, so each is compared
    only with the earlier ones sharing a term (an index by term), not with every earlier rule."""
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
            if hit is None:
                result.new_rules.append(said)
                mine.append((said, said))
                continue
            first, how = hit
            item = Restated(**said.model_dump(), earlier=first, same_project=first.project == s.project, matched_by=how)
            s.restated.append(item)
            result.restated_items.append(item)
            mine.append((said, first))
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


def _rebuild(history: list[_Session], root: Path, max_chars: int, matcher: Matcher, result: ReplayResult) -> None:
    """The memory at the start of each session that restates a rule, built incrementally in
    `root`; each of its restated rules checked against what would have been injected."""
    from prefect import tags

    from dsh_memory.flows.consolidate import consolidate_flow
    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.readpath.summary import summary
    from dsh_memory.storage.store import MemoryStore

    total, done = len(history), 0
    relayed = [0]  # Phase 1's per-session reports in this batch

    def relay(phase: str, n: int, _total: int, label: str) -> None:
        if phase == "phase1":
            relayed[0] += n
            progress.report(PHASE, n, total, label)

    with progress.listening(relay, lambda *_: None), tags(RUN_TAG):
        for i, s in enumerate(history):
            if not s.restated:
                continue
            batch = [h.id for h in history[done:i]]
            if batch:
                relayed[0] = 0
                extract = extract_flow.with_options(flow_run_name=f"replay/extract/{len(batch)} sessions")
                p1 = extract(session_ids=batch, backfill=True, respect_idle=False, memory_root=str(root))
                if p1.skipped_no_route:
                    raise NoModelRouteError(p1.error or "no model route")
                result.extracted += sum(1 for o in p1.outcomes if o.outcome in ("extracted", "noop"))
                result.failed += sum(1 for o in p1.outcomes if o.outcome in ("failed", "unreadable"))
                result.provider, result.model = p1.provider or result.provider, p1.model or result.model
                if len(batch) > relayed[0]:  # the sessions Phase 1 skipped report nothing themselves
                    progress.report(PHASE, len(batch) - relayed[0], total, "skipped")
                if any(o.outcome == "extracted" for o in p1.outcomes):  # else nothing new to merge
                    p2 = consolidate_flow(force=True, memory_root=str(root))
                    if str(p2.outcome).startswith("error"):
                        raise DshMemoryError(f"replay stopped: consolidation failed before {s.id}: {p2.error}")
                    result.consolidations += p2.outcome == "consolidated"
            done = i
            injected = summary(MemoryStore(root), max_chars, cwd=s.cwd).content
            lines = [_BULLET.sub("", ln).strip() for ln in injected.splitlines()]
            lines = [ln for ln in lines if ln and not ln.startswith("#") and ln != "v1"]
            for item in s.restated:
                item.held_by = matcher.holder([item.earlier.text, item.text], lines)
                item.anticipated = bool(item.held_by)
        if total > done:  # the sessions after the last restatement need no memory
            progress.report(PHASE, total - done, total, "done")
