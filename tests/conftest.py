"""Shared test fixtures. The session-log fixtures live outside the repo at ../shared/fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {FIXTURES} (expected ../shared/fixtures beside the repo)")
    return FIXTURES


@pytest.fixture(scope="session")
def expected(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "expected.json").read_text())


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One real Prefect server for the whole test session; the test process points at it.

    Use this fixture in every test that runs a flow. It sets PREFECT_API_URL for this process
    (and children started afterwards) and turns flow heartbeats off.
    """
    import os

    from dsh_memory.testing.prefect_server import PrefectServer

    home = tmp_path_factory.mktemp("prefect-home")
    server = PrefectServer(home).start()
    old = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ["PREFECT_API_URL"] = server.api_url
    os.environ["PREFECT_HOME"] = str(home / "client")
    # Threads and subprocesses must see the server too, not just this context: refresh the
    # process-global settings context from the environment.
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()
    try:
        yield server.api_url
    finally:
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)  # deliver queued run logs before the server goes away
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        refresh_global_settings_context()
