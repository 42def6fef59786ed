"""Whole-pipeline safety on a real Prefect server: secrets never reach the memory root, and a
Phase 1 process killed mid-run leaves no torn file, recovers its claims and extracts nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory.llm.limit import LIMIT_NAME
from dsh_memory.storage.state import StateStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import memory_reply, pipeline_env, user_text

pytestmark = pytest.mark.usefixtures("prefect_api")


def _secrets(expected) -> list[str]:
    out = []
    for facts in expected.values():
        if isinstance(facts, dict):
            for s in facts.get("secrets") or []:
                out.append(s["value"] if isinstance(s, dict) else s)
    return [s for s in out if s]


def _echo_everything(request: dict) -> Reply:
    """A worst-case model: it copies whatever it was given into every field it writes (the data,
    not the fences around it: an answer with this run's fences is refused as an echo)."""
    text = "\n".join(line for line in user_text(request).split("\n") if "<<<" not in line)
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool(
            {
                "memory_md": "# Memory\n" + text[:20000],
                "memory_summary_md": "v1\n" + text[:3000],
                "skills": [{"name": "echo", "skill_md": text[:5000], "files": []}],
            }
        )
    return Reply.tool({"raw_memory": text[:3500], "rollout_summary": text[-5500:], "rollout_slug": "echo"})


def test_no_planted_secret_under_the_memory_root_nor_in_prefect(monkeypatch, tmp_path, fixtures_dir, expected):
    with FakeOpenAIServer(handler=_echo_everything) as fake:
        root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url, codex=True, claude=True)
        monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "0")
        from dsh_memory.flows.catch_up import catch_up_flow

        result = catch_up_flow(backfill=True)
        assert result.phase2.outcome == "consolidated", result.phase2
        sent = json.dumps(fake.requests, ensure_ascii=False)
    # Search index, state DB, archives, skills: every byte under the root.
    from dsh_memory.readpath import search
    from dsh_memory.storage.store import MemoryStore

    search(MemoryStore(root), ["uv"], mode="ranked")  # builds the ranked index too
    blobs = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    assert len(blobs) > 10
    secrets = _secrets(expected)
    assert len(secrets) >= 5
    # Prefect: the server's database (run parameters, task inputs, logs, artifacts, states) and the
    # client's result storage and cache files — nothing unredacted is handed to Prefect either.
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # queued run logs reach the server first
    prefect_home = Path(os.environ["PREFECT_HOME"]).parent
    prefect_blobs = [p.read_bytes() for p in prefect_home.rglob("*") if p.is_file() and p.stat().st_size < 512 << 20]
    assert any(p.name.startswith("prefect.db") for p in prefect_home.rglob("*")), "the server's database"
    ran = result.phase1.outcomes[0].session.encode()
    assert any(ran in b for b in prefect_blobs), "the scan sees this run's records (task run names)"
    for secret in secrets:
        assert secret not in sent, "a secret reached the model"
        needle = secret.encode()
        assert not any(needle in b for b in blobs), f"secret {secret[:6]}… on disk"
        assert not any(needle in b for b in prefect_blobs), f"secret {secret[:6]}… in Prefect's database or storage"


CHIT_CHAT = "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b"  # "hi there 👋": no-op without a model call

CHILD = r"""
import os, sys
from dsh_memory.flows.extract import extract_flow
extract_flow()
"""


def test_phase1_killed_mid_run_recovers_without_double_extraction(monkeypatch, tmp_path, fixtures_dir):
    with FakeOpenAIServer(
        latency_seconds=0.5,  # the kill lands among model calls, files being written or both
        handler=memory_reply,  # grounded in each transcript: the clean-up keeps it (a bare "a fact" is dropped)
    ) as fake:
        root = pipeline_env(monkeypatch, tmp_path, fixtures_dir, fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_CONCURRENCY", "2")
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            env=dict(os.environ),
            cwd=str(Path(__file__).parents[1]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        state = StateStore(root)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # kill it once some sessions are done and others in flight
            claims = state.claims().values()
            if sum(c.status == "done" for c in claims) >= 2 and any(c.status == "running" for c in claims):
                break
            time.sleep(0.1)
        else:
            proc.kill()
            pytest.fail("the child never got going")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_before = {c.session_id for c in state.claims().values() if c.status == "done"}
        orphaned = {c.session_id for c in state.claims().values() if c.status == "running"}
        assert orphaned, "the kill landed while extractions were in flight"
        # No torn or temporary files.
        for p in root.rglob("*"):
            assert not p.name.startswith(".tmp") and not p.name.endswith(".tmp"), p
        for p in (root / "rollout_summaries").glob("*.md"):
            assert p.read_text().startswith("---"), p
        sent_before = len(fake.requests)
        # No wait: the orphaned running claims' owner process is gone, so the rerun recovers them
        # at once. The killed child's model slots stay taken until the server expires its lease
        # (Prefect's minimum, 60 s: docs/running.md); deleting the limit, as an operator could,
        # lets the rerun take them now (it creates the limit again): recovery is under test here,
        # not Prefect's lease expiry, and an expiry later finds no limit to give slots back to.
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.delete_global_concurrency_limit_by_name(LIMIT_NAME)
        from dsh_memory.flows.extract import extract_flow

        summary = extract_flow()
        outcomes = {o.session: o.outcome for o in summary.outcomes}
        assert orphaned <= set(outcomes), "orphaned claims were recovered and retried"
        assert not (done_before & set(outcomes)), "a finished session was extracted twice"
        final = StateStore(root).claims()
        # finished (the chit-chat one as a no-op: the batch is claimed up front, so it can be orphaned too)
        assert all(final[s].status in ("done", "noop") for s in orphaned), {s: final[s].status for s in orphaned}
        # At most one model call per session read (the chit-chat one the no-op gate stops first
        # makes none): an answer the killed run had already received is served from Prefect's
        # persisted cache (the call runs in an eager transaction), never asked for twice.
        called = [o for o in summary.outcomes if o.outcome != "unreadable" and o.session != CHIT_CHAT]
        assert 0 < len(fake.requests) - sent_before <= len(called)
