"""extract-session flow: Phase 1 for one session, then consolidation when pending.

Started by the `extract-session` deployment's trigger: a Prefect event `dsh.turn.ended` on the
resource `dsh.session.<id>`, debounced per session (proactive trigger: one run ~debounce after
the last turn end). Also runnable by hand: `dsh-memory extract SESSION`.
Writes: what flows/extract.py writes; makes sure one `consolidate` run is queued when pending
(dsh_memory/serve/consolidation_queue.py: requests coalesce, nothing waits on Phase 2).
Run name: `extract-session/<short session id>`; its tasks (discover, plan, one `extract-<id>`
per session…) are this run's own: it runs Phase 1's body, not the extract flow as a subflow.
Due and fired sessions: when other extract-session runs are due but wait for a runner slot, or
the trigger fired for other sessions whose runs Prefect has not created yet, this run extracts
those sessions too and completes the due runs (dsh_memory/serve/due_runs.py).
Returns: the extract flow's Phase1Result, with `consolidation_requested` set.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from dsh_memory.flows.extract import run_phase1, short_id
from dsh_memory.hooks.events import RESOURCE_PREFIX
from dsh_memory.phase1.result import Phase1Result


def session_id_from(resource: str) -> str:
    """`dsh.session.<id>` (the event resource) or a bare id → the id."""
    resource = (resource or "").strip()
    return resource[len(RESOURCE_PREFIX) :] if resource.startswith(RESOURCE_PREFIX) else resource


def _run_name() -> str:
    """`extract-session/<short id>` (`extract-session/all` without one)."""
    from prefect.runtime import flow_run

    sid = session_id_from(str(flow_run.parameters.get("session") or ""))
    return f"extract-session/{short_id(sid) if sid else 'all'}"


@flow(name="extract-session", flow_run_name=_run_name)
def extract_session_flow(session: str = "", consolidate: bool = True) -> Phase1Result:
    log = get_run_logger()
    sid = session_id_from(session)
    if not sid:
        log.warning("no session id in the trigger: extracting every ready session instead")
    # Other sessions whose trigger fired and whose runs wait for a runner slot (due) or for
    # Prefect to create them (fired): extracted here too, the due runs then completed without a
    # process (dsh_memory/serve/due_runs.py). Read BEFORE the plan.
    due = _due_runs() if sid else []
    fired = _fired_sessions() if sid else []
    others = [session_id_from(s) for s in [*(r.session for r in due), *fired]]
    ids = [sid, *dict.fromkeys(s for s in others if s and s != sid)] if sid else None
    if ids and len(ids) > 1:
        log.info("also taking %d other sessions whose trigger fired (%d due runs)", len(ids) - 1, len(due))
    # Phase 1's body runs in this flow run (its tasks are this run's), not as a subflow.
    result = run_phase1(session_ids=ids, respect_idle=not sid)
    if due:
        _complete_covered(due, result)
    result.consolidation_requested = False
    if consolidate and result.extracted:
        result.consolidation_requested = request_consolidation()
    return result


def _due_runs() -> list:
    from prefect.runtime import flow_run

    from dsh_memory.serve.due_runs import read_due_runs

    try:
        return read_due_runs(exclude_run=flow_run.get_id())
    except Exception as exc:  # the sweep is an optimisation: without it each run does its own
        get_run_logger().info("due extract-session runs not read (%s)", type(exc).__name__)
        return []


def _fired_sessions() -> list[str]:
    from prefect.runtime import flow_run

    from dsh_memory.serve.due_runs import read_fired_sessions

    try:
        return read_fired_sessions(exclude_run=flow_run.get_id())
    except Exception as exc:  # an optimisation, as the due runs: each run still does its own
        get_run_logger().warning("fired sessions not read (%s: %s); each run extracts its own", type(exc).__name__, exc)
        return []


def _complete_covered(due: list, result: Phase1Result) -> None:
    """Complete the due runs whose session this run finished (extracted, no-op, up to date)."""
    from prefect.runtime import flow_run

    from dsh_memory.phase1.selection import ReasonKind
    from dsh_memory.serve.due_runs import complete_covered

    done = {o.session for o in result.outcomes if o.outcome in ("extracted", "noop")}
    done |= {d.session for d in result.decisions if d.kind is ReasonKind.UP_TO_DATE}
    by_param = {r.session for r in due if session_id_from(r.session) in done}
    try:
        covered = complete_covered(
            due,
            by_param,
            by=f"run {flow_run.get_name()} ({flow_run.get_id()})",  # names repeat, ids do not
            name_for=lambda s: f"extract-session/{short_id(session_id_from(s))}",
        )
    except Exception as exc:
        get_run_logger().info("due runs not completed (%s); they run on their own", type(exc).__name__)
        return
    get_run_logger().info(
        "also extracted %d due sessions; %d of their runs completed without a process", len(due), len(covered)
    )


def request_consolidation() -> bool:
    """One queued `consolidate` run covers every request (coalesced); True when one is queued."""
    from dsh_memory.context import memory_context
    from dsh_memory.serve import consolidation_queue
    from dsh_memory.serve.deployments import CONSOLIDATE, in_this_mode

    log = get_run_logger()
    try:
        with memory_context() as ctx:
            # A pool's run (`dsh-memory deploy`) queues the pool's consolidate, never serve's.
            req = consolidation_queue.request_consolidation(ctx.settings, in_this_mode(CONSOLIDATE))
    except Exception as exc:  # no such deployment (plain in-process run): the schedule picks it up
        log.info("consolidation not requested (%s); the schedule will pick it up", type(exc).__name__)
        return False
    if req.requested:
        log.info("consolidation %s: run %s at %s", req.reason, req.run_name, f"{req.start_at:%H:%M:%S}Z")
    else:
        log.info("consolidation not requested: %s", req.reason)
    return req.requested
