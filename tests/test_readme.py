"""Docs that cannot drift: the README's CLI reference equals what `--help` prints today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "tools" / "cli_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_cli_reference_matches_help():
    tool = _tool()
    readme = (REPO / "README.md").read_text()
    assert tool.render(readme) == readme, "README CLI reference is stale: run `python tools/cli_reference.py`"


def test_every_command_is_documented():
    tool = _tool()
    readme = (REPO / "README.md").read_text()
    for name in tool.commands():
        assert f"#### `dsh-memory {name}`" in readme
