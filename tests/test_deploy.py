"""`dsh-memory deploy` (issue 15): the worker mode on a real Prefect server — work pools created,
every prefect.yaml deployment under a `-pool` name (never serve's), the settings applied, a second
deploy changes nothing, and a real `prefect worker start` runs a deployment to completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory.serve import deployments
from dsh_memory.testing.fake_openai import FakeOpenAIServer
from dsh_memory.testing.workers import running_workers, worker_env, worker_logs
from tests.flow_helpers import memory_reply, pipeline_env

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("own_prefect_api")

SESSION = "3b8f2c1e-5a7d-4e29-9c41-7d2e8f6a1b03"  # a DSH fixture session with work in it
POOL_NAMES = {"catch-up-pool", "extract-session-pool", "consolidate-pool", "extract-transcripts-pool"}


def _server_view(pool_names=("dsh-memory", "dsh-memory-extract")):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        pools = {p: client.read_work_pool(p) for p in pool_names}
        deps = client.read_deployments()
        automations = client.read_automations()
    return pools, deps, automations


def test_deploy_twice_creates_pools_and_pool_named_deployments_with_the_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    monkeypatch.setenv("DSH_MEMORY_DEBOUNCE_SECONDS", "42")
    monkeypatch.setenv("DSH_MEMORY_CATCH_UP_INTERVAL_SECONDS", "900")
    monkeypatch.setenv("DSH_MEMORY_CONSOLIDATE_INTERVAL_SECONDS", "7200")
    monkeypatch.setenv("DSH_MEMORY_FLOW_RUN_LIMIT", "3")
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "deploy"],
        env=dict(os.environ),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "created work pool dsh-memory (process)" in proc.stdout
    assert "prefect worker start --pool dsh-memory --type process" in proc.stdout
    assert "prefect worker start --pool dsh-memory-extract --type process" in proc.stdout
    # Extract workers run anywhere (docs/running.md): never told to sit beside the memory root.
    assert "the extract pool's on any machine with dsh-memory, a model route" in proc.stdout

    pools, deps, automations = _server_view()
    assert {p.type for p in pools.values()} == {"process"}
    assert pools["dsh-memory"].concurrency_limit == 3  # flow_run_limit, as serve bounds itself
    assert pools["dsh-memory-extract"].concurrency_limit is None  # workers on many machines
    first = {d.name: d for d in deps}
    assert set(first) == POOL_NAMES
    served = {d.name for d in deployments.runner_deployments()}
    assert served == {"catch-up", "extract-session", "consolidate"} and not served & set(first)
    assert first["extract-transcripts-pool"].work_pool_name == "dsh-memory-extract"
    assert {first[n].work_pool_name for n in POOL_NAMES - {"extract-transcripts-pool"}} == {"dsh-memory"}
    intervals = {n: [s.schedule.interval.total_seconds() for s in first[n].schedules] for n in first}
    assert intervals["catch-up-pool"] == [900] and intervals["consolidate-pool"] == [7200]
    (automation,) = automations
    spec = {s["name"]: s for s in deployments.load_spec()}["extract-session"]
    (trigger,) = spec["triggers"]
    assert automation.name == trigger["name"] and automation.description == trigger["description"]
    assert automation.trigger.within.total_seconds() == 42  # the setting, not the yaml's 180
    assert automation.actions[0].deployment_id == first["extract-session-pool"].id

    # Deploy again (in-process this time): the same deployments, one automation, nothing new.
    from dsh_memory.context import memory_context
    from dsh_memory.serve.deployments import deploy

    with memory_context() as ctx:
        report = deploy(ctx.settings.model_copy(update={"flow_run_limit": 5}))
    assert report.pools_created == []
    assert "work pool dsh-memory keeps its concurrency limit 3 (flow_run_limit is 5)" in " ".join(report.notes)
    pools, deps, automations = _server_view()
    assert {d.name: d.id for d in deps} == {n: d.id for n, d in first.items()}
    assert len(automations) == 1 and automations[0].trigger.within.total_seconds() == 42


def test_extract_only_deploys_the_extract_pool_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    from prefect import get_client

    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    report = deploy(MemorySettings.from_env(), pool="never-made", extract_pool="gpu-boxes", extract_only=True)
    assert report.pools_created == ["gpu-boxes"] and report.pools == ["gpu-boxes"]
    assert report.deployments == ["extract-transcripts/extract-transcripts-pool"]
    with get_client(sync_client=True) as client:
        assert client.read_deployment_by_name("extract-transcripts/extract-transcripts-pool").work_pool_name == (
            "gpu-boxes"
        )
        assert "never-made" not in {p.name for p in client.read_work_pools()}
    # That pool (no limit) named as the main pool: the note says it has none, not "limit None".
    report = deploy(MemorySettings.from_env(), pool="gpu-boxes", extract_pool="gpu-boxes", extract_only=True)
    assert "work pool gpu-boxes keeps no concurrency limit (flow_run_limit is 4)" in " ".join(report.notes)


def test_deploy_without_a_prefect_server_is_one_line_and_exit_4(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(DSH_MEMORY_PREFECT_HOME=str(tmp_path / "no-stack"), PREFECT_HOME=str(tmp_path / "client"))
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "deploy"], env=env, cwd=str(REPO), capture_output=True, text=True
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: deploy needs a Prefect server: set PREFECT_API_URL (a `prefect server start`, or the one "
        "`dsh-memory serve` started)"
    ]


def test_deploy_refuses_an_unknown_result_storage_block(monkeypatch, tmp_path):
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    from dsh_memory.errors import ConfigError
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    with pytest.raises(ConfigError, match="no such block"):
        deploy(MemorySettings.from_env(), result_storage="local-file-system/nope")


def test_deploy_refuses_a_result_storage_block_that_stores_no_files(monkeypatch, tmp_path):
    """A saved block that is no file storage (a Secret): workers could not write results to it."""
    from prefect.blocks.system import Secret

    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    from dsh_memory.errors import ConfigError
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    Secret(value="x").save("dsh-not-storage", overwrite=True)
    with pytest.raises(ConfigError, match="'secret/dsh-not-storage': not a storage block"):
        deploy(MemorySettings.from_env(), result_storage="secret/dsh-not-storage")


def test_deploy_refuses_the_main_pool_on_the_server_of_a_running_serve(monkeypatch, tmp_path, own_prefect_api):
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    monkeypatch.setenv("DSH_MEMORY_PREFECT_HOME", str(tmp_path / "prefect-home"))
    from dsh_memory.errors import ConfigError
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.serve.stack_state import StackLock, info_for_this_process
    from dsh_memory.settings import MemorySettings

    home = tmp_path / "prefect-home"
    with StackLock(home) as lock:  # this process plays the running `serve` on the suite's server
        lock.publish(info_for_this_process(home, own_prefect_api, None, "127.0.0.1", 1))
        with pytest.raises(ConfigError, match=r"`dsh-memory serve` runs on .* --extract-only"):
            deploy(MemorySettings.from_env())
        report = deploy(MemorySettings.from_env(), extract_only=True)  # what a serve host deploys
        assert report.deployments == ["extract-transcripts/extract-transcripts-pool"]


@pytest.mark.parametrize("pools", [{"pool": "team/a"}, {"extract_pool": ""}])
def test_deploy_refuses_a_bad_work_pool_name_in_one_line(monkeypatch, tmp_path, pools):
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    from dsh_memory.errors import ConfigError
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    with pytest.raises(ConfigError, match=r"work pool name .* \(--pool / --extract-pool\) is not valid"):
        deploy(MemorySettings.from_env(), **pools)


def test_a_real_worker_runs_an_extract_session_pool_run(monkeypatch, tmp_path, fixtures_dir, own_prefect_api):
    from prefect import get_client
    from prefect.deployments import run_deployment

    from dsh_memory.settings import MemorySettings

    with FakeOpenAIServer(handler=memory_reply) as fake:
        root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
        from dsh_memory.serve.deployments import deploy

        deploy(MemorySettings.from_env())
        run = run_deployment("extract-session/extract-session-pool", parameters={"session": SESSION}, timeout=0)
        env = worker_env(dict(os.environ), own_prefect_api)
        logs = tmp_path / "worker-logs"
        with running_workers([("main", "dsh-memory", env)], logs):
            deadline = time.monotonic() + 240
            with get_client(sync_client=True) as client:
                while time.monotonic() < deadline:
                    state = client.read_flow_run(run.id).state
                    if state and state.is_final():
                        break
                    time.sleep(1)
                assert state and state.is_completed(), f"{state}\n{worker_logs(logs)}"
                done = client.read_flow_run(run.id)
                # It asked for Phase 2 in its own mode: the pool's consolidate, never serve's.
                deps = {d.id: d.name for d in client.read_deployments()}
                later = [r for r in client.read_flow_runs() if r.id != run.id]
        assert done.name == "extract-session/3b8f2c1e"
        assert any(deps.get(r.deployment_id) == "consolidate-pool" for r in later), [
            (r.name, deps.get(r.deployment_id)) for r in later
        ]
    raw = (root / "raw_memories.md").read_text()
    assert SESSION in raw
    assert json.dumps(fake.requests).count("memory_save") >= 1


BAD_YAMLS = {
    "not-yaml": "deployments: [\n",
    "not-a-mapping": "just a string\n",
    "no-entrypoint": "deployments:\n  - name: x\n",
    "unknown-flow": "deployments:\n  - name: x\n    entrypoint: flows/nope.py:nope_flow\n",
    "bad-trigger": (
        "deployments:\n  - name: consolidate\n    entrypoint: flows/consolidate.py:consolidate_flow\n"
        "    triggers:\n      - type: event\n        posture: Sideways\n"
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD_YAMLS))
def test_deploy_with_a_bad_prefect_yaml_is_one_line_and_exit_4(tmp_path, bad):
    """A checkout whose prefect.yaml is broken: one line naming the file, exit 4, before any
    server is asked (nothing listens at this API address)."""
    import shutil

    checkout = tmp_path / "checkout"
    for part in ("dsh_memory", "flows", "tasks", "blocks"):
        shutil.copytree(REPO / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "prefect.yaml").write_text(BAD_YAMLS[bad])
    env = dict(
        os.environ,
        PREFECT_API_URL="http://127.0.0.1:9/api",
        DSH_MEMORY_IGNORE_BLOCKS="1",
        DSH_MEMORY_PREFECT_HOME=str(tmp_path / "no-stack"),
        PREFECT_HOME=str(tmp_path / "client"),
    )
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "deploy"], env=env, cwd=str(checkout), capture_output=True, text=True
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 4 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "prefect.yaml" in lines[0], lines


def test_deploy_refuses_an_existing_pool_of_another_type_in_one_line(monkeypatch, tmp_path):
    """A pool the printed `prefect worker start --type process` would not serve: refused, nothing deployed to it."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    from dsh_memory.errors import ConfigError
    from dsh_memory.serve.deployments import deploy
    from dsh_memory.settings import MemorySettings

    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name="dsh-k8s", type="kubernetes"))
        with pytest.raises(ConfigError, match=r"work pool dsh-k8s exists with type 'kubernetes', not 'process'"):
            deploy(MemorySettings.from_env(), extract_pool="dsh-k8s", extract_only=True)
        assert not [d for d in client.read_deployments() if d.work_pool_name == "dsh-k8s"]
