"""The single writer's tasks when Phase 1's model calls run on workers (`extract_on_workers`).

One verb each, per batch of sessions (dsh_memory/phase1/remote.py):
- `prepare_batch`: claim each session (the usual `try_start`), render → redact → budget its
  transcript into a TranscriptJob; a session another run holds is skipped, one that cannot be
  rendered fails its claim alone.
- `extract_on_workers`: start one `extract-transcripts-pool` flow run with the jobs, wait for it,
  read its JobResults from Prefect's result storage. Never raises: a run that fails, crashes,
  times out or whose result cannot be read becomes an error per job (the claims fail, to be
  retried with the usual backoff).
- `apply_batch`: each result validated and applied, or the claim failed with the worker's error
  — both through `finish` (tasks/_session.py), Phase 1's one end of a session in either mode.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel

from dsh_memory.context import MemoryContext
from dsh_memory.phase1.extraction import Outcome, prepare_input
from dsh_memory.phase1.remote import JobResult, TranscriptJob, accept
from dsh_memory.phase1.selection import Decision
from dsh_memory.settings import MemorySettings
from dsh_memory.tasks._session import finish, short_error, start

POLL_SECONDS = 1.0
WORKERS = "workers"  # the provider a claim records when the extract pool's workers failed it


class PreparedBatch(BaseModel):
    jobs: list[TranscriptJob]
    outcomes: list[Outcome]  # sessions of the batch that were skipped or failed before dispatch


@task(name="prepare-batch", cache_policy=NO_CACHE)
def prepare_batch(decisions: list[Decision], settings: MemorySettings, claimed: bool = False) -> PreparedBatch:
    jobs, outcomes = [], []
    with MemoryContext.of(settings) as ctx:
        for d in decisions:
            if not start(ctx, settings, d, claimed):
                outcomes.append(Outcome.claimed_elsewhere(d))
                continue
            try:
                material = prepare_input(d, settings.transcript_budget_tokens, None)  # the worker's writer decides
            except Exception as exc:  # this session alone
                outcomes.append(finish(ctx, settings, d, exc))
                continue
            ref = d.ref
            jobs.append(
                TranscriptJob(
                    session_id=ref.id,
                    source=ref.source,
                    cwd=d.session.cwd,
                    watermark=d.watermark,
                    to_seq=d.session.last_seq,
                    text=material.transcript,
                    evidence=material.evidence,
                    cache_scope=str(settings.memory_root),
                )
            )
    return PreparedBatch(jobs=jobs, outcomes=outcomes)


@task(name="find-extract-deployment", cache_policy=NO_CACHE)
def find_extract_deployment(deployment: str) -> str:
    """ "" when `deployment` exists on the server, else why Phase 1 cannot send work to workers
    (then nothing is claimed: the sessions wait, as without a model route)."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            client.read_deployment_by_name(deployment)
        return ""
    except ObjectNotFound:
        return f"extract_on_workers is on but {deployment} is not deployed: run `dsh-memory deploy`"
    except Exception as exc:
        return f"extract_on_workers is on but the Prefect API did not answer ({type(exc).__name__}: {exc})"


@task(name="extract-on-workers", cache_policy=NO_CACHE)
def extract_on_workers(prepared: PreparedBatch, deployment: str, timeout_seconds: float) -> list[JobResult]:
    from prefect.deployments import run_deployment

    jobs = prepared.jobs
    if not jobs:
        return []
    log = get_run_logger()
    try:
        run = run_deployment(
            deployment,
            parameters={"jobs": [j.model_dump(mode="json") for j in jobs]},
            timeout=timeout_seconds,
            poll_interval=POLL_SECONDS,
        )
        if not run.state or not run.state.is_final():
            _cancel(run.id)
            raise TimeoutError(f"no worker finished {deployment} run {run.name} within {timeout_seconds:.0f}s")
        if not run.state.is_completed():
            raise RuntimeError(f"{deployment} run {run.name} ended {run.state.name}: {run.state.message or ''}")
        try:
            answers = read_json_result(run.state)
        except RefusedResult:
            raise
        except Exception as exc:
            raise RuntimeError(
                f"the result of {run.name} is not readable here ({type(exc).__name__}): workers must write "
                "to a result storage this host can read (`dsh-memory deploy --result-storage`)"
            ) from exc
        results = [JobResult.model_validate(a) for a in answers]
    except Exception as exc:  # every job of the batch fails; the batch next to it goes on
        error = short_error(exc)
        log.error("%d sessions not extracted: %s", len(jobs), error)
        return [JobResult(session_id=j.session_id, error=error) for j in jobs]
    log.info("run %s: %d results", run.name, len(results))
    return results


class RefusedResult(RuntimeError):
    """A result record this writer will not decode (not JSON, too large)."""


MAX_RESULT_BYTES = 64 << 20


def read_json_result(state) -> object:
    """A finished run's persisted result, parsed as plain JSON.

    Not `state.result()`: that decodes with the serializer the record itself names, and the
    record is written by a worker — a `pickle` record would run code here. So the record is
    read from its storage block and accepted only when it says JSON, then parsed without
    object hooks (no class is imported from it either)."""
    import json
    from pathlib import Path

    from prefect.results import ResultRecordMetadata, resolve_result_storage
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH

    meta = getattr(state.data, "metadata", state.data)  # a state read from the server holds the metadata
    if not isinstance(meta, ResultRecordMetadata) or not meta.storage_key:
        raise RuntimeError("the run persisted no result")
    if meta.serializer.type != "json":
        raise RefusedResult(f"refused: the run's result is serialized as {meta.serializer.type!r}, not JSON")
    if meta.storage_block_id is not None:
        raw = resolve_result_storage(meta.storage_block_id).read_path(meta.storage_key)
    else:  # the default local storage: a worker on this machine, this Prefect home; read no more than the cap
        with open(Path(PREFECT_LOCAL_STORAGE_PATH.value()) / meta.storage_key, "rb") as fh:
            raw = fh.read(MAX_RESULT_BYTES + 1)
    if len(raw) > MAX_RESULT_BYTES:
        raise RefusedResult(f"refused: the run's result is over {MAX_RESULT_BYTES} bytes")
    data = json.loads(raw)
    if not (isinstance(data, dict) and {"metadata", "result"} <= data.keys()):
        return data  # the payload alone (Prefect then decodes it with the server's metadata: JSON)
    # A whole record, which Prefect would decode with the serializer it names itself.
    if ((data.get("metadata") or {}).get("serializer") or {}).get("type") != "json":
        raise RefusedResult("refused: the stored result record does not say JSON")
    result = data["result"]
    return json.loads(result) if isinstance(result, str) else result


def _cancel(flow_run_id) -> None:
    from prefect import get_client
    from prefect.states import Cancelling

    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(flow_run_id, Cancelling(message="the writer stopped waiting"), force=True)
    except Exception:
        pass


@task(name="apply-batch", cache_policy=NO_CACHE)
def apply_batch(
    decisions: list[Decision],
    prepared: PreparedBatch,
    results: list[JobResult],
    settings: MemorySettings,
    route: tuple[str, str] = ("", ""),
) -> list[Outcome]:
    """`route`: what a worker's failure is recorded against — (WORKERS, the deployment) — so a
    session parked by failing workers resumes when a run on the workers works again."""
    by_id = {r.session_id: r for r in results}
    sent = {j.session_id for j in prepared.jobs}
    outcomes = list(prepared.outcomes)
    with MemoryContext.of(settings) as ctx:
        for d in decisions:
            if d.ref.id not in sent:
                continue
            r = by_id.get(d.ref.id) or JobResult(session_id=d.ref.id, error="the worker returned no result for it")
            try:
                answer = accept(r.output) if r.output is not None else r.error
            except Exception as exc:  # an answer that does not validate
                answer = exc
            outcomes.append(finish(ctx, settings, d, answer or "the worker returned neither output nor error", route))
    return outcomes
