"""`dsh-memory replay` on a crafted history: a rule, its restatement in other words, a new rule
and both restated again; the real CLI, the real extract and consolidate flows on a real Prefect
server (`prefect_api`), the model answers from the fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.readpath import embedder
from dsh_memory.replay.result import (
    MAX_REPORT_BYTES,
    ReplayResult,
    Restated,
    Said,
    load_report,
    report_path,
    save_report,
    vault_page,
)
from dsh_memory.replay.rules import Matcher, standing_instructions, terms
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from dsh_memory.testing.sessions import write_session
from tests.replay_helpers import replay_env, text_of, tool_of

RULE = "Never mock our own code in the tests."
RULE_AGAIN = "Don't mock our own modules, the tests use the real parts."  # other words
NEW_RULE = "Always run `make lint` before committing."
NEW_AGAIN = "Remember: always run make lint before each commit."
REPLY = "Done; the build with `make` passes."


def answer(request: dict) -> Reply:
    """Phase 1: the first session's memory forgets its rule; the second's keeps both rules.
    Phase 2: the summary states what the raw memories say."""
    text = text_of(request)
    if tool_of(request) == "memory_write":
        lines = ["- The project builds with `make`."]
        if "mock our own code" in text:
            lines.append("- " + RULE)
        if "make lint" in text:
            lines.append("- " + NEW_RULE)
        body = "\n".join(lines) + "\n"
        return Reply.tool({"memory_md": "# Memory\n\n" + body, "memory_summary_md": "v1\n" + body})
    raw = "- The project builds with `make`."
    if "make lint" in text:
        raw += f"\n- {RULE}\n- {NEW_RULE}"
    return Reply.tool({"raw_memory": raw, "rollout_summary": "## Task\nA fix.\n", "rollout_slug": "a fix"})


@pytest.fixture
def history(tmp_path: Path, monkeypatch) -> dict:
    """Three sessions of one repository (and one of another), a live memory root with a file."""
    proj, other = tmp_path / "proj", tmp_path / "other"
    for p in (proj, other):
        (p / ".git").mkdir(parents=True)
    env = replay_env(tmp_path, monkeypatch)
    dsh = env["dsh"]
    ids = [
        write_session(dsh, proj, 1, ["Fix the failing date parser.", RULE], days_ago=3, reply=REPLY),
        write_session(dsh, proj, 2, [f"Add the CSV export. {RULE_AGAIN}", NEW_RULE], days_ago=2, reply=REPLY),
        write_session(
            dsh,
            proj,
            3,
            ["Fix the export's header.", NEW_AGAIN, "I told you: " + RULE.lower()],
            days_ago=1,
            reply=REPLY,
        ),
        write_session(dsh, other, 4, ["Fix the logo. Never use tabs in the stylesheets."], days_ago=1, reply=REPLY),
    ]
    return {"proj": proj, "other": other, "ids": ids, "live": env["live"], "tmp": env["tmp"]}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.usefixtures("prefect_api")
def test_replay_counts_restated_rules_and_whether_memory_held_them(history, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(history["tmp"]))  # where the temporary root goes
    seen: list[Path] = []
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: seen.append(Path(real_mkdtemp(*a, **k))) or str(seen[-1]))
    before, runs_before = _files(history["live"]), set(_tagged_runs())  # the server is the session's
    with FakeOpenAIServer(handler=answer) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        out = CliRunner().invoke(app, ["replay", "--cwd", str(history["proj"] / "src"), "--json"])
        tools = [tool_of(r) for r in fake.requests]
    assert out.exit_code == 0, out.output
    r = json.loads(out.stdout)
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("dsh-memory: replay: ")]
    assert lines and lines[-1] == "dsh-memory: replay: 3/3 sessions", out.stderr  # progress off a terminal
    assert r["summary"] == {"restated": 3, "anticipated": 2, "missed": 1, "new_rules": 2}
    assert r["sessions"] == 3  # the other repository's session is not replayed
    assert [(p["project"], p["sessions"], p["missed"]) for p in r["projects"]] == [(str(history["proj"]), 3, 1)]
    a, b, c = history["ids"][:3]
    missed = [i for i in r["restated_items"] if not i["anticipated"]]
    assert [(i["session"], i["text"], i["earlier"]["session"], i["earlier"]["text"]) for i in missed] == [
        (b, RULE_AGAIN, a, RULE)
    ]
    held = sorted((i["session"], i["earlier"]["text"]) for i in r["restated_items"] if i["anticipated"])
    assert held == sorted([(c, RULE), (c, NEW_RULE)])
    assert [(n["session"], n["text"]) for n in r["new_rules"]] == [(a, RULE), (b, NEW_RULE)]
    # Incremental: A and B extracted once each, in one Phase 1 run (C needs no memory after it);
    # a consolidation before B and before C, each when it has raw memories to merge.
    assert tools.count("memory_save") == 2 and r["extracted"] == 2, tools
    assert 1 <= r["consolidations"] == tools.count("memory_write") <= 2, (tools, r["consolidations"])
    # The live memory is untouched but for the report; the temporary root is gone.
    after = _files(history["live"])
    assert after.pop(".state/replay.json")
    assert after == before
    replay_roots = [p for p in seen if p.name.startswith("dsh-memory-replay-")]
    assert len(replay_roots) == 1 and not replay_roots[0].exists()
    assert load_report(history["live"]).summary.missed == 1  # what the vault shows
    # One flow run for the replay, its Phase 1 a subflow; its consolidations are the consolidate
    # flow's tasks run as steps of it, not flow runs; neither publishes the live pipeline's
    # artifacts (the Prefect UI's latest Phase 1 batch and consolidation stay the pipeline's).
    runs = {i: name for i, name in _tagged_runs().items() if i not in runs_before}
    assert sorted(runs.values()) == ["extract", "replay"], runs
    replay_run = next(i for i, name in runs.items() if name == "replay")
    assert _task_runs(replay_run, "phase2-apply", r["consolidations"]) == r["consolidations"]
    assert not {"phase1-batch", "phase2-consolidation"} & _artifact_keys(list(runs))
    from dsh_memory.serve.status import _query_server

    shown = _query_server("", 200)  # status and the vault: the replay's runs are not the pipeline's
    assert not {run["id"] for run in shown["last_runs"] + shown["in_flight"]} & set(runs), shown


def _tagged_runs() -> dict[str, str]:
    """Flow run id → flow name, of the runs tagged as the replay's in Prefect (not the live pipeline's)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    from dsh_memory.replay.result import RUN_TAG

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[RUN_TAG])))
        names = {f.id: f.name for f in client.read_flows()}
    return {str(run.id): names[run.flow_id] for run in runs}


def _task_runs(flow_run_id: str, name: str, expected: int) -> int:
    """How many task runs named `name` the flow run holds, once the server has recorded `expected`
    of them (task runs reach it as events, a moment later; given up after a minute)."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter, TaskRunFilterName

    deadline = time.monotonic() + 60
    with get_client(sync_client=True) as client:
        while True:
            found = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_=name)),
            )
            n = sum(1 for t in found if t.name.rsplit("-", 1)[0] == name)
            if n >= expected or time.monotonic() > deadline:
                return n
            time.sleep(0.5)


def _artifact_keys(flow_run_ids: list[str]) -> set[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=flow_run_ids))
        )
    return {a.key for a in found if a.key}


@pytest.mark.parametrize("writer", ["model", "mechanical"])
@pytest.mark.usefixtures("prefect_api")
def test_a_replay_consolidation_writes_what_the_consolidate_flow_writes(history, tmp_path, monkeypatch, writer):
    """The replay's consolidation step (the consolidate flow's body inside the replay's run) and
    the consolidate flow, each on a copy of one root Phase 1 wrote: the same memory files. With
    the model writing the memory (the fake endpoint), and merged mechanically (the local model)."""
    import shutil

    from prefect import flow

    from dsh_memory.context import memory_context
    from dsh_memory.flows.consolidate import consolidate_flow, consolidate_step
    from dsh_memory.flows.extract import extract_flow

    staged, by_flow, by_step = tmp_path / "staged", tmp_path / "by-flow", tmp_path / "by-step"
    with FakeOpenAIServer(handler=answer) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        extract_flow(session_ids=history["ids"][:3], backfill=True, respect_idle=False, memory_root=str(staged))
        if writer == "mechanical":
            from dsh_memory.llm import model_files
            from dsh_memory.testing.models import SMOLLM2_135M

            monkeypatch.delenv("DSH_MEMORY_BASE_URL")
            monkeypatch.setenv("DSH_MEMORY_PROVIDER", "local")
            monkeypatch.setenv("DSH_MEMORY_MODEL_PATH", str(model_files.bundled_model_path(SMOLLM2_135M)))
        shutil.copytree(staged, by_flow)
        shutil.copytree(staged, by_step)
        a = consolidate_flow(force=True, memory_root=str(by_flow))
        with memory_context(memory_root=by_step).for_run() as ctx:
            b = flow(name="replay-step")(lambda: consolidate_step(ctx, force=True))()
    assert a.outcome == b.outcome == "consolidated", (a, b)
    assert (a.model.output_source == "mechanical") == (writer == "mechanical"), a.model
    assert (a.mode, a.inputs, a.model.output_source) == (b.mode, b.inputs, b.model.output_source)

    def memory(root: Path) -> dict[str, bytes]:
        return {k: v for k, v in _files(root).items() if not k.startswith(".state")}

    assert memory(by_flow) == memory(by_step)
    assert "mock our own code" in (by_step / "MEMORY.md").read_text()  # not two empty memories


def _a_rule_restated(first_session: str, project: str, rule: str, again: str) -> ReplayResult:
    """A replay of two sessions: `rule` said in the first, new, and said again (`again`) in s-2."""
    first = Said(session=first_session, project=project, text=rule)
    result = ReplayResult(
        restated_items=[Restated(session="s-2", project=project, text=again, earlier=first)],
        new_rules=[first],
        sessions=2,
        matcher="words only",
    )
    result.tally()
    return result


def test_the_text_output_puts_both_sessions_words_side_by_side(capsys):
    from dsh_memory.cli.replay import _print

    _print(_a_rule_restated("s-1", "/w/proj", RULE, RULE_AGAIN).model_dump(mode="json"))
    out = capsys.readouterr().out.splitlines()
    said = next(i for i, line in enumerate(out) if RULE_AGAIN in line)
    assert "s-2" in out[said] and "first" in out[said + 1] and "s-1" in out[said + 1] and RULE in out[said + 1]
    assert out[-1] == "Total: 1 restated, 0 anticipated, 1 missed, 1 new rules."


def test_the_text_output_shows_a_rules_escape_sequences_not_obeys_them(capsys):
    """A rule is a user's words from a session log: its escape sequences and bidi overrides are
    printed as `\\x1b`, `\\u202e` (the command's `show`), never sent to the terminal."""
    from dsh_memory.cli._common import show
    from dsh_memory.cli.replay import _print

    hostile = RULE + " \x1b]0;owned\x07\x1b[2J\u202e\x9b31m"
    result = _a_rule_restated("s-1\x1b[2J", "/w/\x1b[2Jproj", hostile, hostile)
    show(lambda: result.model_dump(mode="json"), False, _print)
    out = capsys.readouterr().out
    assert RULE + " \\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m" in out
    assert not [c for c in out if c not in "\n\t" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c == "\u202e")]


def test_the_text_output_says_the_bound_that_left_older_sessions_out(capsys):
    """Past MAX_SESSIONS logs, the older ones are not read: said with that bound, not with the
    number of sessions replayed ("at most 10 are replayed" after `--last 10`), and not at all when
    `--last N` found its N sessions among those read (the older ones changed nothing)."""
    from dsh_memory.cli.replay import _print
    from dsh_memory.replay.core import MAX_SESSIONS

    for last, sessions, said in ((None, 4000, True), (10, 10, False), (10, 4, True)):
        _print(ReplayResult(sessions=sessions, left_out=7, last=last).model_dump(mode="json"))
        out = [line for line in capsys.readouterr().out.splitlines() if "left out" in line]
        assert out == (
            [f"(7 older session logs left out: a replay reads the {MAX_SESSIONS:,} most recent)"] if said else []
        )


def test_replay_errors_are_one_line_with_an_exit_code(history):
    runner = CliRunner()
    empty = history["proj"].parent / "elsewhere"
    empty.mkdir()
    for args, code in (
        (["replay", "--cwd", str(empty)], 3),  # no session there
        (["replay", "--all", "--cwd", str(empty)], 2),
        (["replay", "--all", "--since", "last tuesday"], 2),
        (["replay", "--all", "--since", "2099-01-01"], 3),  # none since: no report (was exit 0, an empty one)
    ):
        out = runner.invoke(app, args)
        assert out.exit_code == code, (args, out.output)
        assert out.output.count("\n") == 1 and out.output.startswith("error: "), out.output
        assert "Traceback" not in out.output
    out = runner.invoke(app, ["replay", "--cwd", str(empty), "--json"])
    assert out.exit_code == 3 and json.loads(out.stdout)["error"]["code"] == "not_found"


@pytest.mark.usefixtures("prefect_api")
def test_keep_never_builds_in_the_live_root_nor_over_a_kept_memory(history, tmp_path, monkeypatch):
    """`--keep DIR` builds in DIR/memories, which starts empty: never the live memory root (its
    handbook would be replaced by the replay's) nor a folder in it (served and searched as live
    memory), nor a memory a replay kept there before."""
    live = tmp_path / "home" / ".dsh" / "memories"
    live.mkdir(parents=True)
    (live / "MEMORY.md").write_text("# Memory\n\n- the live handbook\n")
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(live))
    kept = tmp_path / "kept"
    (kept / "memories").mkdir(parents=True)
    (kept / "memories" / "MEMORY.md").write_text("# Memory\n\n- an earlier replay's\n")
    (tmp_path / "a-file").write_text("not a folder\n")  # was exit 1, "Not a directory: a-file/memories"
    (tmp_path / "holds-a-file").mkdir()
    (tmp_path / "holds-a-file" / "extracted").write_text("not a folder\n")
    with FakeOpenAIServer(handler=answer) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        for keep in (live.parent, live, live / "extensions", kept, tmp_path / "a-file", tmp_path / "holds-a-file"):
            out = CliRunner().invoke(app, ["replay", "--cwd", str(history["proj"]), "--keep", str(keep)])
            assert out.exit_code == 2 and out.output.startswith("error: ") and out.output.count("\n") == 1, out.output
        assert fake.request_count == 0
    assert _files(live) == {"MEMORY.md": b"# Memory\n\n- the live handbook\n"}


@pytest.mark.usefixtures("prefect_api")
def test_a_replay_whose_every_extraction_failed_says_why_and_fails(history, monkeypatch):
    """A refused key fails Phase 1 on every session: no memory was built, so the replay has
    nothing to measure. It says why in one line and exits 1, not "every rule missed" and 0."""
    refused = Reply.error(401, {"error": {"message": "invalid api key"}})
    with FakeOpenAIServer(handler=lambda _: refused) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        out = CliRunner().invoke(app, ["replay", "--cwd", str(history["proj"])])
    assert out.exit_code == 1 and out.stdout == "" and "Traceback" not in out.stderr, out.output
    error = [line for line in out.stderr.splitlines() if not line.startswith("dsh-memory: replay: ")]  # progress
    assert len(error) == 1 and error[0].startswith("error: replay stopped: Phase 1 failed on every session"), error
    assert "invalid api key" in error[0], error


@pytest.mark.usefixtures("prefect_api")
def test_a_replay_without_a_model_route_stops_with_one_line_and_its_run_failed(history, monkeypatch):
    """An error inside the replay's flow run reaches the CLI as itself (a configuration error:
    one line, its exit code), and the run is marked failed in Prefect."""
    from prefect.client.orchestration import get_client

    from dsh_memory.errors import NoModelRouteError

    monkeypatch.delenv("DSH_MEMORY_API_KEY")
    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "openai")  # an endpoint, none configured
    before = set(_tagged_runs())
    out = CliRunner().invoke(app, ["replay", "--cwd", str(history["proj"])])
    assert out.exit_code == NoModelRouteError.exit_code, out.output
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    runs = {i: name for i, name in _tagged_runs().items() if i not in before}
    assert sorted(runs.values()) == ["extract", "replay"], runs
    with get_client(sync_client=True) as client:
        states = {name: client.read_flow_run(i).state for i, name in runs.items()}
    assert states["replay"].is_failed() and states["extract"].is_completed(), states  # Phase 1 skipped


def test_standing_instructions_are_phase_1s_rules(history):
    from dsh_memory import readers
    from dsh_memory.settings import MemorySettings

    settings = MemorySettings.from_env(os.environ)
    refs = {r.id: r for r in readers.discover(settings.roots)}
    session = readers.load(refs[history["ids"][2]])
    assert standing_instructions(session) == [NEW_AGAIN, "I told you: " + RULE.lower()]  # not the task
    assert standing_instructions(session, limit=1) == [NEW_AGAIN]


def test_replay_reads_a_rule_with_the_sentence_it_needs_as_phase_1_keeps_it():
    """Replay counts the rules Phase 1 keeps, as Phase 1 says them: a fragment after its sentence."""
    from dsh_memory.phase1.evidence import gather
    from tests.session_helpers import make_session

    session = make_session(
        ("user", "can you make permissions tighter. only exactly whats needed"),
        ("user", "Use pnpm, not npm."),
        cwd="/home/dev/src/shop",
    )
    kept = ["can you make permissions tighter. only exactly whats needed", "Use pnpm, not npm."]
    assert standing_instructions(session) == [r.text for r in gather(session).rules] == kept


@pytest.mark.parametrize("semantic", [False, True])
def test_the_matcher_pairs_restatements_and_keeps_other_rules_apart(semantic):
    emb = embedder.get() if semantic else None
    if semantic and emb is None:
        pytest.skip("the search embedding model is not installed")
    m = Matcher(emb)
    assert m.same(RULE, RULE_AGAIN) and m.same(NEW_RULE, NEW_AGAIN)
    assert m.same("Never push to main directly.", "don't push directly to main, open a PR")
    for a, b in (
        (RULE, NEW_RULE),
        ("Never push to main directly.", "Never delete the migrations folder."),
        ("Don't commit the .env file.", "Always commit the lock file."),
        (
            "What I said was run `git add … && git commit …` so I approve it once.",
            "it would be great if it didn't commit",
        ),
    ):
        assert not m.same(a, b), (a, b)
    assert terms("Always run `make lint` before committing.") == {"run", "lint", "commit"}
    lines = ["The project builds with `make`.", "Tests never mock our own code."]
    assert m.holder([RULE], lines) == lines[1]
    assert m.holder([NEW_RULE], lines) == ""
    if semantic:  # only the meaning ties these two together
        assert m.same("don't use emojis in the UI", "no emoji in user-facing text") == "meaning"


def test_the_saved_report_holds_no_key_from_a_projects_path(tmp_path):
    """A replay's projects are its sessions' cwds: a cwd ending in a key put the key in
    `.state/replay.json`, in the memory root. The report is kept redacted."""
    project = "/home/me/sk-proj-Zr8Tq2Wm5Kx9Lb3Nv7Hc4Jd1Fg6Ys0Ue"
    said = Said(session="s-1", project=project, text=RULE, started=datetime(2026, 11, 2, 9, 30, tzinfo=UTC))
    result = ReplayResult(new_rules=[said], sessions=1, scope=project)
    result.tally()
    text = save_report(tmp_path, result).read_text()
    assert "Zr8Tq2Wm5Kx9" not in text and "/home/me/[REDACTED:api_key]" in text
    assert load_report(tmp_path).new_rules[0].text == RULE


def test_the_last_replay_is_shown_in_the_vault(tmp_path):
    from starlette.testclient import TestClient

    from dsh_memory.serve.http_app import create_app
    from dsh_memory.settings import MemorySettings

    root = tmp_path / "mem"
    first = Said(session="s-1", project="/w/proj", text=RULE, started=datetime(2026, 11, 2, 9, 30, tzinfo=UTC))
    result = ReplayResult(
        restated_items=[Restated(session="s-2", project="/w/proj", text="<b>" + RULE_AGAIN, earlier=first)],
        new_rules=[first],
        sessions=2,
        finished_at=datetime(2026, 11, 3, 8, 0, tzinfo=UTC),
    )
    result.tally()
    save_report(root, result)
    assert report_path(root).is_file()
    client = TestClient(create_app(MemorySettings(memory_root=root)), base_url="http://127.0.0.1")
    page = client.get("/vault/replay")
    assert page.status_code == 200
    assert "&lt;b&gt;" + RULE_AGAIN.replace("'", "&#39;") in page.text and "<b>Please" not in page.text
    assert "<b>1</b> missed" in page.text
    assert "2026-11-03 08:00 UTC" in page.text and "2026-11-02 09:30 UTC" in page.text
    report_path(root).write_text("{not json")  # a broken report is said, not taken for no replay
    broken = client.get("/vault/replay").text
    assert "replay.json cannot be read: JSONDecodeError" in broken and "No replay yet" not in broken
    report_path(root).unlink()
    os.mkfifo(report_path(root))  # a FIFO in its place is said at once, never waited on
    shown: list = []
    reader = threading.Thread(target=lambda: shown.append(vault_page(root)), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "the vault's replay page waits on a FIFO"
    assert "not a regular file" in shown[0]["error"]
    report_path(root).unlink()
    assert "No replay yet" in client.get("/vault/replay").text


def test_a_report_too_long_for_the_vault_is_saved_with_its_lists_cut_to_fit(tmp_path):
    """A long history (up to 5,000 sessions of 50 rules) restates rules by the ten thousand: its
    report outgrew what the vault reads back (MAX_REPORT_BYTES), which then showed an error in
    place of the last replay. Its lists are cut to fit, the missed first; its totals stay whole."""
    root = tmp_path / "mem"
    when = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    first = Said(session="s-0", project="/w/proj", text=RULE, started=when)
    items = [
        Restated(session=f"s-{n}", project="/w/proj", text=f"{n} {RULE_AGAIN}", earlier=first, anticipated=n % 2 == 0)
        for n in range(1, MAX_REPORT_BYTES // 400)
    ]
    result = ReplayResult(restated_items=items, new_rules=[first] * 200, sessions=len(items) + 1, finished_at=when)
    result.tally()
    assert len(result.model_dump_json(indent=1)) > MAX_REPORT_BYTES
    save_report(root, result)
    assert report_path(root).stat().st_size <= MAX_REPORT_BYTES
    shown = vault_page(root)
    assert "error" not in shown and shown["replay"].summary == result.summary, shown.get("error")
    assert shown["missed"] and shown["missed"][0].text == items[0].text  # the missed first, in order
    assert shown["replay"].items_cut > 0
    from starlette.testclient import TestClient

    from dsh_memory.serve.http_app import create_app
    from dsh_memory.settings import MemorySettings

    client = TestClient(create_app(MemorySettings(memory_root=root)), base_url="http://127.0.0.1")
    assert f"{shown['replay'].items_cut} of the items are left out" in client.get("/vault/replay").text


def test_a_long_history_is_bounded_to_its_most_recent_sessions(history):
    from dsh_memory.context import memory_context
    from dsh_memory.replay.core import _history

    with memory_context() as ctx:
        kept, left_out = _history(ctx, None, None, limit=2)
        every, none_left = _history(ctx, None, None)
    assert len(every) == 4 and none_left == 0
    assert (len(kept), left_out) == (2, 2)
    assert [s.id for s in kept] == [s.id for s in every][-2:]  # the two that started last
    since = datetime.now(UTC) - timedelta(days=1.5)
    with memory_context() as ctx:
        recent, _ = _history(ctx, None, since)
    assert [s.id for s in recent] == history["ids"][2:]  # --since: the sessions started after it


def test_a_session_whose_cwd_holds_half_an_emoji_is_replayed_not_a_traceback(history):
    """A JSON log may hold a lone UTF-16 surrogate (half an emoji, as JavaScript writes it), in a
    cwd too: looking for that path's repository raised UnicodeEncodeError, ending the replay of
    the whole history in a traceback. No such path exists: it is its own project, as a gone one."""
    from dsh_memory.context import memory_context
    from dsh_memory.replay.core import _history

    odd = write_session(history["proj"].parent / "dsh", "/work/app\ud83d/src", 9, [RULE], days_ago=0.5)
    with memory_context() as ctx:
        replayed, _ = _history(ctx, None, None)
    assert [(s.project, s.rules) for s in replayed if s.id == odd] == [("/work/app\ufffd/src", [RULE])]


@pytest.mark.usefixtures("prefect_api")
def test_a_rule_holding_half_an_emoji_is_reported_not_a_traceback(history, monkeypatch):
    """A lone UTF-16 surrogate (half an emoji, as JavaScript writes it in a JSON log) in a rule
    restated later, and in a session's cwd: the whole replay ran, then saving its report (and
    printing it) raised UnicodeEncodeError. It is reported with U+FFFD in its place."""
    dsh = history["proj"].parent / "dsh"
    odd = "/work/app\ud83d"
    write_session(dsh, odd, 7, ["Never commit the generated \ud83d files."], days_ago=0.9)
    write_session(dsh, odd, 8, ["Again: never commit the generated \ud83d files."], days_ago=0.8)
    with FakeOpenAIServer(handler=answer) as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        out = CliRunner().invoke(app, ["replay", "--all"])
    assert out.exit_code == 0, out.output
    assert "Again: never commit the generated \ufffd files." in out.stdout, out.stdout
    report = load_report(history["live"])
    assert {p.project for p in report.projects} >= {"/work/app\ufffd"}
    assert [i.earlier.text for i in report.restated_items if i.project == "/work/app\ufffd"] == [
        "Never commit the generated \ufffd files."
    ]


def test_a_forgotten_session_is_not_replayed(history):
    """`forget SESSION` excludes a session from extraction, in the live state: the replay's Phase 1
    runs over a temporary root whose state knows nothing of it, so a forgotten session was sent to
    the model again and its rules reported. It is left out of the history, as Phase 1 leaves it."""
    from dsh_memory.context import memory_context
    from dsh_memory.replay.core import _history

    forgotten = history["ids"][1]
    out = CliRunner().invoke(app, ["forget", forgotten])
    assert out.exit_code == 0, out.output
    with memory_context() as ctx:
        replayed, _ = _history(ctx, None, None)
    assert [s.id for s in replayed] == [i for i in history["ids"] if i != forgotten]


def test_the_bound_is_on_the_logs_read_as_the_docs_say(history):
    """ "A replay reads the 5,000 most recently written session logs": it read on until it had that
    many sessions to replay, so with --cwd every log of every other project was read (a history
    of 50,000 logs, all of them). It stops at the bound, and says so when the project has no
    session among them, instead of replaying an empty history."""
    from dsh_memory import scope
    from dsh_memory.context import memory_context
    from dsh_memory.errors import NotFoundError
    from dsh_memory.replay.core import _history

    logs = sorted((history["proj"].parent / "dsh" / "sessions").rglob("*.jsonl"))
    for age, sid in enumerate(reversed(history["ids"])):  # written in the order they started
        path = next(p for p in logs if sid in str(p))
        os.utime(path, (time.time() - 3600 * (age + 1),) * 2)
    proj = scope.locate(str(history["proj"]))
    with memory_context() as ctx:
        kept, left_out = _history(ctx, proj, None, limit=2)  # the other project's newest, then one
        assert ([s.id for s in kept], left_out) == ([history["ids"][2]], 2)
        with pytest.raises(NotFoundError, match="3 older session logs left out"):
            _history(ctx, proj, None, limit=1)  # the newest log is the other project's


def test_ctrl_c_on_the_temporary_prefect_server_exits_130_at_once(history, tmp_path, new_prefect_home):
    """A terminal's Ctrl-C signals the whole foreground process group: the replay and, were it in
    that group, the temporary Prefect server the replay started. The replay still reports its runs'
    end through that server, then exits 130, instead of retrying a dead server for minutes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # the temporary server
    env |= {"PREFECT_HOME": str(new_prefect_home(tmp_path / "prefect")), "DSH_MEMORY_IGNORE_BLOCKS": "1"}
    with FakeOpenAIServer(latency_seconds=600) as never:
        env["DSH_MEMORY_BASE_URL"] = never.base_url
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "replay", "--cwd", str(history["proj"])],
            cwd=str(Path(__file__).resolve().parents[1]),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        try:
            while never.request_count == 0 and proc.poll() is None:
                time.sleep(0.1)
            assert proc.poll() is None, "the replay ended before it could be interrupted"
            os.killpg(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=120)  # it takes seconds; a dead server, minutes
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.rstrip().endswith("interrupted"), err[-2000:]
