"""The offline path end to end: Phase 1 through the real llama.cpp runtime with the SmolLM2 test
model (content quality not asserted), and Ctrl-C / SIGTERM stopping a local decode promptly."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.flow_helpers import copy_tree_aged

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "dsh_memory" / "samples"
WEATHER = "5a1d3c7e-0b2f-4e6a-9c8d-1f2e3a4b5c6d"


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from dsh_memory.errors import NoModelRouteError
    from dsh_memory.llm import model_files
    from dsh_memory.testing.models import SMOLLM2_135M

    if importlib.util.find_spec("cyllama") is None:
        pytest.fail("the local runtime is not installed (pip install 'dsh-memory[local]')")
    try:
        return model_files.bundled_model_path(SMOLLM2_135M)
    except NoModelRouteError as exc:
        pytest.fail(f"test model missing: {exc}")


def _local_env(monkeypatch, tmp_path: Path, model: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DSH_HOME", str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "none"))
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    for var in ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY", "DSH_MEMORY_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "auto")  # no endpoint configured → the local model
    monkeypatch.setenv("DSH_MEMORY_MODEL_PATH", str(model))
    monkeypatch.setenv("DSH_MEMORY_LOCAL_THREADS", "1")
    monkeypatch.setenv("DSH_MEMORY_PHASE1_MAX_TOKENS", "300")
    monkeypatch.setenv("DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS", "0")
    return root


@pytest.mark.usefixtures("prefect_api")
def test_phase1_with_the_local_model_writes_memory_files(monkeypatch, tmp_path, smollm2):
    root = _local_env(monkeypatch, tmp_path, smollm2)
    from dsh_memory.flows.extract import extract_flow

    summary = extract_flow(session_ids=[WEATHER], respect_idle=False)
    (outcome,) = summary.outcomes
    assert outcome.outcome in ("extracted", "noop"), outcome
    assert summary.provider == "local" and summary.model == smollm2.name
    claim = StateStore(root).get_claim(WEATHER)
    assert claim.provider == "local" and claim.model == smollm2.name and claim.status in ("done", "noop")
    if outcome.outcome == "extracted":  # the grammar gave non-empty fields: files written
        (info,) = MemoryStore(root).list_rollout_summaries()
        assert info.provenance["provider"] == "local" and info.provenance["session_id"] == WEATHER
        assert MemoryStore(root).read_raw_blocks()[0].session_id == WEATHER


CHILD = "from dsh_memory.cli import main; main()"


def test_sigterm_stops_a_local_extraction_promptly(monkeypatch, tmp_path, smollm2):
    root = _local_env(monkeypatch, tmp_path, smollm2)
    monkeypatch.setenv("DSH_MEMORY_PHASE1_MAX_TOKENS", "4096")  # a long decode to interrupt
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "extract", "--all", "--json"],
        cwd=str(REPO),
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    state_db = root / ".state" / "state.sqlite3"
    while time.monotonic() < deadline and proc.poll() is None:
        if state_db.exists() and any(c.status == "running" for c in StateStore(root).claims().values()):
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the extraction ended before it could be interrupted"
    time.sleep(3)  # inside the model call
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=90)  # one prompt batch at most, not the whole decode
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("SIGTERM did not stop the local decode")
    assert proc.returncode != 0
