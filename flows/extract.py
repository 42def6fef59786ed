"""Phase 1 flow: extract every ready root session into a rollout summary + raw memory.

How to run it, what it writes (and its `phase1-batch` table artifact) and how it is named:
docs/running.md ("The flows"). Returns a Phase1Result (dsh_memory/phase1/result.py).

Sessions are mapped on a `ThreadPoolTaskRunner` the flow opens itself, not a decorator's: its
size follows `settings.concurrency` (llm/limit.py), known only once the settings are loaded, and
owning it orders the shutdown (on Ctrl-C/SIGTERM the cancel flag is set before its threads join).
With `extract_on_workers` this flow stays the single writer: the model calls run on the extract
pool's workers (tasks/remote.py, flows/extract_transcripts.py).
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from dsh_memory import cancel
from dsh_memory.context import memory_context
from dsh_memory.errors import NoModelRouteError
from dsh_memory.llm.factory import PhaseModel, phase_model
from dsh_memory.llm.limit import run_slots, worker_count
from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.remote import batches
from dsh_memory.phase1.result import Phase1Result
from dsh_memory.phase1.selection import EXTRACT, Decision, ReasonKind
from dsh_memory.replay.result import in_replay_run
from dsh_memory.settings import MemorySettings
from dsh_memory.tasks.claims import (
    claim_sessions,
    discover_sessions,
    finish_phase1,
    plan_extractions,
    record_decisions,
    recover_stale_claims,
    renewing_claims,
    sweep_temp_files,
)
from dsh_memory.tasks.extract import extract_session
from dsh_memory.tasks.remote import DEPLOYMENT, ROUTE, extract_on_workers, find_extract_deployment
from dsh_memory.transcript import tokens


def short_id(session_id: str) -> str:
    """A session id as run names show it: the first 8 characters, a `claude:` / `codex:` prefix kept."""
    prefix, _, rest = session_id.rpartition(":")
    return f"{prefix}:{rest[:8]}" if prefix else rest[:8]


def _run_name() -> str:
    """`extract/all`, `extract/<short id>` or `extract/<n> sessions` (from the run's parameters)."""
    ids = flow_run.parameters.get("session_ids") or []
    what = "all" if not ids else short_id(ids[0]) if len(ids) == 1 else f"{len(ids)} sessions"
    return f"extract/{what}" + (" (dry run)" if flow_run.parameters.get("dry_run") else "")


@flow(name="extract", flow_run_name=_run_name, log_prints=False)
def extract_flow(
    session_ids: list[str] | None = None,
    backfill: bool = False,
    dry_run: bool = False,
    respect_idle: bool = True,
    memory_root: str | None = None,
) -> Phase1Result:
    """Phase 1 over the given sessions (or every candidate). `memory_root` overrides the root
    for this run (`dsh-memory replay` builds memory in a temporary one)."""
    # settings: saved block > environment > default (refused when the Prefect API does not answer)
    with memory_context(memory_root=memory_root, writes=True).for_run() as ctx:
        result = _phase1(ctx, session_ids, backfill, dry_run, respect_idle)
    if not dry_run and not in_replay_run():  # a replay's run is not the live pipeline's latest batch
        create_table_artifact(key="phase1-batch", table=result.table_rows(), description=result.describe())
    return result


def _phase1(ctx, session_ids, backfill, dry_run, respect_idle) -> Phase1Result:
    log = get_run_logger()
    settings, route = ctx.settings, ctx.route
    now = datetime.now(UTC)

    refs = discover_sessions(settings)
    decisions = plan_extractions(refs, settings, now, session_ids, backfill, respect_idle)
    todo = [d for d in decisions if d.action == EXTRACT]
    if todo and not dry_run:
        tokens.preload()  # while claims are recovered and the workers start
    result = Phase1Result(discovered=len(refs), candidates=len(todo), decisions=[d.row() for d in decisions])
    if session_ids:
        known = {r.id for r in refs}
        result.unknown_ids = [s for s in session_ids if s not in known]
    if dry_run:
        return result

    # No model without sessions to extract (the local one is 1.1 GB to assemble or hash), and none
    # with extract_on_workers: the workers' models answer.
    model = None
    try:
        if todo and not settings.extract_on_workers:
            model = phase_model(route, "phase1", settings)
        elif todo and (why := find_extract_deployment(DEPLOYMENT)):
            raise NoModelRouteError(why)
    except NoModelRouteError as exc:  # skipped: no state is touched, retried on the next trigger
        log.warning("Phase 1 skipped: %s", exc)
        result.skipped_no_route, result.error = True, str(exc)
        return result

    sweep_temp_files(settings)
    recover_stale_claims(settings, now)
    result.outcomes += record_decisions(result.decisions, settings, now)
    if todo:  # claimed up front: a run that planned the same sessions at once gets the others
        claimed = set(claim_sessions([d.ref.id for d in todo], settings, datetime.now(UTC)))
        result.outcomes += [Outcome.claimed_elsewhere(d) for d in todo if d.ref.id not in claimed]
        todo = [d for d in todo if d.ref.id in claimed]
    # The route that answered: this host's model, or the extract pool's workers (a session parked
    # by failing workers resumes when they work again, as one parked on a model does).
    route = (model.provider, model.model) if model else ROUTE
    if todo:
        with renewing_claims(settings, [d.ref.id for d in todo]):
            result.outcomes += _extract(todo, model, settings)
        result.provider, result.model = route
    finish_phase1(settings, result.outcomes, now, provider=route[0], model=route[1])
    result.counts = result.count_outcomes()
    done = ", ".join(f"{k}={v}" for k, v in result.counts.items()) or "nothing to do"
    if waiting := sum(d.kind == ReasonKind.ACTIVE for d in decisions):  # why "nothing", when sessions exist
        done += f"; {waiting} session(s) written to within idle_seconds ({settings.idle_seconds}s) wait for a later run"
    log.info("Phase 1 done: %s", done)
    return result


def _extract(todo: list[Decision], model: PhaseModel | None, settings: MemorySettings) -> list[Outcome]:
    """One `extract-<session id>` task run per claimed session. With this host's model,
    `settings.concurrency` model calls at a time (llm/limit.py); without, each batch is first sent
    by one `extract-on-workers` task run and each session's task run applies its answer."""
    where = f"with {model.provider}/{model.model}" if model else "on workers"
    get_run_logger().info("extracting %d sessions %s (concurrency %d)", len(todo), where, settings.concurrency)
    slots = run_slots(settings.concurrency, calls=len(todo)) if model else nullcontext()
    with slots, ThreadPoolTaskRunner(max_workers=worker_count(settings.concurrency)) as runner:
        try:
            sent: list = [None] * len(todo)
            if model is None:  # submitted first: the session runs that wait on a batch queue behind it
                groups = batches(todo, settings.concurrency)
                params = dict(decisions=groups, settings=unmapped(settings))
                batch_runs = runner.map(extract_on_workers, parameters=params)
                sent = [run for run, group in zip(batch_runs, groups, strict=True) for _ in group]
            return runner.map(
                extract_session,
                parameters=dict(
                    decision=todo,
                    model=unmapped(model),
                    settings=unmapped(settings),
                    progress_total=unmapped(len(todo)),
                    sent=sent,
                ),
            ).result()
        except BaseException as exc:
            if not isinstance(exc, Exception):  # Ctrl-C, SIGTERM (Prefect's TerminationSignal)
                cancel.CANCELLED.set()  # before the runner joins its threads: stop model calls in flight
            raise
