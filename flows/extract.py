"""Phase 1 flow: extract every ready root session into a rollout summary + raw memory.

Run it:   dsh-memory extract [SESSION…] [--all] [--backfill] [--dry-run]
          or the `extract-session` / `catch-up` deployments (prefect.yaml).
Writes:   <memory root>/rollout_summaries/<slug>.md, raw_memories.md (appended),
          .state/state.sqlite3 (claims, watermarks, pending flag), and a table artifact
          `phase1-batch` per run in the Prefect run history (session, outcome, tokens, slug, error).
"""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from dsh_memory import cancel
from dsh_memory.errors import NoModelRouteError
from dsh_memory.llm.factory import phase_model
from dsh_memory.llm.limit import open_limit
from dsh_memory.phase1.extraction import Outcome
from dsh_memory.phase1.selection import BASELINE, EXTRACT, UNREADABLE, ReasonKind
from dsh_memory.settings_loader import load_settings
from dsh_memory.storage.state import StateStore
from dsh_memory.tasks.discover import discover_sessions
from dsh_memory.tasks.extract import extract_session
from dsh_memory.tasks.select import plan_extractions


@flow(name="extract", log_prints=False)
def extract_flow(
    session_ids: list[str] | None = None,
    backfill: bool = False,
    dry_run: bool = False,
    respect_idle: bool = True,
) -> dict:
    """Phase 1 over the given sessions (or every candidate). Returns a summary dict."""
    log = get_run_logger()
    settings, route = load_settings()
    state = StateStore(settings.memory_root)
    now = datetime.now(UTC)

    refs = discover_sessions(settings)
    decisions = plan_extractions(refs, settings, now, session_ids, backfill, respect_idle)
    todo = [d for d in decisions if d.action == EXTRACT]
    summary: dict = {
        "discovered": len(refs),
        "candidates": len(todo),
        "decisions": [d.row() for d in decisions],
        "outcomes": [],
        "skipped_no_route": False,
    }
    if session_ids:
        known = {r.id for r in refs}
        summary["unknown_ids"] = [s for s in session_ids if s not in known]
    if dry_run:
        return summary

    try:
        model = phase_model(route, "phase1", settings)
    except NoModelRouteError as exc:  # skipped: no state is touched, retried on the next trigger
        log.warning("Phase 1 skipped: %s", exc)
        summary["skipped_no_route"] = True
        summary["error"] = str(exc)
        _publish(summary)
        return summary

    recovered = state.recover_stale(now, settings.stale_claim_seconds)
    if recovered:
        log.warning("recovered %d stale running claims as failed: %s", len(recovered), ", ".join(recovered))
    for d in decisions:
        if d.action == UNREADABLE:
            state.fail(d.ref.id, d.reason, now, settings.retry_base_seconds, settings.retry_limit)
            summary["outcomes"].append(Outcome(d.ref.id, d.ref.source, "unreadable", d.part, error=d.reason).row())
        elif d.action == BASELINE:
            state.baseline(d.ref.id, d.watermark, now)
        elif d.kind is ReasonKind.TOO_FEW_NEW_EVENTS:  # looked at, not extracted: recheck later
            state.touch_checked(d.ref.id, now)

    if todo:
        global_limit = open_limit(settings.concurrency)
        runner = ThreadPoolTaskRunner(max_workers=settings.concurrency)
        log.info(
            "extracting %d sessions with %s/%s (concurrency %d)",
            len(todo),
            model.provider,
            model.model,
            settings.concurrency,
        )
        with runner:
            futures = [
                runner.submit(
                    extract_session,
                    parameters=dict(
                        decision=d,
                        model=model,
                        settings=settings,
                        progress_total=len(todo),
                        global_limit=global_limit,
                    ),
                )
                for d in todo
            ]
            try:
                outcomes = [f.result() for f in futures]
            except BaseException as exc:
                if not isinstance(exc, Exception):  # Ctrl-C, SIGTERM (Prefect's TerminationSignal)
                    cancel.CANCELLED.set()  # before the runner joins its threads: stop local decodes
                raise
            finally:
                if global_limit is not None:
                    global_limit.close()
        summary["outcomes"].extend(o.row() for o in outcomes)
        summary["provider"], summary["model"] = model.provider, model.model
        if any(o.outcome == "extracted" for o in outcomes):
            state.set_pending(True)
    state.set_phase1_ran(now)
    _publish(summary)
    counts = _counts(summary)
    log.info("Phase 1 done: %s", ", ".join(f"{k}={v}" for k, v in counts.items()) or "nothing to do")
    summary["counts"] = counts
    return summary


def _counts(summary: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in summary["outcomes"]:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    return counts


def _publish(summary: dict) -> None:
    rows = summary["outcomes"] or [
        {
            "session": "-",
            "source": "-",
            "outcome": "nothing to extract",
            "part": 0,
            "slug": "",
            "tokens_in": 0,
            "tokens_out": 0,
            "error": summary.get("error", ""),
        }
    ]
    create_table_artifact(
        key="phase1-batch",
        table=rows,
        description=f"Phase 1 batch: {summary['candidates']} candidates of {summary['discovered']} sessions"
        + (f" via {summary.get('provider')}/{summary.get('model')}" if summary.get("model") else ""),
    )
