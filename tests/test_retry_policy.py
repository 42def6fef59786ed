"""Retry policy lives on the @task decorators in Prefect's own terms (tasks/_policy.py): retries, a
plain list of delays, jitter, and `retry_condition_fn=transient_only` — transient errors only,
and a server's Retry-After longer than the next delay is not retried in the run (the session's
claim fails, to be retried after the claims' backoff); the predicate decides, it never sleeps."""

from __future__ import annotations

import ast
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from prefect import flow, task
from prefect.states import Failed

from dsh_memory.errors import LLMFatalError, LLMTransientError
from dsh_memory.llm.factory import PhaseModel
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.phase1.extraction import material_for
from dsh_memory.tasks._policy import RETRY_JITTER_FACTOR, transient_only
from dsh_memory.tasks.consolidate import call_consolidation_model
from dsh_memory.tasks.extract import extract_session, llm_extract
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.session_helpers import make_session

REPO = Path(__file__).resolve().parents[1]
JITTER_LOW, JITTER_HIGH = 0.62, 1.5  # Prefect's clamped_poisson_interval range for factor 0.5


def test_the_decorators_carry_the_policy_as_plain_prefect_values():
    for t in (llm_extract, call_consolidation_model):
        assert t.retries == 3 and t.retry_condition_fn is transient_only
        assert type(t.retry_delay_seconds) is list and t.retry_jitter_factor == RETRY_JITTER_FACTOR
    assert llm_extract.retry_delay_seconds == [1, 2, 4]
    assert call_consolidation_model.retry_delay_seconds == [5, 20, 60]


def test_no_policy_is_patched_at_run_time():
    """No `.with_options(...)` in flows/ or tasks/, and no task object passed as a parameter."""
    calls = []
    for path in [*(REPO / "flows").glob("*.py"), *(REPO / "tasks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "with_options":
                calls.append(f"{path.name}:{node.lineno}")
    assert not calls, calls
    import inspect

    assert not [p for p in inspect.signature(extract_session.fn).parameters if p.endswith("_task")]


def test_the_retry_predicate_decides_without_sleeping():
    first_retry = SimpleNamespace(id=uuid.uuid4(), run_count=1)  # the next delay: 1 s, jittered ≥ 0.62 s
    last_retry = SimpleNamespace(id=uuid.uuid4(), run_count=3)  # 4 s, jittered ≥ 2.5 s
    slept = []  # a sleep inside the predicate, seen as it is called (not timed: the machine may be busy)
    sys.setprofile(lambda frame, event, arg: slept.append(arg) if event == "c_call" and arg is time.sleep else None)
    try:
        decided = [
            transient_only(llm_extract, first_retry, Failed(data=LLMTransientError("503"))),
            transient_only(llm_extract, first_retry, Failed(data=LLMTransientError("429", retry_after=0.5))),
            transient_only(llm_extract, first_retry, Failed(data=LLMTransientError("429", retry_after=100))),
            transient_only(llm_extract, last_retry, Failed(data=LLMTransientError("429", retry_after=2))),
            transient_only(llm_extract, first_retry, Failed(data=LLMFatalError("401"))),
            transient_only(llm_extract, first_retry, Failed(data=ValueError("a bug"))),
        ]
    finally:
        sys.setprofile(None)
    assert decided == [True, True, False, True, False, False]
    assert slept == []  # sleeping out the 429s' Retry-After would be the task's own wait, not the predicate's


def _awaiting_retry_delays(task_run_id) -> list[float]:
    """Seconds each AwaitingRetry state of the task run was scheduled ahead (from run history)."""

    async def read():
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            return await client.read_task_run_states(task_run_id)

    states = anyio.run(read)
    return [
        (s.state_details.scheduled_time - s.timestamp).total_seconds()
        for s in sorted(states, key=lambda s: s.timestamp)
        if s.name == "AwaitingRetry"
    ]


@pytest.mark.usefixtures("prefect_api")
def test_the_engine_waits_the_listed_delays_and_fatal_errors_are_not_retried():
    calls: list[float] = []

    @task(
        retries=3,
        retry_delay_seconds=[0.2, 0.4, 0.8],
        retry_jitter_factor=RETRY_JITTER_FACTOR,
        retry_condition_fn=transient_only,
        persist_result=False,
    )
    def flaky(fatal: bool = False) -> int:
        calls.append(time.monotonic())
        if fatal:
            raise LLMFatalError("bad request")
        if len(calls) < 3:
            raise LLMTransientError("busy")
        return len(calls)

    @flow
    def run(fatal: bool):
        return flaky(fatal=fatal, return_state=True)

    state = run(False)
    assert state.result() == 3
    delays = _awaiting_retry_delays(state.state_details.task_run_id)
    assert len(delays) == 2
    for delay, scheduled in zip(delays, (0.2, 0.4), strict=True):
        assert scheduled * JITTER_LOW <= delay <= scheduled * JITTER_HIGH + 0.05, delays

    calls.clear()
    assert run(True, return_state=True).is_failed() and len(calls) == 1


def _fake_model(fake: FakeOpenAIServer, phase: str, **client) -> PhaseModel:
    """The fake endpoint as a phase's model route."""
    llm = OpenAICompatLLM(fake.base_url, "fake-model", "key", metadata_lookup=False, **client)
    return PhaseModel(
        phase=phase,
        llm=llm,
        provider="openai",
        model="fake-model",
        max_tokens=1000,
        reasoning_effort="",
        budget_tokens=1000,
    )


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.parametrize("retry_after", [0.5, 30])
def test_a_429_is_never_retried_sooner_than_its_retry_after(retry_after, tmp_path):
    """Within the next delay (1 s, ≥ 0.62 s jittered): the engine retries after it. Longer: not
    retried in this run — one call, the task fails (the session's claim backoff takes over)."""
    seen: list[float] = []

    def handler(request):
        seen.append(time.monotonic())
        if len(seen) == 1:
            return Reply.error(429, retry_after=retry_after)
        return Reply.tool(
            {
                "raw_memory": "- The user runs the tests with `make test`, not pytest.",
                "rollout_summary": "The user asked to run the tests with `make test`, not pytest.",
                "rollout_slug": "recap",
            }
        )

    with FakeOpenAIServer(handler=handler) as fake:
        model = _fake_model(fake, "phase1")

        @flow
        def one_call():
            return llm_extract(
                model,
                material_for(
                    make_session(
                        ("user", "Always run the tests with `make test`, not pytest."),
                        ("assistant", "Understood: `make test`."),
                    )
                ),
                session_id=str(uuid.uuid4()),
                watermark=-1,
                to_seq=1,
                cwd=None,
                source="dsh",
                cache_scope=str(tmp_path),
                return_state=True,
            )

        state = one_call(return_state=True)
    task_state = state.result(raise_on_failure=False)
    if retry_after > 1:
        assert len(seen) == 1 and task_state.is_failed(), seen
        assert isinstance(task_state.result(raise_on_failure=False), LLMTransientError)
        return
    assert "make test" in task_state.result().raw_memory  # a real answer, after the retry
    assert len(seen) == 2 and seen[1] - seen[0] >= retry_after, seen
    (delay,) = _awaiting_retry_delays(task_state.state_details.task_run_id)
    assert JITTER_LOW <= delay <= JITTER_HIGH + 0.05, delay  # the engine waited, not the predicate


@pytest.mark.usefixtures("prefect_api")
def test_a_call_that_ran_its_whole_deadline_is_not_tried_again_in_the_run():
    """A stuck endpoint (headers trickling in) was given up at call_deadline_seconds, then tried
    again three times by the task: Phase 2 held its lock for four deadlines (about 4 h at the
    default hour). A deadline past the task's next delay (5 s here, 5 s jittered down to 3.1 s)
    is one call: the next trigger (or the claim's backoff) tries again."""
    seen: list[float] = []

    def handler(request):
        seen.append(time.monotonic())
        return Reply.slow_headers(60.0, then=Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n"}))

    with FakeOpenAIServer(handler=handler) as fake:
        model = _fake_model(fake, "phase2", deadline_seconds=5.0)

        @flow
        def one_call():
            return call_consolidation_model(model, [{"role": "user", "content": "merge"}], 1000, return_state=True)

        task_state = one_call(return_state=True).result(raise_on_failure=False)
    assert task_state.is_failed() and len(seen) == 1, seen
    error = task_state.result(raise_on_failure=False)
    assert isinstance(error, LLMTransientError) and "call_deadline_seconds" in str(error)
