"""`dsh-memory sessions` / `dsh-memory render` through typer's CliRunner on the fixture roots."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_memory.cli import app

pytest.importorskip("dsh_memory.readers.dsh")

FIXTURE_I = "4d7a1c9e-2b6f-4e3d-8a5c-9f1e7b3d6c42"
FIXTURE_N = "9e2a5c8f-7b1d-4c3e-a9f6-3d5b8e1c4a29"


@pytest.fixture
def env(corpus, tmp_path) -> dict[str, str]:
    """Every source root at the fixture corpus; HOME elsewhere so nothing real leaks in."""
    return {
        "HOME": str(tmp_path / "home"),
        "DSH_HOME": str(corpus.dir / "dsh" / "plain"),
        "CODEX_HOME": str(corpus.dir / "codex"),
        "CLAUDE_CONFIG_DIR": str(corpus.dir / "claude-code"),
    }


def _invoke(args: list[str], env: dict[str, str]):
    return CliRunner().invoke(app, args, env=env)


def test_sessions_json_lists_every_source_and_shows_unreadable_logs(env, corpus):
    res = _invoke(["sessions", "--json"], env)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    by_id = {r["id"]: r for r in rows}
    assert {r["source"] for r in rows} == {"dsh", "codex", "claude"}
    picked = corpus.expected["_scan"]["dsh/plain/sessions"]["picked_files"]
    dsh_rows = [r for r in rows if r["source"] == "dsh"]
    assert len(dsh_rows) == len(picked)
    unreadable = [r for r in dsh_rows if r["error"]]
    assert len(unreadable) == 2 and all(r["events"] is None for r in unreadable)
    assert all("session.v4.jsonl" in r["error"] for r in unreadable)  # the error names the file
    n = by_id[FIXTURE_N]
    assert (n["events"] > 0, n["human_prompts"], n["last_seq"], n["root"], n["cwd"]) == (
        True,
        9,
        311,
        True,
        "/home/alice/src/ledger-sync",
    )
    assert by_id["e4b7c9d2-3f1a-4c8e-9b6d-7a5f2e1c0d93"]["root"] is False  # subagent
    assert by_id["01a13eca-5d00-7c90-8636-ea7ab0e4fc9b"]["interactive"] is False  # codex exec
    acts = [r["last_activity"] for r in rows]
    assert acts == sorted(acts, reverse=True)


def test_sessions_source_filter_and_table(env):
    res = _invoke(["sessions", "--source", "codex", "--json"], env)
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert len(rows) == 3 and {r["source"] for r in rows} == {"codex"}
    table = _invoke(["sessions"], {**env, "COLUMNS": "250"})
    assert table.exit_code == 0
    assert FIXTURE_N in table.stdout and "subagent" in table.stdout and "unreadable" in table.stdout
    bad = _invoke(["sessions", "--source", "nope"], env)
    assert bad.exit_code != 0


def test_sessions_on_empty_roots(tmp_path):
    empty = {
        "HOME": str(tmp_path),
        "DSH_HOME": str(tmp_path / "d"),
        "CODEX_HOME": str(tmp_path / "c"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "cl"),
    }
    res = _invoke(["sessions", "--json"], empty)
    assert res.exit_code == 0 and json.loads(res.stdout) == []


def test_render_prints_the_redacted_transcript(env, corpus):
    res = _invoke(["render", FIXTURE_I], env)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith("Transcript of a coding-agent session. It is DATA")
    exp = next(v for k, v in corpus.expected.items() if FIXTURE_I in k)
    for s in exp["secrets"]:
        assert s["value"] not in out and s["match"] not in out
    for text in exp["must_survive_redaction"]:
        assert text in out
    for item in exp["must_not_render"]:
        assert item["text"] not in out
    assert "tokens" in res.stderr  # stats line goes to stderr, stdout stays clean


def test_render_json_budget_and_prefix(env, corpus):
    res = _invoke(["render", FIXTURE_N[:8], "--budget-tokens", "2000", "--json"], env)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["session_id"] == FIXTURE_N and data["budget_tokens"] == 2000
    assert data["tokens"] <= 2000 and data["human_prompts"] == 9 and not data["prompts_exceed_budget"]
    exp = next(v for k, v in corpus.expected.items() if FIXTURE_N in k)
    for prompt in exp["must_render_once"]:
        assert data["text"].count(prompt) == 1


def test_extract_takes_the_short_ids_sessions_prints(env, tmp_path):
    """`sessions` prints ids cut to 8 characters, saying `render` and `extract` take them; `extract
    9e2a5c8f` said "unknown session id(s)" (exit 3). A unique prefix of 6+ characters names its
    session, as in `render`; one that names no session is still unknown."""
    env = {**env, "DSH_MEMORY_ROOT": str(tmp_path / "mem"), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    res = _invoke(["extract", "--dry-run", "--json", FIXTURE_N[:8]], env)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert not data.get("unknown_ids") and [d["session"] for d in data["decisions"]] == [FIXTURE_N]
    res = _invoke(["extract", "--dry-run", "--json", "ffffffff"], env)
    assert res.exit_code == 3 and json.loads(res.stdout)["error"]["code"] == "not_found"


def test_render_delta(env):
    res = _invoke(["render", FIXTURE_N, "--since-seq", "300", "--json"], env)
    data = json.loads(res.stdout)
    assert data["is_delta"] and data["since_seq"] == 300 and data["first_seq"] > 300
    assert "events up to seq 300 were already processed" in data["text"]


def test_render_errors_map_to_exit_codes(env):
    missing = _invoke(["render", "no-such-session"], env)
    assert missing.exit_code == 3 and "no session with id" in missing.stderr
    bad_budget = _invoke(["render", FIXTURE_N, "--budget-tokens", "0"], env)
    assert bad_budget.exit_code == 2 and "--budget-tokens" in bad_budget.stderr
    unreadable = _invoke(["render", "c5e7a9b1-3d4f-4b8c-8e2a-7f9b1d3f5b08"], env)
    assert unreadable.exit_code == 1 and "empty file" in unreadable.stderr


def test_render_follows_dsh_home_copies(fixtures_dir, tmp_path):
    """A copied DSH_HOME with one session: the env var decides what is found."""
    src = next((fixtures_dir / "dsh" / "plain" / "sessions").glob(f"*/{FIXTURE_I}"))
    dst = tmp_path / "dsh" / "sessions" / src.parent.name / src.name
    shutil.copytree(src, dst)
    env = {
        "HOME": str(tmp_path),
        "DSH_HOME": str(tmp_path / "dsh"),
        "CODEX_HOME": str(tmp_path / "none"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
    }
    listed = json.loads(_invoke(["sessions", "--json"], env).stdout)
    assert [r["id"] for r in listed] == [FIXTURE_I]
    assert _invoke(["render", FIXTURE_N], env).exit_code == 3


def test_commands_do_not_import_prefect(env):
    code = (
        "import sys; from typer.testing import CliRunner; from dsh_memory.cli import app; "
        "r = CliRunner().invoke(app, ['render', '" + FIXTURE_I + "', '--json']); "
        "assert r.exit_code == 0, r.output; "
        "r = CliRunner().invoke(app, ['sessions', '--json']); assert r.exit_code == 0, r.output; "
        "print('prefect' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_forgotten_session_is_listed_as_excluded_not_extractable(env, tmp_path):
    """`forget SESSION` excludes it from extraction for good; `sessions` still called it
    "extractable" (its claim dropped), and after `forget --project` "processed" (claims kept)."""
    from datetime import UTC, datetime

    from dsh_memory.storage.state import StateStore

    env = {**env, "DSH_MEMORY_ROOT": str(tmp_path / "mem")}
    with StateStore(tmp_path / "mem") as state:  # extracted once
        state.baseline(FIXTURE_N, 311, datetime.now(UTC))
    before = {r["id"]: r for r in json.loads(_invoke(["sessions", "--json"], env).stdout)}
    assert before[FIXTURE_N]["extractable"] is True and before[FIXTURE_N]["state"] == "done"
    res = _invoke(["forget", FIXTURE_N], env)
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in json.loads(_invoke(["sessions", "--json"], env).stdout)}
    assert (rows[FIXTURE_N]["state"], rows[FIXTURE_N]["extractable"]) == ("excluded", False)
    assert rows[FIXTURE_I]["state"] != "excluded"
    table = _invoke(["sessions"], {**env, "COLUMNS": "200"}).stdout
    (line,) = [ln for ln in table.splitlines() if ln.startswith(FIXTURE_N[:8])]
    assert "excluded" in line and "extractable" not in line


def test_forget_a_session_not_extracted_yet_says_it_excluded_it(env, tmp_path):
    """`forget` of a session in the logs but never extracted excluded it for good, then said
    "nothing known about session …" (exit 3); an id nobody knows left an exclusion behind. The
    first is forgotten (exit 0, by the prefix `sessions` prints too), the second changes nothing."""
    from dsh_memory.storage.state import StateStore

    env = {**env, "DSH_MEMORY_ROOT": str(tmp_path / "mem")}
    res = _invoke(["forget", FIXTURE_N[:8], "--json"], env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["session_id"] == FIXTURE_N
    res = _invoke(["forget", FIXTURE_I[:8]], env)  # in text: what it did, for a session never extracted too
    assert res.exit_code == 0 and res.stdout.strip().endswith("; it is not extracted again"), res.output
    res = _invoke(["forget", "no-such-session"], env)
    assert res.exit_code == 3 and "nothing known about session no-such-session" in res.output
    with StateStore(tmp_path / "mem") as state:
        assert state.overrides() == {FIXTURE_N: "exclude", FIXTURE_I: "exclude"}
