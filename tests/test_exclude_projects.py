"""`exclude_projects`: an excluded repository's sessions are read no further than their header,
never extracted and never sent to a model, next to an included one; `extract --dry-run` says
"excluded", `status` counts them; `forget --project ROOT` retires what a project has, recoverably."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.errors import ConfigError
from dsh_memory.scope import excluded_by
from dsh_memory.settings import MemorySettings
from dsh_memory.testing.fake_openai import FakeOpenAIServer
from tests.test_pipeline_safety import _echo_everything
from tests.test_private import write_claude, write_dsh

NEEDLE = "Zanzibar-ledger-4471"  # only inside the excluded project's sessions
SECRET_DSH = "00000000-0000-4000-8000-0000000e0001"
SECRET_CLAUDE = "00000000-0000-4000-8000-0000000e0002"
APP_DSH = "00000000-0000-4000-8000-0000000a0001"


def _repo(path: Path) -> str:
    path.mkdir(parents=True)
    (path / ".git").mkdir()
    return str(path)


def test_the_setting_reads_lists_from_the_environment_and_the_block():
    env = {"DSH_MEMORY_EXCLUDE_PROJECTS": "/w/secret, ~/client-*\n/w/other"}
    assert MemorySettings.from_env(env).exclude_projects == ["/w/secret", "~/client-*", "/w/other"]
    env = {"DSH_MEMORY_EXCLUDE_PROJECTS": '["/w/a,b", "/w/c"]'}
    assert MemorySettings.from_env(env).exclude_projects == ["/w/a,b", "/w/c"]
    assert MemorySettings.from_env({}).exclude_projects == []
    with pytest.raises(ConfigError, match="'src/app' is relative"):
        MemorySettings.from_env({"DSH_MEMORY_EXCLUDE_PROJECTS": "/w/a,src/app"})
    from dsh_memory.blocks import MemorySettingsBlock

    block = MemorySettingsBlock(exclude_projects=["/w/pinned"])
    assert block.to_settings(env).exclude_projects == ["/w/pinned"]  # block > environment
    cleared = MemorySettingsBlock(exclude_projects=[])  # the UI's cleared list is unset, not "exclude nothing"
    assert cleared.to_settings(env).exclude_projects == ["/w/a,b", "/w/c"]


def test_which_sessions_a_pattern_excludes(tmp_path):
    secret = _repo(tmp_path / "src" / "secret")
    app_repo = _repo(tmp_path / "src" / "app")
    worktree = tmp_path / "wt"  # a linked worktree of `secret`: the same project
    gitdir = Path(secret) / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    assert excluded_by(secret + "/pkg/sub", [secret]) == secret
    assert excluded_by(str(worktree), [secret]) == secret
    assert excluded_by(secret, [str(worktree)]) == str(worktree)  # a worktree's pattern names its repository
    assert excluded_by(app_repo, [secret]) is None
    assert excluded_by(app_repo, [str(tmp_path / "src" / "a*")]) is not None
    assert excluded_by(secret, [str(tmp_path / "src")]) is not None  # a folder: every project inside it
    assert excluded_by(None, [secret]) is None and excluded_by(secret, []) is None


def _layout(monkeypatch, tmp_path: Path) -> tuple[Path, str, str]:
    secret = _repo(tmp_path / "src" / "secret")
    app_repo = _repo(tmp_path / "src" / "app")
    prompts = [f"Fix the ledger test; {NEEDLE}. Always run `make test` before committing."]
    write_dsh(tmp_path / "dsh", secret, SECRET_DSH, prompts)
    write_claude(tmp_path / "claude", secret, SECRET_CLAUDE, prompts)
    write_dsh(tmp_path / "dsh", app_repo, APP_DSH, ["Fix the login test. Always run `make test` before committing."])
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS", "0")
    monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "0")
    monkeypatch.setenv("DSH_MEMORY_EXCLUDE_PROJECTS", secret)
    return root, secret, app_repo


def test_dry_run_says_excluded_and_status_counts_them(monkeypatch, tmp_path):
    _root, secret, _app = _layout(monkeypatch, tmp_path)
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    out = CliRunner().invoke(app, ["extract", "--all", "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["session"]: r for r in json.loads(out.stdout)["decisions"]}
    for sid in (SECRET_DSH, SECRET_CLAUDE):
        assert rows[sid]["action"] == "skip" and rows[sid]["reason"].startswith("excluded"), rows[sid]
    assert rows[APP_DSH]["action"] == "extract"
    listed = CliRunner().invoke(app, ["sessions", "--json"])
    states = {r["id"]: r for r in json.loads(listed.stdout)}
    assert states[SECRET_DSH]["state"] == "excluded" and states[SECRET_DSH]["title"] is None
    assert NEEDLE not in listed.stdout
    shown = CliRunner().invoke(app, ["render", SECRET_DSH])
    assert shown.exit_code == 2 and "exclude_projects" in shown.output and NEEDLE not in shown.output


@pytest.mark.usefixtures("prefect_api")
def test_an_excluded_project_is_never_extracted_next_to_an_included_one(monkeypatch, tmp_path):
    with FakeOpenAIServer(handler=_echo_everything) as fake:
        root, secret, app_repo = _layout(monkeypatch, tmp_path)
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_API_KEY", "test-key")
        monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
        from dsh_memory.flows.catch_up import catch_up_flow

        result = catch_up_flow(backfill=True)
        assert [o.session for o in result.phase1.outcomes] == [APP_DSH]
        assert result.phase2.outcome == "consolidated", result.phase2
        sent = json.dumps(fake.requests, ensure_ascii=False)
    assert "Fix the login test" in sent and NEEDLE not in sent
    assert not any(NEEDLE.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())
    from dsh_memory.context import memory_context
    from dsh_memory.serve.status import local_status

    with memory_context() as ctx:
        assert local_status(ctx)["excluded"] == {"patterns": 1, "sessions": 2}
        assert set(ctx.state.claims()) == {APP_DSH}
    # The included project is forgotten as a project: recoverably. A handbook in the documented shape.
    from dsh_memory.storage.store import MemoryStore

    store = MemoryStore(root)
    store.atomic_write(
        "MEMORY.md",
        f"# Task Group: {app_repo}\nscope: project\napplies_to: cwd={app_repo}; reuse_rule=this project only\n"
        "- Run `make test` before committing.\n\n# Task Group: global\nscope: global\n- Answer tersely.\n",
    )
    store.atomic_write(
        "memory_summary.md", f"v1\n# Scope: global\n- Answer tersely.\n# Scope: project {app_repo}\n- make test\n"
    )
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    out = CliRunner().invoke(app, ["forget", "--project", app_repo, "--json"])
    assert out.exit_code == 0, out.output
    done = json.loads(out.stdout)
    assert done["project"] == app_repo and done["sessions_excluded"] == [APP_DSH]
    assert store.list_rollout_summaries() == []
    assert store.read_text("MEMORY.md") == "# Task Group: global\nscope: global\n- Answer tersely.\n"
    assert store.read_text("memory_summary.md") == "v1\n# Scope: global\n- Answer tersely.\n"
    kept = [s for s in done["retired"] if s.startswith("forgotten-app-handbook")]
    assert kept and app_repo in (root / "rollout_summaries" / ".retired" / f"{kept[0]}.md").read_text()
    back = CliRunner().invoke(app, ["restore", done["retired"][0]])
    assert back.exit_code == 0, back.output
    assert len(store.list_rollout_summaries()) == 1
    again = CliRunner().invoke(app, ["forget", "--project", str(tmp_path / "nowhere")])
    assert again.exit_code != 0 and "nothing in memory" in again.output and "Traceback" not in again.output
    both = CliRunner().invoke(app, ["forget", APP_DSH, "--project", app_repo])
    assert both.exit_code == 2 and "one of the two" in both.output


def test_the_header_alone_says_where_a_session_ran(tmp_path):
    """DSH (plain and zstd), a Codex meta whose instructions come first, a Claude Code transcript
    whose first record is longer than the header bound (read in part)."""
    import zstandard

    from dsh_memory.models import SessionRef
    from dsh_memory.readers.header import MAX_HEAD_BYTES, session_cwd

    repo = _repo(tmp_path / "src" / "my-app")
    dsh = write_dsh(tmp_path / "dsh", repo)
    packed = dsh.with_name("session.v4.jsonl.zstd")
    packed.write_bytes(zstandard.ZstdCompressor().compress(dsh.read_bytes()))
    codex = tmp_path / "rollout.jsonl"
    meta = {"instructions": "x" * 20_000, "id": SECRET_DSH, "cwd": repo}
    codex.write_text(json.dumps({"type": "session_meta", "payload": meta}) + "\n")
    claude = write_claude(tmp_path / "claude", repo, prompts=["y" * (MAX_HEAD_BYTES + 10)])
    for source, path in (("dsh", dsh), ("dsh", packed), ("codex", codex), ("claude", claude)):
        ref = SessionRef(id="x", source=source, path=path, size=path.stat().st_size, mtime_ns=path.stat().st_mtime_ns)
        assert session_cwd(ref) == repo, (source, path)


def test_a_fifo_put_in_a_logs_place_after_discovery_does_not_hang_the_header_read(tmp_path):
    """Untrusted files: a session log swapped for a FIFO (no writer) after discovery gives no cwd
    at once; opening it for reading used to block the run forever."""
    import threading

    from dsh_memory.models import SessionRef
    from dsh_memory.readers.header import session_cwd

    fifo = tmp_path / "rollout.jsonl"
    os.mkfifo(fifo)
    ref = SessionRef(id="x", source="codex", path=fifo, size=10, mtime_ns=0)
    found: list = []
    reader = threading.Thread(target=lambda: found.append(session_cwd(ref)), daemon=True)
    reader.start()
    reader.join(timeout=60)
    try:
        assert not reader.is_alive(), "reading the FIFO's header blocked"
        assert found == [None]
    finally:
        if reader.is_alive():  # let the blocked open go (a writer appears), so the thread ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# A CLI command in a process that dies (SIGKILL) right after a method of the store or the state
# database has done its work: `python -c DIES_AFTER MODULE CLASS METHOD ARGS...`.
DIES_AFTER = r"""
import importlib, os, signal, sys
_, module, cls, method, *args = sys.argv
owner = getattr(importlib.import_module(module), cls)
real = getattr(owner, method)

def then_die(self, *a, **kw):
    real(self, *a, **kw)
    os.kill(os.getpid(), signal.SIGKILL)

setattr(owner, method, then_die)
from dsh_memory.cli import main
sys.argv = ["dsh-memory", *args]
main()
"""


def _killed_after(method: str, *args: str) -> int:
    """Run `dsh-memory ARGS` until `method` ("dsh_memory.storage.state.StateStore.forget") returns."""
    import subprocess
    import sys

    module, cls, name = method.rsplit(".", 2)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    cmd = [sys.executable, "-c", DIES_AFTER, module, cls, name, *args]
    return subprocess.run(cmd, env=env, check=False).returncode


def test_forget_project_killed_half_way_still_excludes_every_session_it_retired(monkeypatch, tmp_path):
    """A session is excluded as its summary is retired: a run killed in between used to leave the
    retired sessions' exclusion unrecorded, and the rerun no longer saw them (already retired), so
    a session that grew was extracted again and its project was back in memory."""

    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.store import MemoryStore

    repo = _repo(tmp_path / "src" / "app")
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    store = MemoryStore(root)
    store.ensure_layout()
    for sid in ("s1", "s2"):
        store.write_rollout_summary(f"recap-{sid}", {"session_id": sid, "cwd": repo, "project": repo}, "- a fact")
    died = _killed_after("dsh_memory.storage.store.MemoryStore.retire_summary", "forget", "--project", repo)
    assert died == -signal.SIGKILL and len(store.retired_slugs()) == 1
    out = CliRunner().invoke(app, ["forget", "--project", repo])
    assert out.exit_code == 0, out.output
    assert store.list_rollout_summaries() == [] and len(store.retired_slugs()) == 2
    assert StateStore(root).overrides() == {"s1": "exclude", "s2": "exclude"}


def test_forget_session_killed_half_way_never_leaves_it_to_be_extracted_again(monkeypatch, tmp_path):
    """The extraction record used to be dropped before the session was excluded: a kill in
    between left a session with no record and no exclusion, which the next run extracts anew."""
    from datetime import UTC, datetime

    from dsh_memory.storage.state import StateStore

    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    state = StateStore(root)
    state.try_start("s1", datetime.now(UTC))
    state.finish("s1", "done", 10, datetime.now(UTC))
    state.close()
    assert _killed_after("dsh_memory.storage.state.StateStore.forget", "forget", "s1") == -signal.SIGKILL
    state = StateStore(root)
    assert state.get_claim("s1") is None and state.overrides() == {"s1": "exclude"}
    state.close()


def test_forget_project_during_a_consolidation_says_what_to_do(monkeypatch, tmp_path):
    """`forget --project` while a consolidation holds Phase 2's lock said "phase2 is already
    running" (exit 5): neither what that is to the user nor what to do."""
    from dsh_memory.storage.locks import phase_lock
    from dsh_memory.storage.store import MemoryStore

    repo = _repo(tmp_path / "src" / "app")
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    store = MemoryStore(root)
    store.ensure_layout()
    store.write_rollout_summary("recap-s1", {"session_id": "s1", "cwd": repo, "project": repo}, "- a fact")
    with phase_lock(root, "phase2"):
        out = CliRunner().invoke(app, ["forget", "--project", repo])
    assert out.exit_code == 5, out.output
    assert out.stderr.strip() == "error: a consolidation is running: forget the project once it ends", out.stderr
    assert [i.slug for i in store.list_rollout_summaries()] == ["recap-s1"]
