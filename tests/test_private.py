"""`<private>…</private>` in what the user typed never reaches a model, the memory root or Prefect:
the span rule, the readers, and the whole pipeline on a real Prefect server with a model that
echoes everything it is given, and with the local evidence writer."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

from dsh_memory import readers
from dsh_memory.settings import SourceRoots
from dsh_memory.testing.fake_openai import FakeOpenAIServer
from dsh_memory.transcript.private import drop_private
from dsh_memory.transcript.render import render_transcript
from tests.test_pipeline_safety import _echo_everything

CLOSED = "Mallory Quuxbridge"  # inside a closed span
UNCLOSED = "Bartholomew Zyxwell"  # after a <private> never closed: to the end of that message
TITLE = "Ophelia Vantablack"  # in the first line, which becomes the session's title
NEEDLES = (CLOSED, UNCLOSED, TITLE)
DSH_ID = "00000000-0000-4000-8000-00000000b001"
CLAUDE_ID = "00000000-0000-4000-8000-00000000c001"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("a <private>x</private> b", "a  b"),
        ("a <PRIVATE>x", "a "),
        ("keep < Private >x</ private > this", "keep  this"),
        ("<private>a<private>b</private>c</private>d", "d"),
        ("a stray </private> tag", "a stray  tag"),
        ("a private word stays", "a private word stays"),
        ("", ""),
    ],
)
def test_the_span_rule(text, kept):
    assert drop_private(text) == kept


def _prompts() -> list[str]:
    return [
        f"<private>{TITLE}</private> fix the login test. Always run `make test` before committing; "
        f"my landlord is <private>{CLOSED}</private> by the way.",
        f"Also use ruff, not flake8. <private>{UNCLOSED} knows the staging password\nand more lines",
    ]


def write_dsh(home: Path, cwd: str, sid: str = DSH_ID, prompts: list[str] | None = None) -> Path:
    """A DSH v4 session under `home`/sessions: one turn per prompt, quiet for an hour."""
    t0 = int(time.time() * 1000) - 7_200_000
    lines: list[dict] = [{"type": "session", "version": 4, "id": sid, "createdAt": t0, "cwd": cwd}]
    seq = 0
    for turn, text in enumerate(prompts or _prompts(), 1):
        user = {"id": f"u{turn}", "role": "user", "source": {"kind": "user"}}
        user["content"] = [{"type": "text", "text": text}]
        reply = {"id": f"a{turn}", "role": "assistant", "source": {"kind": "model"}}
        reply["content"] = [{"type": "text", "text": f"Done: turn {turn}; `make test` passes."}]
        for kind, data in (
            ("turn/start", {"turn": turn}),
            ("user/message", user),
            ("assistant/message", {"turn": turn, "step": 1, "message": reply}),
            ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
        ):
            line = {"type": kind, "seq": seq, "time": t0 + seq, "data": data}
            if kind.endswith("/message"):
                line["surfaceOp"] = "append"
            lines.append(line)
            seq += 1
    folder = home / "sessions" / ("-" + cwd.replace("/", "-") + "--") / sid
    folder.mkdir(parents=True)
    path = folder / "session.v4.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _age(path)
    return path


def write_claude(config: Path, cwd: str, sid: str = CLAUDE_ID, prompts: list[str] | None = None) -> Path:
    """A Claude Code transcript under `config`/projects/<dashed cwd>/, quiet for an hour."""
    folder = config / "projects" / cwd.replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    lines, parent = [], None
    for i, text in enumerate(prompts or _prompts()):
        for role, content in (("user", text), ("assistant", [{"type": "text", "text": f"Done with step {i}."}])):
            uid = f"{sid[:-4]}{len(lines):04d}"
            message = {"role": role, "content": content}
            if role == "assistant":
                message.update(id=f"msg_{uid}", type="message", model="claude-sonnet-4-5")
            lines.append(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "userType": "external",
                    "cwd": cwd,
                    "sessionId": sid,
                    "version": "2.0.31",
                    "type": role,
                    "message": message,
                    "uuid": uid,
                    "timestamp": f"2026-10-27T14:0{len(lines)}:00.000Z",
                }
            )
            parent = uid
    path = folder / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _age(path)
    return path


def _age(path: Path, seconds: float = 3600) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_readers_and_render_drop_the_spans(tmp_path):
    write_dsh(tmp_path / "dsh", "/home/w/src/app")
    write_claude(tmp_path / "claude", "/home/w/src/app")
    roots = SourceRoots(dsh_sessions=tmp_path / "dsh" / "sessions", claude_projects=tmp_path / "claude" / "projects")
    refs = readers.discover(roots)
    assert {r.source for r in refs} == {"dsh", "claude"}
    for ref in refs:
        session = readers.load(ref)
        dump = session.model_dump_json() + render_transcript(session, budget_tokens=None).text
        assert not any(n in dump for n in NEEDLES), ref.source
        prompts = [e.text for e in session.human_prompts]
        assert "fix the login test" in prompts[0] and "by the way." in prompts[0]
        assert prompts[1].startswith("Also use ruff, not flake8.") and "and more lines" not in prompts[1]


def _env(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    write_dsh(tmp_path / "dsh", "/home/w/src/app")
    write_claude(tmp_path / "claude", "/home/w/src/site")
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS", "0")
    monkeypatch.setenv("DSH_MEMORY_PHASE2_COOLDOWN_SECONDS", "0")
    return root


def _assert_nowhere(root: Path, *also: str) -> None:
    from dsh_memory.readpath import search
    from dsh_memory.storage.store import MemoryStore

    search(MemoryStore(root), ["make test"], mode="ranked")  # the search index too
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    prefect_home = Path(os.environ["PREFECT_HOME"]).parent
    blobs = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    assert any(b"make test" in b for b in blobs), "the sessions were extracted"
    blobs += [p.read_bytes() for p in prefect_home.rglob("*") if p.is_file() and p.stat().st_size < 512 << 20]
    for needle in NEEDLES:
        assert not any(needle in text for text in also), f"{needle} reached the model"
        assert not any(needle.encode() in b for b in blobs), f"{needle} on disk or in Prefect"


@pytest.mark.usefixtures("prefect_api")
def test_private_spans_reach_no_model_no_file_and_not_prefect(monkeypatch, tmp_path):
    with FakeOpenAIServer(handler=_echo_everything) as fake:
        root = _env(monkeypatch, tmp_path)
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_API_KEY", "test-key")
        monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
        from dsh_memory.flows.catch_up import catch_up_flow

        result = catch_up_flow(backfill=True)
        assert {o.session for o in result.phase1.outcomes} == {DSH_ID, CLAUDE_ID}
        assert result.phase2.outcome == "consolidated", result.phase2
        sent = json.dumps(fake.requests, ensure_ascii=False)
    assert "fix the login test" in sent
    _assert_nowhere(root, sent)


@pytest.mark.usefixtures("prefect_api")
def test_private_spans_stay_out_of_the_evidence_writer(monkeypatch, tmp_path):
    from dsh_memory.errors import NoModelRouteError
    from dsh_memory.llm import model_files
    from dsh_memory.testing.models import SMOLLM2_135M

    if importlib.util.find_spec("cyllama") is None:
        pytest.fail("the local runtime is not installed (pip install 'dsh-memory[local]')")
    try:
        model = model_files.bundled_model_path(SMOLLM2_135M)
    except NoModelRouteError as exc:
        pytest.fail(f"test model missing: {exc}")
    root = _env(monkeypatch, tmp_path)
    for var in ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY", "DSH_MEMORY_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "local")
    monkeypatch.setenv("DSH_MEMORY_MODEL_PATH", str(model))
    monkeypatch.setenv("DSH_MEMORY_LOCAL_THREADS", "1")
    monkeypatch.setenv("DSH_MEMORY_PHASE1_MAX_TOKENS", "300")
    from dsh_memory.flows.catch_up import catch_up_flow

    result = catch_up_flow(backfill=True)
    assert {o.session for o in result.phase1.outcomes} == {DSH_ID, CLAUDE_ID}
    _assert_nowhere(root)


def test_a_note_keeps_no_private_span(tmp_path):
    from dsh_memory.errors import UserInputError
    from dsh_memory.storage.store import MemoryStore

    store = MemoryStore(tmp_path / "mem")
    rel = store.add_note(f"<private>{TITLE}</private> Deploys need the VPN. <private>{UNCLOSED}", title="VPN")
    assert TITLE not in rel and not any(n in store.read_text(rel) for n in NEEDLES)
    assert "Deploys need the VPN." in store.read_text(rel)
    with pytest.raises(UserInputError):
        store.add_note(f"<private>{CLOSED}</private>")


def test_every_stage_reads_sessions_through_readers_load():
    """The one place private spans are dropped: no module outside readers/ (and the imports of
    other agents' memory files, which read no session) calls a per-agent reader itself."""
    import re

    repo = Path(__file__).resolve().parents[1]
    direct = re.compile(r"readers\.(dsh|codex|claude)\b|from dsh_memory\.readers import .*\b(dsh|codex|claude)\b")
    offenders = [
        str(p.relative_to(repo))
        for folder in ("dsh_memory", "flows", "tasks")
        for p in (repo / folder).rglob("*.py")
        if "readers" not in p.parts and direct.search(p.read_text())
    ]
    assert offenders == []
