"""Phase 2 flow on a real Prefect server (`prefect_api`), model answers from the fake
OpenAI-compatible server on loopback. No mocks of our own code."""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_memory import scope as sc
from dsh_memory.consolidation.result import Phase2Result
from dsh_memory.consolidation.skill_inventory import skills_inventory
from dsh_memory.readpath import list_dir
from dsh_memory.readpath.scoping import scope_of
from dsh_memory.storage.locks import is_running, phase_lock
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from dsh_memory.storage.store_format import RawBlock
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2H1g0"
NOW = datetime.now(UTC)


@pytest.fixture
def fake():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def root(tmp_path: Path, monkeypatch, fake, prefect_api) -> Path:
    r = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
    monkeypatch.setenv("DSH_MEMORY_API_KEY", "test")
    monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(r))
    MemoryStore(r).ensure_layout()
    return r


def run_flow(**kw) -> Phase2Result:
    from dsh_memory.flows.consolidate import consolidate_flow

    return consolidate_flow(**kw)


def add_raw(root: Path, slug: str, body: str, session: str = "s1") -> str:
    return MemoryStore(root).append_raw(
        RawBlock(
            id="", session_id=session, slug=slug, source="dsh", cwd="/work/proj", updated_at=NOW.isoformat(), body=body
        )
    )


def with_state(root: Path, fn):
    st = StateStore(root)
    try:
        return fn(st)
    finally:
        st.close()


def all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def artifacts_of(flow_run_id: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["phase2-consolidation"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
            )
        )


def test_init_then_incremental_with_skills_retirement_notes_and_artifacts(root: Path, fake: FakeOpenAIServer):
    store = MemoryStore(root)
    # Nothing to do yet: no pending flag, no notes, no raw blocks → no model call.
    first = run_flow()
    assert first.outcome == "skipped: nothing to consolidate" and fake.request_count == 0

    add_raw(root, "fix-ci", f"- CI cache key includes the lockfile; key {SECRET}")
    note = store.add_note("I prefer uv over pip.", title="tools")
    with_state(root, lambda st: st.set_pending(True))
    fake.script(
        Reply.tool(
            {
                "memory_md": f"# Task Group: proj\n- user prefers uv (note)\n- leaked {SECRET}\n",
                "memory_summary_md": "## User preferences\n- use uv\n",  # no v1 line: repaired
            }
        )
    )
    init = run_flow()
    assert init.outcome == "consolidated" and init.mode == "INIT", init
    assert init.inputs["raw_blocks"] == 1 and init.inputs["notes"] == 1
    assert store.summary_path.read_text().startswith("v1\n\n## User preferences")
    assert init.changes.summary_repaired is True
    assert store.read_raw_blocks() == [] and len(store.read_raw_archive_blocks()) == 1
    assert not (root / note).exists() and store.list_notes() == []
    meta = with_state(root, lambda st: st.get_meta())
    assert meta.pending_consolidation is False and meta.last_phase2_at is not None and meta.phase2_error is None
    first_request = fake.requests[0]
    assert first_request["tool_choice"]["function"]["name"] == "memory_write"
    user = first_request["messages"][1]["content"]
    assert "I prefer uv over pip." in user and "mode: INIT" in user

    # Cooldown: new evidence, automatic run skips without calling the model.
    add_raw(root, "deploy", "- deploy with make deploy", session="s2")
    store.write_rollout_summary(
        "old-work",
        {"session_id": "s-old", "cwd": "/work/proj", "updated_at": "2020-01-01T00:00:00+00:00"},
        "# Old work",
    )
    store.write_rollout_summary(
        "fresh-work", {"session_id": "s-new", "cwd": "/work/proj", "updated_at": NOW.isoformat()}, "# Fresh work"
    )
    cooled = run_flow()
    assert cooled.outcome == "skipped: cooldown" and fake.request_count == 1
    assert cooled.gate.cooldown_remaining_seconds > 0

    fake.script(
        Reply.tool(
            {
                "memory_md": "# Task Group: proj\n- user prefers uv\n- deploy: make deploy\n",
                "memory_summary_md": "v1\n\n## User preferences\n- use uv\n",
                "skills": [
                    {
                        "name": "deploy-proj",
                        "skill_md": "---\nname: deploy-proj\ndescription: Deploy\n---\n1. make deploy\n",
                        "files": [{"path": "scripts/deploy.sh", "content": "make deploy\n"}],
                    },
                    {"name": "../../escape", "skill_md": "x"},
                    {
                        "name": "sneaky",
                        "skill_md": "x",
                        "files": [{"path": "scripts/../../../../escape.txt", "content": "x"}],
                    },
                    {"name": "abs", "skill_md": "x", "files": [{"path": "/tmp/escape.txt", "content": "x"}]},
                ],
                "retire_summaries": ["old-work", "fresh-work"],
            }
        )
    )
    inc = run_flow(force=True)
    assert inc.outcome == "consolidated" and inc.mode == "INCREMENTAL", inc
    second_user = fake.requests[1]["messages"][1]["content"]
    assert "- user prefers uv (note)" in second_user  # the current MEMORY.md is in the input
    assert "FORGETTING CANDIDATE" in second_user
    c = inc.changes
    assert c.skills_written == ["deploy-proj"] and len(c.skill_errors) == 3
    assert sorted(p.name for p in store.skills_dir.iterdir()) == ["deploy-proj"]
    assert sorted(p.relative_to(store.skills_dir).as_posix() for p in store.skills_dir.rglob("*") if p.is_file()) == [
        "deploy-proj/SKILL.md",
        "deploy-proj/scripts/deploy.sh",
    ]
    assert not (root.parent / "escape.txt").exists() and not (root / "escape.txt").exists()
    assert c.retired == ["old-work"] and c.retire_refused == ["fresh-work"]
    assert (store.retired_dir / "old-work.md").is_file() and (store.rollout_dir / "fresh-work.md").is_file()

    assert SECRET.encode() not in all_bytes(root)  # planted in a raw memory and in model output
    arts = artifacts_of(inc.flow_run_id)
    assert len(arts) == 1
    md = arts[0].data
    assert "consolidated" in md and "INCREMENTAL" in md and "deploy-proj" in md and "openai / fake-model" in md
    init_md = artifacts_of(init.flow_run_id)[0].data
    assert "[REDACTED" in init_md and SECRET not in init_md
    assert "cooldown" in artifacts_of(cooled.flow_run_id)[0].data


def test_single_flight_threads_and_held_lock(root: Path, fake: FakeOpenAIServer):
    # A stale pending flag with no evidence: no model call, flag cleared.
    with_state(root, lambda st: st.set_pending(True))
    stale = run_flow(force=True)
    assert stale.outcome == "skipped: nothing to consolidate" and fake.request_count == 0
    assert with_state(root, lambda st: st.get_meta().pending_consolidation) is False

    add_raw(root, "a", "- one fact")
    with_state(root, lambda st: st.set_pending(True))
    # A held lock (another process/deployment run): skipped at once, no model call.
    with phase_lock(root, "phase2"):
        held = run_flow(force=True)
    assert held.outcome == "skipped: already running" and fake.request_count == 0
    assert artifacts_of(held.flow_run_id)  # skips are in run history too

    # Two runs at once: the model answers the one that took the lock only after the other run has
    # returned, so that one met the lock held during the call (and waited for nothing).
    other_returned = threading.Event()
    returned_first: list[bool] = []

    def answer_after_the_other_run(request: dict) -> Reply:
        returned_first.append(other_returned.wait(timeout=120))
        return Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n\nx\n"})

    fake.handler = answer_after_the_other_run
    results: list[Phase2Result] = []

    def one_run() -> None:
        try:
            results.append(run_flow(force=True))
        finally:
            other_returned.set()

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    outcomes = sorted(r.outcome for r in results)
    assert len(outcomes) == 2 and outcomes[0] == "consolidated" and outcomes[1].startswith("skipped:"), outcomes
    assert fake.request_count == 1 and returned_first == [True]  # the skip did not wait for the lock


AFTER = "# Task Group: after\napplies_to: cwd=/work/proj\n- new fact\n"  # the fact in its project's group


def test_killed_mid_run_leaves_files_intact_and_lock_released(root: Path, fake: FakeOpenAIServer):
    store = MemoryStore(root)
    store.atomic_write("MEMORY.md", "# Task Group: before\n- old fact\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- new fact")
    with_state(root, lambda st: st.set_pending(True))
    fake.script(Reply.tool({"memory_md": "# never\n", "memory_summary_md": "v1\n\nnever\n"}, delay_seconds=60))
    code = "from dsh_memory.flows.consolidate import consolidate_flow; consolidate_flow(force=True)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=str(REPO),
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while fake.request_count == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fake.request_count == 1, "the child never reached the model call"
        assert is_running(root, "phase2") is True
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert is_running(root, "phase2") is False  # the kernel released the lock
    assert store.memory_md_path.read_text() == "# Task Group: before\n- old fact\n"
    assert store.summary_path.read_text() == "v1\n\n- before\n"
    assert [b.body for b in store.read_raw_blocks()] == ["- new fact"]
    assert not [p for p in root.rglob("*.tmp")]
    fake.script(Reply.tool({"memory_md": AFTER, "memory_summary_md": "v1\n\n- after\n"}, delay_seconds=0))
    after = run_flow(force=True)
    assert after.outcome == "consolidated", after
    assert store.memory_md_path.read_text() == AFTER


def test_killed_between_the_files_of_a_skill_leaves_the_skill_as_it_was(root: Path, fake: FakeOpenAIServer):
    """A skill's files were written one by one into its folder, SKILL.md first: a kill after it left
    the new SKILL.md with the old scripts (a new skill: with none), a skill neither version was.
    The child dies at the first SKILL.md it puts in place (os.replace, as the kernel would kill it);
    the skill is whole, as it was, and the next run writes the new one whole."""
    store = MemoryStore(root)
    old = {"SKILL.md": "---\nname: deploy\ndescription: Deploy\n---\n1. run scripts/deploy.sh\n"}
    old["scripts/deploy.sh"] = "make deploy\n"
    for rel, text in old.items():
        store.atomic_write(f"skills/deploy/{rel}", text)
    add_raw(root, "a", "- deploy with make ship")
    new_md = "---\nname: deploy\ndescription: Deploy\n---\n1. run scripts/ship.sh\n"
    skill = {"name": "deploy", "skill_md": new_md, "files": [{"path": "scripts/ship.sh", "content": "make ship\n"}]}
    answer = {"memory_md": "# Task Group: /work/proj\n- deploy with make ship\n", "memory_summary_md": "v1\n"}
    fake.script(Reply.tool({**answer, "skills": [skill]}))
    code = (
        "import os, signal\n"
        "replace = os.replace\n"
        "def dies(src, dst, *a, **k):\n"
        "    replace(src, dst, *a, **k)\n"
        "    if str(dst).endswith('/SKILL.md'):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace = dies\n"
        "from dsh_memory.flows.consolidate import consolidate_flow; consolidate_flow(force=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=dict(os.environ), capture_output=True)
    assert proc.returncode == -signal.SIGKILL and fake.request_count == 1, proc.stderr[-2000:]
    folder = store.skills_dir / "deploy"
    assert {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()} == old
    fake.script(Reply.tool({**answer, "skills": [skill]}))
    assert run_flow(force=True).outcome == "consolidated"
    assert (folder / "SKILL.md").read_text() == new_md and (folder / "scripts/ship.sh").read_text() == "make ship\n"
    assert sorted(p.name for p in store.skills_dir.iterdir()) == [".removed", "deploy"]


def test_a_hand_edit_made_while_the_model_answers_is_not_overwritten(root: Path, fake: FakeOpenAIServer):
    """The user edits MEMORY.md (an editor, between two keystrokes of a scheduled run) while the
    model is consolidating the old text: the run writes nothing, the edit and the raw memories
    stay, and the next run merges from the edited handbook."""
    store = MemoryStore(root)
    store.atomic_write("MEMORY.md", "# Task Group: before\n- old fact\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- new fact")
    edited = "# Task Group: before\n- old fact\n- the user's own line\n"

    def edit_then_answer(request: dict) -> Reply:
        store.memory_md_path.write_text(edited)  # in place, as an editor saves
        return Reply.tool({"memory_md": "# never\n", "memory_summary_md": "v1\n\nnever\n"})

    fake.handler = edit_then_answer
    first = run_flow(force=True)
    assert first.outcome == "error" and "MEMORY.md" in first.error and "changed" in first.error, first
    assert store.memory_md_path.read_text() == edited and store.summary_path.read_text() == "v1\n\n- before\n"
    assert [b.body for b in store.read_raw_blocks()] == ["- new fact"]
    fake.handler = None
    fake.script(Reply.tool({"memory_md": AFTER, "memory_summary_md": "v1\n\n- after\n"}))
    assert run_flow(force=True).outcome == "consolidated"
    assert "the user's own line" in json.dumps(fake.requests[-1])  # the next run read the edit
    assert store.memory_md_path.read_text() == AFTER


def test_the_handbook_past_the_input_cap_is_kept_not_lost(root: Path, fake: FakeOpenAIServer, monkeypatch):
    """MEMORY.md longer than max_memory_md_chars (the cap lowered, a hand edit): the model sees its
    head only, so what it rewrites is the head; the rest stays as it was, under its task group,
    instead of vanishing with the rewrite: in MEMORY.md as far as the cap allows, in
    MEMORY.archive.md beyond it."""
    monkeypatch.setenv("DSH_MEMORY_MAX_MEMORY_MD_CHARS", "1000")
    store = MemoryStore(root)
    a = [f"- ledger fact {i}: run `make ledger-{i}` before a release" for i in range(20)]
    b = [f"- weather fact {i}: the radar cache lives in cache/radar-{i}" for i in range(20)]
    head = "# Task Group: /src/ledger\nscope: project /src/ledger\napplies_to: cwd=/src/ledger; reuse_rule=this project only\n"
    weather = "# Task Group: /src/weather\nscope: project /src/weather\n"
    store.atomic_write("MEMORY.md", head + "\n".join(a) + "\n\n" + weather + "\n".join(b) + "\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- new fact")
    fake.script(Reply.tool({"memory_md": head + a[0] + "\n", "memory_summary_md": "v1\n\n- after\n"}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated" and "MEMORY.md" in res.inputs["truncated"], res
    shown = fake.requests[-1]["messages"][1]["content"]
    unseen = [line for line in a + b if line not in shown]
    assert b[0] in unseen and a[-1] in unseen and a[0] in shown
    md = store.memory_md_path.read_text()
    assert len(md) <= 1000 and md.startswith(head) and a[0] in md.split("\n")  # the model's rewrite first
    assert md.count("scope: project /src/ledger") == 1  # the repeated heading's lines are no items
    archived = store.read_text("MEMORY.archive.md").split("\n")

    def project_of(line: str, lines: list[str]) -> str | None:
        at = next(n for n, ln in enumerate(lines) if ln == line or ln.startswith(f"{line} (retired: "))
        return [p for i, p in sc.handbook_groups(lines) if i <= at][-1]

    kept = [line for line in unseen if line in md.split("\n")]
    assert kept and len(kept) < len(unseen)
    for line in unseen:
        lines = md.split("\n") if line in kept else archived
        assert project_of(line, lines) == ("/src/weather" if "weather" in line else "/src/ledger"), line
    assert res.changes.unseen_kept > 0


def test_truncation_retry_then_failure_backoff_and_force(root: Path, fake: FakeOpenAIServer, tmp_path: Path):
    add_raw(root, "a", "- fact a")
    with_state(root, lambda st: st.set_pending(True))
    cut_in_summary = '{"memory_md": "# M\\n- a\\n", "memory_summary_md": "v1\\n\\n- partial'
    fake.script(
        Reply.truncated(cut_in_summary), Reply.tool({"memory_md": "# M\n- a\n", "memory_summary_md": "v1\n\n- a\n"})
    )
    ok = run_flow()
    assert ok.outcome == "consolidated", ok
    assert ok.model.max_tokens_tried == [32768, 65536]
    assert [r["max_tokens"] for r in fake.requests] == [32768, 65536]

    # A second memory root: two earlier failures, then one more (cut off even at the cap).
    other = tmp_path / "other"
    store = MemoryStore(other)
    store.ensure_layout()
    add_raw(other, "b", "- fact b")

    def seed(st: StateStore):
        st.set_pending(True)
        st.record_phase2_failure("earlier failure 1", NOW)
        st.record_phase2_failure("earlier failure 2", NOW)

    with_state(other, seed)
    n0 = fake.request_count
    fake.script(*[Reply.truncated(cut_in_summary) for _ in range(3)])
    failed = run_flow(memory_root=str(other))
    assert failed.outcome == "error" and "cut off" in failed.error
    assert [r["max_tokens"] for r in fake.requests[n0:]] == [32768, 65536, 131072]
    meta = with_state(other, lambda st: st.get_meta())
    assert meta.phase2_failures == 3 and meta.pending_consolidation is True and "cut off" in meta.phase2_error
    assert [b.body for b in store.read_raw_blocks()] == ["- fact b"] and not store.memory_md_path.exists()

    waiting = run_flow(memory_root=str(other))  # the third failure starts a back-off
    assert waiting.outcome == "skipped: backing off after repeated failures" and fake.request_count == n0 + 3

    fake.script(Reply.tool({"memory_md": "# M\n- b\n", "memory_summary_md": "v1\n\n- b\n"}))
    forced = run_flow(memory_root=str(other), force=True)
    assert forced.outcome == "consolidated", forced
    meta = with_state(other, lambda st: st.get_meta())
    assert meta.phase2_failures == 0 and meta.phase2_error is None and meta.pending_consolidation is False


def test_after_repeated_failures_automatic_runs_back_off_then_try_again_by_themselves(
    root: Path, fake: FakeOpenAIServer
):
    """Three consolidations in a row failed (say the endpoint was down) an hour ago: the back-off
    after them (30 min) is over, so the next automatic run tries again with no `--force`. Its
    failure lengthens the back-off (1 h), and the run after it waits without calling the model."""
    add_raw(root, "b", "- fact b")
    hour_ago = datetime.now(UTC) - timedelta(hours=1)

    def seed(st: StateStore):
        st.set_pending(True)
        for i in range(3):
            st.record_phase2_failure(f"endpoint down {i}", hour_ago)

    with_state(root, seed)
    fake.script(Reply.error(401, {"error": {"message": "key revoked"}}))
    retried = run_flow()
    assert retried.outcome == "error" and "key revoked" in retried.error, retried
    assert fake.request_count == 1 and with_state(root, lambda st: st.get_meta()).phase2_failures == 4

    waiting = run_flow()
    assert waiting.outcome == "skipped: backing off after repeated failures", waiting
    assert 50 * 60 < waiting.gate.backoff_remaining_seconds <= 60 * 60 and fake.request_count == 1
    assert "4 consecutive failures" in waiting.reason and "--force" in waiting.reason
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    shown = CliRunner().invoke(app, ["status"])
    assert shown.exit_code == 0 and "(4 in a row)" in shown.output, shown.output
    assert "automatic consolidation backs off until" in shown.output


def test_cli_no_model_route_leaves_state_untouched_and_forget(root: Path, fake: FakeOpenAIServer, monkeypatch):
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    for k in ("DSH_MEMORY_BASE_URL", "DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "openai")  # not the local model, whether installed or not
    add_raw(root, "a", "- fact")
    with_state(root, lambda st: st.set_pending(True))
    res = CliRunner().invoke(app, ["consolidate", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{") :])
    assert out["outcome"] == "skipped: no model route" and fake.request_count == 0
    meta = with_state(root, lambda st: st.get_meta())
    assert meta.pending_consolidation is True and meta.phase2_failures == 0 and meta.phase2_error is None

    store = MemoryStore(root)
    store.write_rollout_summary("task", {"session_id": "sess-9", "part": 1}, "# t")
    store.write_rollout_summary("task-part2", {"session_id": "sess-9", "part": 2}, "# t2")
    add_raw(root, "task", "- a fact from the forgotten session", session="sess-9")
    res = CliRunner().invoke(app, ["forget", "sess-9", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert sorted(out["retired"]) == ["task", "task-part2"] and out["raw_blocks_archived"] == 1
    assert sorted(store.retired_slugs()) == ["task", "task-part2"]
    assert not [b for b in store.read_raw_blocks() if b.session_id == "sess-9"]
    assert with_state(root, lambda st: st.overrides()) == {"sess-9": "exclude"}  # never re-learned


def _a_handbook_of_40_items(store: MemoryStore, lead: str = "") -> tuple[str, list[str]]:
    """MEMORY.md of one project group whose knowledge section is `lead` and 40 items (its heading
    and the items), and a summary."""
    head = "# Task Group: /work/proj\nscope: project /work/proj\napplies_to: cwd=/work/proj; reuse_rule=this project only\n"
    items = [f"- fact {i}: run `make target-{i}` before release {i}" for i in range(40)]
    store.atomic_write("MEMORY.md", head + "\n## Reusable knowledge\n" + lead + "\n".join(items) + "\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    return head, items


def test_a_rewrite_that_drops_most_of_the_handbook_archives_what_it_dropped(root: Path, fake: FakeOpenAIServer):
    """A model (a bad day, a small context, a hostile transcript) answers with a handbook that has
    lost 39 of its 40 items: each one it left out goes to MEMORY.archive.md under its project, and
    the run says how many — it used to vanish with exit 0 and no word."""
    store = MemoryStore(root)
    head, items = _a_handbook_of_40_items(store, "keywords: make\n")
    add_raw(root, "a", "- new fact")
    kept = head + "\n## Reusable knowledge\nkeywords: make\n" + items[0] + "\n- new fact\n"
    fake.script(Reply.tool({"memory_md": kept, "memory_summary_md": "v1\n\n- after\n"}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    assert res.changes.items_retired == 39 and "MEMORY.archive.md" in res.changes.files_written
    archive = store.read_text("MEMORY.archive.md")
    assert "# Task Group: /work/proj\n" in archive
    assert all(f"{item} (retired: " in archive for item in items[1:]) and f"{items[0]} (retired: " not in archive
    assert "keywords" not in archive  # bullets only: a line it kept is no item it left out


def test_a_rambling_rewrite_past_the_archives_bound_does_not_crowd_the_handbook_out(root: Path, fake: FakeOpenAIServer):
    """A model rambles: a handbook of 990,000 characters of its own lines, none of the 40 items
    the handbook had. What it wrote past max_memory_md_chars was archived first and filled
    MEMORY.archive.md to its bound, so the 40 items it left out found no room and were lost.
    The handbook's items go to the archive before the answer's own."""
    store = MemoryStore(root)
    head, items = _a_handbook_of_40_items(store)
    add_raw(root, "a", "- new fact")
    rnd = random.Random(5)
    lines, size = [], 0
    while size < 990_000:
        words = " ".join("".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(3, 9))) for _ in range(8))
        lines.append(f"- {words} on port {len(lines)}.")
        size += len(lines[-1]) + 1
    rambling = head + "\n## Reusable knowledge\n" + "\n".join(lines)[:990_000] + "\n"
    fake.script(Reply.tool({"memory_md": rambling, "memory_summary_md": "v1\n\n- after\n"}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    archive = store.read_text("MEMORY.archive.md")
    assert len(archive) > 900_000  # the archive's bound was reached
    assert all(f"{item} (retired: left out of the model's rewrite)" in archive for item in items)


def test_a_global_heading_a_rewrite_floods_with_applies_to_lines_evicts_no_memory(root: Path, fake: FakeOpenAIServer):
    """A model's rewrite wrote the global task group with 1,500 `applies_to:` lines: MEMORY.md was
    written as is (145 KB, past max_memory_md_chars), and the next mechanical merge (the local
    model's Phase 2) kept every one as the group's heading, which `_cap` never drops: MEMORY.md
    became 60,000 characters of them, every item archived. A heading keeps its first 3 scope
    lines (what `scope.handbook_groups` reads); the merge writes the global group's itself."""
    from dsh_memory.consolidation import mechanical
    from dsh_memory.consolidation.apply import apply_output
    from dsh_memory.consolidation.inputs import gather_inputs
    from dsh_memory.settings import MemorySettings

    store = MemoryStore(root)
    flood = "".join(f"applies_to: cwd=/src/{n:05d}/{'x' * 60}; reuse_rule=every project\n" for n in range(1500))
    heading = (
        "# Task Group: /src/shop\nscope: project /src/shop\napplies_to: cwd=/src/shop; reuse_rule=this project only\n"
    )
    memory_md = (
        f"# Task Group: global\nscope: global (every project)\n{flood}\n## User preferences\n- Answer in English.\n\n"
        f"{heading}{flood}\n## User notes\n- Deploy the shop with make ship-all.\n"
    )
    fake.script(Reply.tool({"memory_md": memory_md, "memory_summary_md": "v1\n\n- Answer in English.\n"}))
    add_raw(root, "a", "- fact")
    assert run_flow(force=True).outcome == "consolidated"
    written = store.read_text("MEMORY.md")
    assert written.count("applies_to:") == 2 + 2 and len(written) < 2_000  # each heading: its first 3 lines
    assert "Answer in English." in written and "Deploy the shop with make ship-all." in written
    store.add_note("Use pnpm in the shop.", extra={"project": "/src/shop"})
    settings = MemorySettings(memory_root=root)
    now = datetime.now(UTC)
    with_state(
        root,
        lambda st: apply_output(
            store,
            st,
            (i := gather_inputs(store, st, settings, now)),
            mechanical.consolidate(store, i, settings),
            settings,
            now,
        ),
    )
    md, summary = store.read_text("MEMORY.md"), store.read_text("memory_summary.md")
    for text in ("Answer in English.", "Deploy the shop with make ship-all.", "Use pnpm in the shop."):
        assert text in md and text in summary, text
    assert md.count("applies_to:") == 1 + 2 and len(md) < 2_000  # global: its own; the project: 3 lines
    assert sc.handbook_groups(md.split("\n"))[1:] == [
        (0, None),
        (md.split("\n").index("# Task Group: /src/shop"), "/src/shop"),
    ]


def test_a_models_handbook_past_max_memory_md_chars_is_capped_and_the_rest_archived(
    root: Path, fake: FakeOpenAIServer, monkeypatch
):
    """`max_memory_md_chars` bounded only what the model was shown: an endpoint model's
    `memory_write` with a 6,000-character MEMORY.md under a 1,000 cap was written whole, so the
    handbook could grow by the excess every run. It is capped as the local model's merge caps it
    (`mechanical._cap`: the oldest items of the largest section go), and what does not fit goes to
    MEMORY.archive.md under its task group, never lost."""
    monkeypatch.setenv("DSH_MEMORY_MAX_MEMORY_MD_CHARS", "1000")
    store = MemoryStore(root)
    head = "# Task Group: /work/proj\nscope: project /work/proj\napplies_to: cwd=/work/proj; reuse_rule=this project only\n"
    items = [f"- fact {i}: run `make target-{i}` before release {i}" for i in range(120)]
    rule = "- Answer in English."
    memory_md = (
        f"# Task Group: global\nscope: global (every project)\n\n## User preferences\n{rule}\n\n"
        "# Task Group: team habits\n\n## User preferences\n- Review every diff before a commit.\n\n"
        f"{head}\n## Reusable knowledge\n" + "\n".join(items) + "\n"
    )
    assert len(memory_md) > 6000
    fake.script(Reply.tool({"memory_md": memory_md, "memory_summary_md": "v1\n\n- after\n"}))
    add_raw(root, "a", "- new fact")
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    md = store.read_text("MEMORY.md")
    assert len(md) <= 1000, len(md)
    archive = store.read_text("MEMORY.archive.md")
    assert rule in md and items[0] in md  # the newest kept; the oldest of the largest section go
    kept = [item for item in items if item in md.split("\n")]
    assert kept and len(kept) < len(items) and res.changes.items_retired == len(items) - len(kept)
    gone = archive.split("# Task Group: /work/proj\n", 1)[1]  # archived under its project
    assert all(f"{item} (retired: over max_memory_md_chars (1000)" in gone for item in items if item not in kept)
    assert "Review every diff before a commit." in md  # its group, without scope lines, stays global
    assert [p for _, p in sc.handbook_groups(md.split("\n"))] == [None, None, None, "/work/proj"], md


def test_an_answer_the_providers_content_filter_cut_is_not_taken_whole(root: Path, fake: FakeOpenAIServer):
    """finish_reason `content_filter`: the provider withheld the rest of the answer. Its text was
    parsed as a whole answer: a MEMORY.md block cut after its first item replaced a handbook of
    30 (29 archived as left out). It is a cut answer now: a file cut off is no file."""
    store = MemoryStore(root)
    head = "# Task Group: /work/proj\napplies_to: cwd=/work/proj\n"
    old = head + "".join(f"- rule {i}: run make check-{i} before a release.\n" for i in range(30))
    store.atomic_write("MEMORY.md", old)
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- a fact")
    text = (
        f"=== memory_summary.md ===\nv1\n\n- after\n=== END ===\n=== MEMORY.md ===\n{head}- rule 0: run make check-0 be"
    )
    filtered = {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "content_filter"}]}
    fake.script(Reply(kind="error", status=200, body=filtered), Reply.tool({}))
    res = run_flow(force=True)
    assert res.outcome == "error" and "cut off (content_filter)" in res.error, res
    assert fake.request_count == 1  # not asked again with a larger max_tokens: it was no cut at max_tokens
    assert store.read_text("MEMORY.md") == old and not (root / "MEMORY.archive.md").exists()
    assert [b.body for b in store.read_raw_blocks()] == ["- a fact"]


@pytest.mark.parametrize(
    "reply",
    [Reply.raw_tool("this is not JSON at all"), Reply.raw_tool('{"memory_md": "# M\\n", "memory_summary_md": ')],
)
def test_unparseable_tool_arguments_are_named_not_called_an_empty_answer(root: Path, fake: FakeOpenAIServer, reply):
    add_raw(root, "a", "- a fact")
    fake.script(reply)
    res = run_flow(force=True)
    assert res.outcome == "error" and "unparseable tool arguments" in res.error, res.error
    assert "empty answer" not in res.error
    assert with_state(root, lambda st: st.get_meta().phase2_error) == res.error


def test_control_characters_in_the_answer_never_reach_the_handbook(root: Path, fake: FakeOpenAIServer):
    """A NUL turns the grep-friendly handbook into a 'binary file' for grep, and an escape sequence
    in the summary reaches every terminal it is printed on (a C1 control too: U+009B is CSI):
    what the model wrote is kept, without them."""
    add_raw(root, "a", "- run make check before a release")
    dirty = "- run make check\x00 before\x1b]0;pwned\x07 a\x1b[2J\x9b2J release\x85.\r\n"
    skill = {"name": "release", "skill_md": f"# Release\n{dirty}"}
    fake.script(
        Reply.tool(
            {
                "memory_md": f"# Task Group: /work/proj\n{dirty}",
                "memory_summary_md": f"v1\n\n{dirty}",
                "skills": [skill],
            }
        )
    )
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    store = MemoryStore(root)
    skill_md = (store.skills_dir / "release" / "SKILL.md").read_text()
    for text in (store.memory_md_path.read_text(), store.summary_path.read_text(), skill_md):
        assert "- run make check before]0;pwned a[2J2J release.\n" in text
        assert not [c for c in text if (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F) and c not in "\n\t"], repr(text)


def test_a_line_separator_in_the_answer_heads_no_part_the_read_path_alone_sees(root: Path, fake: FakeOpenAIServer):
    """U+2028 and U+2029 end a line for the read path (`str.splitlines`: the scope of each line
    that list and search serve) but not for the consolidation's own parsing: a `global` heading
    after one made the project's next line global to every other project's search, past the
    scope guard. Stored, they are line ends, and both read every line in the same part."""
    add_raw(root, "a", "- deploy with make ship")
    fake.script(
        Reply.tool(
            {
                "memory_md": "# Task Group: /work/proj\napplies_to: cwd=/work/proj\n- deploy with make ship"
                "\u2028# Task Group: global\n- the staging host is staging.proj.internal\n",
                "memory_summary_md": "v1\n\n# Scope: project /work/proj\n- deploy with make ship"
                "\u2029# Scope: global\n- the staging host is staging.proj.internal\n",
            }
        )
    )
    assert run_flow(force=True).outcome == "consolidated"
    store = MemoryStore(root)
    for rel, groups in (("MEMORY.md", sc.handbook_groups), ("memory_summary.md", sc.summary_groups)):
        lines = (root / rel).read_text().split("\n")
        starts, part, seen = dict(groups(lines)), None, []
        for i in range(len(lines)):  # each line's part as the consolidation reads it, and as the read path does
            part = starts.get(i, part)
            seen.append((f"project {part}" if part else sc.GLOBAL, scope_of(store, rel, i + 1)))
        assert all(mine == read for mine, read in seen), (rel, lines, seen)


def test_a_line_the_model_words_anew_without_a_period_is_kept(root: Path, fake: FakeOpenAIServer):
    """The clean-up took a line whose last word the input never had for one cut mid-word and,
    with no earlier sentence to trim it to, dropped it: the user's rule was in no handbook or
    summary. A word cut short is the start of one the input has ('## User prefe')."""
    add_raw(root, "a", "- The user wants pnpm used to install dependencies.")
    rule = "- Install dependencies with pnpm workspaces"
    fake.script(
        Reply.tool(
            {
                "memory_md": f"# Task Group: /work/proj\n## User preferences\n{rule}\n- The user also wants dependen\n",
                "memory_summary_md": f"v1\n\n{rule}\n",
            }
        )
    )
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    store = MemoryStore(root)
    memory_md = store.memory_md_path.read_text()
    assert rule in memory_md and rule in store.summary_path.read_text()
    assert "dependen\n" not in memory_md


def test_a_note_the_model_keeps_word_for_word_is_kept_though_it_ends_on_a_short_word(
    root: Path, fake: FakeOpenAIServer
):
    """The clean-up took a note ending on "a" or "is" ("roll back with plan a", "ask me which one
    it is"), written by the model as the user wrote it, for a line cut off after a dangling word:
    it left the handbook and the summary, archived nowhere. A line the input has whole is no cut."""
    store = MemoryStore(root)
    notes = [
        "- If the release breaks, roll back with plan a",
        "- The staging key is in the team vault; ask me which one it is",
    ]
    for note in notes:
        store.add_note(note[2:], extra={"project": "/work/proj"})
    cut = "- Deploy the shop with make ship and the"
    fake.script(
        Reply.tool(
            {
                "memory_md": "# Task Group: /work/proj\n## User notes\n" + "\n".join([*notes, cut]) + "\n",
                "memory_summary_md": "v1\n\n# Scope: project /work/proj\n" + "\n".join(notes) + "\n",
            }
        )
    )
    assert run_flow(force=True).outcome == "consolidated"
    memory_md, summary = store.memory_md_path.read_text(), store.summary_path.read_text()
    for note in notes:
        assert note in memory_md and note in summary, note
    assert "ship and the" not in memory_md  # a line the model did cut still goes


def test_a_skill_the_model_removes_is_kept_not_deleted(root: Path, fake: FakeOpenAIServer):
    """`remove_skills` is the model's word alone (a prompt injection in a session can ask for it):
    the folder, with the user's edits, moves to skills/.removed/ instead of being deleted for good."""
    store = MemoryStore(root)
    edited = "---\nname: deploy\ndescription: Deploy\n---\n1. make deploy (the user's own step)\n"
    store.atomic_write("skills/deploy/SKILL.md", edited)
    store.atomic_write("skills/deploy/scripts/deploy.sh", "make deploy\n")
    add_raw(root, "a", "- a fact")
    fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n", "remove_skills": ["deploy"]}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated" and res.changes.skills_removed == ["deploy"], res
    assert not (store.skills_dir / "deploy").exists()
    (kept,) = (store.skills_dir / ".removed").iterdir()
    assert kept.name.startswith("deploy-") and (kept / "SKILL.md").read_text() == edited
    assert (kept / "scripts" / "deploy.sh").read_text() == "make deploy\n"
    assert [s.name for s in skills_inventory(store.skills_dir)] == []  # not offered to the next run
    assert list_dir(store, "skills").entries == []  # nor listed as a skill (the vault's list)


def test_one_answer_removing_every_skill_deletes_none_for_good(root: Path, fake: FakeOpenAIServer):
    """skills/.removed/ keeps its newest 100 versions, and `remove_skills` had no bound: one answer
    removing 110 skills set all 110 aside, and the bound deleted 10 of them at once. A run removes
    at most 20 (as it writes at most 20); every skill is in skills/ or skills/.removed/."""
    store = MemoryStore(root)
    names = [f"tool-{i:03d}" for i in range(110)]
    for name in names:
        store.atomic_write(f"skills/{name}/SKILL.md", f"---\nname: {name}\ndescription: d\n---\n1. run {name}\n")
    add_raw(root, "a", "- a fact")
    fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n", "remove_skills": names}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated", res
    kept = {p.name for p in store.skills_dir.iterdir()} | {
        p.name.rsplit("-", 1)[0] for p in (store.skills_dir / ".removed").iterdir()
    }
    assert [name for name in names if name not in kept] == []
    assert res.changes.skills_removed == names[:20] and "the rest kept" in res.changes.skill_errors[-1]


@pytest.mark.parametrize(
    ("files", "on_disk"),
    [
        ([{"path": "scripts/a", "content": "x"}, {"path": "scripts/a/b", "content": "y"}], None),  # file and folder
        ([{"path": "scripts/d", "content": "x"}], "skills/deploy/scripts/d/inner.sh"),  # a folder there already
    ],
)
def test_a_skill_that_cannot_be_written_whole_is_not_written_at_all(root: Path, fake: FakeOpenAIServer, files, on_disk):
    """A skill reported as skipped used to be half written: its SKILL.md replaced, then a file
    path that collides with a folder failed."""
    store = MemoryStore(root)
    old = "---\nname: deploy\ndescription: Deploy\n---\n1. make deploy\n"
    store.atomic_write("skills/deploy/SKILL.md", old)
    if on_disk:
        store.atomic_write(on_disk, "z\n")
    add_raw(root, "a", "- a fact")
    skill = {"name": "deploy", "skill_md": "1. a new procedure", "files": files}
    fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n", "skills": [skill]}))
    res = run_flow(force=True)
    assert res.outcome == "consolidated" and res.changes.skills_written == [], res
    assert [e.split(":")[0] for e in res.changes.skill_errors] == ["deploy"]
    assert (store.skills_dir / "deploy" / "SKILL.md").read_text() == old
    assert not (store.skills_dir / "deploy" / "scripts" / "a").exists()


def test_a_model_that_echoes_its_input_writes_nothing(root: Path, fake: FakeOpenAIServer):
    """A small model served badly answers with the prompt it was given: that text (the data fences,
    'Now call memory_write') became the handbook and the summary injected into every session."""
    store = MemoryStore(root)
    store.atomic_write("MEMORY.md", "# Task Group: before\n- old fact\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- new fact")

    def echo(request: dict) -> Reply:
        user = request["messages"][1]["content"]
        return Reply.tool({"memory_md": user, "memory_summary_md": "v1\n\n" + user})

    fake.handler = echo
    res = run_flow(force=True)
    assert res.outcome == "error" and "repeats its input" in res.error, res
    assert store.memory_md_path.read_text() == "# Task Group: before\n- old fact\n"
    assert store.summary_path.read_text() == "v1\n\n- before\n"
    assert [b.body for b in store.read_raw_blocks()] == ["- new fact"]


def test_private_spans_in_the_answer_reach_no_file_and_no_artifact(root: Path, fake: FakeOpenAIServer):
    """What the user marks <private> is never stored (docs/security.md): a span the model writes
    (copied from an agent's quote of the user, a hand-written note) is dropped before any file or
    the run's artifact holds it."""
    add_raw(root, "a", "- the staging database is reached through the bastion host\n- run make check before a release")
    span = "<private>the db password is hunter2</private>"
    line = f"- the staging database is reached through the bastion host {span}."
    line += "\n- wrap a secret in `<private>` when you paste it\n- run make check before a release."  # one line
    skill = {
        "name": "staging-db",
        "skill_md": f"# Staging\n1. ssh to the bastion {span}\n",
        "files": [{"path": "scripts/connect.sh", "content": f"# {span}\nssh bastion\n"}],
    }
    fake.script(
        Reply.tool(
            {
                "memory_md": f"# Task Group: /work/proj\n{line}\n",
                "memory_summary_md": f"v1\n\n{line}\n",
                "skills": [skill],
            }
        )
    )
    res = run_flow(force=True)
    assert res.outcome == "consolidated" and res.changes.skills_written == ["staging-db"], res
    assert b"hunter2" not in all_bytes(root)
    handbook = MemoryStore(root).memory_md_path.read_text()
    assert "reached through the bastion host" in handbook and "- run make check before a release." in handbook
    md = artifacts_of(res.flow_run_id)[0].data
    assert "bastion" in md and "hunter2" not in md


def test_the_archive_keeps_every_line_it_was_given_run_after_run(root: Path, fake: FakeOpenAIServer):
    """MEMORY.archive.md was re-parsed with the merge's memory rules and written anew on each
    retirement: a line those rules do not take (a hand-written 'your …', a table row) was archived
    once, then dropped by the next run that archived anything — and never archived at all when it
    came from the handbook."""
    store = MemoryStore(root)
    head = "# Task Group: /work/proj\nscope: project /work/proj\napplies_to: cwd=/work/proj; reuse_rule=this project only\n"
    yours, row, later = (
        "- Your deploy key is in the team vault.",
        "- | port | 8080 |",
        "- the cache lives in .cache/app",
    )
    store.atomic_write("MEMORY.md", f"{head}\n## Notes\n{yours}\n{row}\n{later}\n")
    store.atomic_write("memory_summary.md", "v1\n")
    for n, kept in enumerate((later, "- a new fact")):
        add_raw(root, f"r{n}", "- a new fact")
        fake.script(Reply.tool({"memory_md": f"{head}\n## Notes\n{kept}\n", "memory_summary_md": "v1\n"}))
        assert run_flow(force=True).outcome == "consolidated"
    archive = store.read_text("MEMORY.archive.md")
    assert all(f"{line} (retired: " in archive for line in (yours, row, later)), archive


def test_the_archive_and_the_removed_skills_keep_their_newest_only(root: Path, fake: FakeOpenAIServer):
    """MEMORY.archive.md and skills/.removed/ were only ever added to: read and written whole
    by every consolidation that retires an item, without end. The archive keeps its newest
    ARCHIVE_MAX_CHARS in whole task groups (the oldest go first), skills/.removed/ the newest
    MAX_REMOVED_SKILLS versions; a folder there of another name is the user's and stays."""
    from dsh_memory.consolidation.apply import ARCHIVE_MAX_CHARS, ARCHIVE_TITLE
    from dsh_memory.consolidation.skill_files import MAX_REMOVED_SKILLS

    store = MemoryStore(root)
    old = [f"# Task Group: /work/old{i}\n\n## Retired 2020-01-01\n- old item {i} " + "x" * 5000 for i in range(250)]
    store.atomic_write("MEMORY.archive.md", ARCHIVE_TITLE + "\n\n" + "\n\n".join(old) + "\n")
    for i in range(MAX_REMOVED_SKILLS):
        (store.skills_dir / ".removed" / f"lint-2020010{1 + i // 50}T0000{i % 50:02d}Z").mkdir(parents=True)
    (store.skills_dir / ".removed" / "notes").mkdir()
    store.atomic_write("skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Deploy\n---\n1. make deploy\n")
    store.atomic_write("MEMORY.md", "# Task Group: /work/proj\n\n## Notes\n- the newest retired item\n")
    add_raw(root, "a", "- a fact")
    fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n", "remove_skills": ["deploy"]}))
    assert run_flow(force=True).outcome == "consolidated"
    archive = store.read_text("MEMORY.archive.md")
    assert len(archive) <= ARCHIVE_MAX_CHARS and archive.startswith(ARCHIVE_TITLE + "\n\n# Task Group: /work/old")
    assert "- the newest retired item (retired: " in archive and old[-1] in archive and old[0] not in archive
    removed = sorted(p.name for p in (store.skills_dir / ".removed").iterdir())
    assert len(removed) == MAX_REMOVED_SKILLS + 1 and "notes" in removed and removed[0].startswith("deploy-")
    assert "lint-20200101T000000Z" not in removed and "lint-20200102T000049Z" in removed


def test_one_run_retiring_more_than_the_archive_holds_keeps_it_bounded(root: Path):
    """The archive's bound held for what earlier runs wrote, never for what one run adds: a model
    answer that left out 940,000 characters of items made a 3.8 MB MEMORY.archive.md. One run's
    retirements past ARCHIVE_MAX_CHARS keep their first items that fit, each group's heading kept."""
    from dsh_memory.consolidation.apply import ARCHIVE_MAX_CHARS, ARCHIVE_TITLE, archive_dropped
    from dsh_memory.consolidation.stale import Flagged

    store = MemoryStore(root)
    store.atomic_write(
        "MEMORY.archive.md", ARCHIVE_TITLE + "\n\n# Task Group: /work/old\n\n## Retired 2020-01-01\n- old\n"
    )
    flagged = [
        Flagged(f"/work/p{i % 3}", f"- item {i} " + "x" * 1000, "left out by the model's rewrite", False)
        for i in range(1500)
    ]
    assert archive_dropped(store, flagged, "# M\n", datetime(2026, 12, 5, tzinfo=UTC)) == 1500
    archive = store.read_text("MEMORY.archive.md")
    assert len(archive) <= ARCHIVE_MAX_CHARS and archive.startswith(ARCHIVE_TITLE + "\n\n# Task Group: /work/")
    assert "- item 0 x" in archive and "- item 1499 x" not in archive and "## Retired 2026-12-05" in archive
    assert [ln for ln in archive.splitlines() if ln.startswith("# Task Group") and "old" not in ln] == [
        "# Task Group: /work/p0",
        "# Task Group: /work/p1",
        "# Task Group: /work/p2",
    ]


def test_an_answer_longer_than_max_tokens_allows_is_refused(root: Path, fake: FakeOpenAIServer):
    """A file of the answer past what 131,072 tokens could hold comes from a broken endpoint: it
    was cleaned line by line (about an hour of CPU for 16 MiB, the lock held) and written."""
    store = MemoryStore(root)
    store.atomic_write("MEMORY.md", "# Task Group: before\n- old fact\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- new fact")
    huge = "# Task Group: /work/proj\n" + "- new fact\n" * 110_000
    fake.script(Reply.tool({"memory_md": huge, "memory_summary_md": "v1\n\n- after\n"}))
    res = run_flow(force=True)
    assert res.outcome == "error" and "memory_md" in res.error and "characters" in res.error, res
    assert store.memory_md_path.read_text() == "# Task Group: before\n- old fact\n"
    assert [b.body for b in store.read_raw_blocks()] == ["- new fact"]


def test_a_skill_the_model_rewrites_keeps_its_earlier_version(root: Path, fake: FakeOpenAIServer):
    """The model sees a skill's first lines only, then sends its 'full new SKILL.md': the earlier
    text (the user's own steps with it) was overwritten for good. It is kept in skills/.removed/,
    once per change."""
    store = MemoryStore(root)
    edited = "---\nname: deploy\ndescription: Deploy\n---\n1. make deploy (the user's own step)\n"
    store.atomic_write("skills/deploy/SKILL.md", edited)
    new = "---\nname: deploy\ndescription: Deploy\n---\n1. make release\n"
    for n in range(2):  # the same new text twice: one earlier version kept
        add_raw(root, f"r{n}", "- a fact")
        fake.script(
            Reply.tool(
                {"memory_md": "# M\n", "memory_summary_md": "v1\n", "skills": [{"name": "deploy", "skill_md": new}]}
            )
        )
        assert run_flow(force=True).changes.skills_written == ["deploy"]
    assert (store.skills_dir / "deploy" / "SKILL.md").read_text() == new
    (kept,) = (store.skills_dir / ".removed").iterdir()
    assert kept.name.startswith("deploy-") and (kept / "SKILL.md").read_text() == edited


def test_a_session_forgotten_while_the_model_answers_is_not_learned(root: Path, fake: FakeOpenAIServer):
    """`dsh-memory forget SESSION` during a consolidation that already sent the session's raw
    memory to the model: the answer, with the forgotten fact, was written all the same."""
    from dsh_memory.consolidation.forget import retire_session

    store = MemoryStore(root)
    store.atomic_write("MEMORY.md", "# Task Group: before\n- old fact\n")
    store.atomic_write("memory_summary.md", "v1\n\n- before\n")
    add_raw(root, "a", "- the secret project codename is bluebird", session="sess-9")
    add_raw(root, "b", "- another fact", session="sess-1")

    def forget_then_answer(request: dict) -> Reply:
        with_state(root, lambda st: retire_session(store, st, "sess-9", datetime.now(UTC)))
        return Reply.tool(
            {"memory_md": AFTER + "- the secret project codename is bluebird\n", "memory_summary_md": "v1\n"}
        )

    fake.handler = forget_then_answer
    first = run_flow(force=True)
    assert first.outcome == "error" and "forgotten" in first.error, first
    assert "bluebird" not in store.memory_md_path.read_text()
    assert [b.body for b in store.read_raw_blocks()] == ["- another fact"]  # the next run reads what is left
