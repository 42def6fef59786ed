"""Memory that says how old it is and how it is doing (issue 27, points 1, 2, 4, 5).

On a real git repository and a real memory root: an injected project line learned longer ago
than `stale_after_days` (the date of its evidence: the sessions its `[source: …]` names) says so,
a newer session refreshes it; and the health figures `status`, `status --json` and the vault show
(items, uses by search/read, never used, may be stale, old, left out of injection) count what is
really there."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, date, datetime

import pytest

from dsh_memory.readpath import search, summary
from dsh_memory.readpath.health import memory_health
from dsh_memory.readpath.learned import dates_of, item_key
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.git_helpers import git, make_repo

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
CAP = 6000


@pytest.fixture
def repo(tmp_path):
    return make_repo(
        tmp_path / "shop",
        {"conf/app.toml": "port = 1\n", "Makefile": "test:\n\tpytest\nlint:\n\truff check .\n"},
    )


def _recap(store: MemoryStore, slug: str, session: str, updated: str, cwd, body: str) -> str:
    return store.write_rollout_summary(
        slug,
        {"session_id": session, "source": "codex", "cwd": str(cwd), "project": str(cwd), "updated_at": updated},
        body,
    )


@pytest.fixture
def memory(tmp_path, repo) -> MemoryStore:
    """A project learned from an old session (July) and a newer one (November), as the merge
    writes it: bullets with `[source: …]`, the group's session lines with their dates."""
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    _recap(
        store,
        "old-setup",
        "s-old",
        "2026-07-01T09:00:00+00:00",
        repo,
        "- Ran `make lint` first.\n- Read `conf/app.toml`.\n",
    )
    _recap(store, "new-fix", "s-new", "2026-11-20T09:00:00+00:00", repo, "- Ran `make test`.\n")
    store.atomic_write(
        "MEMORY.md",
        f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
        "## Project facts\n- Settings live in `conf/app.toml`. [source: old-setup]\n\n"
        "## Reusable knowledge\n- Checks that passed: `make lint` [source: old-setup]\n"
        "- Checks that passed: `make test` [source: old-setup, new-fix]\n\n"
        "## Tasks\n- rollout_summaries/new-fix.md (session=s-new, source=codex, updated=2026-11-20): fix\n",
    )
    store.atomic_write(
        "memory_summary.md",
        "v1\n\n# Scope: global\n## User preferences\n- Answer in English.\n\n"
        f"# Scope: project {repo}\n## Build and test\n- Checks that passed: `make lint`\n"
        "- Checks that passed: `make test`\n- Settings live in `conf/app.toml`.\n",
    )
    return store


def test_an_old_item_says_how_old_it_is_and_a_newer_session_refreshes_it(memory, repo):
    s = summary(memory, CAP, cwd=str(repo), stale_after_days=90, now=NOW)
    lines = s.content.splitlines()
    assert "- Checks that passed: `make lint` (learned 153 days ago)" in lines  # July 1 → December 1
    assert "- Checks that passed: `make test`" in lines  # learned again on November 20: fresh
    assert "- Settings live in `conf/app.toml`. (learned 153 days ago)" in lines
    assert "- Answer in English." in lines  # the global part is not this project's to date
    assert s.aged == 2 and s.stale == 0
    assert summary(memory, CAP, cwd=str(repo), stale_after_days=200, now=NOW).aged == 0
    off = summary(memory, CAP, cwd=str(repo), stale_after_days=0, now=NOW)
    assert off.aged == 0 and "learned" not in off.content


def test_gone_and_old_are_said_in_one_note(memory, repo):
    (repo / "conf" / "app.toml").unlink()
    git("commit", "-qam", "drop the settings file", cwd=repo)
    s = summary(memory, CAP, cwd=str(repo), stale_after_days=90, now=NOW)
    assert (
        "- Settings live in `conf/app.toml`. (may be stale: conf/app.toml no longer exists; learned 153 days ago)"
        in s.content.splitlines()
    )
    assert s.stale == 1 and s.aged == 2


def test_an_items_date_comes_from_its_evidence(memory, repo):
    """The group's session lines first, then the recap's front matter (a retired one too), then a
    note's name; an item without readable evidence has no date."""
    assert memory.retire_summary("old-setup")
    text = (
        "## Tasks\n- rollout_summaries/a.md (session=x, source=dsh, updated=2026-03-04): a\n"
        "- One [source: a]\n- Two [source: old-setup]\n- Three [source: 20250102T030405Z-remember-this.md]\n"
        "- Four [source: nowhere]\n- Five, untagged\n"
    )
    dates = dates_of(text, str(memory.root))
    assert dates[item_key("- One")] == date(2026, 3, 4)
    assert dates[item_key("- Two (learned 3 days ago)")] == date(2026, 7, 1)  # read from .retired/
    assert dates[item_key("* Three")] == date(2025, 1, 2)
    assert item_key("- Four") not in dates and item_key("- Five, untagged") not in dates


def test_health_counts_items_uses_never_used_stale_old_and_left_out(memory, repo):
    state = StateStore(memory.root)
    try:
        search(memory, ["make test"], state=state, now=NOW)  # a real search hits new-fix's recap
        search(memory, ["make test"], state=state, now=NOW)
        (repo / "conf" / "app.toml").unlink()
        lines = "".join(f"- project rule number {i} with some words\n" for i in range(200))
        memory.atomic_write(
            "memory_summary.md", memory.read_text("memory_summary.md") + "## More\n" + lines
        )  # over the budget: cut when injected
        h = memory_health(memory, state.usage(), max_summary_chars=2500, stale_after_days=90, now=NOW)
    finally:
        state.close()
    row = h["projects"][str(repo)]
    assert row["handbook_items"] == 3 and row["sessions"] == 2
    assert row["uses"] == 2 and row["never_used"] == 1
    assert row["stale"] == 1 and row["aged"] == 2
    injected = summary(memory, 2500, cwd=str(repo), stale_after_days=90, now=NOW)  # as status counts it
    note = next(ln for ln in injected.content.splitlines() if ln.startswith("- not shown here:"))
    assert row["left_out"] == injected.left_out == int(note.split()[4]) > 100
    files = {f["path"]: f for f in h["memory_files"]}
    assert files["MEMORY.md"]["items"] == 3 and files["MEMORY.md"]["stale"] == 1
    assert files["memory_summary.md"]["left_out"] == row["left_out"]
    old, new = files["rollout_summaries/old-setup.md"], files["rollout_summaries/new-fix.md"]
    assert (old["never_used"], old["uses"], old["stale"], old["age_days"]) == (True, 0, 1, 153)
    assert (new["never_used"], new["uses"], new["items"]) == (False, 2, 1)
    assert h["totals"]["stale"] == 1 and h["totals"]["never_used"] == 1


def test_status_json_and_text_show_the_health(tmp_path, memory, repo):
    (repo / "conf" / "app.toml").unlink()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "DSH_HOME": str(tmp_path / "no-dsh"),
        "CODEX_HOME": str(tmp_path / "no-codex"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "no-claude"),
        "DSH_MEMORY_ROOT": str(memory.root),
        "DSH_MEMORY_IGNORE_BLOCKS": "1",
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "DSH_MEMORY_STALE_AFTER_DAYS": "3650",  # the CLI dates by today's clock: no item old here
    }

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "dsh_memory.cli", *args], env=env, capture_output=True, text=True, timeout=120
        )

    out = cli("status", "--json")
    assert out.returncode == 0, out.stderr
    local = json.loads(out.stdout)["local"]
    assert local["stale"] == 1 == local["projects"][str(repo)]["stale"]
    assert local["projects"][str(repo)]["never_used"] == 2
    assert {f["path"] for f in local["memory_files"]} >= {"MEMORY.md", "rollout_summaries/new-fix.md"}
    text = cli("status")
    assert text.returncode == 0, text.stderr
    assert (
        f"  {repo}: 3 handbook items (1 may be stale, 0 older than stale_after_days) · 2 session recaps"
        " (0 uses, 2 never used) · 0 raw waiting · 0 lines left out of injection"
    ) in text.stdout.splitlines()
    assert "session recaps: 2 · used 0 times · never used 2" in text.stdout


def _aged(tmp_path, repo) -> tuple[MemoryStore, int]:
    """A project item last learned 120 days before today (real time: the adapters use the clock)."""
    from datetime import timedelta

    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    learned = datetime.now(UTC) - timedelta(days=120)
    _recap(store, "setup", "s1", learned.isoformat(), repo, "- recap\n")
    group = f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
    store.atomic_write(
        "MEMORY.md", f"{group}## Reusable knowledge\n- Checks that passed: `make lint` [source: setup]\n"
    )
    store.atomic_write(
        "memory_summary.md", f"v1\n\n# Scope: project {repo}\n## Build and test\n- Checks that passed: `make lint`\n"
    )
    return store, (datetime.now(UTC).date() - learned.date()).days


def test_the_session_start_hook_says_how_old_and_honours_the_setting(tmp_path, repo):
    """`summary --inject --cwd` (what the SessionStart hook runs), today's date, the setting from
    the environment."""
    store, days = _aged(tmp_path, repo)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "DSH_MEMORY_ROOT": str(store.root),
        "DSH_MEMORY_IGNORE_BLOCKS": "1",
        "PREFECT_HOME": str(tmp_path / "prefect"),
    }

    def inject(**extra: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "dsh_memory.cli", "summary", "--inject", "--cwd", str(repo / "conf")],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert f"- Checks that passed: `make lint` (learned {days} days ago)" in inject().splitlines()
    assert "- Checks that passed: `make lint`" in inject(DSH_MEMORY_STALE_AFTER_DAYS="200").splitlines()


def test_the_rpc_and_the_mcp_tool_say_how_old_too(tmp_path, repo):
    import os

    import anyio
    from mcp import Client, StdioServerParameters
    from starlette.testclient import TestClient

    from dsh_memory.serve.http_app import RPC_PATH, create_app
    from dsh_memory.settings import MemorySettings

    store, days = _aged(tmp_path, repo)
    line = f"- Checks that passed: `make lint` (learned {days} days ago)"
    settings = MemorySettings.from_env(env={"DSH_MEMORY_ROOT": str(store.root)})
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1:8765") as client:
        body = {"method": "summary", "params": {"cwd": str(repo)}}
        result = client.post(RPC_PATH, json=body).json()["result"]
    assert line in result["content"].splitlines() and result["aged"] == 1
    env = {"DSH_MEMORY_ROOT": str(store.root), "PYTHONPATH": os.pathsep.join(sys.path)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_memory.serve.mcp_server"], env=env)

    async def main() -> str:
        async with Client(params) as mcp:
            return (await mcp.call_tool("memory_summary", {"cwd": str(repo)})).content[0].text

    assert line in anyio.run(main).splitlines()
