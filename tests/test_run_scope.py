"""One run opens the state database once: a flow holds THE memory context for its run and its
tasks share its state store (`MemoryContext.for_run` / `MemoryContext.of`)."""

from __future__ import annotations

import pytest

from dsh_memory.context import MemoryContext
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import memory_reply, pipeline_env


def test_tasks_share_the_runs_state_store(tmp_path):
    settings = MemorySettings(memory_root=tmp_path / "mem")
    run = MemoryContext.of(settings)
    with run.for_run():
        with MemoryContext.of(settings) as task_ctx:
            assert task_ctx.state is run.state
        run.state.get_meta()  # still open after the task's context closed
        other = MemoryContext.of(settings.model_copy(update={"memory_root": tmp_path / "other"}))
        assert other.state is not run.state
        other.close()
    assert "state" not in run.__dict__  # closed at the end of the run
    with MemoryContext.of(settings) as after:
        assert after.state is not run.state


def _answer(request: dict) -> Reply:
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool(
            {"memory_md": "# Memory\n\n- Tests run with `uv run pytest`.\n", "memory_summary_md": "v1\n- uv\n"}
        )
    return memory_reply(request)


@pytest.mark.usefixtures("prefect_api")
def test_a_catch_up_opens_one_state_store_per_flow_run(monkeypatch, tmp_path, fixtures_dir):
    opened: list[StateStore] = []  # the stores themselves: a freed store's id() can come back
    real_conn = StateStore._conn

    def counting_conn(self):  # observe which stores open a database connection
        if not any(s is self for s in opened):
            opened.append(self)
        return real_conn(self)

    with FakeOpenAIServer(handler=_answer) as fake:
        pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "0")
        monkeypatch.setattr(StateStore, "_conn", counting_conn)
        from dsh_memory.flows.catch_up import catch_up_flow

        result = catch_up_flow(backfill=True)
    assert result.phase2.outcome == "consolidated", result.phase2
    assert len(opened) == 2, "one state store for Phase 1's run, one for Phase 2's"
