"""No secret planted in a session reaches Prefect or the memory root: a hostile session puts one
in its id (the DSH reader takes any directory name), its cwd, its title, a prompt, a tool command,
a tool's error output, an edited file's path and its log's folder (a DSH project folder is named
after the cwd, so a cwd ending in a key puts the key in the log's path); Phase 1 and Phase 2 run on a real Prefect server
against the fake model, then every file of the server's home (its database: run names,
parameters, logs, artifacts, events, results) and of the memory root is scanned for them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from dsh_memory.testing.sessions import PLANTED_SECRET

pytestmark = pytest.mark.usefixtures("own_prefect_api")

API_KEY = "sk-" + "Pq4" * 16
AWS_KEY = "AKIA" + "QX7RZ2MB4KD9WT3N"
URL_PASSWORD = "hunter2-Vx9qLm"
FOLDER_KEY = "sk-proj-" + "Zr8Tq2Wm5Kx9Lb3Nv7Hc4Jd1Fg6Ys0Ue"
SECRETS = [PLANTED_SECRET, API_KEY, AWS_KEY, URL_PASSWORD, FOLDER_KEY]


def hostile_session(dsh_home: Path, folder_name: str, sid: str = "", project: str = "--hostile--") -> None:
    """A session with secrets in its cwd, title, prompt, tool command, tool error and edited path,
    in the DSH project folder `project`."""
    sid = sid or folder_name
    cwd = f"/home/w/src/{API_KEY}"
    folder = dsh_home / "sessions" / project / folder_name
    folder.mkdir(parents=True)
    t0 = int(time.time() * 1000) - 7200_000
    prompt = f"Deploy with https://admin:{URL_PASSWORD}@db.example.com. Always run `make test` before committing."
    call = {
        "type": "tool-call",
        "id": "c1",
        "name": "bash",
        "arguments": json.dumps({"command": f"export AWS={AWS_KEY}"}),
    }
    edit = {"type": "tool-call", "id": "c2", "name": "edit", "arguments": json.dumps({"path": f"{cwd}/{AWS_KEY}.py"})}
    result = {
        "role": "tool",
        "toolCallId": "c1",
        "isError": True,
        "content": [{"type": "text", "text": f"denied: {API_KEY}"}],
    }
    records = [
        {"type": "session", "version": 4, "id": sid, "createdAt": t0, "cwd": cwd},
        {"type": "session/title", "seq": 0, "time": t0, "data": {"title": f"token {PLANTED_SECRET}"}},
        {"type": "turn/start", "seq": 1, "time": t0, "data": {"turn": 1}},
        {"type": "user/message", "seq": 2, "time": t0 + 1, "surfaceOp": "append",
         "data": {"id": "u1", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": prompt}]}},
        {"type": "assistant/message", "seq": 3, "time": t0 + 2, "surfaceOp": "append",
         "data": {"turn": 1, "step": 1, "message": {"id": "a1", "role": "assistant", "source": {"kind": "model"},
                                                     "content": [{"type": "text", "text": "On it."}, call, edit]}}},
        {"type": "tool/result", "seq": 4, "time": t0 + 3, "surfaceOp": "append", "data": {"message": result}},
        {"type": "turn/end", "seq": 5, "time": t0 + 4, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]  # fmt: skip
    path = folder / "session.v4.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    old = time.time() - 3600
    os.utime(path, (old, old))


def _reply(request: dict):
    """Phase 1 answers with secrets in every field; Phase 2 answers with the secrets, unusably (its error and artifact quote it)."""
    if "memory_write" not in json.dumps(request):  # Phase 1: the model echoes a key everywhere
        leak = f"token {PLANTED_SECRET} key {API_KEY}"
        return Reply.tool({
            "raw_memory": f"- Always run `make test` before committing ({leak}).",
            "rollout_summary": f"## Task\nDeploy ({leak})\n\n## Outcome\ndone",
            "rollout_slug": f"deploy {API_KEY}",
        })  # fmt: skip
    return Reply.text(f"No: {API_KEY} {PLANTED_SECRET} {AWS_KEY} https://u:{URL_PASSWORD}@x.example.com")


def _hits(folder: Path) -> list[tuple[str, str]]:
    out = []
    for p in folder.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            out += [(str(p), s) for s in SECRETS if s.encode() in data]
    return out


def test_secrets_planted_in_a_session_reach_neither_prefect_nor_the_memory_root(monkeypatch, tmp_path):
    root = tmp_path / "memories"
    with FakeOpenAIServer(handler=_reply) as fake:
        for k, v in {
            "HOME": str(tmp_path),
            "DSH_HOME": str(tmp_path / "dsh"),
            "CODEX_HOME": str(tmp_path / "none"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
            "DSH_MEMORY_ROOT": str(root),
            "DSH_MEMORY_BASE_URL": fake.base_url.replace("://", f"://u:{URL_PASSWORD}@"),
            "DSH_MEMORY_API_KEY": API_KEY,
            "DSH_MEMORY_MODEL": "fake-model",
            "DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS": "0",
        }.items():
            monkeypatch.setenv(k, v)
        sid = "0d5e7a1c-2b3f-4c6d-8e9f-a0b1c2d3e4f5"
        keyed = f"-home-w-{FOLDER_KEY}"  # a project folder named after a cwd that ends in a key
        hostile_session(tmp_path / "dsh", sid, sid, project=keyed)
        hostile_session(tmp_path / "dsh", f"proj-{PLANTED_SECRET}", f"proj-{PLANTED_SECRET}")  # the id itself
        hostile_session(tmp_path / "dsh", "proj-2", f"proj-{AWS_KEY}", project=keyed)  # the header's id
        from dsh_memory.flows.consolidate import consolidate_flow
        from dsh_memory.flows.extract import extract_flow

        first = extract_flow()
        named = extract_flow(session_ids=[sid], respect_idle=False)
        phase2 = consolidate_flow(force=True)
        requests = json.dumps(fake.requests)
    outcomes = {o.session: o.outcome for o in first.outcomes}
    assert outcomes == {sid: "extracted", "proj-2": "unreadable"} and named is not None  # a secret id: refused
    assert len(fake.requests) == 2  # phase 1 for the clean session, then phase 2
    assert not [s for s in SECRETS if s in requests]  # nor to the model
    assert phase2.outcome == "error"
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    prefect_home = Path(os.environ["PREFECT_HOME"]).parent
    assert any(p.name.startswith("prefect.db") for p in prefect_home.rglob("*"))
    assert not _hits(prefect_home) and not _hits(root)


def test_the_evidence_of_a_hostile_session_holds_no_secret(tmp_path):
    """The evidence is sent to workers and read by the evidence writer: every string in it, the
    cwd and the edited paths included, is redacted."""
    from dsh_memory.phase1.evidence import gather
    from dsh_memory.readers import dsh

    hostile_session(tmp_path / "dsh", "0d5e7a1c-2b3f-4c6d-8e9f-a0b1c2d3e4f5")
    (ref,) = dsh.discover(tmp_path / "dsh" / "sessions")
    evidence = gather(dsh.load(ref))
    assert evidence.edited, "the edit is in the evidence"
    assert not [s for s in SECRETS if s in evidence.model_dump_json()]
