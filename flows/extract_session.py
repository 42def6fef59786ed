"""extract-session flow: Phase 1 for one session, then consolidation when pending.

Started by the `extract-session` deployment's trigger: a Prefect event `dsh.turn.ended` on the
resource `dsh.session.<id>`, debounced per session (proactive trigger: one run ~debounce after
the last turn end). Also runnable by hand: `dsh-memory extract SESSION`.
Writes: what flows/extract.py writes; makes sure one `consolidate` run is queued when pending
(dsh_memory/serve/consolidation_queue.py: requests coalesce, nothing waits on Phase 2).
Run name: `extract-session/<short session id>`; its tasks (discover, plan, one `extract-<id>`
per session…) are this run's own: it runs Phase 1's body, not the extract flow as a subflow.
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
    # Phase 1's body runs in this flow run (its tasks are this run's), not as a subflow.
    result = run_phase1(session_ids=[sid] if sid else None, respect_idle=not sid)
    result.consolidation_requested = False
    if consolidate and result.extracted:
        result.consolidation_requested = request_consolidation()
    return result


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
