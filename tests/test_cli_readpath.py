"""`dsh-memory summary/list/read/search/add` through typer's CliRunner on a real memory root."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.storage.store import MemoryStore


@pytest.fixture()
def root(tmp_path):
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\nUse uv, not pip.\nRun pytest -x before pushing.\n")
    (s.root / "memory_summary.md").write_text("v1\n- python tooling: uv, pytest\n")
    (s.rollout_dir / "uv-setup.md").write_text("# uv setup\nuv sync installs the lockfile.\n")
    return s.root


@pytest.fixture()
def cli(root):
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, list(args), env={"DSH_MEMORY_ROOT": str(root)})

    return invoke


def test_summary_plain_inject_and_json(cli):
    r = cli("summary")
    assert r.exit_code == 0 and r.stdout.strip() == "v1\n- python tooling: uv, pytest"
    inj = cli("summary", "--inject")
    assert inj.exit_code == 0
    assert "Long-term memory" in inj.stdout and "- python tooling: uv, pytest" in inj.stdout
    data = json.loads(cli("summary", "--json").stdout)
    assert data["empty"] is False and data["injection"] == inj.stdout


def test_summary_inject_on_empty_memory_prints_nothing(tmp_path):
    r = CliRunner().invoke(app, ["summary", "--inject"], env={"DSH_MEMORY_ROOT": str(tmp_path / "empty")})
    assert r.exit_code == 0 and r.stdout == ""


def test_list_on_a_memory_nothing_has_written_yet_is_empty(tmp_path):
    """A fresh install's `dsh-memory list` said "error: no such file or directory in memory: ."
    (exit 3): the memory root is not made before the first write. It is an empty listing."""
    env = {"DSH_MEMORY_ROOT": str(tmp_path / "fresh")}
    r = CliRunner().invoke(app, ["list", "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["entries"] == []
    assert CliRunner().invoke(app, ["list", "MEMORY.md"], env=env).exit_code == 3  # a path in it: not found
    assert not (tmp_path / "fresh").exists()


def test_list_and_read(cli):
    r = cli("list", "--json")
    assert [e["path"] for e in json.loads(r.stdout)["entries"]] == [
        "MEMORY.md",
        "extensions",
        "memory_summary.md",
        "rollout_summaries",
        "skills",
    ]
    r = cli("read", "MEMORY.md", "--start-line", "2", "--max-lines", "1")
    assert r.exit_code == 0 and r.stdout.split() == ["2", "Use", "uv,", "not", "pip."]
    assert "more: --start-line 3" in r.stderr
    data = json.loads(cli("read", "MEMORY.md", "--start-line", "2", "--max-lines", "1", "--json").stdout)
    assert (data["start_line"], data["end_line"], data["next_start_line"]) == (2, 2, 3)
    assert cli("read", "MEMORY.md", "--offset", "1").exit_code == 2  # the old name is gone
    data = json.loads(cli("read", "MEMORY.md", "--json").stdout)
    assert (data["start_line"], data["end_line"], data["truncated"]) == (1, 3, False)


def test_search_prints_citable_ranges(cli):
    r = cli("search", "UV", "pytest")
    assert r.exit_code == 0
    heads = [ln for ln in r.stdout.splitlines() if not ln.startswith((" ", ">"))]
    assert heads == [  # a memory root from before scopes: every hit global
        "MEMORY.md:2-2  [global]",
        "MEMORY.md:3-3  [global]",
        "memory_summary.md:2-2  [global]",
        "rollout_summaries/uv-setup.md:1-1  [global]",
        "rollout_summaries/uv-setup.md:2-2  [global]",
    ]
    data = json.loads(cli("search", "lockfile installs", "--mode", "ranked", "--json").stdout)
    assert data["matches"][0]["path"] == "rollout_summaries/uv-setup.md"
    r = cli(
        "search",
        "uv",
        "lockfile",
        "--mode",
        "all_within_lines",
        "--within-lines",
        "2",
        "--path",
        "rollout_summaries",
        "--context-lines",
        "1",
    )
    assert r.stdout.splitlines()[0] == "rollout_summaries/uv-setup.md:2-2  [global]"
    assert r.stdout.splitlines()[1:] == ["      1  # uv setup", ">     2  uv sync installs the lockfile."]


def test_text_output_shows_a_memory_files_escape_sequences_never_sends_them(cli, root):
    """Memory text comes from session logs: `summary` (--inject too), `read`, `search` and `list`
    printed an OSC title sequence, a bell or an 8-bit CSI as they were, to the terminal or the
    agent's context. Text output shows them (`\\x1b`), lines and tabs stay; --json escapes them."""
    evil = "- uv \x1b]0;pwned\x07 title \x1b[2J\x9b31m red\x08\tend"
    (root / "memory_summary.md").write_text(f"v1\r\n{evil}\n")
    (root / "MEMORY.md").write_text(f"# Handbook\n{evil}\n")
    (root / "extensions" / "ad_hoc" / "notes" / "a\x1b]0;x\x07.md").write_text("uv\n")
    for args in (
        ["summary"],
        ["summary", "--inject"],
        ["read", "MEMORY.md"],
        ["search", "uv", "--context-lines", "1"],
        ["list", "extensions/ad_hoc/notes"],
    ):
        r = cli(*args)
        assert r.exit_code == 0 and r.stdout, (args, r.output)
        assert not any(c < " " and c not in "\t\n" or "\x7f" <= c <= "\x9f" for c in r.stdout), (args, r.stdout)
        assert "\\x1b]0;" in r.stdout, (args, r.stdout)
    assert "\\x1b]0;pwned\\x07 title \\x1b[2J\\x9b31m red\\x08\tend" in cli("summary").stdout
    assert cli("summary").stdout.startswith("v1\n- uv")  # a CRLF line end is a line end
    assert json.loads(cli("read", "MEMORY.md", "--json").stdout)["content"] == f"# Handbook\n{evil}"


def test_ranked_search_rebuilds_a_search_index_that_is_not_a_database(cli, root):
    """`.state/search_index.sqlite3` damaged (not an SQLite file) was a DatabaseError traceback on
    every ranked search; the index is derived from the memory files, so it is built again."""
    index = root / ".state" / "search_index.sqlite3"
    index.parent.mkdir(exist_ok=True)
    index.write_bytes(b"not an SQLite database\n" * 300)
    r = cli("search", "lockfile installs", "--mode", "ranked", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["matches"][0]["path"] == "rollout_summaries/uv-setup.md"
    assert index.read_bytes().startswith(b"SQLite format 3")


def test_search_says_which_files_it_could_not_search(cli, root):
    """`search WORD --path MEMORY.md` on a MEMORY.md over 4 MiB that holds the word said only
    "no matches"; the skipped file is named, in one line (--json: `skipped`)."""
    (root / "MEMORY.md").write_text("- uv needle\n" + "filler line\n" * 400_000)
    for mode in ("any", "ranked"):
        r = cli("search", "needle", "--path", "MEMORY.md", "--mode", mode)
        assert r.exit_code == 0 and r.stdout == "", r.output
        assert r.stderr == "no matches\nskipped 1 file: MEMORY.md (over 4 MiB)\n", mode
    data = json.loads(cli("search", "uv", "--json").stdout)
    assert data["matches"] and data["skipped"] == "skipped 1 file: MEMORY.md (over 4 MiB)"


def test_add_then_search_finds_the_note(cli):
    r = cli("add", "The staging DB is called blue-heron.", "--title", "staging db", "--json")
    path = json.loads(r.stdout)["path"]
    assert path.startswith("extensions/ad_hoc/notes/") and "staging-db" in path
    found = json.loads(cli("search", "blue heron", "--normalized", "--json").stdout)
    assert [m["path"] for m in found["matches"]] == [path]


def test_add_is_for_the_current_directorys_project_unless_global(cli, tmp_path, monkeypatch):
    repo = tmp_path / "app"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    here = json.loads(cli("add", "Run `make ci` before pushing.", "--json").stdout)
    assert here["scope"] == f"project {repo}"
    there = json.loads(cli("add", "Use pnpm.", "--cwd", str(tmp_path / "shop"), "--json").stdout)
    assert there["scope"] == f"project {tmp_path / 'shop'}"
    everywhere = cli("add", "Answer in French.", "--scope", "global")
    assert everywhere.exit_code == 0 and everywhere.stdout.rstrip().endswith("  [global]")
    bad = cli("add", "x", "--cwd", "/src/victim\n# Scope: global")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


@pytest.mark.parametrize("where", ["/", "home"])
def test_add_run_in_the_root_or_home_is_refused_without_cwd(cli, root, tmp_path, monkeypatch, where):
    """`dsh-memory add` run in / (or in the home directory, no repository) filed the note under
    project / (or ~): seen by no session started in a project. As for a stdio server started
    there (docs/agents.md), the directory's default is refused in one line; --cwd and --scope
    global still say where it goes."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    here = "/" if where == "/" else str(home)
    monkeypatch.chdir(here)
    r = cli("add", "Deploy with make ship.")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert r.stderr.startswith(f"error: {here} is no project") and "--cwd" in r.stderr and "--scope global" in r.stderr
    assert MemoryStore(root).list_notes() == []
    assert json.loads(cli("add", "x", "--cwd", here, "--json").stdout)["scope"] == f"project {here}"
    assert json.loads(cli("add", "x", "--scope", "global", "--json").stdout)["scope"] == "global"
    dotfiles = tmp_path / "dotfiles"  # a home directory that is a repository is that project
    (dotfiles / ".git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(dotfiles))
    monkeypatch.chdir(dotfiles)
    assert json.loads(cli("add", "x", "--json").stdout)["scope"] == f"project {dotfiles}"


@pytest.mark.parametrize(
    "args,code",
    [
        (["read", "../outside"], 2),
        (["read", ".state/state.sqlite3"], 2),
        (["read", "missing.md"], 3),
        (["search", "x", "--mode", "fuzzy"], 2),
        (["list", "/etc"], 2),
        (["add", "   "], 2),
    ],
)
def test_errors_map_to_exit_codes_with_a_message(cli, args, code):
    r = cli(*args)
    assert r.exit_code == code
    assert r.stderr.startswith("error: ")


def test_read_path_commands_do_not_import_prefect(root):
    code = (
        "import sys\n"
        "from dsh_memory.cli import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(app, ['search', 'uv', '--mode', 'ranked'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"DSH_MEMORY_ROOT": str(root), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
