"""A worker's result is untrusted input (scale-out, tasks/remote.py): the test plays a worker that
answers the writer's real extract-transcripts-pool run with a JSON result of its own making, on
a real Prefect server. What does not fit fails its session alone, saying why; the batch goes on."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prefect import flow, get_client

from dsh_memory.storage.state import StateStore
from dsh_memory.testing.sessions import make_sessions
from tests.test_scale_out import model_writer_env

pytestmark = pytest.mark.usefixtures("own_prefect_api")


@flow(persist_result=True, result_serializer="json")
def _worker_answer(answers: Any) -> Any:
    return answers


def _answer_the_pool_run(answers_for, jobs: list | None = None) -> dict:
    """Runs Phase 1 in a thread, answers its one pool run with `answers_for(session ids sent)` as
    a worker's persisted JSON result, and returns the finished Phase1Result; the run's jobs, as
    the server stored them, are added to `jobs`."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.states import Completed

    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.tasks.remote import DEPLOYMENT

    finished: dict = {}
    with get_client(sync_client=True) as client:
        only_ours = DeploymentFilter(id=DeploymentFilterId(any_=[client.read_deployment_by_name(DEPLOYMENT).id]))
        before = {r.id for r in client.read_flow_runs(deployment_filter=only_ours)}
        writer = threading.Thread(target=lambda: finished.update(state=extract_flow(return_state=True)))
        writer.start()
        deadline = time.monotonic() + 120
        while not (runs := [r for r in client.read_flow_runs(deployment_filter=only_ours) if r.id not in before]):
            assert time.monotonic() < deadline and writer.is_alive(), "the writer sent no run"
            time.sleep(0.2)
        sent = [j["session_id"] for j in runs[0].parameters["jobs"]]
        (jobs if jobs is not None else []).extend(runs[0].parameters["jobs"])
        record = _worker_answer(answers_for(sent), return_state=True).data
        client.set_flow_run_state(runs[0].id, Completed(data=record), force=True)
        writer.join(timeout=300)
    assert not writer.is_alive()
    return finished["state"].result()


def test_a_bad_entry_in_a_worker_result_fails_that_session_alone(monkeypatch, tmp_path):
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    make_sessions(tmp_path / "dsh", 4)
    root = model_writer_env(monkeypatch, tmp_path, "http://127.0.0.1:9/v1", 1)  # one batch; no model here
    deploy(MemorySettings.from_env(), extract_only=True)
    good = {
        "raw_memory": "- The user asked: keep the tests green.\n- Tests run with `uv run pytest`.",
        "rollout_summary": "## Task\nkeep the tests green\n\n## Outcome\ndone",
        "rollout_slug": "keep the tests green",
    }

    def answers_for(sent: list[str]) -> list:
        ok, wrong_typed, twice, _missing = sent
        return [
            {"session_id": ok, "output": good},
            {"session_id": wrong_typed, "output": {"raw_memory": ["not", "text"]}},
            {"session_id": twice, "error": "one"},
            {"session_id": twice, "error": "two"},
            {"session_id": "not-sent", "output": good},  # for a session this batch never sent
            "not even an object",
        ]

    result = _answer_the_pool_run(answers_for)
    assert result.counts == {"extracted": 1, "failed": 3}, result.counts
    claims = StateStore(root).claims()
    errors = sorted(c.error or "" for c in claims.values() if c.status == "failed")
    assert errors == [
        "the worker returned 2 results for it",
        "the worker returned no result for it",
        "the worker's result for it is not valid: output.raw_memory",
    ], errors
    assert "not-sent" not in claims


def test_a_worker_result_that_is_not_a_list_fails_its_batch_saying_so(monkeypatch, tmp_path):
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    make_sessions(tmp_path / "dsh", 2)
    root = model_writer_env(monkeypatch, tmp_path, "http://127.0.0.1:9/v1", 1)
    deploy(MemorySettings.from_env(), extract_only=True)

    result = _answer_the_pool_run(lambda sent: {"session_id": sent[0]})
    assert result.counts == {"failed": 2}, result.counts
    errors = {c.error for c in StateStore(root).claims().values()}
    assert len(errors) == 1 and "not a list of results" in errors.pop()


def test_a_pool_run_no_worker_took_shows_in_status(monkeypatch, tmp_path):
    """No worker runs the extract pool: the writer's run waits (up to stale_claim_seconds), and
    `status` lists the extract-transcripts run that waits for a worker."""
    from prefect.deployments import run_deployment

    from dsh_memory.serve.deployments import deploy
    from dsh_memory.serve.status import _query_server
    from dsh_memory.settings import MemorySettings
    from dsh_memory.tasks.remote import DEPLOYMENT

    model_writer_env(monkeypatch, tmp_path, "http://127.0.0.1:9/v1", 1)
    deploy(MemorySettings.from_env(), extract_only=True)
    run = run_deployment(DEPLOYMENT, parameters={"jobs": []}, timeout=0)
    waiting = [r for r in _query_server("", 50)["next_scheduled"] if r["id"] == str(run.id)]
    assert [(r["flow"], r["name"]) for r in waiting] == [("extract-transcripts", run.name)]


def _metadata_state(storage_key: str, block_id=None):
    """A finished run's state as the writer reads it from the server: the record's metadata only."""
    from types import SimpleNamespace

    from prefect.results import ResultRecordMetadata
    from prefect.serializers import JSONSerializer

    meta = ResultRecordMetadata(storage_key=storage_key, serializer=JSONSerializer(), storage_block_id=block_id)
    return SimpleNamespace(data=meta)


def test_a_huge_result_in_a_local_storage_block_is_refused_reading_no_more_than_the_cap(tmp_path):
    """The shared LocalFileSystem block (an NFS mount): a result far over the cap is refused
    after reading the cap, not the whole file."""
    import tracemalloc

    from prefect.filesystems import LocalFileSystem

    from dsh_memory.tasks.remote import MAX_RESULT_BYTES, RefusedResult, read_json_result

    shared = tmp_path / "shared"
    shared.mkdir()
    LocalFileSystem(basepath=str(shared)).save("dsh-huge", overwrite=True)
    block_id = LocalFileSystem.load("dsh-huge")._block_document_id
    with open(shared / "huge-result", "wb") as fh:
        fh.truncate(3 * MAX_RESULT_BYTES)  # sparse: costs nothing on disk
    tracemalloc.start()
    try:
        with pytest.raises(RefusedResult, match="over"):
            read_json_result(_metadata_state("huge-result", block_id))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * MAX_RESULT_BYTES, f"peak {peak >> 20} MiB"


def test_a_result_that_is_no_regular_file_is_refused_without_waiting(tmp_path):
    """A record whose key names a FIFO (nothing ever writes to it): refused, not read forever."""
    import os

    from dsh_memory.tasks.remote import RefusedResult, read_json_result

    fifo = tmp_path / "result-fifo"
    os.mkfifo(fifo)
    with pytest.raises(RefusedResult, match="not a regular file"):
        read_json_result(_metadata_state(str(fifo)))


def test_the_pool_run_parameters_carry_no_secret_of_the_session(monkeypatch, tmp_path):
    """A pool run's parameters are stored by the server as they are: the jobs must be redacted."""
    import json

    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings
    from tests.test_secrets_prefect import SECRETS, hostile_session

    hostile_session(tmp_path / "dsh", "0d5e7a1c-2b3f-4c6d-8e9f-a0b1c2d3e4f5")
    model_writer_env(monkeypatch, tmp_path, "http://127.0.0.1:9/v1", 1)
    deploy(MemorySettings.from_env(), extract_only=True)
    sent_jobs: list = []
    result = _answer_the_pool_run(lambda sent: [{"session_id": s, "error": "no"} for s in sent], sent_jobs)
    assert result.counts == {"failed": 1} and len(sent_jobs) == 1
    assert not [s for s in SECRETS if s in json.dumps(sent_jobs)]
