"""`dsh-memory replay --cwd` and global rules: a rule the user stated for every project in another
project's session reaches this project's memory (the live pipeline injects global memory
everywhere), so saying it again here is *restated*. Other projects' sessions are replayed only
when they state a global rule, and never reported. The real CLI, the real extract and consolidate
flows on a real Prefect server (`prefect_api`), the fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.replay.rules import standing_instructions
from dsh_memory.scope import stated_as_general
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from dsh_memory.testing.sessions import write_session
from tests.replay_helpers import replay_env, text_of, tool_of

GLOBAL = "I always want commit messages in the imperative mood, in every repo."  # said in project A
GLOBAL_AGAIN = "Write commit messages in the imperative mood, always."  # said again in B, other words
A_ONLY = "Never use tabs in the stylesheets."  # A's own rule
A_ONLY_AGAIN = "Never put tabs in stylesheets."  # B says it too: B's new rule, A's was not global
B_RULE = "Never mock our own code in the tests."
B_AGAIN = "I told you: never mock our own code in the tests."
RULES = (GLOBAL, A_ONLY, B_RULE)
REPLY = "Done; the build with `make` passes."


def answer(request: dict) -> Reply:
    """Phase 1 keeps every rule the session states; Phase 2's summary states every rule of the
    raw memories (its scope guard then moves a project's own items to that project's part)."""
    text = text_of(request)
    lines = "".join(f"- {rule}\n" for rule in RULES if rule in text)
    if tool_of(request) == "memory_write":
        body = "- The project builds with `make`.\n" + lines
        return Reply.tool({"memory_md": "# Memory\n\n" + body, "memory_summary_md": "v1\n" + body})
    raw = "- The project builds with `make`.\n" + lines
    return Reply.tool({"raw_memory": raw, "rollout_summary": "## Task\nA fix.\n", "rollout_slug": "a fix"})


def _projects(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    for p in (a, b):
        (p / ".git").mkdir(parents=True)
    return a, b


def _replay(args: list[str], monkeypatch) -> tuple[dict, list[dict]]:
    with FakeOpenAIServer(handler=answer) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        out = CliRunner().invoke(app, ["replay", *args, "--json"])
        requests = list(fake.requests)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout), requests


@pytest.mark.usefixtures("prefect_api")
def test_a_global_rule_of_another_project_restated_here_is_counted(tmp_path, monkeypatch):
    a, b = _projects(tmp_path)
    dsh = replay_env(tmp_path, monkeypatch)["dsh"]
    a1 = write_session(dsh, a, 1, ["Fix the logo.", GLOBAL, A_ONLY], days_ago=3, reply=REPLY)
    b1 = write_session(dsh, b, 2, ["Add the CSV export.", B_RULE], days_ago=2, reply=REPLY)
    b2 = write_session(dsh, b, 3, ["Fix the export's header.", GLOBAL_AGAIN, A_ONLY_AGAIN], days_ago=1, reply=REPLY)
    write_session(dsh, a, 4, ["Fix the favicon.", GLOBAL], days_ago=0.5, reply=REPLY)  # after B's last: not read
    r, requests = _replay(["--cwd", str(b)], monkeypatch)
    assert (r["sessions"], r["context_sessions"]) == (2, 1)
    assert [(p["project"], p["sessions"]) for p in r["projects"]] == [(str(b), 2)]  # A's is not reported
    [item] = r["restated_items"]
    assert (item["session"], item["text"], item["earlier"]["session"], item["earlier"]["text"]) == (
        b2,
        GLOBAL_AGAIN,
        a1,
        GLOBAL,
    )
    assert item["same_project"] is False
    assert item["anticipated"] is True and "imperative mood" in item["held_by"], item  # the global part injected
    # A's rules are not B's new rules; B saying A's project-only rule is B's own new rule.
    assert [(n["session"], n["text"]) for n in r["new_rules"]] == [(b1, B_RULE), (b2, A_ONLY_AGAIN)]
    assert r["summary"] == {"restated": 1, "anticipated": 1, "missed": 0, "new_rules": 2}
    tools = [tool_of(q) for q in requests]
    assert tools.count("memory_save") == 2 == r["extracted"], tools  # A's first session and B's first
    assert not any("favicon" in text_of(q) for q in requests)


@pytest.mark.usefixtures("prefect_api")
def test_other_projects_sessions_without_a_global_rule_are_not_extracted(tmp_path, monkeypatch):
    a, b = _projects(tmp_path)
    dsh = replay_env(tmp_path, monkeypatch)["dsh"]
    write_session(dsh, a, 1, ["Fix the logo."], days_ago=3, reply=REPLY)  # no standing instruction
    write_session(dsh, a, 2, ["Fix the navbar.", A_ONLY], days_ago=2.5, reply=REPLY)  # a rule of A's only
    b1 = write_session(dsh, b, 3, ["Add the CSV export.", B_RULE], days_ago=2, reply=REPLY)
    b2 = write_session(dsh, b, 4, ["Fix the export's header.", B_AGAIN], days_ago=1, reply=REPLY)
    r, requests = _replay(["--cwd", str(b)], monkeypatch)
    assert (r["sessions"], r["context_sessions"]) == (2, 0)
    assert [(i["session"], i["earlier"]["session"]) for i in r["restated_items"]] == [(b2, b1)]
    assert [tool_of(q) for q in requests].count("memory_save") == 1 == r["extracted"]  # B's first only
    assert not any(w in text_of(q) for q in requests for w in ("logo", "navbar")), "A's sessions went to the model"


def test_since_and_last_narrow_the_context_with_the_project(tmp_path, monkeypatch):
    """`--since` applies to every session; `--last N` counts the project's, and the other
    projects' sessions before the first of them are left out too (the memory starts empty there)."""
    from dsh_memory.context import memory_context
    from dsh_memory.replay.core import _history, _window
    from dsh_memory.scope import locate

    a, b = _projects(tmp_path)
    dsh = replay_env(tmp_path, monkeypatch)["dsh"]
    a1 = write_session(dsh, a, 1, [GLOBAL], days_ago=4, reply=REPLY)
    b1 = write_session(dsh, b, 2, [B_RULE], days_ago=3, reply=REPLY)
    a2 = write_session(dsh, a, 3, [GLOBAL, A_ONLY], days_ago=2, reply=REPLY)
    b2 = write_session(dsh, b, 4, [GLOBAL_AGAIN], days_ago=1, reply=REPLY)
    write_session(dsh, a, 5, [GLOBAL], days_ago=0.5, reply=REPLY)
    with memory_context() as ctx:
        every, _ = _history(ctx, locate(str(b)), None)
        recent, _ = _history(ctx, locate(str(b)), datetime.now(UTC) - timedelta(days=2.5))
    assert [(s.id, s.context) for s in _window(every, None)] == [(a1, True), (b1, False), (a2, True), (b2, False)]
    assert [s.rules for s in every if s.id == a2] == [[GLOBAL]]  # a context session's global rules only
    assert [s.id for s in _window(every, 1)] == [b2]
    assert [s.id for s in _window(every, 2)] == [b1, a2, b2]
    assert [s.id for s in _window(recent, None)] == [a2, b2]


def test_the_crafted_rules_are_what_phase_1_says(tmp_path, monkeypatch):
    """Phase 1's classifier finds the rules; its scoping makes GLOBAL global, the others not."""
    from dsh_memory import readers
    from dsh_memory.settings import MemorySettings

    a, _ = _projects(tmp_path)
    dsh = replay_env(tmp_path, monkeypatch)["dsh"]
    sid = write_session(dsh, a, 1, ["Fix the logo.", GLOBAL, A_ONLY], days_ago=1)
    ref = next(r for r in readers.discover(MemorySettings.from_env(os.environ).roots) if r.id == sid)
    assert standing_instructions(readers.load(ref)) == [GLOBAL, A_ONLY]
    assert stated_as_general(GLOBAL) and not stated_as_general(A_ONLY) and not stated_as_general(GLOBAL_AGAIN)


def test_the_text_output_says_how_many_sessions_were_context(capsys):
    from dsh_memory.cli.replay import _print
    from dsh_memory.replay.result import ReplayResult

    result = ReplayResult(scope="/w/b", sessions=2, context_sessions=1, matcher="words only")
    _print(result.model_dump(mode="json"))
    assert capsys.readouterr().out.startswith(
        "Replayed 2 sessions (/w/b) and 1 of other projects for their global rules"
    )
