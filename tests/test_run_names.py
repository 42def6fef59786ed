"""Runs say what they are (issue 15): on a real Prefect server, flow runs are named
`extract-session/<short id>`, `extract/<…>`, `catch-up/<time>`, `consolidate/<mode or check>`;
task runs per session `extract-<id>`; an extract-session run holds its own task runs (Phase 1's
body runs in it, not in a subflow)."""

from __future__ import annotations

import re

import pytest

from dsh_memory.flows.extract import short_id
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import memory_reply, pipeline_env, task_runs_of

pytestmark = pytest.mark.usefixtures("prefect_api")

SESSION = "3b8f2c1e-5a7d-4e29-9c41-7d2e8f6a1b03"  # a DSH fixture session with work in it


def _llm(request: dict) -> Reply:
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool({"memory_md": "# Memory\n- Use `uv run pytest`.\n", "memory_summary_md": "v1\n- uv run\n"})
    return memory_reply(request)


@pytest.fixture
def fake():
    with FakeOpenAIServer(handler=_llm) as srv:
        yield srv


def _run(state, until=lambda tasks: True):
    """(flow run, its task runs) from the server, for a flow called with return_state=True."""
    from prefect.client.orchestration import get_client

    run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
    return run, task_runs_of(run_id, until)


def _subflow_runs(tasks) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentTaskRunId

    ids = [t.id for t in tasks]
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_task_run_id=FlowRunFilterParentTaskRunId(any_=ids))
        )


def test_short_ids_keep_the_source_prefix():
    assert short_id(SESSION) == "3b8f2c1e"
    assert short_id(f"claude:{SESSION}") == "claude:3b8f2c1e"


def test_extract_session_run_is_named_for_its_session_and_holds_its_tasks(monkeypatch, tmp_path, fixtures_dir, fake):
    pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
    from dsh_memory.flows.extract_session import extract_session_flow

    state = extract_session_flow(session=f"dsh.session.{SESSION}", consolidate=False, return_state=True)
    assert state.is_completed()
    assert state.result().extracted
    wanted = {"discover-sessions", "plan-extractions", "llm-extract", "finish-phase1"}

    def verbs(tasks) -> set[str]:  # Prefect adds a suffix to each task run's name
        return {t.name.rsplit("-", 1)[0] for t in tasks if not t.name.startswith("extract-")}

    run, tasks = _run(state, until=lambda tasks: wanted <= verbs(tasks))
    assert run.name == "extract-session/3b8f2c1e"
    names = {t.name for t in tasks}
    assert f"extract-{SESSION}" in names, names  # the per-session task run is this run's own
    assert wanted <= verbs(tasks), names
    assert _subflow_runs(tasks) == []  # no subflow wrapped around the work


def test_extract_catch_up_and_consolidate_runs_are_named(monkeypatch, tmp_path, fixtures_dir, fake):
    pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
    monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "0")
    from dsh_memory.flows.catch_up import catch_up_flow
    from dsh_memory.flows.consolidate import consolidate_flow
    from dsh_memory.flows.extract import extract_flow

    one = extract_flow(session_ids=[SESSION], return_state=True)
    assert _run(one)[0].name == "extract/3b8f2c1e"

    state = catch_up_flow(return_state=True)
    assert state.is_completed() and state.result().phase2.outcome == "consolidated"
    run, tasks = _run(state, until=lambda tasks: len(_subflow_runs(tasks)) >= 2)
    assert re.fullmatch(r"catch-up/\d{4}-\d\d-\d\dT\d\d:\d\dZ", run.name), run.name
    children = {r.name for r in _subflow_runs(tasks)}
    assert children == {"extract/all", "consolidate/init"}, children  # the mode, once known

    again = consolidate_flow(return_state=True)
    assert again.result().outcome.startswith("skipped")
    assert _run(again)[0].name == "consolidate/check"  # only the gate was asked
