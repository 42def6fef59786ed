"""Failures stay small and heal (issue 14), through the real CLI on a real Prefect server:
- a failed session prints one line (session, reason, how to retry) — no traceback on the console;
- three failing runs park a session; `status` and `extract --dry-run` say how to resume it;
- with the model healthy, `extract --retry-parked` extracts it; and a successful extraction on
  the same route resumes parked sessions by itself;
- a temp file left by a killed writer is swept at the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime

import pytest

from dsh_memory.storage.state import StateStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import copy_tree_aged, memory_reply
from tests.test_cli_behaviour import SAMPLES, WEATHER, cli, pipeline_env

pytestmark = pytest.mark.e2e


class Switch:
    """The fake model: HTTP 500 for every call while `broken`, a plausible memory otherwise."""

    def __init__(self) -> None:
        self.broken = True

    def __call__(self, request: dict) -> Reply:
        # Retry-After beyond the task's retry delays: each run fails the session at once (no
        # in-run retries), so the claims' backoff is what this test walks through.
        return Reply.error(500, "upstream exploded", retry_after=3600) if self.broken else memory_reply(request)


def _fail_until_parked(env: dict, root) -> None:
    """Run `extract` on the failing session until its third failure parks it (backoff 1 s, 2 s)."""
    for _ in range(10):
        claim = StateStore(root).get_claim(WEATHER)
        if claim is not None and claim.parked:
            return
        if claim is not None and claim.next_retry_at is not None:
            time.sleep(max(0.0, (claim.next_retry_at - datetime.now(UTC)).total_seconds()))
        cli(["extract", WEATHER], env)
    pytest.fail("the session was not parked after repeated failures")


def _env(tmp_path, prefect_api: str, fake_url: str) -> dict:
    dsh = copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")
    return pipeline_env(
        tmp_path,
        prefect_api,
        fake_url,
        DSH_HOME=str(dsh),
        DSH_MEMORY_RETRY_LIMIT="3",
        DSH_MEMORY_RETRY_BASE_SECONDS="1",
    )


@pytest.fixture()
def setup(tmp_path, prefect_api):
    switch = Switch()
    with FakeOpenAIServer(handler=switch) as fake:
        yield switch, _env(tmp_path, prefect_api, fake.base_url), tmp_path / "mem"


@pytest.fixture(scope="module")
def parked_once(tmp_path_factory, prefect_api):
    """WEATHER failed by `extract` until parked (three CLI runs), once for the module: the
    first run's result and the memory root it left (the claims are in its state database)."""
    tmp_path = tmp_path_factory.mktemp("parked")
    with FakeOpenAIServer(handler=Switch()) as fake:
        env = _env(tmp_path, prefect_api, fake.base_url)
        first = cli(["extract", WEATHER], env)
        _fail_until_parked(env, tmp_path / "mem")
    return first, tmp_path / "mem"


@pytest.fixture()
def parked(setup, parked_once):
    """`setup` whose memory root is a copy of the parked one (the model still failing)."""
    switch, env, root = setup
    first, parked_root = parked_once
    shutil.copytree(parked_root, root)
    return first, switch, env, root


def test_failed_sessions_are_one_line_each_then_park_and_resume(parked):
    r, switch, env, root = parked  # r: the first failing `extract WEATHER`
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Task run" not in r.stderr, r.stderr
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("failed: ")]
    assert len(failed) == 1 and WEATHER in failed[0] and "HTTP 500" in failed[0], r.stderr
    assert f"dsh-memory extract {WEATHER}" in failed[0]

    claim = StateStore(root).get_claim(WEATHER)
    assert claim.status == "failed" and claim.parked and claim.attempts == 3

    status = cli(["status"], env)
    assert "parked after repeated failures" in status.stdout and "--retry-parked" in status.stdout
    plan = cli(["extract", "--all", "--dry-run", "--json"], env)
    row = next(d for d in json.loads(plan.stdout)["decisions"] if d["session"] == WEATHER)
    assert row["action"] == "skip" and "--retry-parked" in row["reason"]

    switch.broken = False  # the model works again
    r = cli(["extract", "--retry-parked", "--json"], env)
    assert r.returncode == 0, r.stderr
    outcomes = {o["session"]: o["outcome"] for o in json.loads(r.stdout)["outcomes"]}
    assert outcomes == {WEATHER: "extracted"}
    assert StateStore(root).get_claim(WEATHER).status == "done"


def test_a_working_route_resumes_parked_sessions_by_itself(parked):
    _, switch, env, root = parked
    assert StateStore(root).get_claim(WEATHER).parked

    switch.broken = False
    r = cli(["extract", "--all", "--json"], env)  # the others extract; the parked one waits…
    data = json.loads(r.stdout)
    assert WEATHER not in {o["session"] for o in data["outcomes"]}
    assert any(o["outcome"] == "extracted" for o in data["outcomes"])
    claim = StateStore(root).get_claim(WEATHER)
    assert not claim.parked and claim.attempts == 0  # …and is resumed by that success
    r = cli(["extract", "--all", "--json"], env)
    assert {o["session"]: o["outcome"] for o in json.loads(r.stdout)["outcomes"]} == {WEATHER: "extracted"}


def test_temp_files_of_a_killed_writer_are_swept(setup):
    switch, env, root = setup
    switch.broken = False
    (root / "rollout_summaries").mkdir(parents=True)
    stale = root / "rollout_summaries" / ".x.md.abc123xy.tmp"
    fresh = root / ".MEMORY.md.zz99zz99.tmp"
    stale.write_text("half")
    fresh.write_text("in flight")
    os.utime(stale, (1, 1))
    r = cli(["extract", WEATHER], env)
    assert r.returncode == 0, r.stderr
    assert not stale.exists() and fresh.exists()
