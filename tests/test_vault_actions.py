"""The cores behind the vault's corrections that are new with it: `restore` (store, state, CLI)
and starting a deployment run on a real Prefect server (re-run extraction, consolidate)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from dsh_memory.consolidation.forget import restore_summary, retire_session
from dsh_memory.errors import NotFoundError
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.test_cli_behaviour import clean_env, cli
from tests.vault_helpers import FLOW_ACTIONS, SESSION, make_memory, plan_and_confirm

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_restore_undoes_forget_and_takes_another_name_when_the_old_one_is_taken(tmp_path):
    settings = make_memory(tmp_path)
    store = MemoryStore(settings.memory_root)
    with StateStore(store.root) as state:
        retired = retire_session(store, state, SESSION, NOW)["retired"]
        assert retired == ["release-fix"] and not (store.rollout_dir / "release-fix.md").exists()
        # meanwhile a new summary took the name
        (store.rollout_dir / "release-fix.md").write_text("# a newer recap\n")
        out = restore_summary(store, state, "release-fix.md", NOW)
        assert out == {"restored": "release-fix", "slug": "release-fix-2", "path": "rollout_summaries/release-fix-2.md"}
        assert "make release failed" in (store.rollout_dir / "release-fix-2.md").read_text()
        assert (store.rollout_dir / "release-fix.md").read_text() == "# a newer recap\n"
        assert "release-fix" not in state.retired() and "release-fix" not in store.retired_slugs()
        # the restore counts as a use: forgetting leaves it alone for max_unused_days
        assert state.usage()["rollout_summaries/release-fix-2.md"] == (1, NOW)
        for bad in ("release-fix", "../MEMORY", "", "no-such"):
            with pytest.raises(NotFoundError):
                restore_summary(store, state, bad, NOW)


def test_restored_summary_is_not_a_forgetting_candidate_right_away(tmp_path):
    from dsh_memory.consolidation.inputs import build_index

    settings = make_memory(tmp_path)
    store = MemoryStore(settings.memory_root)
    with StateStore(store.root) as state:
        restore_summary(store, state, "old-deploy", NOW - timedelta(days=1))
        (entry,) = [e for e in build_index(store, state.usage(), NOW, max_unused_days=30) if e.slug == "old-deploy"]
    assert not entry.candidate


def test_restore_command(tmp_path):
    settings = make_memory(tmp_path)
    env = clean_env(tmp_path, DSH_MEMORY_ROOT=str(settings.memory_root))
    ok = cli(["restore", "old-deploy", "--json"], env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["path"] == "rollout_summaries/old-deploy.md"
    again = cli(["restore", "old-deploy"], env)
    assert again.returncode == 3 and again.stderr.strip() == "error: no retired summary named 'old-deploy'"


@pytest.mark.e2e
def test_extract_and_consolidate_start_deployment_runs_on_the_prefect_server(tmp_path, prefect_api, monkeypatch):
    """With a Prefect server, the vault starts the real deployments (the flows and names `serve`
    registers from prefect.yaml; here without their schedules and triggers, so nothing else on this
    shared server starts them) and links the new flow runs."""
    import re

    from prefect.client.orchestration import get_client

    from dsh_memory.serve.deployments import CONSOLIDATE, EXTRACT_SESSION, import_entrypoint, load_spec
    from dsh_memory.serve.http_app import create_app

    deployment_ids = []
    for spec in load_spec():
        if f"{spec['name']}/{spec['name']}" in (EXTRACT_SESSION, CONSOLIDATE):
            flow = import_entrypoint(spec["entrypoint"])
            deployment_ids.append(flow.to_deployment(name=spec["name"]).apply())
    settings = make_memory(tmp_path)
    started: dict[str, str] = {}
    try:
        with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1:8765") as c:
            for action, page, fields in FLOW_ACTIONS:
                plan, done = plan_and_confirm(c, action, page, fields)
                assert 'id="confirm"' in plan.text and "No Prefect server" not in plan.text
                assert done.status_code == 200 and "Started flow run" in done.text, done.text[-600:]
                (run_id,) = re.findall(r'href="[^"]*/runs/flow-run/([0-9a-f-]{36})"', done.text)
                started[action] = run_id
            overview = c.get("/").text  # the queued runs are listed, linked to the Prefect UI
            assert 'id="queued"' in overview and "/runs/flow-run/" in overview
            monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")  # other tests' blocks on this server
            settings_page = c.get("/vault/settings").text  # editing stays in Prefect's Blocks UI
            assert f'href="{prefect_api.removesuffix("/api")}/blocks"' in settings_page
        with get_client(sync_client=True) as client:
            extract = client.read_flow_run(started["extract"])
            consolidate = client.read_flow_run(started["consolidate"])
        assert extract.parameters == {"session": SESSION} and consolidate.parameters == {"force": True}
        assert extract.deployment_id and consolidate.deployment_id
    finally:  # nobody serves them here; no other test's runner on this server may pick them up
        with get_client(sync_client=True) as client:
            for run_id in started.values():
                client.delete_flow_run(run_id)
            for deployment_id in deployment_ids:
                client.delete_deployment(deployment_id)


@pytest.mark.e2e
def test_starting_a_deployment_nobody_registered_says_who_registers_it(prefect_api):
    from dsh_memory.serve.deployments import start_run

    with pytest.raises(NotFoundError, match="dsh-memory serve"):
        start_run("consolidate/not-registered-anywhere", {})


@pytest.mark.e2e
def test_without_serves_deployment_the_vault_starts_the_pool_one_deploy_registered(prefect_api):
    """`dsh-memory deploy` (work pools, no `serve`) registers `<name>-pool` only: the vault's
    Consolidate now / Re-run extraction start that one, not a NotFound naming `serve`."""
    import uuid

    from prefect.client.orchestration import get_client

    from dsh_memory.serve.deployments import POOL_SUFFIX, import_entrypoint, load_spec, start_run

    (spec,) = [s for s in load_spec() if s["name"] == "consolidate"]
    name = f"vault-{uuid.uuid4().hex[:8]}"  # no other test on this shared server has it
    flow = import_entrypoint(spec["entrypoint"])
    deployment_id = flow.to_deployment(name=name + POOL_SUFFIX).apply()
    run_id = None
    try:
        started = start_run(f"consolidate/{name}", {"force": True})
        run_id = started["id"]
        assert started["deployment"] == f"consolidate/{name}{POOL_SUFFIX}"
        with get_client(sync_client=True) as client:
            assert client.read_flow_run(run_id).deployment_id == deployment_id
    finally:  # nobody serves it here
        with get_client(sync_client=True) as client:
            if run_id:
                client.delete_flow_run(run_id)
            client.delete_deployment(deployment_id)
