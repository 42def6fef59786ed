"""The CLI behaves like a finished tool: `--version`; one-line errors with documented exit codes,
the same with `--json` (where the error is JSON on stdout); refusals before anything starts;
plain progress lines when not on a terminal; a demo that says how to look at what it made; a
`sessions` table that knows what was processed and fits 80 columns.

Real CLI throughout: `python -m dsh_memory.cli` in a subprocess, or typer's CliRunner for the
quick read-path commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_memory import __version__
from dsh_memory.cli import app
from dsh_memory.errors import DshMemoryError, ServiceUnavailableError
from dsh_memory.serve.prefect_server import free_port
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.flow_helpers import copy_tree_aged, memory_reply

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "dsh_memory" / "samples"
WEATHER = "5a1d3c7e-0b2f-4e6a-9c8d-1f2e3a4b5c6d"  # a bundled DSH sample session
SAMPLE_IDS = {
    WEATHER,
    "7c2e4a6b-8d0f-4b1c-a3e5-9f7d1b3c5e7a",
    "9e4f6a8c-1b3d-4f5a-8c7e-2d4f6a8b0c1e",
    "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b",
    "3c5e7a9b-1d2f-4a6c-8e0b-2d4f6a8c0e1b",
}
PROGRESS = "dsh-memory: "  # prefix of the plain progress lines on stderr


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without anything that points dsh-memory or Prefect elsewhere."""
    drop = ("DSH_", "CODEX_", "CLAUDE_", "DEEPSEEK_", "PREFECT_", "COLUMNS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(tmp_path / "home"),
        DSH_HOME=str(tmp_path / "no-dsh"),
        CODEX_HOME=str(tmp_path / "no-codex"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "no-claude"),
        DSH_MEMORY_ROOT=str(tmp_path / "mem"),
        PREFECT_HOME=str(tmp_path / "prefect-client"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    env.update(extra)
    return env


def cli(args: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    """`python -m dsh_memory.cli ARGS` with pipes (so: not a terminal)."""
    return run_argv([sys.executable, "-m", "dsh_memory.cli", *args], env, timeout, label=" ".join(args))


def run_argv(argv: list[str], env: dict[str, str], timeout: float, label: str) -> subprocess.CompletedProcess:
    """Run a command with pipes; on timeout its whole process group is killed (a server it may
    have started included) and the test fails."""
    proc = subprocess.Popen(
        argv,
        cwd=str(REPO),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"dsh-memory {label} did not finish in {timeout}s\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# ---- --version ------------------------------------------------------------------------------


def test_version_prints_the_package_version(tmp_path):
    r = cli(["--version"], clean_env(tmp_path), timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"dsh-memory {__version__}\n", "")


def a_note_to_consolidate(env: dict[str, str]) -> None:
    """Work for `consolidate` (with its gate closed it answers without Prefect: test_noop.py)."""
    notes = Path(env["DSH_MEMORY_ROOT"]) / "extensions" / "ad_hoc" / "notes"
    notes.mkdir(parents=True)
    (notes / "uv.md").write_text("Use uv, not pip.\n")


# ---- one line and a documented exit code for operational errors ----------------------------


@pytest.mark.parametrize(
    "args",
    [["extract", "--all"], ["run"], ["consolidate"], ["consolidate", "--json"], ["run", "--json"]],
    ids=lambda a: " ".join(a),
)
def test_unreachable_prefect_api_is_one_line_and_its_own_exit_code(tmp_path, args):
    url = f"http://127.0.0.1:{free_port()}/api"  # nothing listens there
    if args == ["run"]:  # a proxy's basic auth in the address: its password is said nowhere
        url = url.replace("http://", "http://ops:s3cr3t-pw@")
    # Sessions to extract: with nothing to do, extract and run never reach for Prefect (test_noop.py).
    dsh = copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")
    env = clean_env(tmp_path, PREFECT_API_URL=url, DSH_HOME=str(dsh))
    a_note_to_consolidate(env)
    r = cli(args, env)
    assert r.returncode == ServiceUnavailableError.exit_code == 6, r.stderr
    assert "Traceback" not in r.stderr
    if "--json" in args:
        error = json.loads(r.stdout)["error"]  # stdout is exactly one JSON document
        assert set(json.loads(r.stdout)) == {"error"} and error["code"] == "unavailable"
        message = error["message"]
    else:
        assert r.stdout == ""
        errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, r.stderr
        message = errors[0]
    shown = url.replace("ops:s3cr3t-pw@", "")
    assert shown in message and "prefect server start" in message and "unset PREFECT_API_URL" in message
    assert "s3cr3t" not in r.stdout + r.stderr


@pytest.mark.parametrize("args", [["extract", "--all"], ["consolidate", "--json"], ["demo"]], ids=lambda a: " ".join(a))
def test_a_prefect_home_that_cannot_be_made_is_one_line_at_once(tmp_path, args):
    """No PREFECT_API_URL and HOME pointing nowhere: Prefect cannot make its home, so its temporary
    server never starts. Said in one line with exit 6 at once, not after Prefect's whole startup
    timeout (180 s) and a traceback."""
    dsh = copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")
    env = clean_env(tmp_path, HOME=str(tmp_path / "gone" / "home"), DSH_HOME=str(dsh))
    del env["PREFECT_HOME"]
    a_note_to_consolidate(env)
    if args == ["demo"]:
        args = ["demo", "--workdir", str(tmp_path / "demo")]
    r = cli(args, env, timeout=150)
    assert r.returncode == ServiceUnavailableError.exit_code, r.stderr
    assert "Traceback" not in r.stderr and "Failed to create the Prefect home" not in r.stderr
    home = tmp_path / "gone" / "home" / ".prefect"
    message = json.loads(r.stdout)["error"]["message"] if "--json" in args else r.stderr.splitlines()[-1]
    assert str(home) in message and "PREFECT_HOME" in message, r.stderr
    assert not (tmp_path / "gone").exists()


def test_the_temporary_prefect_servers_own_output_goes_to_its_log_not_the_terminal(tmp_path, new_prefect_home):
    """Prefect's temporary server wrote its logs to the command's stderr: a successful `extract
    --all` of 60 sessions ended in four tracebacks of its shutdown ("Error flushing events",
    CancelledError). Its output goes to `temporary-server.log` in Prefect's home; made
    deterministic here with the server's debug logging, which names its loggers. Prefect's home
    starts with a migrated database (the server's output is the point here, not a first migration)."""
    new_prefect_home(tmp_path / "prefect-client")  # clean_env's PREFECT_HOME
    with FakeOpenAIServer(handler=_fake_model) as srv:
        env = clean_env(
            tmp_path,
            DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")),
            DSH_MEMORY_BASE_URL=srv.base_url,
            DSH_MEMORY_API_KEY="test-key",
            DSH_MEMORY_MODEL="fake-model",
            PREFECT_SERVER_LOGGING_LEVEL="DEBUG",
        )
        r = cli(["extract", "--all"], env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "prefect.server" not in r.stderr and "uvicorn" not in r.stderr, r.stderr[-2000:]
    log = tmp_path / "prefect-client" / "temporary-server.log"
    assert "prefect.server" in log.read_text(errors="replace")


@pytest.mark.parametrize("host", ["10.0.0.1", "0.0.0.0"])
@pytest.mark.parametrize("attach", [False, True], ids=["no-api-url", "api-url"])
def test_serve_refuses_a_non_loopback_host_before_starting_anything(tmp_path, host, attach):
    prefect_home = tmp_path / "serve-prefect"
    extra = {"DSH_MEMORY_PREFECT_HOME": str(prefect_home)}
    if attach:
        extra["PREFECT_API_URL"] = f"http://127.0.0.1:{free_port()}/api"
    r = cli(["serve", "--host", host, "--no-boot-catch-up"], clean_env(tmp_path, **extra), timeout=90)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith(f"error: refusing to bind {host}: not loopback"), r.stderr
    assert "Prefect" not in r.stderr and not prefect_home.exists()  # no server started or attached


@pytest.mark.parametrize("option,value", [("--port", "-1"), ("--port", "65536"), ("--prefect-port", "0")])
def test_serve_refuses_a_port_out_of_range_before_starting_anything(tmp_path, option, value):
    """`serve --port 99999` was an OverflowError traceback (exit 1); 0 would be a random port,
    which `serve` never takes (its state file and `notify` need the port it names)."""
    prefect_home = tmp_path / "serve-prefect"
    env = clean_env(tmp_path, DSH_MEMORY_PREFECT_HOME=str(prefect_home))
    r = cli(["serve", option, value, "--no-boot-catch-up"], env, timeout=90)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"Invalid value for '{option}'" in r.stderr and not prefect_home.exists()


@pytest.mark.parametrize("variable,value", [("DSH_MEMORY_CONCURRENCY", "abc"), ("DSH_MEMORY_TIMEOUT_SECONDS", "0")])
def test_serve_refuses_a_bad_environment_setting_before_starting_anything(tmp_path, variable, value):
    """`serve` started its Prefect server (≈ 15 s, a database in its home) before it read the
    settings, then failed on a bad environment value; it is one line and exit 4 before anything
    starts (a saved block is not consulted for it: the variable itself is wrong)."""
    prefect_home = tmp_path / "serve-prefect"
    env = clean_env(tmp_path, DSH_MEMORY_PREFECT_HOME=str(prefect_home), **{variable: value})
    r = cli(["serve", "--port", str(free_port()), "--no-boot-catch-up"], env, timeout=90)
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: invalid dsh-memory ") and f"setting: {variable}: " in r.stderr, r.stderr
    assert "Prefect" not in r.stderr and not prefect_home.exists()


def test_demo_with_a_file_as_its_workdir_is_one_line(tmp_path):
    """`demo --workdir FILE` was a FileExistsError traceback (exit 1)."""
    workdir = tmp_path / "not-a-folder"
    workdir.write_text("x\n")
    r = cli(["demo", "--workdir", str(workdir)], clean_env(tmp_path), timeout=90)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: --workdir ") and r.stderr.count("\n") == 1, r.stderr
    assert str(workdir) in r.stderr and workdir.read_text() == "x\n"


def test_mcp_with_stdin_closed_is_one_line(tmp_path):
    """`dsh-memory mcp <&-` (no client on stdin) was an AttributeError traceback deep in the MCP
    library; now one line saying what the command needs, exit 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "mcp"],
        cwd=str(REPO),
        env=clean_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        preexec_fn=lambda: os.close(0),  # stdin closed, as `<&-` does
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ") and "stdin" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["status"], ["extract", "--all", "--dry-run"]], ids=" ".join)
def test_output_with_stdout_closed_is_no_traceback(tmp_path, args):
    """`dsh-memory status >&-`: Python's sys.stdout is None; the table printer asked it isatty()
    and ended in an AttributeError traceback (exit 1). Nothing to print to is no error."""
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", *args],
        cwd=str(REPO),
        env=clean_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),  # stdout closed, as `>&-` does
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


# ---- names over 255 bytes: a user-input error, not an OSError ------------------------------

A256 = "a" * 256
E256 = "é" * 128  # 128 characters, 256 bytes in UTF-8


@pytest.fixture()
def memory(tmp_path) -> Path:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\nUse uv, not pip.\n")
    return s.root


def invoke(args: list[str], env: dict[str, str | None]):
    return CliRunner().invoke(app, args, env=env)


@pytest.mark.parametrize(
    "args",
    [
        ["read", A256],
        ["read", E256],
        ["read", f"rollout_summaries/{A256}.md"],
        ["read", f"x/{E256}/y.md"],
        ["list", A256],
        ["search", "uv", "--path", E256],
        ["read", "/".join(["abc"] * 1400)],  # every part short, the whole path over PATH_MAX
    ],
    ids=["read-ascii", "read-utf8", "read-file-part", "read-middle-part", "list", "search-path", "read-long-path"],
)
def test_names_over_255_bytes_are_user_input_errors(memory, args):
    r = invoke(args, {"DSH_MEMORY_ROOT": str(memory)})
    assert not isinstance(r.exception, OSError)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and "bytes" in r.stderr and r.stderr.count("\n") == 1
    js = invoke([*args, "--json"], {"DSH_MEMORY_ROOT": str(memory)})
    assert js.exit_code == 2 and json.loads(js.stdout)["error"]["code"] == "user_input"


def test_a_255_byte_name_is_still_looked_up(memory):
    r = invoke(["read", "é" * 127 + "a"], {"DSH_MEMORY_ROOT": str(memory)})  # 255 bytes: allowed
    assert r.exit_code == 3 and "no such file" in r.stderr


def test_add_with_a_long_non_ascii_title_writes_a_short_file_name(memory):
    r = invoke(["add", "Releases need a tag.", "--title", "日" * 120, "--json"], {"DSH_MEMORY_ROOT": str(memory)})
    assert r.exit_code == 0, r.output
    path = json.loads(r.stdout)["path"]
    assert len(Path(path).name.encode()) <= 255 and (memory / path).is_file()


# ---- exit codes: one table, the same with and without --json -------------------------------


@pytest.mark.parametrize(
    "args,extra,exit_code,code",
    [
        (["read", "missing.md"], {}, 3, "not_found"),
        (["read", "../outside"], {}, 2, "path_guard"),
        (["search", "x", "--mode", "fuzzy"], {}, 2, "user_input"),
        (["summary"], {"DSH_MEMORY_CONCURRENCY": "many"}, 4, "config"),
        (["forget", "no-such-session"], {}, 3, "not_found"),
        (["extract"], {}, 2, "user_input"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_errors_exit_the_same_with_and_without_json(memory, args, extra, exit_code, code):
    env = {"DSH_MEMORY_ROOT": str(memory), "DSH_MEMORY_IGNORE_BLOCKS": "1", **extra}
    text = invoke(args, env)
    assert text.exit_code == exit_code, text.output
    assert text.stdout == "" and text.stderr.startswith("error: ") and text.stderr.count("\n") == 1
    js = invoke([*args, "--json"], env)
    assert js.exit_code == exit_code, js.output
    data = json.loads(js.stdout)  # nothing but the error on stdout
    assert list(data) == ["error"] and data["error"]["code"] == code
    assert data["error"]["message"] and data["error"]["message"] in text.stderr


def damage_state_database(memory: Path, damage: str) -> Path:
    """The memory's state database, damaged: not one, a directory, every page after the first
    (header and schema) garbage, or tables a hand edit dropped."""
    db = memory / ".state" / "state.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    if damage == "a-directory":
        db.mkdir()
    elif damage == "not-a-database":
        db.write_bytes(b"this is not an SQLite database\n" * 200)
    else:
        with StateStore(memory) as st:
            for i in range(200):
                st.finish(f"session-{i:03}-" + "x" * 200, "done", 3, datetime.now(UTC))
            st.record_usage("rollout_summaries/uv.md", datetime.now(UTC))
            for sql in ("DROP TABLE claims", "DROP TABLE usage") if damage == "tables-dropped" else ("VACUUM",):
                st._conn().execute(sql)
            st._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if damage == "pages-past-the-first":
            with open(db, "r+b") as f:
                f.seek(4096)
                f.write(bytes(range(256)) * (db.stat().st_size // 256))
    return db


@pytest.mark.parametrize("damage", ["not-a-database", "a-directory", "pages-past-the-first", "tables-dropped"])
@pytest.mark.parametrize(
    "args", [["status"], ["sessions"], ["search", "uv"], ["extract", "--dry-run", "--all"]], ids=" ".join
)
def test_a_state_database_that_cannot_be_opened_is_one_line(memory, args, damage):
    """`.state/state.sqlite3` that is not a database, or cannot be opened (a directory there, a
    read-only memory root), or is damaged where only a query finds it (pages past the first,
    tables dropped): one `error:` line naming the file and exit 1, the same with --json; was a
    sqlite3 traceback (the last two: at the first query that reached the damage)."""
    (memory / "rollout_summaries" / "uv.md").write_text("Use uv.\n")  # a hit counts as a use
    db = damage_state_database(memory, damage)
    env = {"DSH_MEMORY_ROOT": str(memory), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    text = invoke(args, env)
    assert not isinstance(text.exception, sqlite3.Error), text.exception
    assert text.exit_code == 1, text.output
    assert text.stderr.startswith("error: ") and text.stderr.count("\n") == 1
    assert str(db) in text.stderr and "DSH_MEMORY_ROOT" in text.stderr, text.stderr
    js = invoke([*args, "--json"], env)
    assert js.exit_code == 1 and json.loads(js.stdout)["error"]["code"] == "error", js.output


@pytest.mark.parametrize(
    "args", [["status"], ["summary"], ["list"], ["read", ""], ["search", "uv"], ["add", "a note"]], ids=" ".join
)
def test_a_memory_root_that_is_a_file_is_a_configuration_error(tmp_path, args):
    """DSH_MEMORY_ROOT naming a file: exit 4 and one line naming the variable, for every command;
    was `list`/`read ''` showing the file as the memory, `summary` "memory is empty", `status` and
    `add` "a component of … is not a directory" as bad input (exit 2)."""
    root = tmp_path / "memories"
    root.write_text("Use uv, not pip.\n")
    text = invoke(args, {"DSH_MEMORY_ROOT": str(root), "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert text.exit_code == 4, text.output
    assert text.stdout == "" and text.stderr.count("\n") == 1
    assert text.stderr.startswith("error: invalid dsh-memory setting: DSH_MEMORY_ROOT: "), text.stderr
    assert "not a directory" in text.stderr and str(root) in text.stderr
    assert root.read_text() == "Use uv, not pip.\n"


@pytest.mark.parametrize("args", [["status"], ["search", "uv"], ["add", "a note"]], ids=" ".join)
def test_a_memory_root_inside_a_file_is_a_configuration_error(tmp_path, args):
    """DSH_MEMORY_ROOT under a file (a typo, a moved folder): the same one line naming the variable
    and the file, exit 4; was `status`/`add` "a component of 'raw_memories.md' is not a directory"
    (exit 2) and `search` "no matches"."""
    file = tmp_path / "memories"
    file.write_text("Use uv, not pip.\n")
    text = invoke(args, {"DSH_MEMORY_ROOT": str(file / "mine"), "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert text.exit_code == 4, text.output
    assert text.stdout == "" and text.stderr.count("\n") == 1
    assert text.stderr.startswith("error: invalid dsh-memory setting: DSH_MEMORY_ROOT: "), text.stderr
    assert f"{file} is not a directory" in text.stderr
    assert file.read_text() == "Use uv, not pip.\n"


@pytest.mark.parametrize("args", [["status"], ["summary"], ["add", "a note"]], ids=" ".join)
def test_a_relative_memory_root_is_a_configuration_error(tmp_path, monkeypatch, args):
    """DSH_MEMORY_ROOT=memories was taken from the folder each command ran in: a hook runs in the
    session's project, so every project grew its own `memories/`. Refused like a saved block's
    relative path (exit 4, naming the variable); `~` still means the home folder."""
    monkeypatch.chdir(tmp_path)
    text = invoke(args, {"DSH_MEMORY_ROOT": "memories", "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert text.exit_code == 4, text.output
    assert text.stderr.startswith("error: invalid dsh-memory setting: DSH_MEMORY_ROOT: ") and "absolute" in text.stderr
    assert not (tmp_path / "memories").exists()
    # the default under a relative DSH_HOME: the message names it too, and shows the path as a path
    text = invoke(args, {"DSH_HOME": "dsh", "DSH_MEMORY_ROOT": None, "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert text.exit_code == 4 and "DSH_HOME" in text.stderr and "(got 'dsh/memories')" in text.stderr, text.stderr
    home = invoke(["status"], {"DSH_MEMORY_ROOT": "~/mem", "HOME": str(tmp_path), "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert home.exit_code == 0, home.output


@pytest.mark.parametrize("args", [["status"], ["summary", "--json"]], ids=" ".join)
def test_a_memory_root_that_is_no_utf8_path_is_a_configuration_error(tmp_path, args):
    """A DSH_MEMORY_ROOT holding a byte that is no UTF-8 (`/home/m\\xff`) is in what the
    read path answers (the summary's instructions, `get-state`): the memory API and MCP failed
    every such call with a 500. Refused where the settings are read (exit 4), in one line."""
    text = invoke(args, {"DSH_MEMORY_ROOT": f"{tmp_path}/m\udcff", "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert text.exit_code == 4, text.output
    assert "DSH_MEMORY_ROOT" in (text.stderr + text.stdout) and "UTF-8" in (text.stderr + text.stdout)
    assert "Traceback" not in text.output
    assert not any(p.name.startswith("m") for p in tmp_path.iterdir())


@pytest.mark.parametrize("variable", ["DSH_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR"])
def test_a_relative_source_folder_is_a_configuration_error(tmp_path, monkeypatch, variable):
    """CODEX_HOME=.codex was read from the folder each command ran in: a hook runs in the session's
    project, so each project was searched for its own `.codex/sessions` and its sessions were
    never found. Refused like a relative memory root (exit 4, one line naming the variable)."""
    monkeypatch.chdir(tmp_path)
    env = {variable: "agent-home", "DSH_MEMORY_ROOT": str(tmp_path / "mem"), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    for args in (["status"], ["sessions"]):
        text = invoke(args, env)
        assert text.exit_code == 4, text.output
        assert text.stderr.startswith(f"error: invalid dsh-memory setting: {variable}: "), text.stderr
        assert "absolute" in text.stderr and text.stderr.count("\n") == 1
    home = invoke(["status"], {**env, variable: "~/agent-home", "HOME": str(tmp_path)})
    assert home.exit_code == 0, home.output


@pytest.mark.parametrize("url", ["127.0.0.1:4200/api", "ftp://127.0.0.1/api"])
@pytest.mark.parametrize(
    "args", [["status"], ["summary"], ["settings", "show"], ["settings", "save"], ["search", "uv"]], ids=" ".join
)
def test_a_prefect_api_url_that_is_not_http_is_a_configuration_error(memory, args, url):
    """PREFECT_API_URL without http(s):// was an httpx.UnsupportedProtocol traceback from every
    command that reads the settings; it is an invalid setting (exit 4) naming the variable."""
    import prefect.settings  # noqa: F401  (first imported under the bad URL, this process would keep it)

    r = invoke(args, {"DSH_MEMORY_ROOT": str(memory), "PREFECT_API_URL": url})
    assert r.exit_code == 4, r.output
    assert r.stdout == "" and r.stderr.startswith("error: PREFECT_API_URL ") and r.stderr.count("\n") == 1


def _error_classes() -> list[type[DshMemoryError]]:
    import dsh_memory.llm.model_files  # noqa: F401  (ModelChecksumError)
    import dsh_memory.storage.locks  # noqa: F401  (AlreadyRunning)
    import dsh_memory.storage.store  # noqa: F401  (MemoryFileNotFound)

    out, todo = [], [DshMemoryError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def _exit_code_rows() -> dict[str, tuple[str, str]]:
    """docs/cli.md "Exit codes" table: first-column label → (exit code, json code)."""
    text = (REPO / "docs" / "cli.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows[cells[2].strip("`")] = (cells[0], cells[1].strip("`"))
    return rows


def test_readme_exit_code_table_lists_every_error_class():
    rows = _exit_code_rows()
    own = [cls for cls in _error_classes() if cls.__module__ == "dsh_memory.errors"]
    for cls in _error_classes():
        expected = (str(cls.exit_code), cls.code)
        if cls in own or "code" in cls.__dict__ or cls.__base__ is DshMemoryError:
            assert rows.get(cls.__name__) == expected, f"docs/cli.md exit-code row for {cls.__name__}"
        else:  # a refinement elsewhere (MemoryFileNotFound…): documented by its parent's row
            assert expected in rows.values(), f"{cls.__name__} exits {expected}, which no docs/cli.md row says"
    assert rows["ok"] == ("0", "")
    assert rows["interrupted"] == ("130", "interrupted")
    assert rows["usage"][0] == "2"  # typer/click parse errors share UserInputError's exit code
    codes = [cls.code for cls in own]
    assert len(codes) == len(set(codes))  # each class of errors.py has its own stable code


@pytest.mark.parametrize(
    "args",
    [
        ["read", "MEMORY.md"],
        ["search", "uv"],
        ["list", "--json"],
        ["status"],
        ["sessions"],
        ["--help"],
        ["search", "--help"],
    ],
    ids=" ".join,
)
def test_a_reader_that_went_away_is_a_quiet_exit_141(memory, tmp_path, args):
    """`dsh-memory read MEMORY.md | head`: the pipe's reader is gone before the first write (here
    from the start, so the write always fails), the command stops without a word: exit 141,
    nothing on stderr (was: `error: Broken pipe`, exit 1). Output printed inside `run` (read,
    search) and after it (list) alike, and `--help` (printed by typer's own console: exit 1 before)."""
    env = {**clean_env(tmp_path), "DSH_MEMORY_ROOT": str(memory), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader went away
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dsh_memory.cli", *args],
            cwd=str(REPO),
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


# ---- sessions: processed sessions marked, 80 columns ---------------------------------------


def test_sessions_marks_processed_sessions_and_fits_80_columns(tmp_path):
    root = tmp_path / "mem"
    state = StateStore(root)
    state.finish(WEATHER, "done", 23, datetime.now(UTC), slug="weather")
    state.close()
    env = {
        "HOME": str(tmp_path / "home"),
        "DSH_HOME": str(SAMPLES / "dsh"),
        "CODEX_HOME": str(SAMPLES / "codex"),
        "CLAUDE_CONFIG_DIR": str(SAMPLES / "claude"),
        "DSH_MEMORY_ROOT": str(root),
        "DSH_MEMORY_IGNORE_BLOCKS": "1",
        "COLUMNS": "80",
    }
    rows = {r["id"]: r for r in json.loads(invoke(["sessions", "--json"], env).stdout)}
    assert set(rows) == SAMPLE_IDS
    assert rows[WEATHER]["state"] == "done"
    assert {rows[i]["state"] for i in SAMPLE_IDS - {WEATHER}} == {None}
    table = invoke(["sessions"], env)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, table.stdout
    (weather,) = [line for line in lines if WEATHER[:8] in line]
    assert "processed" in weather and "extractable" not in weather
    others = [line for line in lines if any(i[:8] in line for i in SAMPLE_IDS - {WEATHER})]
    assert len(others) == 4 and all("extractable" in line for line in others)
    assert WEATHER not in table.stdout  # short ids, one line per session


# ---- text from outside never drives the terminal --------------------------------------------

# What a terminal would obey: C0 but tab and line feed, DEL, C1 (U+009B is CSI), bidi overrides.
OBEYED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"  # retitle, clear the screen, reverse, CSI


def test_text_from_session_logs_and_file_names_is_shown_escaped_not_obeyed(tmp_path):
    """A session id (a DSH folder name), a cwd, a prompt, a state error, a memory or import file name: each
    printed as `\\x1b`, `\\u202e`, never sent to the terminal as is (it re-titled it, cleared it,
    reversed lines); --json keeps them exact."""
    sid = "5a1d3c7e" + HOSTILE
    project = tmp_path / "dsh" / "sessions" / "--home-demo--"
    project.mkdir(parents=True)
    log = SAMPLES / "dsh" / "sessions" / "--home-demo-src-weather-cli--" / WEATHER / "session.v4.jsonl"
    header, rest = log.read_text().split("\n", 1)
    header = json.dumps({**json.loads(header), "id": sid, "cwd": "/home/demo/" + HOSTILE})
    folder = project / "".join(f"~{ord(c):04x}" if c in HOSTILE else c for c in sid)  # DSH's encoding
    copy_tree_aged(log.parent, folder)
    (folder / "session.v4.jsonl").write_text(header + "\n" + rest.replace("Please fix it.", json.dumps(HOSTILE)[1:-1]))
    broken = copy_tree_aged(log.parent, project / "broken\x1b[2J")  # a raw ESC in the name
    (broken / "session.v4.jsonl").write_text("not json\n")
    memory = MemoryStore(tmp_path / "mem")
    memory.ensure_layout()
    (memory.root / f"a{HOSTILE}.md").write_text(f"line {HOSTILE}\n")
    state = StateStore(memory.root)
    state.fail("s-bad", f"LLMOutputError: the answer held {HOSTILE}", datetime.now(UTC), 60, 3)
    state.close()
    claude = tmp_path / "claude" / "projects" / "-home-demo" / "memory"
    claude.mkdir(parents=True)
    (claude / f"n{HOSTILE}.md").write_text("Use uv.\n")
    env = {
        "HOME": str(tmp_path / "home"),
        "DSH_HOME": str(tmp_path / "dsh"),
        "CODEX_HOME": str(tmp_path / "none"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "DSH_MEMORY_ROOT": str(memory.root),
        "DSH_MEMORY_IGNORE_BLOCKS": "1",
        "COLUMNS": "200",
    }
    commands = [
        ["sessions"],
        ["extract", "--all", "--dry-run"],
        ["render", sid],
        ["render", "broken\x1b[2J"],  # unreadable: the error names its path
        ["status"],
        ["list"],
        ["read", f"a{HOSTILE}.md"],
        ["import", "claude", "--dry-run"],
    ]
    for args in commands:
        r = invoke(args, env)
        assert r.exit_code in (0, 1), (args, r.output)
        assert not OBEYED.findall(r.stdout + r.stderr), (args, r.stdout, r.stderr)
        assert "\\x1b" in r.stdout + r.stderr, (args, r.stdout, r.stderr)
    assert "\\u202e" in invoke(["read", f"a{HOSTILE}.md"], env).stdout
    rows = json.loads(invoke(["sessions", "--json"], env).stdout)
    assert sid in {row["id"] for row in rows} and "/home/demo/" + HOSTILE in {row["cwd"] for row in rows}


def test_a_warning_shows_a_file_name_escaped_not_obeyed(tmp_path):
    """A logged warning names a file from outside (a FIFO in place of a DSH session log): its
    escape sequence went to the terminal as it was (Python's last-resort handler)."""
    folder = tmp_path / "dsh" / "sessions" / "--home-demo--" / "fifo\x1b[2J"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "session.v4.jsonl")
    r = cli(["sessions"], clean_env(tmp_path, DSH_HOME=str(tmp_path / "dsh")))
    assert r.returncode == 0, r.stderr
    assert "fifo\\x1b[2J/session.v4.jsonl: skipped: not a regular file" in r.stderr
    assert not OBEYED.findall(r.stdout + r.stderr), r.stderr


def test_a_warning_during_an_in_process_run_shows_its_text_escaped():
    """In-process runs print other loggers' warnings through Prefect's console handler: escaped."""
    import io
    import logging

    from prefect.logging.handlers import PrefectConsoleHandler

    from dsh_memory.cli._progress import quiet_console

    stream = io.StringIO()
    handler = PrefectConsoleHandler(stream=stream)
    logging.getLogger().addHandler(handler)
    try:
        quiet_console()
        logging.getLogger("dsh_memory.readers").warning("%s: skipped: not a regular file", "fifo\x1b[2J")
    finally:
        logging.getLogger().removeHandler(handler)
    assert "fifo\\x1b[2J: skipped" in stream.getvalue() and not OBEYED.findall(stream.getvalue())


def test_a_name_that_is_no_utf8_is_shown_escaped_not_a_traceback(tmp_path):
    """A session folder whose name holds a byte that is no UTF-8, a cwd holding half an emoji
    (`"\\ud83d"` in the log): on a UTF-8 terminal (Python's stdout: strict) `sessions` died with a
    UnicodeEncodeError traceback, with and without --json. Shown as `\\xff`, `\\ud83d`; --json exact."""
    log = SAMPLES / "dsh" / "sessions" / "--home-demo-src-weather-cli--" / WEATHER / "session.v4.jsonl"
    header, rest = log.read_text().split("\n", 1)
    project = tmp_path / "dsh" / "sessions" / "--home-demo--"
    folder = Path(os.fsdecode(bytes(project) + b"/bad\xff"))
    folder.mkdir(parents=True)
    cwd = header.replace("/home/demo/src/weather-cli", "/home/demo/\\ud83d")
    (folder / "session.v4.jsonl").write_text(cwd + "\n" + rest)
    env = clean_env(tmp_path, DSH_HOME=str(tmp_path / "dsh"), PYTHONIOENCODING="utf-8:strict", COLUMNS="200")
    table = cli(["sessions"], env)
    assert table.returncode == 0, table.stderr
    assert "bad\\xff " in table.stdout and "/home/demo/\\ud83d" in table.stdout
    js = cli(["sessions", "--json"], env)
    assert js.returncode == 0, js.stderr
    assert [(r["id"], r["cwd"]) for r in json.loads(js.stdout)] == [("bad\udcff", "/home/demo/\ud83d")]


def test_json_output_is_exact_and_escapes_what_a_terminal_would_obey(memory):
    """`--json` printed C1 controls (U+009B is CSI) and bidi overrides raw: JSON escapes only
    C0. They are \\u escapes now: the same JSON value, nothing a terminal obeys."""
    (memory / "hostile.md").write_text(f"line {HOSTILE}\n")
    r = invoke(["read", "hostile.md", "--json"], {"DSH_MEMORY_ROOT": str(memory)})
    assert r.exit_code == 0, r.output
    assert not OBEYED.findall(r.stdout), r.stdout
    assert json.loads(r.stdout)["content"].rstrip("\n") == f"line {HOSTILE}"


def test_every_commands_help_is_whole_paragraphs():
    """typer keeps a docstring's single line breaks, so at 80 columns `replay --help` and six more
    were ragged (each docstring line wrapped again); the help is reflowed into paragraphs."""
    from typer.main import get_command

    def walk(cmd):
        yield cmd
        for sub in getattr(cmd, "commands", {}).values():
            yield from walk(sub)

    commands = list(walk(get_command(app)))
    assert len(commands) > 20
    assert [c.name for c in commands if c.help and re.search(r"[^\n]\n[^\n]", c.help)] == []
    page = CliRunner().invoke(app, ["replay", "--help"], env={"COLUMNS": "80"}, terminal_width=80).output
    assert " in a temporary memory root (the live memory is never written; only the report," in " ".join(page.split())


def test_http_help_names_every_route_it_serves(tmp_path):
    """`http --help` named the vault, the RPC, /healthz and /mcp, not the turn-end hook it serves
    too (the hooks of docs/agents.md post there)."""
    from dsh_memory.hooks.receiver import HOOK_PATH
    from dsh_memory.serve.http_app import RPC_PATH, create_app
    from dsh_memory.settings import MemorySettings

    served = {r.path for r in create_app(MemorySettings.from_env(env={"DSH_MEMORY_ROOT": str(tmp_path)})).routes}
    named = {"/", RPC_PATH, HOOK_PATH, "/healthz", "/mcp"}
    assert named <= served
    page = " ".join(CliRunner().invoke(app, ["http", "--help"], terminal_width=200).output.split())
    assert [p for p in sorted(named) if f" {p}" not in page] == []


def test_status_prints_paths_and_errors_as_they_are_on_one_line_each(tmp_path):
    """Text from outside (a memory root's path, a session's error) is never read as rich markup:
    `[/q]` crashed `status` with a MarkupError traceback and `[proj]` vanished from the path. Piped
    (CliRunner, 80 columns), a line is not wrapped."""
    root = tmp_path / "p[/q]r" / "[proj]" / "mem"
    state = StateStore(root)
    state.finish(WEATHER, "done", 23, datetime.now(UTC), slug="weather")
    state.fail("s-bad", "LLMOutputError: the answer held [/x] and [bold]", datetime.now(UTC), 60, 3)
    state.close()
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "DSH_MEMORY_ROOT": str(root), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    r = invoke(["status"], {**env, "COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert f"memory root {root}" in lines
    assert "  failed s-bad attempts=1: LLMOutputError: the answer held [/x] and [bold]" in lines
    assert any(line.startswith("last phase 1: ") and "last phase 2: " in line for line in lines), r.stdout


def test_status_prints_emoji_codes_from_outside_as_they_are(tmp_path):
    """rich turned `:x:` in a console line into an emoji: a model's error (or a project's path)
    holding one was printed other than it is."""
    root = tmp_path / "mem"
    state = StateStore(root)
    state.fail("s-bad", "LLMOutputError: the answer said :x: and :smile:", datetime.now(UTC), 60, 3)
    state.close()
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "DSH_MEMORY_ROOT": str(root), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    r = invoke(["status"], env)
    assert r.exit_code == 0, r.output
    assert "  failed s-bad attempts=1: LLMOutputError: the answer said :x: and :smile:" in r.stdout.splitlines()


def test_the_phase1_table_shows_what_it_is_given(capsys, monkeypatch):
    """The extract summary's cells (a reason holding a path, a slug) are printed, not read as
    markup, and piped (no COLUMNS) whole, not squeezed into 80 columns."""
    from dsh_memory.cli.pipeline import _print_phase1

    monkeypatch.delenv("COLUMNS", raising=False)
    reason = "excluded by /src/[/vendor]/* (exclude_projects) " + "and a reason long enough to be cut at 80 columns"
    plan = {"session": "s-1", "source": "codex", "action": "skip", "reason": reason}
    _print_phase1({"decisions": [plan]}, dry_run=True)
    row = {"session": "s-2", "source": "dsh", "outcome": "extracted", "slug": "fix-[red]", "tokens_in": 1}
    _print_phase1({"outcomes": [{**row, "tokens_out": 2}]}, dry_run=False)
    out = capsys.readouterr().out
    assert reason in out and "fix-[red]" in out


# ---- progress off a terminal, and the demo's exports (fake model, real Prefect server) -----


def _fake_model(request: dict) -> Reply:
    tool = ((request.get("tools") or [{}])[0].get("function") or {}).get("name")
    if tool == "memory_write":
        return Reply.tool(
            {
                "memory_md": "# Handbook\n- Tests run with `uv run pytest`.\n",
                "memory_summary_md": "v1\n\n## Tooling\n- tests: uv run pytest (weather-cli, ledger)\n",
            }
        )
    return memory_reply(request)


@pytest.fixture()
def fake_llm():
    with FakeOpenAIServer(handler=_fake_model) as srv:
        yield srv


def pipeline_env(tmp_path: Path, api_url: str, fake_url: str, **extra: str) -> dict[str, str]:
    return clean_env(
        tmp_path,
        PREFECT_API_URL=api_url,
        DSH_MEMORY_IGNORE_BLOCKS="1",
        DSH_MEMORY_BASE_URL=fake_url,
        DSH_MEMORY_API_KEY="test-key",
        DSH_MEMORY_MODEL="fake-model",
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        DSH_MEMORY_PHASE2_COOLDOWN_SECONDS="0",
        **extra,
    )


def test_the_progress_bar_shows_a_session_id_as_it_is_not_as_markup(monkeypatch):
    """On a terminal the bar shows the session being extracted: an id (a DSH session's folder name)
    opening with `[/x]` was read as rich markup, a MarkupError traceback once the run was over
    (the run's result lost); an escape sequence in it is shown, not obeyed."""
    from dsh_memory import progress
    from dsh_memory.cli._progress import _with_bar

    master, follower = os.openpty()
    os.set_blocking(master, False)
    monkeypatch.setenv("TERM", "xterm")
    with os.fdopen(follower, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        assert _with_bar(lambda: progress.report("phase1", 1, 2, "[/x]\x1b]0;owned") or "ran", "extracting") == "ran"
        shown = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(master, 65536):
                shown += chunk
    os.close(master)
    assert b"[/x]\\x1b]0;" in shown and b"\x1b]0;" not in shown


def test_progress_lines_show_a_session_id_escaped(capsys):
    """Off a terminal each finished session is a progress line naming its id (a DSH session's
    folder name): shown escaped, never obeyed."""
    from dsh_memory import progress
    from dsh_memory.cli._progress import _with_lines

    _with_lines(lambda: progress.report("phase1", 1, 2, "5a1d" + HOSTILE))
    err = capsys.readouterr().err
    assert "phase 1: session 5a1d\\x1b]0;owned\\x07" in err and not OBEYED.findall(err), err


def _progress(stderr: str) -> list[str]:
    return [line[len(PROGRESS) :] for line in stderr.splitlines() if line.startswith(PROGRESS)]


def test_extract_and_consolidate_report_progress_lines_when_not_on_a_terminal(tmp_path, prefect_api, fake_llm):
    env = pipeline_env(
        tmp_path,
        prefect_api,
        fake_llm.base_url,
        DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")),
        CODEX_HOME=str(copy_tree_aged(SAMPLES / "codex", tmp_path / "codex")),
    )
    r = cli(["extract", "--all"], env)
    assert r.returncode == 0, r.stderr
    lines = _progress(r.stderr)
    assert lines[0] == "phase 1 started (extract)" and lines[-1] == "phase 1 finished (Completed)", lines
    done = lines[1:-1]
    assert len(done) == 4 and all(re.fullmatch(r"phase 1: session \S+ finished \([1-4]/4\)", d) for d in done)
    assert {d.split()[3] for d in done} == SAMPLE_IDS - {"3c5e7a9b-1d2f-4a6c-8e0b-2d4f6a8c0e1b"}
    assert "━" not in r.stderr  # no live bar off a terminal

    r = cli(["consolidate", "--json"], env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["outcome"] == "consolidated"
    assert _progress(r.stderr) == ["phase 2 started (consolidate)", "phase 2 finished (Completed)"]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_run_with_a_failed_consolidation_exits_1_and_says_why(tmp_path, prefect_api, as_json):
    """`run` whose Phase 2 failed exited 0 with "Phase 2: error (work: 1 ad hoc notes…)": the
    work, not the failure, which `consolidate` reports (exit 1, `Phase 2 failed: …`)."""
    with FakeOpenAIServer(handler=lambda request: Reply.error(400)) as refusing:
        env = pipeline_env(tmp_path, prefect_api, refusing.base_url)
        assert cli(["add", "Makefiles use tabs."], env).returncode == 0  # something to consolidate
        r = cli(["run", *(["--json"] if as_json else [])], env)
    assert r.returncode == 1, r.stderr
    if as_json:
        assert json.loads(r.stdout)["error"]["message"].startswith("Phase 2 failed: ")
    else:
        assert r.stderr.splitlines()[-1].startswith("error: Phase 2 failed: ") and "400" in r.stderr, r.stderr


def test_demo_prints_the_exports_that_show_its_memory(tmp_path, prefect_api, fake_llm):
    workdir = tmp_path / "demo dir's"  # a space and a quote: the exports must be shell-quoted
    env = pipeline_env(tmp_path, prefect_api, fake_llm.base_url)
    r = cli(["demo", "--workdir", str(workdir)], env, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = _progress(r.stderr)
    assert lines[0] == "phase 1 started (extract)" and lines[-1] == "phase 2 finished (Completed)", lines
    assert lines.index("phase 1 finished (Completed)") + 1 == lines.index("phase 2 started (consolidate)")
    assert sum(1 for line in lines if line.startswith("phase 1: session ")) == 5

    exports = [line for line in r.stdout.splitlines() if line.startswith("export ")]
    assert [shlex.split(line)[1].split("=", 1)[0] for line in exports] == [
        "DSH_MEMORY_ROOT",
        "DSH_HOME",
        "CODEX_HOME",
        "CLAUDE_CONFIG_DIR",
    ]
    assert r.stdout.rstrip().endswith(exports[-1])  # the last thing it prints
    # A fresh shell with nothing but those lines sees the demo's memory.
    fresh = clean_env(tmp_path, DSH_MEMORY_IGNORE_BLOCKS="1")
    for var in ("DSH_MEMORY_ROOT", "DSH_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        fresh.pop(var)
    script = "\n".join([*exports, 'exec "$@"'])

    def shell(*args: str) -> subprocess.CompletedProcess:
        cmd = ["bash", "-c", script, "sh", sys.executable, "-m", "dsh_memory.cli", *args]
        return subprocess.run(cmd, cwd=str(tmp_path), env=fresh, capture_output=True, text=True, timeout=120)

    status = shell("status", "--json")
    assert status.returncode == 0, status.stderr
    local = json.loads(status.stdout)["local"]
    assert local["memory_root"] == str(workdir / "memories")
    assert local["counts"]["done"] >= 1
    found = json.loads(shell("search", "uv run pytest", "--json").stdout)
    assert "MEMORY.md" in {m["path"] for m in found["matches"]}
    assert "weather-cli" in shell("summary").stdout
    sessions = json.loads(shell("sessions", "--json").stdout)
    assert {s["id"] for s in sessions} == SAMPLE_IDS and "done" in {s["state"] for s in sessions}


def test_an_interrupt_whose_clean_up_failed_still_exits_130(capsys):
    """Ctrl-C that lands inside a lock's `with` block of Python's threading code leaves the lock
    released, so the block's exit fails ("release unlocked lock", the interrupt as its context):
    still exit 130 and the interrupted JSON, no traceback (seen under load in this file's test below)."""
    import threading

    import typer

    from dsh_memory import cancel
    from dsh_memory.cli._common import run

    def interrupted_in_threading_code():
        try:
            raise KeyboardInterrupt
        finally:
            threading.Lock().release()

    try:
        with pytest.raises(typer.Exit) as exited:
            run(interrupted_in_threading_code, as_json=True)
    finally:
        cancel.CANCELLED.clear()
    assert exited.value.exit_code == 130
    assert json.loads(capsys.readouterr().out) == {"error": {"code": "interrupted", "message": "interrupted"}}


def test_a_cancel_stops_the_wait_for_a_remote_model_answer():
    """Ctrl-C / SIGTERM (cancel.CANCELLED) while a worker thread waits for a remote model's answer,
    which no signal reaches: the call stops with LLMFatalError at once, as a local decode stops
    between tokens, instead of holding the interrupted process until the answer or the client's
    timeout comes (here both 10 minutes away)."""
    import threading

    from dsh_memory import cancel
    from dsh_memory.errors import LLMFatalError
    from dsh_memory.llm.openai_compat import OpenAICompatLLM

    errors: list[Exception] = []
    with (
        FakeOpenAIServer(latency_seconds=600) as never,
        OpenAICompatLLM(never.base_url, "fake-model", timeout_seconds=600) as llm,
    ):

        def call() -> None:
            try:
                llm.complete([{"role": "user", "content": "hi"}])
            except Exception as exc:
                errors.append(exc)

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        try:
            deadline = time.monotonic() + 60
            while never.request_count == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert never.request_count == 1 and worker.is_alive()  # waiting for the answer
            cancel.CANCELLED.set()
            worker.join(timeout=60)  # generous: the answer is 10 minutes away
        finally:
            cancel.CANCELLED.clear()
    assert not worker.is_alive(), "the call still waits for the model's answer after the cancel"
    assert len(errors) == 1 and isinstance(errors[0], LLMFatalError) and "cancelled" in str(errors[0]), errors


def test_interrupt_exits_130_with_a_json_error(tmp_path, prefect_api):
    """Ctrl-C during a model call: exit 130 and, with --json, the error as JSON on stdout."""
    with FakeOpenAIServer(latency_seconds=5) as slow:
        env = pipeline_env(
            tmp_path, prefect_api, slow.base_url, DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh"))
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "extract", "--all", "--json"],
            cwd=str(REPO),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            while slow.request_count == 0 and proc.poll() is None:
                time.sleep(0.1)
            assert proc.poll() is None, "the extraction ended before it could be interrupted"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert json.loads(out) == {"error": {"code": "interrupted", "message": "interrupted"}}
    assert "Traceback" not in err


def test_a_failed_sessions_retry_command_is_quoted_for_the_shell():
    """The retry hint printed `dsh-memory extract <id>` with the id as it is; a DSH session id is
    a folder name, so "$(…)", ";" or a leading "-" ran or broke when the line was pasted."""
    import shlex

    from dsh_memory.cli.pipeline import failure_line

    for sid in ("$(touch pwned)", "a b; rm -rf x", "-x", "9d4e6a2b"):
        line = failure_line({"session": sid, "outcome": "failed", "error": "boom"})
        command = line.split("now: ", 1)[1]
        argv = shlex.split(command)
        assert argv[:2] == ["dsh-memory", "extract"] and argv[-1] == sid, line
        assert argv[2:-1] == (["--"] if sid.startswith("-") else []), line


def test_forget_says_how_long_a_retired_summary_can_be_restored():
    """`forget --project` said `restore NAME` brings a summary back; a consolidation keeps only
    the newest retired ones (apply.MAX_RETIRED_SUMMARIES), so after a large forget the oldest
    went for good, unsaid. The help says the bound, the one the code keeps."""
    from dsh_memory.consolidation.apply import MAX_RETIRED_SUMMARIES

    page = " ".join(CliRunner().invoke(app, ["forget", "--help"], env={"COLUMNS": "200"}).output.split())
    assert f"keeps the newest {MAX_RETIRED_SUMMARIES:,} retired summaries" in page


@pytest.mark.parametrize(
    "args", [["status"], ["sessions"], ["extract", "--dry-run", "--all"], ["forget", "s"]], ids=" ".join
)
def test_a_state_database_from_a_newer_dsh_memory_is_refused_in_one_line(memory, args):
    """A state database a newer dsh-memory migrated (schema past this one's): exit 4 and one line
    saying to upgrade, nothing read or written with the wrong schema."""
    with StateStore(memory) as st:
        st.finish("s", "done", 3, datetime.now(UTC))
        st._conn().execute("PRAGMA user_version = 99")
    r = invoke(args, {"DSH_MEMORY_ROOT": str(memory), "DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert r.exit_code == 4, r.output
    assert r.stderr.startswith("error: state database schema v99 is newer") and r.stderr.count("\n") == 1
    raw = sqlite3.connect(memory / ".state" / "state.sqlite3")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 99
    assert raw.execute("SELECT status, attempts FROM claims").fetchall() == [("done", 0)]
    raw.close()
