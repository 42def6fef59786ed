"""Pipeline status: local bookkeeping plus, when a Prefect server is configured, its run history
(in flight, pending, the last runs, sessions per status, the next scheduled runs)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from dsh_memory.cancel import bounded
from dsh_memory.consolidation.gate import backoff_until
from dsh_memory.context import MemoryContext
from dsh_memory.readers.header import excluded_sessions
from dsh_memory.readpath.health import memory_health
from dsh_memory.replay.result import RUN_TAG
from dsh_memory.serve.stack_state import running_stack
from dsh_memory.settings_loader import shown_url
from dsh_memory.storage.locks import is_running

PHASE1_FLOWS = ("extract", "extract-session", "catch-up")
# extract-transcripts: the extract pool's runs (extract_on_workers), so one no worker took shows
# under "next scheduled" (Late) while its writer waits for it.
FLOW_NAMES = (*PHASE1_FLOWS, "consolidate", "extract-transcripts")
# The run history's queries as a whole, at most: Prefect's client bounds each read, so a server
# answering a byte at a time would otherwise hold `status` for as long as it trickled.
SERVER_QUERY_SECONDS = 10.0


def local_status(ctx: MemoryContext) -> dict[str, Any]:
    now = datetime.now(UTC)
    settings, root = ctx.settings, ctx.memory_root
    if not ctx.state_exists():
        return {
            "memory_root": str(root),
            "initialized": False,
            "counts": {},
            "phase1_running": False,
            "phase2_running": is_running(root, "phase2"),
            "pending_consolidation": False,
            **health(ctx, now),
            "excluded": _excluded(ctx),
        }
    state = ctx.state
    claims = state.claims().values()
    counts = {"done": 0, "noop": 0, "failed": 0, "parked": 0, "running": 0} | Counter(c.shown_status for c in claims)
    failures = [
        {
            "session": c.session_id,
            "attempts": c.attempts,
            "parked": c.parked,
            "next_retry_at": c.next_retry_at,
            "error": (c.error or "")[:200],
        }
        for c in claims
        if c.status == "failed"
    ]
    running_claims = [
        c.session_id for c in claims if c.status == "running" and c.fresh(now, settings.stale_claim_seconds)
    ]
    meta = state.get_meta()
    models = sorted({f"{c.provider}/{c.model}" for c in claims if c.model})
    return {
        "memory_root": str(root),
        "initialized": True,
        "phase1_running": bool(running_claims),
        "phase1_running_sessions": running_claims,
        "phase2_running": is_running(root, "phase2"),
        "pending_consolidation": bool(meta.pending_consolidation),
        "last_phase1_at": meta.last_phase1_at,
        "last_phase2_at": meta.last_phase2_at,
        "last_phase2_outcome": meta.last_phase2_outcome,
        "phase2_error": meta.phase2_error,
        "phase2_consecutive_failures": meta.phase2_failures,
        "phase2_backoff_until": backoff_until(meta, now),
        "counts": counts,
        "tokens": {
            "input": sum(c.input_tokens or 0 for c in claims),
            "output": sum(c.output_tokens or 0 for c in claims),
        },
        "models": models,
        "failures": failures[:20],
        **health(ctx, now),
        "excluded": _excluded(ctx),
    }


def _excluded(ctx: MemoryContext) -> dict[str, int]:
    """Sessions the `exclude_projects` setting keeps out (their headers read, nothing more)."""
    try:
        return excluded_sessions(ctx.settings)
    except OSError:
        return {"patterns": len(ctx.settings.exclude_projects), "sessions": 0}


def health(ctx: MemoryContext, now: datetime | None = None) -> dict[str, Any]:
    """The memory's health (`readpath.health`): `projects` (per scope: items, uses, never used,
    may be stale, older than stale_after_days, left out of injection), `memory_files` (per file),
    `memory` (the totals) and `stale` (handbook items that may be stale)."""
    settings = ctx.settings
    try:
        usage = ctx.state.usage() if ctx.state_exists() else {}
        h = memory_health(ctx.store, usage, settings.max_summary_chars, settings.stale_after_days, now)
    except (OSError, ValueError):  # a status never fails on an unreadable memory file
        return {"projects": {}, "memory_files": [], "memory": {}, "stale": 0}
    return {
        "projects": h["projects"],
        "memory_files": h["memory_files"],
        "memory": h["totals"],
        "stale": h["totals"]["stale"],
    }


def server_status(limit: int = 10) -> dict[str, Any]:
    """In-flight, recent and scheduled runs of our flows from the Prefect API (if configured),
    waited for SERVER_QUERY_SECONDS at most (else unavailable, saying so)."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return {"available": False, "reason": "no Prefect server configured (PREFECT_API_URL unset)"}
    outcome = bounded(lambda: _query_server(url, limit), SERVER_QUERY_SECONDS)  # in this (Prefect's) context
    if not outcome.done():
        reason = f"Prefect server {shown_url(url)} did not answer within {SERVER_QUERY_SECONDS:g} s"
        return {"available": False, "api_url": shown_url(url), "reason": reason}
    try:
        return outcome.result()
    except Exception as exc:
        return {
            "available": False,
            "api_url": shown_url(url),
            "reason": f"Prefect server unreachable: {type(exc).__name__}: {shown_url(str(exc))}"[:300],  # names the URL
        }


def _query_server(url: str, limit: int) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    def row(run, flows) -> dict[str, Any]:
        result = {
            "id": str(run.id),
            "flow": flows.get(run.flow_id, "?"),
            "name": run.name,
            "state": run.state.name if run.state else None,
            "start": run.start_time,
            "end": run.end_time,
            "expected_start": run.expected_start_time,
            "deployment_id": str(run.deployment_id) if run.deployment_id else None,
        }
        if run.state and run.state.is_failed():
            result["message"] = (run.state.message or "")[:200]
        return result

    with get_client(sync_client=True) as client:
        flow_filter = FlowFilter(name=FlowFilterName(any_=list(FLOW_NAMES)))
        flows = {f.id: f.name for f in client.read_flows(flow_filter=flow_filter)}

        def runs(states, sort, n):
            found = client.read_flow_runs(
                flow_filter=flow_filter,
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=states))),
                sort=sort,
                limit=n,
            )
            return [r for r in found if RUN_TAG not in (r.tags or [])]  # a replay's runs are not the pipeline's

        active = runs([StateType.RUNNING, StateType.PENDING], FlowRunSort.START_TIME_DESC, 50)
        finished = runs(
            [StateType.COMPLETED, StateType.FAILED, StateType.CRASHED, StateType.CANCELLED],
            FlowRunSort.END_TIME_DESC,
            limit,
        )
        scheduled = runs([StateType.SCHEDULED], FlowRunSort.EXPECTED_START_TIME_ASC, limit)
    return {
        "available": True,
        "api_url": shown_url(url),  # a basic-auth password is shown nowhere
        "in_flight": [row(r, flows) for r in active],
        "phase1_in_flight": any(flows.get(r.flow_id) in PHASE1_FLOWS for r in active),
        "phase2_in_flight": any(flows.get(r.flow_id) == "consolidate" for r in active),
        "last_runs": [row(r, flows) for r in finished],
        "next_scheduled": [row(r, flows) for r in scheduled],
    }


def status(ctx: MemoryContext) -> dict[str, Any]:
    """Local bookkeeping, the Prefect run history and the running `dsh-memory serve` of this
    Prefect home (its state file; None when there is none)."""
    local, server, info = local_status(ctx), server_status(), running_stack()
    stack = None if info is None else {**asdict(info), "http_url": info.http_url, "hook_url": info.hook_url}
    return {"local": local, "server": server, "stack": stack}
