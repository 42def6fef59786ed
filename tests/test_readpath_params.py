"""The read path declared once: every adapter's parameters come from the request models.

For each operation, the CLI command's arguments/options and the MCP tool's input schema are
compared with the model's fields and JSON schema; a probe model shows that a bound changed in the
model is what every adapter enforces; and the adapters' sources hold no bound of their own.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
import typer
from pydantic import Field
from typer.main import get_command
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.errors import UserInputError
from dsh_memory.readpath import OPERATIONS
from dsh_memory.readpath._common import validate
from dsh_memory.readpath.models import _Request
from dsh_memory.readpath.params import fields
from dsh_memory.serve.mcp_server import TOOL_PREFIX, build_server, make_tool
from dsh_memory.settings import MemorySettings

REPO = Path(__file__).resolve().parents[1]
CLI_ONLY = {"as_json", "inject", "from_hook"}  # --json everywhere, summary --inject --from-hook
NOT_IN_CLI = {"delete-file"}  # the settings page's vault: RPC only
NOT_IN_MCP = {"delete-file"}


def _schema_without_titles(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("title", "description")}


@pytest.fixture(scope="module")
def mcp_tools(tmp_path_factory):
    root = tmp_path_factory.mktemp("mem")
    server = build_server(MemorySettings.from_env(env={"DSH_MEMORY_ROOT": str(root)}))
    return {t.name: t for t in anyio.run(server.list_tools)}


def test_every_parameter_is_described():
    for op, (model, _) in OPERATIONS.items():
        for p in fields(model):
            assert p.description, f"{op}.{p.name} has no description (it is the help text everywhere)"


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op not in NOT_IN_CLI])
def test_cli_command_options_are_the_model_fields(op):
    model, _ = OPERATIONS[op]
    cmd = get_command(app).commands[op]
    by_name = {p.name: p for p in cmd.params}
    assert set(by_name) - CLI_ONLY == {p.name for p in fields(model)}
    for p in fields(model):
        param = by_name[p.name]
        assert param.help == p.description
        assert param.required == p.required
        if not p.required:
            assert param.default == p.default
        if param.param_type_name == "option":
            assert param.opts == [p.option]  # one name: start_line → --start-line
        assert (param.min, param.max) == (p.ge, p.le), f"{op}.{p.name}: bounds not carried to the CLI"


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op not in NOT_IN_MCP])
def test_mcp_input_schema_is_the_model_json_schema(op, mcp_tools):
    model, _ = OPERATIONS[op]
    schema = mcp_tools[TOOL_PREFIX + op].input_schema
    # names, types, defaults, bounds, enums, descriptions, required, additionalProperties: false
    assert _schema_without_titles(schema) == _schema_without_titles(model.model_json_schema())


def test_the_same_operations_over_every_adapter(mcp_tools):
    from dsh_memory.serve.http_app import RPC_METHODS

    assert set(RPC_METHODS) == {"get-state", *OPERATIONS}
    assert set(mcp_tools) == {TOOL_PREFIX + op for op in OPERATIONS if op not in NOT_IN_MCP}
    assert {op for op in OPERATIONS if op not in NOT_IN_CLI} <= set(get_command(app).commands)


class Probe(_Request):
    """Stands for any request model: change a bound here and every adapter follows."""

    count: int = Field(7, ge=2, le=9, description="How many")
    kind: Literal["a", "b"] = Field("a", description="Which kind")
    label: str | None = Field(None, max_length=5, description="A label")
    name: str = Field(description="A required name")


def test_a_bound_declared_in_the_model_is_what_every_adapter_enforces(monkeypatch):
    from dsh_memory.cli import readpath as cli_readpath

    monkeypatch.setitem(OPERATIONS, "probe", (Probe, None))
    seen = []
    probe_app = typer.Typer()

    @cli_readpath.command(probe_app, "probe", arguments=["name"])
    def probe_cmd(as_json: bool, **params: Any) -> None:
        seen.append(validate(Probe, **params).model_dump())

    runner = CliRunner()
    assert runner.invoke(probe_app, ["x"]).exit_code == 0
    assert seen[-1] == {"count": 7, "kind": "a", "label": None, "name": "x"}
    assert runner.invoke(probe_app, ["x", "--count", "9", "--kind", "b"]).exit_code == 0
    assert seen[-1]["count"] == 9 and seen[-1]["kind"] == "b"
    assert runner.invoke(probe_app, ["x", "--count", "10"]).exit_code == 2  # le=9, from the model
    assert runner.invoke(probe_app, ["x", "--count", "1"]).exit_code == 2  # ge=2
    assert "[2<=x<=9]" in runner.invoke(probe_app, ["--help"], terminal_width=100).output

    tool = make_tool(lambda **kw: kw, "probe", Probe, "probe", dict, True)
    props = tool.parameters["properties"]
    assert (props["count"]["minimum"], props["count"]["maximum"], props["count"]["default"]) == (2, 9, 7)
    assert props["kind"]["enum"] == ["a", "b"] and props["label"]["anyOf"][0]["maxLength"] == 5
    assert tool.parameters["required"] == ["name"] and tool.parameters["additionalProperties"] is False
    # … and the tool hands its arguments on as given: the model checks them once, in the core
    # (`readpath.dispatch`, one line; test_mcp_server has the server's answers)
    for given in ({"name": "x"}, {"name": "x", "count": 10}, {"name": "x", "old": 1}):
        assert tool.fn_metadata.validate_arguments(given) == given

    with pytest.raises(UserInputError, match="count"):  # the RPC and the core validate with the model
        validate(Probe, name="x", count=10)


ADAPTERS = ["dsh_memory/cli/readpath.py", "dsh_memory/serve/mcp_server.py", "dsh_memory/serve/http_app.py"]
BOUND_KEYWORDS = {"ge", "gt", "le", "lt", "min", "max", "min_length", "max_length", "default"}


@pytest.mark.parametrize("path", ADAPTERS)
def test_adapters_declare_no_bound_or_default_of_their_own(path):
    """No `Field(...)`, no `le=5000` / `min=1` / `max_length=20_000` in an adapter."""
    tree = ast.parse((REPO / path).read_text())
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "Field":
                offenders.append(f"line {node.lineno}: Field(...)")
            for kw in node.keywords:
                if kw.arg in BOUND_KEYWORDS and isinstance(kw.value, ast.Constant) and type(kw.value.value) is int:
                    offenders.append(f"line {node.lineno}: {kw.arg}={kw.value.value}")
    assert offenders == []


def test_the_parameter_table_of_docs_agents_matches_the_models():
    spec = importlib.util.spec_from_file_location("readpath_reference", REPO / "tools" / "readpath_reference.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    page = (REPO / "docs" / "agents.md").read_text()
    assert tool.render(page) == page, (
        "docs/agents.md parameter table is stale: run `python tools/readpath_reference.py`"
    )
    for name in ("start_line", "next_start_line", "context_lines", "`path`"):
        assert name in page
