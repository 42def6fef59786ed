"""One memory context: a `memory_root` pinned in the saved settings block is what every entry
point serves — the read CLI, the HTTP RPC (`dsh-memory http`) and MCP (`dsh-memory mcp`) — not
the environment's root. Real Prefect server, real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from dsh_memory.context import MemoryContext, memory_context
from dsh_memory.serve.prefect_server import free_port
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.store import MemoryStore

WORD = "zanzibar-pinned-7731"


@pytest.fixture
def pinned(prefect_api, monkeypatch, tmp_path):
    """A settings block pinning root A; the environment names root B. Both hold a note."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from dsh_memory.blocks import MemorySettingsBlock, register_blocks

    pinned_root, env_root = tmp_path / "pinned", tmp_path / "from-env"
    for root, text in ((pinned_root, f"Deploys use {WORD}."), (env_root, "The environment's root.")):
        s = MemoryStore(root)
        s.ensure_layout()
        (s.root / "MEMORY.md").write_text(f"# Handbook\n{text}\n")
    register_blocks()
    MemorySettingsBlock(memory_root=str(pinned_root)).save("default", overwrite=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PYTEST_"))}
    env.update(HOME=str(tmp_path), DSH_MEMORY_ROOT=str(env_root), PREFECT_API_URL=prefect_api)
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(env_root))
    monkeypatch.delenv("DSH_MEMORY_IGNORE_BLOCKS", raising=False)
    try:
        yield pinned_root, env
    finally:
        with get_client(sync_client=True) as client:
            try:
                doc = client.read_block_document_by_name("default", "dsh-memory-settings", include_secrets=False)
                client.delete_block_document(doc.id)
            except ObjectNotFound:
                pass


def _cli(env, *args):
    return subprocess.run([sys.executable, "-m", "dsh_memory.cli", *args], env=env, capture_output=True, text=True)


def test_memory_context_resolves_the_block_root(pinned):
    pinned_root, _ = pinned
    with memory_context() as ctx:
        assert ctx.memory_root == pinned_root and ctx.store.root == pinned_root
        assert ctx.resolved.blocks["dsh-memory-settings"] == "loaded"
        assert ctx.state.db_path.parent.parent == pinned_root
    assert "state" not in ctx.__dict__  # closed on exit


def test_cli_search_reads_the_pinned_root(pinned):
    pinned_root, env = pinned
    out = _cli(env, "search", WORD, "--json")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)["matches"]
    assert [h["path"] for h in hits] == ["MEMORY.md"] and WORD in hits[0]["content"]
    status = json.loads(_cli(env, "status", "--json").stdout)
    assert status["local"]["memory_root"] == str(pinned_root)


def test_http_rpc_reads_the_pinned_root(pinned):
    _, env = pinned
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh_memory.cli", "http", "--port", str(port), "--no-mcp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/dsh-memory/rpc"
        body = {"method": "search", "params": {"queries": [WORD]}}
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.post(url, json=body, timeout=5)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("dsh-memory http did not come up: " + (proc.stderr.read() if proc.stderr else ""))
                time.sleep(0.3)
        assert r.status_code == 200, r.text
        assert [m["path"] for m in r.json()["result"]["matches"]] == ["MEMORY.md"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_mcp_stdio_reads_the_pinned_root(pinned):
    _, env = pinned
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_memory.cli", "mcp"], env=env)

    async def main():
        async with Client(params) as client:
            return await client.call_tool("memory_search", {"queries": [WORD]})

    result = anyio.run(main)
    assert not result.is_error, result.content
    data = result.structured_content or json.loads(result.content[0].text)
    assert [m["path"] for m in data["matches"]] == ["MEMORY.md"]


def test_context_of_plain_settings_and_close(tmp_path):
    ctx = MemoryContext.of(MemorySettings(memory_root=tmp_path / "m"))
    assert not ctx.state_exists()
    ctx.state.get_meta()  # opens (and creates) the state database
    assert ctx.state_exists()
    ctx.close()
    assert "state" not in ctx.__dict__
