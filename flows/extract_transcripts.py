"""extract-transcripts flow: the pure Phase 1 step, for a worker on any machine.

Run by the `extract-transcripts-pool` deployment (`dsh-memory deploy`, work pool
`dsh-memory-extract`) when `extract_on_workers` is on. Reads its `jobs` parameter only (redacted,
budgeted transcripts: dsh_memory/phase1/remote.py), never the memory root, the session logs or
the claims. Calls this worker's own model route (not the main host's global limit), `concurrency`
calls at a time. Returns one JobResult (as JSON) per job, persisted in the result storage this
worker is given (`deploy --result-storage`); the writer reads it as plain JSON (tasks/remote.py).
"""

from __future__ import annotations

from prefect import flow, get_run_logger, unmapped
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from dsh_memory.flows.extract import short_id
from dsh_memory.llm.factory import phase_model
from dsh_memory.phase1.extraction import Phase1Input
from dsh_memory.phase1.remote import JobResult, TranscriptJob
from dsh_memory.settings_loader import resolve_settings
from dsh_memory.tasks._session import short_error
from dsh_memory.tasks.extract import llm_extract

KEYS = ("session_id", "watermark", "to_seq", "cwd", "source", "cache_scope")  # llm_extract's, from each job


def _run_name() -> str:
    jobs = flow_run.parameters.get("jobs") or []
    first = jobs[0].get("session_id", "") if jobs and isinstance(jobs[0], dict) else ""
    return f"extract-transcripts/{len(jobs)} sessions" + (f" from {short_id(first)}" if first else "")


@flow(
    name="extract-transcripts",
    flow_run_name=_run_name,
    persist_result=True,
    result_serializer="json",
    log_prints=False,
)
def extract_transcripts_flow(jobs: list[TranscriptJob]) -> list[dict]:
    # settings and model route only (no memory context, no root); refused like a writer when the
    # Prefect API does not answer: the saved model route is unknown then
    resolved = resolve_settings(writes=True)
    settings = resolved.settings
    model = phase_model(resolved.route, "phase1", settings)
    log = get_run_logger()
    log.info("extracting %d transcripts with %s/%s", len(jobs), model.provider, model.model)

    with ThreadPoolTaskRunner(max_workers=settings.concurrency) as runner:
        futures = runner.map(
            llm_extract,
            parameters=dict(
                model=unmapped(model),
                material=[Phase1Input(evidence=j.evidence, transcript=j.text) for j in jobs],
                **{k: [getattr(j, k) for j in jobs] for k in KEYS},
            ),
        )
        answers = [f.result(raise_on_failure=False) for f in futures]
    results = [
        JobResult(session_id=job.session_id, error=short_error(answer))
        if isinstance(answer, BaseException)
        else JobResult(session_id=job.session_id, output=answer)
        for job, answer in zip(jobs, answers, strict=True)
    ]
    return [r.model_dump(mode="json") for r in results]
