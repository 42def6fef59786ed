"""The MCP server over stdio, driven by the official MCP client (a real subprocess)."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore


@pytest.fixture()
def root(tmp_path):
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\nThe API gateway lives in services/gateway.\n")
    (s.root / "memory_summary.md").write_text("v1\n- api gateway\n")
    (s.rollout_dir / "gateway-timeouts.md").write_text(
        "# Gateway timeouts\nRaised the gateway timeout to 30s.\nCause: slow auth service.\n"
    )
    (s.notes_dir / "latin.md").write_bytes("- gateway caf\xe9\n".encode("latin-1"))  # not searched, and said so
    return s.root


def _params(root, cwd=None) -> StdioServerParameters:
    env = {"DSH_MEMORY_ROOT": str(root), "PYTHONPATH": os.pathsep.join(sys.path)}
    return StdioServerParameters(command=sys.executable, args=["-m", "dsh_memory.serve.mcp_server"], env=env, cwd=cwd)


def _structured(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_stdio_tools_resource_and_prompt(root, tmp_path):
    repo = tmp_path / "gateway"
    (repo / ".git").mkdir(parents=True)

    async def main() -> dict:
        out: dict = {}
        async with Client(_params(root, cwd=repo)) as client:
            out["server_info"] = client.server_info
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out["tools"] = tools
            out["summary"] = _structured(await client.call_tool("memory_summary", {}))
            out["list"] = _structured(await client.call_tool("memory_list", {"path": "rollout_summaries"}))
            out["read"] = _structured(
                await client.call_tool(
                    "memory_read", {"path": "rollout_summaries/gateway-timeouts.md", "start_line": 2, "max_lines": 1}
                )
            )
            out["search"] = _structured(
                await client.call_tool("memory_search", {"queries": ["gateway"], "mode": "any"})
            )
            out["scoped"] = _structured(
                await client.call_tool(
                    "memory_search",
                    {"queries": ["30s"], "path": "rollout_summaries", "context_lines": 1, "max_results": 1},
                )
            )
            out["old_name"] = await client.call_tool("memory_read", {"path": "MEMORY.md", "line_offset": 1})
            out["ranked"] = _structured(
                await client.call_tool("memory_search", {"queries": ["auth service slow"], "mode": "ranked"})
            )
            out["add"] = _structured(
                await client.call_tool(
                    "memory_add", {"note": "Gateway owner is team Falcon.", "title": "gateway owner"}
                )
            )
            out["global"] = _structured(await client.call_tool("memory_add", {"note": "Be brief.", "scope": "global"}))
            out["elsewhere"] = await client.call_tool("memory_add", {"note": "x", "cwd": str(tmp_path / "shop")})
            out["bad"] = await client.call_tool("memory_read", {"path": "../../etc/passwd"})
            out["missing"] = await client.call_tool("memory_read", {"path": "nope.md"})
            res = await client.read_resource("memory://summary")
            out["resource"] = res.contents[0].text
            prompts = (await client.list_prompts()).prompts
            out["prompts"] = [p.name for p in prompts]
            out["prompt"] = await client.get_prompt("memory")
        return out

    out = anyio.run(main)

    from dsh_memory import __version__

    assert (out["server_info"].name, out["server_info"].version) == ("dsh-memory", __version__)
    tools = out["tools"]
    assert set(tools) == {"memory_summary", "memory_list", "memory_read", "memory_search", "memory_add"}
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None and hints.open_world_hint is False, name
        if name == "memory_add":
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (False, False, False)
        else:
            assert (hints.read_only_hint, hints.idempotent_hint) == (True, True), name
    search_schema = tools["memory_search"].input_schema
    assert search_schema["required"] == ["queries"]
    assert set(search_schema["properties"]) >= {
        "queries",
        "mode",
        "within_lines",
        "normalized",
        "context_lines",
        "path",
    }
    assert "explicitly asks" in tools["memory_add"].description
    assert tools["memory_read"].input_schema["properties"]["start_line"]["minimum"] == 1

    assert [e["path"] for e in out["list"]["entries"]] == [
        "rollout_summaries/.retired",
        "rollout_summaries/gateway-timeouts.md",
    ]
    assert (out["read"]["start_line"], out["read"]["content"]) == (2, "Raised the gateway timeout to 30s.")
    assert out["read"]["next_start_line"] == 3
    assert out["scoped"]["path"] == "rollout_summaries" and out["scoped"]["next_cursor"] is None
    ((hit),) = out["scoped"]["matches"]
    assert (hit["path"], hit["start_line"], hit["match_line"], hit["end_line"]) == (
        "rollout_summaries/gateway-timeouts.md",
        1,
        2,
        3,
    )
    assert out["old_name"].is_error and "line_offset" in out["old_name"].content[0].text
    assert "- api gateway" in out["summary"]["result"] and "path:start-end" in out["summary"]["result"]
    assert [(m["path"], m["match_line"]) for m in out["search"]["matches"]] == [
        ("MEMORY.md", 2),
        ("memory_summary.md", 2),
        ("rollout_summaries/gateway-timeouts.md", 1),
        ("rollout_summaries/gateway-timeouts.md", 2),
    ]
    assert out["search"]["skipped"] == "skipped 1 file: extensions/ad_hoc/notes/latin.md (not UTF-8)"
    assert out["ranked"]["matches"][0]["path"] == "rollout_summaries/gateway-timeouts.md"
    note = out["add"]["path"]
    assert note.startswith("extensions/ad_hoc/notes/") and "team Falcon" in (root / note).read_text()
    # a note is for the project the server was started in; global only when asked; never another project's
    assert (out["add"]["scope"], out["global"]["scope"]) == (f"project {repo}", "global")
    assert f"\nproject: {repo}\n" in (root / note).read_text()
    assert out["elsewhere"].is_error and "outside this session's project" in out["elsewhere"].content[0].text
    assert len([n for n in MemoryStore(root).list_notes() if not n.endswith("latin.md")]) == 2  # not "elsewhere"

    assert out["bad"].is_error and "PathGuardError" in out["bad"].content[0].text
    assert out["missing"].is_error and "NotFoundError" in out["missing"].content[0].text

    assert "- api gateway" in out["resource"] and "path:start-end" in out["resource"]
    assert out["prompts"] == ["memory"]
    assert "- api gateway" in out["prompt"].messages[0].content.text

    # read once + three searches hit the active rollout summary: four usage records
    assert StateStore(root).usage()["rollout_summaries/gateway-timeouts.md"][0] == 4


def test_bad_tool_arguments_are_one_line_naming_the_argument(root):
    """The SDK checked a tool's arguments first and answered with pydantic's multi-line report
    ("1 validation error for memory_readArguments\\nstart_line\\n  Input should be …"); the core
    checks them once, as for the CLI and the RPC: one line naming each bad argument. Arguments
    the schema allows still work as given (a number as a JSON string too)."""
    calls = {
        "zero": ("memory_read", {"path": "MEMORY.md", "start_line": 0}),
        "missing": ("memory_read", {"start_line": 2}),
        "unknown": ("memory_read", {"path": "MEMORY.md", "line_offset": 1}),
        "internal": ("memory_search", {"queries": ["gateway"], "model": "ranked"}),  # no name of ours leaks in
        "type": ("memory_search", {"queries": "gateway", "max_results": "many"}),
        "good": ("memory_read", {"path": "MEMORY.md", "start_line": "2", "max_lines": 1}),
        "json_note": ("memory_add", {"note": '{"retries": 3}', "scope": "global"}),  # text that looks like JSON
        "list_note": ("memory_add", {"note": '["pnpm", "never npm"]', "title": "null", "scope": "global"}),
    }

    async def main() -> dict:
        async with Client(_params(root)) as client:
            return {k: await client.call_tool(name, args) for k, (name, args) in calls.items()}

    out = anyio.run(main)
    for key, arg in (
        ("zero", "start_line"),
        ("missing", "path"),
        ("unknown", "line_offset"),
        ("internal", "model"),
        ("type", "max_results"),
    ):
        result = out[key]
        text = result.content[0].text
        assert result.is_error and "\n" not in text, text
        assert "invalid arguments: " in text and arg in text, text
    assert _structured(out["good"])["content"] == "The API gateway lives in services/gateway."
    # a string argument is the string sent, never parsed as JSON into an object, a list or null
    for key, text, title in (("json_note", '{"retries": 3}', "null"), ("list_note", '["pnpm", "never npm"]', '"null"')):
        note = (root / _structured(out[key])["path"]).read_text()
        assert note.endswith(f"\n{text}\n") and f"\ntitle: {title}\n" in note, note


def test_an_unknown_prompt_or_a_bad_resource_is_one_clear_error(root, capfd):
    """The SDK answered an unknown prompt with "Internal server error" and a project resource
    the core refuses with "Error creating resource from template …", each with a traceback on
    the server's stderr (the agent's MCP log): one line naming what is wrong, and no traceback."""
    from mcp import MCPError

    async def main() -> dict:
        out: dict = {}
        async with Client(_params(root)) as client:
            for key, ask in {
                "prompt": lambda: client.get_prompt("nope"),
                "relative": lambda: client.read_resource("memory://summary/relative%2Fdir"),
                "unknown": lambda: client.read_resource("memory://nope"),
            }.items():
                with pytest.raises(MCPError) as err:
                    await ask()
                out[key] = err.value.message
        return out

    out = anyio.run(main)
    assert out["prompt"] == "Unknown prompt: nope"
    assert out["relative"].startswith("UserInputError: ") and "absolute" in out["relative"], out["relative"]
    assert out["unknown"] == "Unknown resource: memory://nope"
    assert "Traceback" not in capfd.readouterr().err
