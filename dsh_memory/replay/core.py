"""`replay()`: would memory have helped? The user's own history, replayed through the real pipeline
(what users see: docs/cli.md, "Would memory have helped?").

1. The history (`_history`): every session Phase 1 would extract, of one project or all, oldest
   first; `since` / `last` narrow it. With `cwd`, the other projects' sessions that state a global
   rule are read too, as *context*: the live pipeline injects their global memory into the
   project's sessions. They are extracted, never reported.
2. The rules (`_classify`): each session's standing instructions (`rules.py`, Phase 1's own
   classifier); one that says again a rule of an earlier session is *restated*, else *new*.
3. The memory at each restating session's start, rebuilt in a temporary root (`rebuild`), and
   whether the summary injected there held the rule ("anticipated"). The live memory root is
   never written, except the last replay's report (`result.save_report`, for the vault).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

from dsh_memory import progress, readers, scope
from dsh_memory.context import MemoryContext
from dsh_memory.errors import DshMemoryError, NoModelRouteError, NotFoundError, UserInputError
from dsh_memory.phase1.facts import BULLET
from dsh_memory.replay.result import RUN_TAG, HistorySession, ProjectTotals, ReplayResult, Restated, Said, save_report
from dsh_memory.replay.rules import Matcher, standing_instructions, terms
from dsh_memory.transcript.render import clean_surrogates

log = logging.getLogger(__name__)

MAX_SESSIONS = 5000  # logs read: a history is untrusted input, the most recent ones, the older left out and counted
PHASE = "replay"  # what its progress reports are named


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
    if workdir is not None:
        _fresh(Path(workdir).expanduser(), Path(settings.memory_root).expanduser())
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
    result.projects = [ProjectTotals(project=p, sessions=n) for p, n in Counter(s.project for s in own).items()]
    _classify(history, matcher, result)
    where = tempfile.TemporaryDirectory(prefix="dsh-memory-replay-") if workdir is None else nullcontext(workdir)
    with where as base:  # the memory root, removed afterwards unless in `workdir`
        root = Path(base).expanduser() / "memories"
        root.mkdir(parents=True, exist_ok=True)
        rebuild(history, root, ctx, matcher, result)
    result.tally()
    result.finished_at = datetime.now(UTC)
    result.seconds = round(time.monotonic() - started, 1)
    save_report(ctx.memory_root, result)
    return result


def _fresh(workdir: Path, live: Path) -> None:
    """A kept replay builds in `workdir`/memories (and `workdir`/extracted), which start empty:
    never the live memory root or a folder inside it (served, searched), nor a memory left there before."""
    live = live.resolve()
    for path in (workdir, workdir / "memories", workdir / "extracted"):
        if path.exists() and not path.is_dir():
            raise UserInputError(f"--keep {workdir}: {path} is not a folder")
    for path in (workdir / "memories", workdir / "extracted"):
        if path.resolve() == live or live in path.resolve().parents:
            raise UserInputError(
                f"{path} is in the live memory root {live}: keep the replay's memory in another folder"
            )
        if path.is_dir() and any(path.iterdir()):
            raise UserInputError(f"{path} already holds a memory: a replay's starts empty, keep it in a new folder")


def _history(
    ctx: MemoryContext, where: tuple[str | None, bool] | None, since: datetime | None, limit: int = MAX_SESSIONS
) -> tuple[list[HistorySession], int]:
    """The sessions to replay, oldest first (see the module docstring; with `where`, the other
    projects' sessions that state a global rule are read too, as context), from the `limit` most
    recently written logs read (newest first, whatever each holds: the work is bounded whatever the
    history); and how many older logs that left out."""
    settings = ctx.settings
    out: list[HistorySession] = []
    # `forget SESSION` excludes it in the live state; the replay's Phase 1 sees a temporary one
    forgotten = {i for i, v in ctx.state.overrides().items() if v == "exclude"} if ctx.state_exists() else set()
    refs = sorted(readers.discover(settings.roots), key=lambda r: r.mtime_ns, reverse=True)
    read = left_out = 0
    for n, ref in enumerate(refs):
        if ref.collision_with is not None or ref.hint_root is False or ref.id in forgotten:
            continue
        if since is not None and ref.updated_at < since:  # it ended before `since`
            continue
        if read >= limit:
            left_out = len(refs) - n
            break
        read += 1
        try:
            session = readers.load(ref)
        except (DshMemoryError, OSError, ValueError) as exc:  # Phase 1 would count it unreadable
            log.warning("replay: %s unreadable: %s", ref.id, type(exc).__name__)
            continue
        if not session.extractable or scope.excluded_by(session.cwd, settings.exclude_projects):
            continue
        when = session.created_at or next((e.time for e in session.events if e.time), None) or ref.updated_at
        when = when if when.tzinfo else when.replace(tzinfo=UTC)  # the session's start
        if since is not None and when < since:
            continue
        project = scope.project_root(session.cwd)
        project = project and clean_surrogates(project)  # the report is UTF-8: a log's half emoji as U+FFFD
        context = where is not None and not scope.matches(project, *where)
        rules = standing_instructions(session)
        if context and project is not None:
            # Another project's rules reach this one's memory when the user stated them as general
            # (Phase 1's scoping tags their items `[scope: global]`: `phase1/postprocess.scope_items`,
            # `scope.stated_as_general`); all of them without a project (their items have none to stay in).
            rules = [r for r in rules if scope.stated_as_general(r)]
        if context and not rules:
            continue  # another project's session: nothing of it reaches this project's memory
        out.append(HistorySession(session.id, when, session.cwd, project, rules, context=context))
    if all(s.context for s in out):  # nothing to report (and the last report stays)
        place = (
            f"in {where[0]} (use --all for every project)" if where is not None else "in the agents' session folders"
        )
        bound = f" ({left_out:,} older session logs left out: a replay reads the {limit:,} most recent)"
        raise NotFoundError(
            f"no session to replay {place}"
            + (" since that date" if since is not None else "")
            + (bound if left_out else "")
        )
    return sorted(out, key=lambda s: (s.started, s.id)), left_out


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


def rebuild(
    history: list[HistorySession], root: Path, ctx: MemoryContext, matcher: Matcher, result: ReplayResult
) -> None:
    """Fill `result` (extracted, consolidations, each restated rule's `held_by`) for `history`,
    its memory rebuilt in `root` (temporary; `ctx`'s own root is never written). One `replay`
    flow run (tagged RUN_TAG), named for the sessions it replays, its extract run a subflow.

    Phase 1 reads one session and no memory, so the sessions before the last restatement go
    through one `extract` run into `<root>/../extracted`. Then, before each restating session,
    the output of the sessions before it moves into `root` and the consolidate flow's body
    (`consolidate_step`) merges it, as a step of this run: a flow run per consolidation cost
    ≈1.4 s against ≈0.2 s for the mechanical merge itself. The consolidations share one context
    over `root`."""
    from prefect import flow, tags

    @flow(name="replay", flow_run_name=f"replay/{len(history)} sessions", log_prints=False)
    def replay_run() -> None:
        _steps(history, root, ctx, matcher, result)

    with tags(RUN_TAG):
        replay_run()


def _steps(
    history: list[HistorySession], root: Path, ctx: MemoryContext, matcher: Matcher, result: ReplayResult
) -> None:
    from dsh_memory.flows.consolidate import consolidate_step
    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.readpath.models import cwd_problem
    from dsh_memory.readpath.summary import summary
    from dsh_memory.storage.store import MemoryStore

    total = len(history)
    checks = [i for i, s in enumerate(history) if s.restated]
    needed = [h.id for h in history[: checks[-1]]] if checks else []
    staging, memory = MemoryStore(root.parent / "extracted"), MemoryStore(root)
    relayed = [0]  # Phase 1's per-session reports

    def relay(phase: str, n: int, _total: int, label: str) -> None:
        if phase == "phase1":
            relayed[0] += n
            progress.report(PHASE, n, total, label)

    with progress.listening(relay, lambda *_: None):
        if needed:
            extract = extract_flow.with_options(flow_run_name=f"replay/extract/{len(needed)} sessions")
            t = time.monotonic()
            p1 = extract(session_ids=needed, backfill=True, respect_idle=False, memory_root=str(staging.root))
            result.phase1_seconds = round(time.monotonic() - t, 1)
            if p1.skipped_no_route:
                raise NoModelRouteError(p1.error or "no model route")
            result.extracted = sum(1 for o in p1.outcomes if o.outcome in ("extracted", "noop"))
            failed = [o for o in p1.outcomes if o.outcome in ("failed", "unreadable")]
            result.failed = len(failed)
            if failed and not result.extracted:  # no memory to measure: not "every rule missed"
                raise DshMemoryError(f"replay stopped: Phase 1 failed on every session ({failed[0].error})")
            result.provider, result.model = p1.provider or "", p1.model or ""
    if total > relayed[0]:  # the sessions after the last restatement (and those Phase 1 skipped)
        progress.report(PHASE, total - relayed[0], total, "checked")
    memory.ensure_layout()
    blocks = staging.read_raw_blocks() if needed else []
    recaps = staging.list_rollout_summaries() if needed else []
    settings = ctx.settings.model_copy(update={"memory_root": root})  # what `consolidate --root` resolves
    max_chars, done = settings.max_summary_chars, 0
    with MemoryContext.of(settings, ctx.route).for_run() as phase2:
        for i in checks:
            ids = {h.id for h in history[done:i]}
            done = i
            if _move(staging, memory, ids, blocks, recaps):  # else nothing new to merge
                t = time.monotonic()
                p2 = consolidate_step(phase2, force=True)
                result.phase2_seconds += time.monotonic() - t
                if str(p2.outcome).startswith("error"):
                    raise DshMemoryError(f"replay stopped: consolidation failed before {history[i].id}: {p2.error}")
                result.consolidations += p2.outcome == "consolidated"
            s = history[i]
            cwd = None if cwd_problem(s.cwd) else s.cwd  # a logged cwd that names no project: as without one
            injected = summary(memory, max_chars, cwd=cwd).content
            lines = [BULLET.sub("", ln).strip() for ln in injected.splitlines()]
            lines = [ln for ln in lines if ln and not ln.startswith("#") and ln != "v1"]
            for item in s.restated:
                item.held_by = matcher.holder([item.earlier.text, item.text], lines)
                item.anticipated = bool(item.held_by)
    result.phase2_seconds = round(result.phase2_seconds, 1)


def _move(staging, memory, ids: set[str], blocks: list, recaps: list) -> int:
    """Phase 1's output for the sessions `ids` (raw memory blocks, recaps) from `staging` into
    `memory`, as Phase 1 would have written it there; how many raw blocks."""
    for info in recaps:
        if str(info.provenance.get("session_id")) in ids:
            memory.atomic_write(info.rel, staging.read_text(info.rel))
    moved = [b for b in blocks if b.session_id in ids]
    for block in moved:
        memory.append_raw(block)
    return len(moved)
