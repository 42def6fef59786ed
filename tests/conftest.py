"""Shared test fixtures.

The session-log corpus (DSH/Codex/Claude Code logs, webhook bodies, `expected.json`) lives in the
repo at `tests/fixtures/corpus/`: a snapshot of the generated corpus at `../shared/fixtures`
(see tests/fixtures/README.md). `fixtures_dir` / `expected` always point at that snapshot.

Tests that check facts against `expected.json` take `corpus` instead: it runs them once over the
snapshot (`[repo-...]`) and once over `../shared/fixtures` (`[shared-...]`) as a conformance
pass when that folder exists beside the repo; without it the shared variants are skipped with a
visible reason. Nothing here reads a fixture at import time.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "corpus"  # in the repo: always there
SHARED_CORPUS = REPO.parent / "shared" / "fixtures"  # beside the repo: optional
CORPUS_DIRS = {"repo": CORPUS, "shared": SHARED_CORPUS}
SHARED_SKIP_REASON = "shared corpus not present at {path}: conformance pass skipped"


@dataclass(frozen=True)
class Corpus:
    """One fixture corpus: its folder and its parsed expected.json."""

    name: str  # "repo" (the in-repo snapshot) or "shared" (../shared/fixtures)
    dir: Path
    expected: dict

    def keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self.expected if k.startswith(prefix))

    def fact(self, key: str) -> dict:
        """expected.json entry for `key`; a key the snapshot has but this corpus lacks is drift."""
        if key not in self.expected:
            pytest.fail(
                f"{key} is in the in-repo snapshot but not in the {self.name} corpus at {self.dir}: "
                "refresh tests/fixtures/corpus (see tests/fixtures/README.md)"
            )
        return self.expected[key]


@functools.cache
def load_corpus(name: str) -> Corpus:
    folder = CORPUS_DIRS[name]
    return Corpus(name, folder, json.loads((folder / "expected.json").read_text()))


def repo_keys(prefix: str) -> list[str]:
    """expected.json keys of the in-repo snapshot starting with `prefix` (for parametrize lists)."""
    return load_corpus("repo").keys(prefix)


@pytest.fixture(scope="session", params=["repo", "shared"])
def corpus(request) -> Corpus:
    """The in-repo snapshot, then ../shared/fixtures when present (skipped with a reason if not)."""
    if request.param == "shared" and not (SHARED_CORPUS / "expected.json").is_file():
        pytest.skip(SHARED_SKIP_REASON.format(path=SHARED_CORPUS))
    return load_corpus(request.param)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The in-repo corpus (flow and integration tests use this copy only)."""
    return CORPUS


@pytest.fixture(scope="session")
def expected() -> dict:
    """expected.json of the in-repo corpus."""
    return load_corpus("repo").expected


def _restart_event_workers() -> None:
    """Deliver the queued events to the server they were meant for and stop Prefect's events
    worker: it is one per process and keeps the API URL it started with (its key does not hold
    the URL), so after a switch of server the next event starts a worker for the new one. Without
    this, a module's own server never saw its runs' events (task runs reach the server as events)."""
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10, at_exit=False)


@pytest.fixture(scope="session")
def new_prefect_home(tmp_path_factory) -> Callable[[Path], Path]:
    """Makes a Prefect home (a folder, created if missing) holding a copy of an empty database
    migrated to the installed Prefect's head once per session (`prefect server database upgrade`).
    A server started there skips the migrations, about half of a `prefect server start` on a new
    SQLite file; it is the same schema a new server would create, and the server still checks it
    and registers its block types."""
    import os
    import shutil
    import subprocess
    import sys

    db_home = tmp_path_factory.mktemp("prefect-db")
    env = {**os.environ, "PREFECT_HOME": str(db_home), "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("PREFECT_API_URL", None)
    exe = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
    done = subprocess.run([exe, "server", "database", "upgrade", "-y"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def make(home: Path) -> Path:
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(db_home / "prefect.db", home / "prefect.db")
        return home

    return make


def _global_settings_without_heartbeats() -> None:
    """The process-global Prefect settings (read by every thread without a settings context of its
    own) refreshed from the environment, flow-run heartbeats off. Prefect sends one every 180 s by
    default, from a thread that sleeps in 1 s steps: each flow run's end waits up to 1 s for it.
    No environment value can say "off" (the setting is an int >= 30, or None), hence the copy."""
    import prefect.context
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    prefect.context.refresh_global_settings_context()
    current = prefect.context.GLOBAL_SETTINGS_CONTEXT
    settings = current.settings.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
    prefect.context.GLOBAL_SETTINGS_CONTEXT = prefect.context.SettingsContext(
        profile=current.profile, settings=settings
    )


@contextlib.contextmanager
def _server_for_this_process(home: Path):
    """A real `prefect server start` in `home`; this process (its threads and the subprocesses
    it starts afterwards) points at it until the block ends; this process's flow runs send no
    heartbeats (`_global_settings_without_heartbeats`)."""
    import os

    from dsh_memory.serve.prefect_server import PrefectServer

    old = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    with PrefectServer(home) as server:
        _restart_event_workers()  # Prefect's events worker keeps the URL it started with
        os.environ["PREFECT_API_URL"] = server.api_url
        os.environ["PREFECT_HOME"] = str(home / "client")
        # Threads and subprocesses must see the server too, not just this context: refresh the
        # process-global settings context from the environment.
        _global_settings_without_heartbeats()
        try:
            yield server.api_url
        finally:
            from prefect.logging.handlers import APILogWorker

            APILogWorker.drain_all(timeout=10)  # deliver queued run logs before the server goes away
            _restart_event_workers()
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            _global_settings_without_heartbeats()


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory, new_prefect_home):
    """One real Prefect server for the whole test session; the test process points at it.

    Use this fixture in every test that runs a flow. It sets PREFECT_API_URL for this process
    (and children started afterwards) and turns this process's flow heartbeats off.
    """
    with _server_for_this_process(new_prefect_home(tmp_path_factory.mktemp("prefect-home"))) as url:
        yield url


@pytest.fixture(scope="module")
def own_prefect_api(tmp_path_factory, new_prefect_home):
    """A real Prefect server of this test module alone (deployments, automations and work pools
    it creates never meet another module's runs); the process points at it for the module."""
    with _server_for_this_process(new_prefect_home(tmp_path_factory.mktemp("own-prefect"))) as url:
        yield url
