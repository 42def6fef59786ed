"""The `semantic_search` setting (auto / on / off) on its way from the memory context into ranked
search: the environment (DSH_MEMORY_SEMANTIC_SEARCH) through the settings loader, then every entry
point (CLI, HTTP RPC, MCP, the vault) hands it to the search core. Real files, a real index, the
real model (.ci/run installs it); 'on' without the model is one clear line and exit 4."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from dsh_memory import readpath as rp
from dsh_memory.context import MemoryContext, memory_context
from dsh_memory.errors import ConfigError
from dsh_memory.readpath import embedder
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.store import MemoryStore
from tests.semantic_helpers import BLOCK_WORDLLAMA

REPO = Path(__file__).resolve().parents[1]
PARAPHRASE = "why wouldn't the vehicle's engine turn over?"  # car.md says it in other words
CAR = "rollout_summaries/car.md"
installed = pytest.mark.skipif(embedder.get() is None, reason="the semantic extra is not installed (.ci/run does)")


@pytest.fixture()
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\n- run the linter before pushing\n")
    (s.rollout_dir / "a.md").write_text("# Ledger\n- the settlement test failed on Mondays\n")
    (s.rollout_dir / "car.md").write_text(
        "# Morning\n- user: my automobile would not start this morning\n"
        "- assistant: the battery was flat, so we jump-started it from a neighbour's\n"
    )
    return s


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_MEMORY_", "PREFECT_API"))}
    return {**env, "DSH_MEMORY_ROOT": str(root), "DSH_MEMORY_IGNORE_BLOCKS": "1", **extra}


def test_the_setting_comes_from_the_environment_through_the_memory_context(tmp_path):
    def mode(**extra: str) -> str:
        return memory_context(_env(tmp_path, **extra)).settings.semantic_search

    assert mode() == "auto"  # the default
    for raw, want in [("off", "off"), ("On", "on"), (" auto ", "auto"), ("1", "on"), ("true", "on"), ("0", "off")]:
        assert mode(DSH_MEMORY_SEMANTIC_SEARCH=raw) == want, raw
    with pytest.raises(ConfigError, match=r"DSH_MEMORY_SEMANTIC_SEARCH: .* \(got 'sometimes'\)"):
        mode(DSH_MEMORY_SEMANTIC_SEARCH="sometimes")


@installed
def test_auto_is_fused_when_the_model_is_installed_and_off_is_lexical(store):
    auto = rp.search(store, [PARAPHRASE], mode="ranked")  # the core's default is the setting's: auto
    assert auto.matches and auto.matches[0].path == CAR
    assert rp.search(store, [PARAPHRASE], mode="ranked", semantic_search="on").matches[0].path == CAR
    off = rp.search(store, [PARAPHRASE], mode="ranked", semantic_search="off")
    assert all(m.path != CAR for m in off.matches)


def _cited(matches) -> list[str]:
    return [m["path"] if isinstance(m, dict) else m.path for m in matches]


@installed
@pytest.mark.parametrize("setting", ["auto", "off"])
def test_http_mcp_and_vault_search_with_the_memory_contexts_setting(store, setting):
    from mcp import Client

    from dsh_memory.serve.http_app import rpc_call
    from dsh_memory.serve.mcp_server import build_server
    from dsh_memory.serve.vault.pages import search_view

    ctx = MemoryContext.of(MemorySettings(memory_root=store.root, semantic_search=setting))
    params = {"queries": [PARAPHRASE], "mode": "ranked"}
    http = _cited(rpc_call(ctx, "search", dict(params)).matches)
    vault = _cited(search_view(ctx, PARAPHRASE)["result"].matches)

    async def mcp_search() -> tuple[list[str], str]:
        async with Client(build_server(ctx)) as client:
            res = await client.call_tool("memory_search", params)
            assert not res.is_error, res.content
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return _cited(res.structured_content["matches"]), tools["memory_search"].description

    mcp, description = anyio.run(mcp_search)
    # the tool description tells the agent how this server ranks
    said = "ranks by words and by meaning" if setting == "auto" else "ranks by words only (its semantic_search setting"
    assert said in description, description
    ctx.close()
    for name, paths in {"http": http, "vault": vault, "mcp": mcp}.items():
        assert (CAR in paths[:1]) == (setting == "auto"), (name, paths)
        assert (CAR in paths) == (setting == "auto"), (name, paths)


def _cli(root: Path, args: list[str], *, block_model: bool = False, **env: str) -> subprocess.CompletedProcess:
    code = (BLOCK_WORDLLAMA if block_model else "") + "from dsh_memory.cli import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=_env(root, **env),
        cwd=REPO,
        timeout=120,
    )


@installed
def test_the_cli_searches_with_the_environments_setting(store):
    args = ["search", PARAPHRASE, "--mode", "ranked"]
    fused = _cli(store.root, args)
    assert fused.returncode == 0, fused.stderr
    assert fused.stdout.splitlines()[0].startswith(CAR + ":")
    lexical = _cli(store.root, args, DSH_MEMORY_SEMANTIC_SEARCH="off")
    assert lexical.returncode == 0, lexical.stderr
    assert CAR not in lexical.stdout


def test_without_the_model_auto_is_lexical_and_on_is_one_clear_error(store):
    args = ["search", "settlement Mondays", "--mode", "ranked"]
    auto = _cli(store.root, args, block_model=True)
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.splitlines()[0].startswith("rollout_summaries/a.md:")
    assert not (store.root / ".state" / "search_vectors.f32").exists()  # lexical only: no vectors
    on = _cli(store.root, args, block_model=True, DSH_MEMORY_SEMANTIC_SEARCH="on")
    assert on.returncode == 4, (on.stdout, on.stderr)
    assert "Traceback" not in on.stderr and on.stdout == ""
    assert "semantic_search is 'on' but the wordllama package" in on.stderr
    assert len(on.stderr.strip().splitlines()) == 1, on.stderr


@installed
def test_settings_show_names_the_setting_and_what_ranked_search_does_with_it(store):
    import json

    shown = {}
    for env in ({}, {"DSH_MEMORY_SEMANTIC_SEARCH": "off"}):
        out = _cli(store.root, ["settings", "show", "--json"], **env)
        assert out.returncode == 0, out.stderr
        shown[env.get("DSH_MEMORY_SEMANTIC_SEARCH", "auto")] = json.loads(out.stdout)
    assert shown["auto"]["memory"]["semantic_search"] == {"value": "auto", "source": "default"}
    assert shown["auto"]["ranked_search"].startswith("lexical + semantic, fused")
    assert shown["off"]["memory"]["semantic_search"] == {"value": "off", "source": "env"}
    assert shown["off"]["ranked_search"] == "lexical only (semantic_search is 'off')"
