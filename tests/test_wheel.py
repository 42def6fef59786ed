"""The built wheel, installed with no checkout in sight: only `dsh_memory` lands in site-packages,
and `dsh-memory serve` from that install finds its deployments and runs a boot catch-up.

The fresh venv (no pip of its own: this environment's pip installs into it with `--python`) gets
the wheel itself (`--no-deps`); its dependencies come from this test environment through a plain
path entry (not a site dir, so the checkout's editable hook is not loaded): whatever the venv
imports as `dsh_memory` is the wheel's copy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from dsh_memory import __version__
from dsh_memory.serve.prefect_server import free_port
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import memory_reply

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A venv holding only the freshly built wheel (plus a path entry to this env's deps)."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("dsh_memory-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    return venv


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp), PREFECT_HOME=str(tmp / "prefect-client"))
    return env


def test_wheel_installs_nothing_but_dsh_memory(wheel_venv, tmp_path):
    py = wheel_venv / "bin" / "python"
    code = (
        "import importlib.metadata as md, importlib.util as u, json, dsh_memory\n"
        "tops = sorted({str(f).split('/')[0] for f in md.files('dsh-memory')})\n"
        "print(json.dumps({'file': dsh_memory.__file__, 'tops': tops,\n"
        "  'stray': [m for m in ('flows', 'tasks', 'blocks') if u.find_spec(m)],\n"
        "  'yaml': str(__import__('dsh_memory.serve.deployments', fromlist=['x']).prefect_yaml_path())}))\n"
    )
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout)
    site = str(wheel_venv)
    assert data["file"].startswith(site), data  # the wheel's copy, not the checkout
    assert data["stray"] == []  # no top-level flows/tasks/blocks to collide with a user's own
    # The package, its metadata, and the console script (recorded as ../../../bin/dsh-memory).
    assert set(data["tops"]) == {"dsh_memory", f"dsh_memory-{__version__}.dist-info", ".."}, data["tops"]
    assert data["yaml"].startswith(site) and data["yaml"].endswith("dsh_memory/prefect.yaml")
    # The stage packages ship inside dsh_memory and import under that name.
    imp = subprocess.run(
        [str(py), "-c", "import dsh_memory.flows.catch_up, dsh_memory.tasks.extract, dsh_memory.blocks; print('ok')"],
        cwd=tmp_path,
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert imp.stdout.strip() == "ok", imp.stderr[-3000:]


def _llm(request: dict) -> Reply:
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool(
            {"memory_md": "# Memory\n\n- from the wheel\n", "memory_summary_md": "v1\n- from the wheel\n"}
        )
    return memory_reply(request)  # grounded: quotes the session's first prompt


def _completed_catch_ups(api_url: str, since: datetime) -> list[dict]:
    body = {
        "flows": {"name": {"any_": ["catch-up"]}},
        "flow_runs": {"start_time": {"after_": since.isoformat()}, "state": {"type": {"any_": ["COMPLETED"]}}},
        "limit": 10,
    }
    r = httpx.post(f"{api_url}/flow_runs/filter", json=body, timeout=10)
    r.raise_for_status()
    return r.json()


def _catch_up_states(api_url: str, since: datetime) -> str:
    """Every catch-up run since `since` with its state (for a failure message)."""
    body = {
        "flows": {"name": {"any_": ["catch-up"]}},
        "flow_runs": {"expected_start_time": {"after_": since.isoformat()}},
    }
    runs = httpx.post(f"{api_url}/flow_runs/filter", json=body, timeout=10).json()
    return "\ncatch-up runs: " + ", ".join(f"{r['name']}={r['state']['type']}" for r in runs)


@pytest.fixture(scope="module")
def own_prefect(tmp_path_factory, new_prefect_home):
    """A Prefect server of this test's own: on the suite's shared server, other tests' triggers
    and deployments of the same names would run flows in this stack (and throttle its boot)."""
    from dsh_memory.serve.prefect_server import PrefectServer

    with PrefectServer(new_prefect_home(tmp_path_factory.mktemp("wheel-prefect"))) as server:
        yield server.api_url


def test_serve_from_the_wheel_finds_its_deployments_and_runs_a_catch_up(wheel_venv, own_prefect, tmp_path):
    prefect_api = own_prefect
    # The sample sessions bundled in the wheel, ended an hour ago (idle, ready to extract).
    samples = wheel_venv.glob("lib/python*/site-packages/dsh_memory/samples/dsh")
    dsh_home = tmp_path / "dsh"
    shutil.copytree(next(samples), dsh_home)
    old = time.time() - 3600
    for p in dsh_home.rglob("*"):
        os.utime(p, (old, old))
    root = tmp_path / "memories"
    port = free_port()
    since = datetime.now(UTC)
    with FakeOpenAIServer(handler=_llm) as fake:
        env = _clean_env(tmp_path)
        env.update(
            DSH_HOME=str(dsh_home),
            CODEX_HOME=str(tmp_path / "none"),
            CLAUDE_CONFIG_DIR=str(tmp_path / "none"),
            DSH_MEMORY_ROOT=str(root),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="test-key",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
            PREFECT_API_URL=prefect_api,
            PREFECT_RUNNER_POLL_FREQUENCY="2",
            DSH_MEMORY_IGNORE_BLOCKS="1",  # the shared test server may hold other tests' blocks
        )
        log_path = tmp_path / "serve.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [str(wheel_venv / "bin" / "dsh-memory"), "serve", "--port", str(port)],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None:
                if _completed_catch_ups(prefect_api, since) and list((root / "rollout_summaries").glob("*.md")):
                    break
                time.sleep(0.5)
            text = log_path.read_text()
            assert proc.poll() is None, "serve exited: " + text[-3000:]
            assert "serving 3 deployments" in text, text[-3000:]
            assert _completed_catch_ups(prefect_api, since), text[-3000:] + _catch_up_states(prefect_api, since)
            assert list((root / "rollout_summaries").glob("*.md")), text[-3000:]
            # the vault ships in the wheel (templates, stylesheet) and `serve` serves it at /
            assert f"memory vault: http://127.0.0.1:{port}/" in text, text[-3000:]
            vault = httpx.get(f"http://127.0.0.1:{port}/vault/browse", timeout=30)
            slug = next((root / "rollout_summaries").glob("*.md")).stem
            assert vault.status_code == 200 and slug in vault.text, vault.text[-2000:]
            css = httpx.get(f"http://127.0.0.1:{port}/vault/static/vault.css", timeout=30)
            assert css.status_code == 200 and "--accent" in css.text
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
