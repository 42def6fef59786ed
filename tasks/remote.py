"""The single writer's side of Phase 1 when its model calls run on workers (`extract_on_workers`).

`extract_on_workers` (one task run per batch, dsh_memory/phase1/remote.py) claims and renders
each session into a TranscriptJob, runs one `extract-transcripts-pool` flow with the jobs and
reads its JobResults (`run-extract-pool`, which sends a batch again when its run crashed, e.g. a
worker could not submit it, or the Prefect API failed on the way); it never raises (a run that
fails, times out or whose result cannot be read becomes an error per job). `from_workers` ends one
session with its answer, through `finish` (tasks/_session.py).
"""

from __future__ import annotations

import json
import os
import stat
from contextlib import suppress
from pathlib import Path

import httpx
from prefect import get_client, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterIdempotencyKey
from prefect.context import TaskRunContext
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultRecordMetadata, resolve_result_storage
from prefect.settings import PREFECT_LOCAL_STORAGE_PATH
from prefect.states import Cancelling

from dsh_memory.context import MemoryContext
from dsh_memory.phase1.extraction import Outcome, prepare_input
from dsh_memory.phase1.remote import JobResult, TranscriptJob, accept, job_results
from dsh_memory.phase1.selection import Decision
from dsh_memory.serve.deployments import EXTRACT_TRANSCRIPTS, POOL_SUFFIX
from dsh_memory.settings import MemorySettings
from dsh_memory.tasks._policy import raised
from dsh_memory.tasks._session import call_keys, finish, short_error, start

DEPLOYMENT = EXTRACT_TRANSCRIPTS + POOL_SUFFIX
ROUTE = ("workers", DEPLOYMENT)  # (provider, model) a claim records when the extract pool's workers failed it


@task(name="find-extract-deployment", cache_policy=NO_CACHE)
def find_extract_deployment(deployment: str) -> str:
    """ "" when `deployment` exists on the server, else why Phase 1 cannot send work to workers
    (then nothing is claimed: the sessions wait, as without a model route)."""
    try:
        with get_client(sync_client=True) as client:
            client.read_deployment_by_name(deployment)
        return ""
    except ObjectNotFound:
        return f"extract_on_workers is on but {deployment} is not deployed: run `dsh-memory deploy`"
    except Exception as exc:
        return f"extract_on_workers is on but the Prefect API did not answer ({type(exc).__name__}: {exc})"


@task(name="extract-on-workers", cache_policy=NO_CACHE)
def extract_on_workers(decisions: list[Decision], settings: MemorySettings) -> dict[str, JobResult | Outcome]:
    """The run claimed `decisions` up front. Session id → what `from_workers` ends the session with: the worker's JobResult, or the
    session's Outcome when it was not sent (claimed elsewhere, or it could not be rendered)."""
    sent: dict[str, JobResult | Outcome] = {}
    jobs = []
    with MemoryContext.of(settings) as ctx:
        for d in decisions:
            if not start(ctx, settings, d, claimed=True):
                sent[d.ref.id] = Outcome.claimed_elsewhere(d)
                continue
            try:
                material = prepare_input(d, settings.transcript_budget_tokens, None)  # the worker's writer decides
            except Exception as exc:  # this session alone
                sent[d.ref.id] = finish(ctx, settings, d, exc)
                continue
            job = TranscriptJob(text=material.transcript, evidence=material.evidence, **call_keys(d, settings))
            jobs.append(job.redacted())
    if jobs:
        try:
            results = run_extract_pool(jobs, float(settings.stale_claim_seconds))
        except Exception as exc:  # this batch fails (retried with the claims' backoff); the next goes on
            error = short_error(exc)
            get_run_logger().error("%d sessions not extracted: %s", len(jobs), error)
            results = [JobResult(session_id=j.session_id, error=error) for j in jobs]
        sent.update((r.session_id, r) for r in results)
    return sent


class PoolRunCrashed(RuntimeError):
    """The pool's run ended Crashed: its infrastructure failed it (a worker could not submit it, e.g.
    on a server 503; its process died). Sending the batch again is safe: the writer applies once."""


def sent_again(exc: BaseException | None) -> bool:
    """Whether a batch whose `run-extract-pool` raised `exc` is sent again: its run crashed, or the
    Prefect API failed on the way (a 5xx or 429 after the client's own retries, a connection that
    broke). Sent again, the batch finds the run it may have created by its idempotency key
    (`_pool_key`), so no session reaches the model twice; a run that failed or timed out is not."""
    if isinstance(exc, PoolRunCrashed | httpx.TransportError):
        return True
    status = exc.response.status_code if isinstance(exc, PrefectHTTPStatusError) else 0
    return status >= 500 or status == 429


def _sent_again(task, task_run, state) -> bool:
    return sent_again(raised(state))


def _pool_key() -> str:
    """The idempotency key of this task run's pool run: its task run id, chained past each run of
    it that crashed (`<id>:<crashed run id>`). A try after an API error gets back the run the last
    try created; a try after a crash, a new run."""
    first = key = str(TaskRunContext.get().task_run.id)
    with get_client(sync_client=True) as client:
        while True:
            keyed = FlowRunFilter(idempotency_key=FlowRunFilterIdempotencyKey(any_=[key]))
            crashed = [r for r in client.read_flow_runs(flow_run_filter=keyed) if r.state and r.state.is_crashed()]
            if not crashed:
                return key
            key = f"{first}:{crashed[0].id}"


@task(
    name="run-extract-pool",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 10],
    retry_jitter_factor=0.5,
    retry_condition_fn=_sent_again,
)
def run_extract_pool(jobs: list[TranscriptJob], timeout_seconds: float) -> list[JobResult]:
    """One `extract-transcripts-pool` run for `jobs`, waited for up to `timeout_seconds`, and its
    JobResults. Sent again (twice at most) when `sent_again` says so; any other end raises."""
    run = run_deployment(
        DEPLOYMENT,
        parameters={"jobs": [j.model_dump(mode="json") for j in jobs]},
        timeout=timeout_seconds,
        poll_interval=1.0,
        idempotency_key=_pool_key(),
    )
    if not run.state or not run.state.is_final():
        with suppress(Exception), get_client(sync_client=True) as client:
            client.set_flow_run_state(run.id, Cancelling(message="the writer stopped waiting"), force=True)
        raise TimeoutError(f"no worker finished {DEPLOYMENT} run {run.name} within {timeout_seconds:.0f}s")
    if not run.state.is_completed():
        why = f"{DEPLOYMENT} run {run.name} ended {run.state.name}: {run.state.message or ''}"
        raise PoolRunCrashed(why) if run.state.is_crashed() else RuntimeError(why)
    try:
        answers = read_json_result(run.state)
    except RefusedResult:
        raise
    except Exception as exc:
        raise RuntimeError(
            f"the result of {run.name} is not readable here ({type(exc).__name__}): workers must write "
            "to a result storage this host can read (`dsh-memory deploy --result-storage`)"
        ) from exc
    try:
        results = job_results(answers, [j.session_id for j in jobs])
    except ValueError as exc:
        raise RuntimeError(f"{DEPLOYMENT} run {run.name}: {exc}") from None
    get_run_logger().info("run %s: results for %d sessions", run.name, len(results))
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
    meta = getattr(state.data, "metadata", state.data)  # a state read from the server holds the metadata
    if not isinstance(meta, ResultRecordMetadata) or not meta.storage_key:
        raise RuntimeError("the run persisted no result")
    if meta.serializer.type != "json":
        raise RefusedResult(f"refused: the run's result is serialized as {meta.serializer.type!r}, not JSON")
    if meta.storage_block_id is None:  # the default local storage: a worker on this machine
        raw = _read_capped(Path(PREFECT_LOCAL_STORAGE_PATH.value()) / meta.storage_key)
    elif isinstance(storage := resolve_result_storage(meta.storage_block_id), LocalFileSystem):
        raw = _read_capped(storage._resolve_path(meta.storage_key))  # Prefect's own bounds: under its basepath
    else:  # an object store's block reads the whole object (its own size)
        raw = storage.read_path(meta.storage_key)
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


def _read_capped(path: Path) -> bytes:
    """A result file's first MAX_RESULT_BYTES + 1 bytes; anything but a regular file (a FIFO that
    would block, a device) is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedResult(f"refused: the run's result at {path} is not a regular file")
        return fh.read(MAX_RESULT_BYTES + 1)


def from_workers(
    ctx: MemoryContext, settings: MemorySettings, decision: Decision, sent: dict[str, JobResult | Outcome]
) -> Outcome:
    """The session's end from its batch's answers (`extract_on_workers`). A worker's failure is
    recorded against ROUTE, so a session parked by failing workers resumes when they work again."""
    r = sent.get(decision.ref.id) or JobResult(session_id=decision.ref.id, error="the worker returned no result for it")
    if isinstance(r, Outcome):
        return r
    try:
        answer = accept(r.output) if r.output is not None else r.error
    except Exception as exc:  # an answer that does not validate
        answer = exc
    return finish(ctx, settings, decision, answer or "the worker returned neither output nor error", ROUTE)
