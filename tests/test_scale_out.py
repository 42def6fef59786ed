"""Scale-out on Prefect itself (issue 15): Phase 1's pure step on workers, one writer beside the
memory root. A real server, the two deployments `dsh-memory deploy` made, three real process
workers on the extract pool — one of them "remote": another HOME, no DSH_MEMORY_ROOT, no session
logs, its own model — and 24 sessions in 6 runs: each is extracted exactly once (one model call,
one raw memory block, one summary, a done claim), none is lost, the results travel through a
shared result storage block, and no planted secret reaches Prefect (parameters, results, logs)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from prefect import flow

from dsh_memory.storage.state import StateStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer
from dsh_memory.testing.sessions import PLANTED_SECRET, make_sessions
from dsh_memory.testing.workers import running_workers, wait_for_workers, worker_env, worker_logs
from tests.flow_helpers import memory_reply, prefect_proxy

pytestmark = pytest.mark.usefixtures("own_prefect_api")

# 6 runs of 10 sessions over three workers: more runs than workers, so runs wait in the pool and
# each worker takes a second one. The size itself proves nothing more (one model call, one block,
# one summary per session); bench/bench_scale_out.py measures 300.
N_SESSIONS = 24  # 6 runs of 4: two per worker


def _session_of(request: dict) -> str:
    text = "\n".join(m.get("content") or "" for m in request.get("messages", []))
    m = re.search(r"session ([0-9a-f-]{36})", text)
    return m.group(1) if m else "?"


def writer_env(monkeypatch, tmp_path: Path, **extra: str) -> Path:
    """The main host: sessions under tmp/dsh, phase 1 on workers. Returns the memory root."""
    root = tmp_path / "memories"
    env = {
        "DSH_HOME": str(tmp_path / "dsh"),
        "CODEX_HOME": str(tmp_path / "none"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "DSH_MEMORY_ROOT": str(root),
        "DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS": "0",
        "DSH_MEMORY_EXTRACT_ON_WORKERS": "1",
    }
    for k, v in {**env, **extra}.items():
        monkeypatch.setenv(k, v)
    return root


def model_writer_env(monkeypatch, tmp_path: Path, base_url: str, concurrency: int, **extra: str) -> Path:
    """`writer_env` with a HOME of its own and a model at `base_url`; Phase 1 sends `concurrency`
    runs of work and waits up to 400 s for each (a hung worker fails the test)."""
    (tmp_path / "home").mkdir()
    return writer_env(
        monkeypatch,
        tmp_path,
        HOME=str(tmp_path / "home"),
        DSH_MEMORY_BASE_URL=base_url,
        DSH_MEMORY_API_KEY="test-key",
        DSH_MEMORY_MODEL="fake-model",
        DSH_MEMORY_CONCURRENCY=str(concurrency),
        DSH_MEMORY_STALE_CLAIM_SECONDS="400",
        **extra,
    )


def test_without_the_extract_deployment_phase1_waits_and_claims_nothing(monkeypatch, tmp_path):
    """extract_on_workers on, nothing deployed (this module's server is fresh): skipped like a
    missing model route — no claim, no state touched, the reason says what to run."""
    make_sessions(tmp_path / "dsh", 2)
    root = writer_env(monkeypatch, tmp_path)
    from dsh_memory.flows.extract import extract_flow

    result = extract_flow()
    assert result.skipped_no_route and result.candidates == 2
    assert "extract-transcripts/extract-transcripts-pool is not deployed" in result.error
    assert "dsh-memory deploy" in result.error
    assert not StateStore(root).claims()


def test_three_workers_one_remote_extract_24_sessions_exactly_once(monkeypatch, tmp_path, own_prefect_api):
    from prefect.filesystems import LocalFileSystem

    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    ids = make_sessions(tmp_path / "dsh", N_SESSIONS + 2)
    parked_on_workers, parked_elsewhere = ids.pop(), ids.pop()  # not extracted now (parked)
    results = tmp_path / "shared-results"  # on other machines: an S3/GCS bucket or a remote fs
    LocalFileSystem(basepath=str(results)).save("dsh-results", overwrite=True)
    with FakeOpenAIServer(handler=memory_reply) as here, FakeOpenAIServer(handler=memory_reply) as gpu_box:
        # 6 runs of 4 sessions, 2 per worker
        root = model_writer_env(monkeypatch, tmp_path, here.base_url, 6, PREFECT_LOGGING_LEVEL="WARNING")
        report = deploy(MemorySettings.from_env(), result_storage="local-file-system/dsh-results")
        from datetime import UTC, datetime

        state = StateStore(root)
        for sid, route in (
            (parked_on_workers, ("workers", "extract-transcripts/extract-transcripts-pool")),
            (parked_elsewhere, ("openai", "another-model")),
        ):
            for _ in range(3):  # retry_limit failures: parked
                state.fail(sid, "down", datetime.now(UTC), 60, 3, provider=route[0], model=route[1])
        state.close()
        assert "extract-transcripts/extract-transcripts-pool" in report.deployments

        remote_home = tmp_path / "gpu-box"
        remote_home.mkdir()
        remote = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(remote_home),
            "PREFECT_HOME": str(remote_home / ".prefect"),
            "DSH_MEMORY_BASE_URL": gpu_box.base_url,  # its own model
            "DSH_MEMORY_API_KEY": "gpu-key",
            "DSH_MEMORY_MODEL": "gpu-model",
        }
        local = worker_env(dict(os.environ), own_prefect_api)
        specs = [
            ("local-1", "dsh-memory-extract", local),
            ("local-2", "dsh-memory-extract", local),
            ("remote", "dsh-memory-extract", worker_env(remote, own_prefect_api)),
        ]
        logs = tmp_path / "worker-logs"
        with running_workers(specs, logs) as procs:
            wait_for_workers("dsh-memory-extract", [name for name, _, _ in specs], procs)
            from dsh_memory.flows.extract import extract_flow

            state = extract_flow(return_state=True)
        result = state.result()
        assert result.counts == {"extracted": N_SESSIONS}, (result.counts, worker_logs(logs))
        # The run shows one task run per session, named for it, as with this host's model.
        wanted = sorted(f"extract-{s}" for s in ids)
        assert sorted(_session_task_runs(state.state_details.flow_run_id, wanted)) == wanted
        calls = [_session_of(r) for r in here.requests + gpu_box.requests]

    # Exactly once: one model call per session, across the three workers; none lost.
    assert sorted(calls) == sorted(ids)
    assert gpu_box.requests and here.requests, "the remote worker and the local ones both extracted"
    claims = StateStore(root).claims()
    assert {s for s, c in claims.items() if c.status == "done"} == set(ids)
    # The workers worked: the session they had parked resumes (due now), the other route's stays.
    assert not claims[parked_on_workers].parked and claims[parked_on_workers].attempts == 0
    assert claims[parked_elsewhere].parked
    assert (result.provider, result.model) == ("workers", "extract-transcripts/extract-transcripts-pool")
    raw = (root / "raw_memories.md").read_text()
    assert all(raw.count(f"{sid}#1") == 1 for sid in ids)
    summaries = list((root / "rollout_summaries").glob("*.md"))
    assert len(summaries) == N_SESSIONS
    models = {m for p in summaries for m in re.findall(r"model: (\S+)", p.read_text())}
    assert {"fake-model", "gpu-model"} <= models
    # The remote worker never touched a memory root (its own default one included).
    assert not (remote_home / ".dsh").exists()
    # The jobs travelled redacted: no secret in the server's database, the shared result storage,
    # the workers' homes, nor anything written under the memory root.
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    prefect_home = Path(os.environ["PREFECT_HOME"]).parent
    assert any(p.name.startswith("prefect.db") for p in prefect_home.rglob("*"))
    needle = PLANTED_SECRET.encode()  # in every session's log
    for folder in (prefect_home, results, remote_home, root):
        hits = [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]
        assert not hits, hits
    assert list(results.rglob("*")), "the results came through the shared storage block"


def _session_task_runs(flow_run_id, wanted: list[str]) -> list[str]:
    """The names of a flow run's `extract-<session>` task runs, page by page (name order), once
    the server has recorded every `wanted` name (task runs reach it as events, a moment later: a
    task run's first event carries Prefect's default name, `extract-session-<suffix>`, and a
    later one the name rendered for its session), or at the deadline."""
    import time

    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter, TaskRunFilterName
    from prefect.client.schemas.sorting import TaskRunSort

    deadline = time.monotonic() + 60
    with get_client(sync_client=True) as client:
        while True:
            names: list[str] = []
            while page := client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="extract-")),
                sort=TaskRunSort.NAME_ASC,
                offset=len(names),
                limit=200,
            ):
                names += [t.name for t in page]
            names = [n for n in names if n.startswith("extract-") and not n.startswith("extract-on-workers")]
            if set(wanted) <= set(names) or time.monotonic() > deadline:
                return names
            time.sleep(1)


@flow(persist_result=True, result_serializer="json")
def _json_answer() -> list[dict]:
    return [{"session_id": "s1", "error": "none"}]


@flow(persist_result=True, result_serializer="pickle")
def _pickled_answer() -> list[dict]:
    return [{"session_id": "s1", "error": "none"}]


class _Boom:
    """Unpickling this touches a file: proof a record was (or was not) decoded as pickle."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_the_writer_reads_a_worker_result_as_plain_json_only(tmp_path):
    """A result record is written by a worker: `state.result()` would decode it with whatever
    serializer the record names (pickle runs code). The writer accepts JSON records only."""
    import base64
    import pickle

    from prefect import get_client

    from dsh_memory.tasks.remote import RefusedResult, read_json_result

    def from_server(state):  # as the writer sees it: the run's state read back from the server
        with get_client(sync_client=True) as client:
            return client.read_flow_run(state.state_details.flow_run_id).state

    ok = from_server(_json_answer(return_state=True))
    assert read_json_result(ok) == [{"session_id": "s1", "error": "none"}]
    with pytest.raises(RefusedResult, match="'pickle', not JSON"):
        read_json_result(from_server(_pickled_answer(return_state=True)))

    # The server says JSON, the stored record was rewritten as a pickle that runs code: refused.
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH

    path = Path(PREFECT_LOCAL_STORAGE_PATH.value()) / ok.data.storage_key
    assert json.loads(path.read_bytes()) == [{"session_id": "s1", "error": "none"}]  # what the worker wrote
    marker = tmp_path / "unpickled"
    record = {
        "metadata": {"storage_key": ok.data.storage_key, "serializer": {"type": "pickle", "picklelib": "pickle"}},
        "result": base64.b64encode(pickle.dumps(_Boom(marker))).decode(),
    }
    path.write_text(json.dumps(record))
    with pytest.raises(RefusedResult, match="does not say JSON"):
        read_json_result(ok)
    assert not marker.exists()
    ok.result()  # what Prefect's own reader does with that record: it unpickles it
    assert marker.exists(), "Prefect's own reader ran the worker's code"


def test_a_huge_local_result_is_refused_reading_no_more_than_the_cap(tmp_path):
    """A result file far over the cap is refused after reading the cap, not the whole file."""
    import tracemalloc
    from types import SimpleNamespace

    from prefect.results import ResultRecordMetadata
    from prefect.serializers import JSONSerializer

    from dsh_memory.tasks.remote import MAX_RESULT_BYTES, RefusedResult, read_json_result

    path = tmp_path / "huge-result"
    with open(path, "wb") as fh:
        fh.truncate(3 * MAX_RESULT_BYTES)  # sparse: costs nothing on disk
    state = SimpleNamespace(data=ResultRecordMetadata(storage_key=str(path), serializer=JSONSerializer()))
    tracemalloc.start()
    try:
        with pytest.raises(RefusedResult, match="over"):
            read_json_result(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * MAX_RESULT_BYTES, f"peak {peak >> 20} MiB"


def test_a_local_model_worker_writes_from_the_evidence_however_long_the_transcript(monkeypatch):
    """A worker whose model has a small context (the local provider, 8192 tokens) is the evidence
    writer: it reads the job's evidence, never the transcript, so a session far longer than its
    context is extracted (it used to come back as "does not fit … set transcript_budget_tokens")."""
    from dsh_memory.flows.extract_transcripts import extract_transcripts_flow
    from dsh_memory.llm import model_files
    from dsh_memory.phase1.evidence import gather
    from dsh_memory.phase1.remote import TranscriptJob
    from dsh_memory.testing.models import SMOLLM2_135M
    from tests.session_helpers import make_session

    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "local")
    monkeypatch.setenv("DSH_MEMORY_MODEL_PATH", str(model_files.bundled_model_path(SMOLLM2_135M)))
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    session = make_session(("user", "Fix the build please. Never push to main without asking."), ("assistant", "Done."))
    big = TranscriptJob(
        session_id="s-big",
        source="dsh",
        watermark=-1,
        to_seq=9,
        text="[user] fix the build please\n" * 3000,
        evidence=gather(session),
    )
    (result,) = extract_transcripts_flow(jobs=[big])
    assert result["session_id"] == "s-big" and result["error"] == ""
    assert "Never push to main without asking." in result["output"]["raw_memory"]


def test_a_batch_whose_run_crashed_is_sent_again_in_the_same_run(monkeypatch, tmp_path, own_prefect_api):
    """A worker that cannot start a run (the server answered 503 while it submitted it, as a busy
    SQLite server does) proposes it Crashed: the writer sends that batch again within its Phase 1
    run, so every session is extracted now, once, instead of failing until a later run."""
    import threading
    import time

    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.states import Crashed

    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings
    from dsh_memory.tasks.remote import DEPLOYMENT

    ids = make_sessions(tmp_path / "dsh", 3)
    with FakeOpenAIServer(handler=memory_reply) as model:
        root = model_writer_env(monkeypatch, tmp_path, model.base_url, 1)  # one batch, one run
        deploy(MemorySettings.from_env())
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(DEPLOYMENT).id
            only_ours = DeploymentFilter(id=DeploymentFilterId(any_=[deployment]))
            before = {r.id for r in client.read_flow_runs(deployment_filter=only_ours)}  # this module's others

            def new_runs() -> list:
                return [r for r in client.read_flow_runs(deployment_filter=only_ours) if r.id not in before]

            finished: dict = {}
            writer = threading.Thread(target=lambda: finished.update(state=extract_flow(return_state=True)))
            writer.start()
            deadline = time.monotonic() + 120
            while not (runs := new_runs()):
                assert time.monotonic() < deadline and writer.is_alive(), "the writer sent no run"
                time.sleep(0.2)
            # No worker is running yet: the run waits in the pool, and a worker failing to submit it crashes it.
            client.set_flow_run_state(
                runs[0].id, Crashed(message="Failed to submit flow run to infrastructure: 503"), force=True
            )
            local = worker_env(dict(os.environ), own_prefect_api)
            with running_workers([("local", "dsh-memory-extract", local)], tmp_path / "worker-logs"):
                writer.join(timeout=600)
            assert not writer.is_alive()
            states = sorted(r.state.type.value for r in new_runs())
        result = finished["state"].result()
        assert result.counts == {"extracted": 3}, (result.counts, worker_logs(tmp_path / "worker-logs"))
        assert sorted(_session_of(r) for r in model.requests) == sorted(ids)  # once each
    assert states == ["COMPLETED", "CRASHED"]
    assert {s for s, c in StateStore(root).claims().items() if c.status == "done"} == set(ids)


def test_a_batch_whose_api_call_failed_after_its_run_was_created_gets_that_run_back(
    monkeypatch, tmp_path, own_prefect_api
):
    """The busy server refuses (503, past the client's retries) the writer's first read of the pool
    run it has just created: the batch is sent again and, by its idempotency key, finds that same
    run instead of creating a second one, so each session reaches the model once."""
    import threading

    from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    created: list[str] = []  # the pool runs the writer created
    refused: list[str] = []

    def answer(path: str, forward):
        status, content, ctype = forward()
        if path.endswith("/create_flow_run") and status < 300:
            created.append(json.loads(content)["id"])
        elif created and path.rstrip("/").endswith(f"/flow_runs/{created[0]}") and not refused:
            refused.append(path)
            return 503, b'{"exception_message": "Service Unavailable"}', "application/json"
        return status, content, ctype

    ids = make_sessions(tmp_path / "dsh", 3)
    with FakeOpenAIServer(handler=memory_reply) as model, prefect_proxy(own_prefect_api, answer) as proxy:
        root = model_writer_env(monkeypatch, tmp_path, model.base_url, 1)  # one batch, one run
        deploy(MemorySettings.from_env())
        finished: dict = {}

        def writer() -> None:
            with temporary_settings(updates={PREFECT_API_URL: proxy, PREFECT_CLIENT_MAX_RETRIES: 0}):
                finished.update(state=extract_flow(return_state=True))

        local = worker_env(dict(os.environ), own_prefect_api)
        with running_workers([("local", "dsh-memory-extract", local)], tmp_path / "worker-logs"):
            thread = threading.Thread(target=writer)
            thread.start()
            thread.join(timeout=600)
        assert not thread.is_alive()
        result = finished["state"].result()
        assert refused, "the proxy refused no read of the pool run"
        assert result.counts == {"extracted": 3}, (result.counts, worker_logs(tmp_path / "worker-logs"))
        assert sorted(_session_of(r) for r in model.requests) == sorted(ids)  # once each
    assert len(set(created)) == 1, created  # the try after the 503 got the same run back
    assert {s for s, c in StateStore(root).claims().items() if c.status == "done"} == set(ids)


def test_a_batch_is_sent_again_after_a_crash_or_an_api_failure_only():
    """A crashed run or a failed Prefect API call (5xx or 429 past the client's retries, a broken
    connection) sends the batch again; a run that failed, or a client error (4xx), does not."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError

    from dsh_memory.tasks.remote import PoolRunCrashed, sent_again

    def refused(method: str, path: str, status: int = 503) -> PrefectHTTPStatusError:
        request = httpx.Request(method, f"http://127.0.0.1:4200/api{path}")
        response = httpx.Response(status, request=request)
        return PrefectHTTPStatusError.from_httpx_error(
            httpx.HTTPStatusError("refused", request=request, response=response)
        )

    assert sent_again(PoolRunCrashed("crashed")) and sent_again(refused("POST", "/task_runs/"))
    assert sent_again(refused("POST", "/deployments/1/create_flow_run"))
    assert sent_again(refused("GET", "/flow_runs/1")) and sent_again(refused("GET", "/flow_runs/1", 429))
    assert sent_again(httpx.ConnectError("refused"))
    assert not sent_again(refused("GET", "/flow_runs/1", 404))
    assert not sent_again(RuntimeError("extract-transcripts run x ended Failed")) and not sent_again(None)
    assert not sent_again(TimeoutError("no worker finished the run"))
