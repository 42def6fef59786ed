"""Turn-end hooks: every webhook fixture through the validator, the HTTP route and `notify`,
delivery to a recording stand-in for the Prefect events API on loopback, and one run against
the real Prefect server proving `dsh.turn.ended` arrives."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from dsh_memory.cli import app as cli_app
from dsh_memory.errors import ConfigError
from dsh_memory.hooks.events import EVENT_NAME, build_event, post_events
from dsh_memory.hooks.forwarder import TurnEndForwarder
from dsh_memory.hooks.payloads import (
    MAX_BODY_BYTES,
    PayloadError,
    parse_json,
    parse_turn_end,
)
from dsh_memory.hooks.receiver import HOOK_PATH, NO_SERVER, TurnEndReceiver
from dsh_memory.serve.http_app import create_app
from dsh_memory.settings import MemorySettings, SourceRoots

from .conftest import CORPUS

# The fixtures carry the user's absolute paths; these roots make them "inside".
ENV = {"DSH_HOME": "/home/alice/.dsh", "CLAUDE_CONFIG_DIR": "/home/alice/.claude", "CODEX_HOME": "/home/alice/.codex"}
ROOTS = SourceRoots.from_env(ENV)
BASE = "http://127.0.0.1:8765"


def create_receiver_app(settings=None, **kwargs) -> Starlette:
    """The receiver alone, behind the same loopback guard as the app `serve` runs."""
    from starlette.concurrency import run_in_threadpool

    from dsh_memory.serve.guard import LoopbackGuard

    receiver = TurnEndReceiver(settings, **kwargs)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        try:
            yield
        finally:
            await run_in_threadpool(receiver.close)

    app = Starlette(routes=receiver.routes(), lifespan=lifespan)
    app.add_middleware(LoopbackGuard, max_body_bytes=receiver.max_body)
    app.state.turn_end = receiver
    return app


# The in-repo snapshot's webhook bodies (each corpus is checked against this list).
WEBHOOK_NAMES = sorted(p.name for p in (CORPUS / "webhooks").iterdir())


@pytest.fixture()
def hook_env(monkeypatch, tmp_path):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "mem"))  # where `notify --direct` records
    for k in ("PREFECT_API_URL", "DSH_MEMORY_HOOK_SECRET"):
        monkeypatch.delenv(k, raising=False)


# ------------------------------------------------------------- a recording Prefect stand-in


class Recorder:
    def __init__(self):
        self.batches: list[list[dict]] = []
        self.fail_next = 0  # answer this many POSTs with 500 (a Prefect API in trouble)
        self.fail_status = 500
        self.refused: list[list[dict]] = []

    @property
    def events(self) -> list[dict]:
        """The turn-end events received, in the order they were posted."""
        return [e for batch in self.batches for e in batch]

    async def post_events(self, request: Request) -> Response:
        """`POST {api}/events`: record the batch, or refuse it while `fail_next` lasts."""
        body = json.loads(await request.body())
        if self.fail_next > 0:
            self.fail_next -= 1
            self.refused.append(body)
            return Response("database is locked", status_code=self.fail_status)
        self.batches.append(body)
        return Response(status_code=204)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(asgi_app):
    """A real uvicorn server on an ephemeral loopback port, in a thread."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(asgi_app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def prefect_stand_in():
    """One loopback server for the module's recording stand-ins (a uvicorn stop costs ~0.15 s,
    once per test otherwise): each test's Recorder answers under its own prefix, and a prefix
    whose test is over answers 404, so a forwarder left from one test never posts into another's."""
    recorders: dict[str, Recorder] = {}

    async def events(request: Request) -> Response:
        rec = recorders.get(request.path_params["key"])
        return Response(status_code=404) if rec is None else await rec.post_events(request)

    with serve(Starlette(routes=[Route("/{key}/api/events", events, methods=["POST"])])) as url:
        yield url, recorders


@pytest.fixture()
def fake_prefect(prefect_stand_in):
    url, recorders = prefect_stand_in
    rec, key = Recorder(), uuid.uuid4().hex
    rec.api_url = f"{url}/{key}/api"
    recorders[key] = rec
    try:
        yield rec
    finally:
        del recorders[key]


# ------------------------------------------------------------- validator


def test_webhook_fixtures_all_have_facts(corpus):
    names = sorted(p.name for p in (corpus.dir / "webhooks").iterdir())
    assert names == WEBHOOK_NAMES, (
        f"the {corpus.name} corpus at {corpus.dir} has other webhook bodies than the in-repo snapshot: "
        "refresh tests/fixtures/corpus (see tests/fixtures/README.md)"
    )
    assert len(names) >= 20
    assert sorted(k.removeprefix("webhooks/") for k in corpus.keys("webhooks/")) == names


@pytest.mark.parametrize("name", WEBHOOK_NAMES)
def test_every_fixture_gets_its_verdict(name, corpus):
    exp = corpus.fact(f"webhooks/{name}")
    body = (corpus.dir / "webhooks" / name).read_bytes()
    if not exp["valid"]:
        with pytest.raises(PayloadError) as err:
            parse_turn_end(body, roots=ROOTS)
        assert err.value.status == (413 if "bytes" in exp else 400)
        return
    turn = parse_turn_end(body, roots=ROOTS)
    assert turn.should_trigger is exp["should_trigger"]
    assert turn.session_id == exp.get("session_id", turn.session_id) != ""
    if exp["kind"] != "unknown":
        assert turn.kind == exp["kind"]
        assert parse_turn_end(body, kind=exp["kind"], roots=ROOTS) == turn  # explicit kind agrees with auto
    assert bool(turn.why_not) is not turn.should_trigger
    for field in ("turn", "seq", "reason"):
        if field in exp:
            assert getattr(turn, field) == exp[field]


def test_huge_body_is_refused_before_parsing_and_deep_nesting_does_not_crash(fixtures_dir):
    huge = (fixtures_dir / "webhooks" / "bad-huge-body.json").read_bytes()
    assert len(huge) > MAX_BODY_BYTES
    with pytest.raises(PayloadError) as err:
        parse_json(huge)
    assert err.value.status == 413
    with pytest.raises(PayloadError) as err:
        parse_json(b"[" * 200_000 + b"]" * 200_000)  # far past the interpreter's recursion limit
    assert err.value.status == 400
    with pytest.raises(PayloadError, match="nested deeper"):
        parse_json(json.dumps({"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}))


def _dsh(**over) -> dict:
    """The in-repo dsh-turn-end.json webhook body with some fields replaced (read when called)."""
    body = json.loads((CORPUS / "webhooks" / "dsh-turn-end.json").read_text())
    body.update(over)
    return body


@pytest.mark.parametrize(
    "over, message",
    [
        ({"transcriptPath": "/home/alice/.dsh/sessions/../../../etc/passwd"}, "inside"),
        ({"transcriptPath": "/etc/passwd"}, "inside"),
        ({"transcriptPath": "sessions/x/session.v4.jsonl"}, "absolute"),
        ({"transcriptPath": "/home/alice/.dsh/sessions"}, "inside"),  # the root itself is no transcript
        ({"transcriptPath": "/home/alice/.dsh/sessions-evil/x.jsonl"}, "inside"),  # prefix trick
        ({"transcriptPath": "/home/alice/.dsh/sessions/x\x00.jsonl"}, "non-empty path"),
        ({"sessionId": "a" * 129}, "sessionId"),
        ({"sessionId": "a/b"}, "sessionId"),
        ({"sessionId": ".."}, "sessionId"),
        ({"turn": True}, "turn"),  # a bool is not an int
        ({"turn": -1}, "turn"),
        ({"reason": {"nokind": 1}}, "reason.kind"),
        ({"header": {"delegationDepth": "1"}}, "header.delegationDepth"),
    ],
)
def test_dsh_rejections(over, message):
    with pytest.raises(PayloadError, match=message) as err:
        parse_turn_end(json.dumps(_dsh(**over)), roots=ROOTS)
    assert err.value.status == 400


def test_error_messages_never_echo_submitted_values():
    secret = "sk-live-DO-NOT-ECHO-0123456789"
    with pytest.raises(PayloadError) as err:
        parse_turn_end(json.dumps(_dsh(turn=secret, transcriptPath=f"/tmp/{secret}")), roots=ROOTS)
    assert secret not in str(err.value)


def test_a_secret_in_a_payload_never_reaches_the_event_nor_the_state(fixtures_dir):
    """The ids and small scalars a turn end forwards are free text a broken hook may fill with a
    key: the DSH reason and the Codex turn-id went to Prefect as sent; a session id shaped like a
    token (it is stored and named in the event's resource) is refused."""
    token, key = "ghp_" + "a1B2c3D4e5" * 4, "sk-proj-" + "Zq8vX2mP9r" * 4
    events = [
        build_event(parse_turn_end(json.dumps(_dsh(reason={"kind": token})), roots=ROOTS)),
        build_event(
            parse_turn_end(
                json.dumps({"type": "agent-turn-complete", "thread-id": "t-1", "turn-id": f"x {key}"}), roots=ROOTS
            )
        ),
    ]
    sent = json.dumps(events)
    assert token not in sent and key not in sent and "[REDACTED:" in sent
    with pytest.raises(PayloadError, match="shape of a secret") as err:
        parse_turn_end(json.dumps(_dsh(sessionId=token)), roots=ROOTS)
    assert err.value.status == 400 and token not in str(err.value)


def test_session_id_limits_and_depth_zero_header():
    assert parse_turn_end(json.dumps(_dsh(sessionId="a" * 128)), roots=ROOTS).session_id == "a" * 128
    t = parse_turn_end(json.dumps(_dsh(header={"delegationDepth": 2})), roots=ROOTS)
    assert not t.should_trigger and "subagent" in t.why_not


def test_symlink_escaping_the_root_is_refused_and_nothing_is_created(tmp_path):
    root = tmp_path / "dsh" / "sessions"
    root.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    roots = SourceRoots(dsh_sessions=root)
    ok = parse_turn_end(json.dumps(_dsh(transcriptPath=str(root / "p" / "s.jsonl"))), roots=roots)
    assert ok.transcript_path == str(root / "p" / "s.jsonl")
    with pytest.raises(PayloadError, match="symlink"):
        parse_turn_end(json.dumps(_dsh(transcriptPath=str(root / "link" / "s.jsonl"))), roots=roots)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["dsh", "link", "outside", "sessions"]
    with pytest.raises(PayloadError, match="not configured"):
        parse_turn_end(json.dumps(_dsh()), roots=SourceRoots())


def test_claude_events_and_types():
    base = {
        "session_id": "1f3b5d7e-9a2c-4e6f-8b0d-2c4e6a8f0b13",
        "transcript_path": "/home/alice/.claude/projects/p/s.jsonl",
    }
    for event, trigger in (("Stop", True), ("SessionEnd", True), ("SubagentStop", False), ("PreToolUse", False)):
        t = parse_turn_end(json.dumps({**base, "hook_event_name": event}), roots=ROOTS)
        assert (t.kind, t.should_trigger, t.reason) == ("claude", trigger, event)
    with pytest.raises(PayloadError, match="stop_hook_active"):
        parse_turn_end(json.dumps({**base, "hook_event_name": "Stop", "stop_hook_active": 0}), roots=ROOTS)
    with pytest.raises(PayloadError, match="unrecognised"):
        parse_turn_end(b'{"hello": "world"}', roots=ROOTS)
    with pytest.raises(PayloadError, match="unknown kind"):
        parse_turn_end(json.dumps(base), kind="cursor", roots=ROOTS)


def test_dsh_claude_code_hook_bridge_body():
    """DSH's Claude-Code hook bridge sends Claude's stdin shape with a DSH transcript path."""
    sid = "0f6c3a9e-7d21-4b5a-8e4f-1a2b3c4d5e6f"
    body = json.dumps(
        {
            "session_id": sid,
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "transcript_path": f"/home/alice/.dsh/sessions/--home-alice-src-invoice-api--/{sid}/session.v4.jsonl",
        }
    )
    for kind in ("auto", "dsh"):
        t = parse_turn_end(body, kind=kind, roots=ROOTS)
        assert (t.kind, t.session_id, t.should_trigger) == ("dsh", sid, True)
    with pytest.raises(PayloadError, match="inside"):
        parse_turn_end(body, kind="claude", roots=ROOTS)
    claude_path = json.dumps({**json.loads(body), "transcript_path": "/home/alice/.claude/projects/p/s.jsonl"})
    assert parse_turn_end(claude_path, roots=ROOTS).kind == "claude"
    with pytest.raises(PayloadError, match="inside"):
        parse_turn_end(claude_path, kind="dsh", roots=ROOTS)


def test_event_carries_ids_only(fixtures_dir):
    turn = parse_turn_end((fixtures_dir / "webhooks/codex-notify.json").read_bytes(), roots=ROOTS)
    event = build_event(turn)
    assert event["event"] == EVENT_NAME == "dsh.turn.ended"
    assert event["resource"]["prefect.resource.id"] == "dsh.session.01a13b2f-6147-7112-94d6-9f81b6dffce8"
    assert event["resource"]["dsh.source"] == "codex"
    assert all(isinstance(v, str) for v in event["resource"].values())
    assert set(event["payload"]) == {"session_id", "turn", "reason", "seq", "source"}
    assert "CRLF" not in json.dumps(event)  # no transcript text (input-messages / last message)
    ignored = parse_turn_end((fixtures_dir / "webhooks/claude-stop-hook-active.json").read_bytes(), roots=ROOTS)
    with pytest.raises(ValueError, match="loop guard"):
        build_event(ignored)


# ------------------------------------------------------------- HTTP route


@pytest.mark.parametrize("name", WEBHOOK_NAMES)
def test_route_answers_every_fixture(name, corpus, fake_prefect):
    exp = corpus.fact(f"webhooks/{name}")
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=None)
    with TestClient(app, base_url=BASE) as client:
        r = client.post(
            HOOK_PATH,
            content=(corpus.dir / "webhooks" / name).read_bytes(),
            headers={"Content-Type": "application/json"},
        )
    assert app.state.turn_end.forwarder.flush(10)
    if not exp["valid"]:
        assert r.status_code == (413 if "bytes" in exp else 400), r.text
        assert r.json().get("accepted", False) is False and r.json()["error"]["message"]
        assert fake_prefect.events == []
        return
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["accepted"], body["triggered"]) == (True, exp["should_trigger"])
    assert body["session_id"] == exp.get("session_id", body["session_id"])
    if exp["should_trigger"]:
        [event] = fake_prefect.events
        assert event["resource"]["prefect.resource.id"] == f"dsh.session.{exp['session_id']}"
    else:
        assert body["reason"] and fake_prefect.events == []


def test_route_guard_table(hook_env, fixtures_dir):
    body = (fixtures_dir / "webhooks/claude-stop.json").read_bytes()
    json_h = {"Content-Type": "application/json"}
    app = create_receiver_app(roots=ROOTS, api_url=None, secret="s3cret")
    with TestClient(app, base_url=BASE) as c:
        assert c.post(HOOK_PATH, content=body, headers=json_h).status_code == 401
        assert c.post(HOOK_PATH, content=body, headers={**json_h, "X-DSH-Memory-Secret": "wrong"}).status_code == 401
        ok = c.post(HOOK_PATH, content=body, headers={**json_h, "X-DSH-Memory-Secret": "s3cret"})
        assert ok.status_code == 202
        assert ok.json() == {
            "accepted": True,
            "triggered": False,
            "session_id": "1f3b5d7e-9a2c-4e6f-8b0d-2c4e6a8f0b13",
            "kind": "claude",
            "reason": NO_SERVER,
        }
        sec = {"X-DSH-Memory-Secret": "s3cret"}
        assert c.post(HOOK_PATH, content=body, headers={"Content-Type": "text/plain", **sec}).status_code == 415
        assert c.post(HOOK_PATH, content=body, headers={**json_h, **sec, "Host": "evil.example"}).status_code == 403
        assert (
            c.post(HOOK_PATH, content=body, headers={**json_h, **sec, "Origin": "http://evil.example"}).status_code
            == 403
        )
        assert c.post(HOOK_PATH, content=body, headers={**json_h, **sec, "Origin": "null"}).status_code == 403
        big = b'{"a": "' + b"x" * MAX_BODY_BYTES + b'"}'
        assert c.post(HOOK_PATH, content=big, headers={**json_h, **sec}).status_code == 413
        assert c.post(HOOK_PATH + "?kind=cursor", content=body, headers={**json_h, **sec}).status_code == 400
        assert c.post(HOOK_PATH + "?kind=codex", content=body, headers={**json_h, **sec}).status_code == 400
        assert c.get(HOOK_PATH).status_code == 405


def test_create_app_mounts_the_receiver_behind_its_guard(hook_env, tmp_path, fixtures_dir, fake_prefect, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", fake_prefect.api_url)
    settings = MemorySettings.from_env(env={**ENV, "DSH_MEMORY_ROOT": str(tmp_path / "mem")})
    body = (fixtures_dir / "webhooks/dsh-turn-end.json").read_bytes()
    with TestClient(create_app(settings, mcp=False), base_url=BASE) as c:
        assert (
            c.post(
                HOOK_PATH, content=body, headers={"Content-Type": "application/json", "Host": "evil.example"}
            ).status_code
            == 403
        )
        r = c.post(HOOK_PATH, json=json.loads(body))
        assert r.status_code == 202 and r.json()["triggered"] is True
    deadline = time.monotonic() + 10
    while not fake_prefect.events and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e["payload"]["seq"] for e in fake_prefect.events] == [49]


def test_delivery_failure_is_logged_retried_and_never_reported_as_dropped(fixtures_dir, caplog):
    dead = f"http://127.0.0.1:{_free_port()}/api"  # nothing listens there
    app = create_receiver_app(roots=ROOTS, api_url=dead, secret=None)
    body = (fixtures_dir / "webhooks/codex-notify.json").read_bytes()
    with TestClient(app, base_url=BASE) as c:
        for _ in range(2):
            r = c.post(HOOK_PATH, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 202 and r.json()["triggered"] is True
        fwd = app.state.turn_end.forwarder
        assert fwd.flush(2) is False  # not delivered: still pending, not dropped
        assert fwd.failed_posts >= 1 and fwd.forwarded == 0 and "could not reach" in fwd.last_error
        assert (fwd.pending, fwd.replaced) == (1, 1)  # the second turn end replaced the first
        assert c.post(HOOK_PATH, content=body, headers={"Content-Type": "application/json"}).status_code == 202
        fwd.close_timeout = 1
    assert "will retry" in caplog.text
    assert "not forwarded at shutdown" in caplog.text  # the app's shutdown says what it left behind
    fwd._thread.join(5)
    assert not fwd._thread.is_alive()  # and stops retrying


def _turn(fixtures_dir, session_id: str, seq: int):
    body = json.loads((fixtures_dir / "webhooks/dsh-turn-end.json").read_bytes())
    body.update(sessionId=session_id, seq=seq)
    body["header"]["id"] = session_id
    body.pop("transcriptPath")
    return body


def test_a_storm_forwards_every_sessions_last_turn_end_in_few_posts(fixtures_dir, fake_prefect):
    """1,000 turn ends for 50 sessions as fast as the route takes them: every session's LAST
    turn end reaches Prefect, in batches (the old one-event-per-POST queue of 256 dropped most)."""
    sessions = [f"0a0b0c0d-0000-4000-8000-{i:012d}" for i in range(50)]
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=None)
    # A cadence longer than a round of 50 posts can take on a loaded machine: with the default
    # 2 s, a slow round let every turn end go out alone and nothing was coalesced.
    app.state.turn_end.forwarder.interval = 30.0
    with serve(app) as url, httpx.Client(base_url=url, timeout=10) as c:
        for seq in range(20):
            for sid in sessions:
                r = c.post(HOOK_PATH, json=_turn(fixtures_dir, sid, seq))
                assert r.status_code == 202 and r.json()["triggered"] is True, r.text
        fwd = app.state.turn_end.forwarder
        assert fwd.flush(20)
        received, refused, pending, forwarded, posts = fwd.received, fwd.refused, fwd.pending, fwd.forwarded, fwd.posts
    assert (received, refused, pending) == (1000, 0, 0)
    last = {}
    for ev in fake_prefect.events:  # in the order they were posted
        last[ev["payload"]["session_id"]] = ev["payload"]["seq"]
    assert last == {sid: 19 for sid in sessions}
    assert forwarded == len(fake_prefect.events) < 1000
    assert posts == len(fake_prefect.batches) <= 300  # batches, not one POST per turn end


def test_a_failed_post_is_retried_with_the_same_event_ids(fixtures_dir, fake_prefect, caplog):
    fake_prefect.fail_next = 2
    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, backoff_max_seconds=0.2)
    turn = parse_turn_end(
        json.dumps(_turn(fixtures_dir, "0a0b0c0d-0000-4000-8000-000000000001", 7)).encode(), roots=ROOTS
    )
    assert fwd.submit(turn)
    assert fwd.flush(10), fwd.last_error
    assert fwd.close(5)
    [event] = fake_prefect.events
    assert [b[0]["id"] for b in fake_prefect.refused] == [event["id"], event["id"]]
    assert (fwd.failed_posts, fwd.posts, fwd.forwarded) == (2, 1, 1)
    assert "HTTP 500" in caplog.text and "will retry" in caplog.text


def test_a_busy_session_costs_one_event_per_gap_and_its_last_turn_end_still_goes_out(fixtures_dir, fake_prefect):
    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, min_gap_seconds=1.0)
    sid = "0a0b0c0d-0000-4000-8000-000000000042"

    def turn(seq):
        return parse_turn_end(json.dumps(_turn(fixtures_dir, sid, seq)).encode(), roots=ROOTS)

    assert fwd.submit(turn(0))
    deadline = time.monotonic() + 5
    while not fake_prefect.events:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for seq in range(1, 11):  # a turn end every 50 ms, all within the gap
        assert fwd.submit(turn(seq))
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while [e["payload"]["seq"] for e in fake_prefect.events][-1:] != [10]:
        assert time.monotonic() < deadline, fake_prefect.events
        time.sleep(0.02)
    assert [e["payload"]["seq"] for e in fake_prefect.events] == [0, 10]
    assert fwd.close(5)


def test_a_held_back_turn_end_is_recorded_at_once_and_keeps_the_time_it_ended(fixtures_dir, fake_prefect):
    """The debounce counts from the recorded turn end: a turn end held back by the gap (or a
    retry) is recorded when it arrives, and its event still says when the turn ended."""
    recorded: list[tuple[str, datetime]] = []
    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, min_gap_seconds=1.5, record=recorded.extend)
    sid = "0a0b0c0d-0000-4000-8000-000000000043"

    def turn(seq):
        return parse_turn_end(json.dumps(_turn(fixtures_dir, sid, seq)).encode(), roots=ROOTS)

    assert fwd.submit(turn(0))
    assert fwd.flush(5)
    ended = datetime.now(UTC)
    assert fwd.submit(turn(1))  # within the gap: waits ~1.5 s for the next batch
    deadline = time.monotonic() + 10
    while len(recorded) < 2:
        assert time.monotonic() < deadline, recorded
        time.sleep(0.01)
    assert len(fake_prefect.events) == 1  # recorded before its event went out
    assert abs((recorded[1][1] - ended).total_seconds()) < 0.5
    while len(fake_prefect.events) < 2:
        assert time.monotonic() < deadline, fake_prefect.events
        time.sleep(0.02)
    sent = datetime.now(UTC)
    occurred = datetime.fromisoformat(fake_prefect.events[1]["occurred"])
    assert (sent - ended).total_seconds() > 1.0  # it was held back…
    assert abs((occurred - ended).total_seconds()) < 0.5  # …and still says when the turn ended
    assert fwd.close(5)
    assert fwd.recorded == 2


def test_a_forwarder_waiting_for_its_cadence_costs_no_cpu(fixtures_dir, fake_prefect):
    """Between batches the forwarder's thread sleeps until its next write or POST is due, with
    and without a recorder: a turn end waiting out the cadence must not keep a core busy (nor
    take the GIL from the event loop that answers the route), and a turn end arriving during
    that sleep is still recorded at once."""
    recorded: list[tuple[str, datetime]] = []
    forwarders = [
        TurnEndForwarder(fake_prefect.api_url, interval_seconds=30.0, record=record)
        for record in (None, recorded.extend)
    ]
    for n, fwd in enumerate(forwarders):
        sid = f"0a0b0c0d-0000-4000-8000-00000000005{n}"
        assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
    deadline = time.monotonic() + 10
    while not recorded:  # both threads are now in their 30 s cadence wait
        assert time.monotonic() < deadline
        time.sleep(0.01)
    cpu = time.process_time()
    time.sleep(0.5)  # a measuring window (this process's CPU time in it), not a wait for a condition
    busy = time.process_time() - cpu
    assert busy < 0.1, f"{busy:.2f} s of CPU in 0.5 s while two forwarders waited"
    assert all(fwd.pending == 1 and fwd.posts == 0 for fwd in forwarders)  # still waiting, nothing sent
    # …yet a turn end arriving meanwhile is still recorded within RECORD_EVERY_SECONDS, not at the POST
    assert forwarders[1].submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 2)).encode(), roots=ROOTS))
    deadline = time.monotonic() + 10
    while len(recorded) < 2:
        assert time.monotonic() < deadline, recorded
        time.sleep(0.01)
    assert forwarders[1].posts == 0
    for fwd in forwarders:
        assert fwd.close(5)
    assert len(fake_prefect.events) == 2


def test_a_turn_end_is_recorded_while_a_post_hangs_on_a_slow_prefect_api(fixtures_dir):
    """Recording never waits on Prefect: the forwarder's one thread wrote turn ends only between
    POSTs, so one held by a slow (here trickling) Prefect API left every turn end taken meanwhile
    unrecorded, and lost at shutdown."""
    recorded: list[tuple[str, datetime]] = []
    with trickling_receiver() as url:
        fwd = TurnEndForwarder(url.removesuffix(HOOK_PATH) + "/api", interval_seconds=0.05, record=recorded.extend)
        first, second = (f"0a0b0c0d-0000-4000-8000-00000000007{n}" for n in (1, 2))
        assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, first, 1)).encode(), roots=ROOTS))
        deadline = time.monotonic() + 10
        while not fwd._in_flight:  # its POST is under way, answered a byte at a time
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, second, 1)).encode(), roots=ROOTS))
        deadline = time.monotonic() + 10
        while len(recorded) < 2:
            assert time.monotonic() < deadline, recorded
            time.sleep(0.01)
        assert fwd._in_flight and fwd.posts == 0  # recorded while the POST still hangs
    fwd.close(1)
    assert [s for s, _ in recorded] == [first, second]


def test_a_post_to_a_trickling_prefect_api_is_given_up_at_its_timeout_and_retried(fixtures_dir):
    """httpx's timeout bounds each read, and a Prefect API answering a byte at a time restarts it
    with every byte: the forwarder's POST hung for as long as the answer trickled (here 30 s), every
    turn end behind it. A POST is given up at its timeout in all now; its events are retried."""
    import anyio
    from starlette.responses import StreamingResponse

    bodies: list[list[dict]] = []

    async def events(request: Request) -> Response:
        bodies.append(json.loads(await request.body()))
        if len(bodies) > 1:
            return Response(status_code=204)

        async def trickle():  # the first answer: a byte every 0.1 s
            for _ in range(300):
                await anyio.sleep(0.1)
                yield b" "

        return StreamingResponse(trickle(), status_code=200)

    with serve(Starlette(routes=[Route("/api/events", events, methods=["POST"])])) as url:
        fwd = TurnEndForwarder(url + "/api", interval_seconds=0.05)
        fwd.timeout = 1.0
        sid = "0a0b0c0d-0000-4000-8000-000000000047"
        assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
        deadline = time.monotonic() + 20
        while fwd.forwarded < 1:
            assert time.monotonic() < deadline, (fwd.failed_posts, fwd.last_error)
            time.sleep(0.05)
        assert fwd.close(5)
    assert fwd.failed_posts == 1 and "within 1 s" in fwd.last_error, fwd.last_error
    assert [[e["id"] for e in b] for b in bodies[1:]] == [[e["id"] for e in bodies[0]]]  # the same event again


def test_a_failed_record_is_retried_and_a_newer_turn_end_wins(fixtures_dir, fake_prefect, caplog):
    recorded: list[tuple[str, datetime]] = []
    fails = [1]

    def record(ends):
        if fails[0]:
            fails[0] -= 1
            raise OSError("database is locked")
        recorded.extend(ends)

    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, record=record)
    sid = "0a0b0c0d-0000-4000-8000-000000000044"
    assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
    assert fwd.flush(10), fwd.last_error
    assert fwd.close(5)
    assert [s for s, _ in recorded] == [sid]
    assert fwd.failed_records == 1 and "will retry" in caplog.text


def test_an_unusable_state_database_is_retried_with_backoff_said_once_and_recovers(
    tmp_path, fixtures_dir, fake_prefect, caplog
):
    """The state database file replaced by a directory while serve runs: its writes were retried
    every second, each failure logged again (a line a second for as long as it lasted). Now the
    retries back off (capped), the error is logged once, and recording resumes by itself."""
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    state = StateStore(tmp_path)
    state.db_path.mkdir(parents=True)  # what sqlite finds at the database's path: no database
    tries: list[float] = []

    def record(ends):  # the real write; only when it was tried is noted
        tries.append(time.monotonic())
        return TurnEnds(state).record(ends)

    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, backoff_max_seconds=2, record=record)
    sid = "0a0b0c0d-0000-4000-8000-000000000046"
    assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
    deadline = time.monotonic() + 30
    while fwd.failed_records < 4:
        assert time.monotonic() < deadline, fwd.failed_records
        time.sleep(0.05)
    gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]
    assert gaps[0] >= 0.45 and gaps[1] >= 0.9 and gaps[2] >= 1.8, gaps  # 0.5 s, doubling, capped at 2 s
    failed = [r for r in caplog.records if "recording" in r.getMessage()]
    assert len(failed) == 1 and "cannot use the state database" in failed[0].getMessage()
    state.db_path.rmdir()  # the database works again
    assert fwd.flush(30), fwd.last_error
    assert "recording turn ends works again" in caplog.text
    assert fwd.close(5)
    assert TurnEnds(state).pending() == 1
    state.close()


def test_close_records_a_turn_end_whose_first_write_failed_before_it_stops(fixtures_dir, fake_prefect, caplog):
    """Shutdown right after a failed write (its retry due 1 s later, the event already sent): close
    waits for the retry instead of stopping the thread with the turn end unrecorded."""
    recorded: list[tuple[str, datetime]] = []
    failed = threading.Event()

    def record(ends):
        if not failed.is_set():
            failed.set()
            raise OSError("database is locked")
        recorded.extend(ends)

    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, record=record)
    sid = "0a0b0c0d-0000-4000-8000-000000000045"
    assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
    assert failed.wait(10)
    assert fwd.close(30), fwd.last_error
    assert [s for s, _ in recorded] == [sid]
    assert "not recorded at shutdown" not in caplog.text


def test_a_turn_end_being_written_is_not_counted_as_recorded(fixtures_dir, fake_prefect):
    """flush() (close() at shutdown) waits for the write itself: it returned True while the write
    was still under way, so close() stopped the thread and a write failing then left its turn
    ends unrecorded, without the "not recorded at shutdown" error."""
    entered, release = threading.Event(), threading.Event()
    recorded: list[tuple[str, datetime]] = []
    calls = []

    def record(ends):  # the first write fails: its retry comes after the event was forwarded
        calls.append(ends)
        if len(calls) == 1:
            raise OSError("database is locked")
        entered.set()
        assert release.wait(10)
        recorded.extend(ends)

    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=0.05, record=record)
    sid = "0a0b0c0d-0000-4000-8000-000000000070"
    assert fwd.submit(parse_turn_end(json.dumps(_turn(fixtures_dir, sid, 1)).encode(), roots=ROOTS))
    assert entered.wait(10)
    try:
        assert fwd.forwarded == 1
        assert not fwd.flush(0.2)  # the write is under way: not recorded yet
    finally:
        release.set()
    assert fwd.close(10), fwd.last_error
    assert [s for s, _ in recorded] == [sid]


def test_turn_ends_waiting_to_be_recorded_count_against_the_bound(fixtures_dir, fake_prefect):
    """A state database that keeps failing (disk full): the turn ends it owes stay in memory, so
    they count against max_pending like those waiting for Prefect, and a new session gets 503
    instead of growing the backlog without end."""
    broken = threading.Event()
    broken.set()
    recorded: list[tuple[str, datetime]] = []

    def record(ends):
        if broken.is_set():
            raise OSError("disk full")
        recorded.extend(ends)

    def turn(sid: str, seq: int = 1):
        return parse_turn_end(json.dumps(_turn(fixtures_dir, sid, seq)).encode(), roots=ROOTS)

    fwd = TurnEndForwarder(fake_prefect.api_url, max_pending=2, interval_seconds=0.05, record=record)
    ids = [f"0a0b0c0d-0000-4000-8000-{i:012d}" for i in range(60, 63)]
    for n, sid in enumerate(ids[:2], start=1):
        assert fwd.submit(turn(sid))
        deadline = time.monotonic() + 10
        while fwd.forwarded < n:  # Prefect has it; only its record is owed
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert not fwd.submit(turn(ids[2]))
    assert fwd.submit(turn(ids[0], 2))  # a session already owed: its newer turn end is taken
    broken.clear()
    assert fwd.close(30), fwd.last_error
    assert {s for s, _ in recorded} == set(ids[:2])


def test_over_capacity_is_a_clear_503_never_a_silent_drop(fixtures_dir, fake_prefect):
    gate = threading.Event()

    def hanging_post(events, api_url, **kw):  # a Prefect API that hangs: pending must stay bounded
        gate.wait(10)
        return post_events(events, api_url, **kw)

    fwd = TurnEndForwarder(fake_prefect.api_url, max_pending=2, interval_seconds=0.05, post=hanging_post)
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=None, forwarder=fwd)
    ids = [f"0a0b0c0d-0000-4000-8000-{i:012d}" for i in range(5)]
    with TestClient(app, base_url=BASE) as c:
        first = c.post(HOOK_PATH, json=_turn(fixtures_dir, ids[0], 1))
        assert first.status_code == 202
        deadline = time.monotonic() + 5
        while fwd.pending != 1 or fwd._pending:  # taken into the (hanging) POST
            assert time.monotonic() < deadline
            time.sleep(0.01)
        codes = [c.post(HOOK_PATH, json=_turn(fixtures_dir, sid, 1)).status_code for sid in ids[1:]]
        assert codes == [202, 202, 503, 503]
        over = c.post(HOOK_PATH, json=_turn(fixtures_dir, ids[4], 2))
        assert over.status_code == 503 and int(over.headers["Retry-After"]) >= 1
        assert over.json()["error"]["type"] == "Overloaded" and "send it again" in over.json()["error"]["message"]
        again = c.post(HOOK_PATH, json=_turn(fixtures_dir, ids[1], 2))  # a waiting session: replaced
        assert again.status_code == 202
        gate.set()
        assert fwd.flush(10)
    last = {e["payload"]["session_id"]: e["payload"]["seq"] for e in fake_prefect.events}
    assert last == {ids[0]: 1, ids[1]: 2, ids[2]: 1}
    assert fwd.refused == 3


def test_shutdown_forwards_what_is_pending(fixtures_dir, fake_prefect):
    fwd = TurnEndForwarder(fake_prefect.api_url, interval_seconds=30)  # no cadence tick before the end
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=None, forwarder=fwd)
    with TestClient(app, base_url=BASE) as c:
        for seq in range(3):
            assert (
                c.post(HOOK_PATH, json=_turn(fixtures_dir, "0a0b0c0d-0000-4000-8000-000000000009", seq)).status_code
                == 202
            )
        assert fake_prefect.events == []
    assert [e["payload"]["seq"] for e in fake_prefect.events] == [2]  # the app's shutdown forwarded it
    assert not fwd.submit(
        parse_turn_end(json.dumps(_turn(fixtures_dir, "0a0b0c0d-0000-4000-8000-000000000009", 3)).encode(), roots=ROOTS)
    )


# ------------------------------------------------------------- notify


def _notify(args, input=None, env=None):
    return CliRunner().invoke(cli_app, ["notify", *args], input=input, env=env)


def test_notify_argv_codex_through_a_real_receiver(hook_env, fixtures_dir, fake_prefect):
    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret="k")
    with serve(app) as url:
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload], env={"DSH_MEMORY_HOOK_SECRET": "k"})
        assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
        assert app.state.turn_end.forwarder.flush(10)
        [event] = fake_prefect.events
        assert event["payload"] == {
            "session_id": "01a13b2f-6147-7112-94d6-9f81b6dffce8",
            "turn": "01a13b30-c48c-7603-9440-d00e0d6bef7f",
            "reason": "agent-turn-complete",
            "seq": None,
            "source": "codex",
        }
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload], env={"DSH_MEMORY_HOOK_SECRET": "bad"})
        assert r.exit_code == 1 and "HTTP 401" in r.stderr and "attempt" not in r.stderr  # refused: no retry


@pytest.mark.parametrize("args", [["--timeout", "100"], ["--timeout", "abc"], ["--bogus"], ["{}", "extra"]])
def test_notify_usage_errors_exit_1_never_2(args):
    """A misconfigured hook command is a failure (1), not Claude Code's "keep going" (2)."""
    r = _notify(args, input="{}")
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.startswith("dsh-memory notify: "), r.output
    assert len(r.stderr.strip().splitlines()) == 1
    quiet = _notify([*args, "--quiet"], input="{}")
    assert quiet.exit_code == 1 and quiet.stdout == quiet.stderr == ""


def test_a_non_ascii_hook_secret_works_end_to_end(hook_env, fixtures_dir, fake_prefect):
    """The secret is sent and compared as UTF-8 bytes: `notify` neither crashes on it nor is
    refused, and a client sending the UTF-8 header (curl) is let in."""
    secret = "pässwörd-€"
    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=secret)
    with serve(app) as url:
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload], env={"DSH_MEMORY_HOOK_SECRET": secret})
        assert r.exit_code == 0 and r.stderr == "", r.stderr
        headers = {"Content-Type": "application/json", "X-DSH-Memory-Secret": secret.encode()}
        assert httpx.post(url + HOOK_PATH, content=payload, headers=headers).status_code == 202
        headers["X-DSH-Memory-Secret"] = secret.encode("latin-1", "replace")
        assert httpx.post(url + HOOK_PATH, content=payload, headers=headers).status_code == 401


def test_a_hook_secret_with_whitespace_around_it_works_and_a_line_break_in_it_is_named(
    hook_env, monkeypatch, fixtures_dir, fake_prefect
):
    """HTTP drops the whitespace around a header value (h11 will not even send it): a secret set
    with a trailing space or newline is met without it, by `notify` and by curl alike. One with
    a line break inside can never be sent: `notify` says so at once, the receiver will not start."""
    monkeypatch.setenv("DSH_MEMORY_HOOK_SECRET", " k3y \n")
    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url)  # the secret from the environment
    with serve(app) as url:
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload])
        assert (r.exit_code, r.stderr) == (0, "")
        headers = {"Content-Type": "application/json", "X-DSH-Memory-Secret": "k3y"}
        assert httpx.post(url + HOOK_PATH, content=payload, headers=headers).status_code == 202
        monkeypatch.setenv("DSH_MEMORY_HOOK_SECRET", "k3\ny")
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload])
        assert r.exit_code == 1 and "DSH_MEMORY_HOOK_SECRET holds a line break" in r.stderr, r.stderr
        assert "attempt" not in r.stderr  # not retried
    with pytest.raises(ConfigError, match="DSH_MEMORY_HOOK_SECRET"):
        TurnEndReceiver(roots=ROOTS, api_url=None)


def test_notify_stdin_claude_direct(hook_env, fixtures_dir, fake_prefect):
    stdin = (fixtures_dir / "webhooks/claude-stop.json").read_bytes()
    r = _notify(["--kind", "claude", "--direct", "--api-url", fake_prefect.api_url], input=stdin)
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
    [event] = fake_prefect.events
    assert event["resource"]["dsh.source"] == "claude"
    r = _notify(["--direct"], input=stdin)  # no PREFECT_API_URL anywhere
    assert r.exit_code == 1 and "PREFECT_API_URL" in r.stderr and len(fake_prefect.events) == 1


@pytest.mark.parametrize(
    "name, args, code, needle",
    [
        ("claude-stop-hook-active.json", ["--kind", "claude"], 0, "loop guard"),  # deliberately ignored
        ("bad-claude-path-traversal.json", ["--kind", "claude"], 1, "payload refused (400)"),
        ("bad-deeply-nested.json", [], 1, "payload refused (400)"),
        ("bad-huge-body.json", [], 1, "payload refused (413)"),
        ("bad-empty.json", [], 1, "empty body"),
        ("codex-notify.json", ["--kind", "claude"], 1, "payload refused (400)"),
        ("dsh-turn-end.json", ["--kind", "cursor"], 1, "unknown --kind"),
    ],
)
def test_notify_never_steers_the_agent(name, args, code, needle, hook_env, fixtures_dir, fake_prefect):
    """Exit 0 (ignored) or 1 (refused), never 2, never stdout: a Claude Code Stop hook reads those
    as "keep going"."""
    stdin = (fixtures_dir / "webhooks" / name).read_bytes()
    r = _notify([*args, "--direct", "--api-url", fake_prefect.api_url], input=stdin)
    assert r.exit_code == code and r.stdout == "" and needle in r.stderr
    assert fake_prefect.events == []


def test_notify_unreachable_receiver_retries_then_exits_1(hook_env, fixtures_dir):
    payload = (fixtures_dir / "webhooks/dsh-turn-end.json").read_text()
    r = _notify(["--url", f"http://127.0.0.1:{_free_port()}{HOOK_PATH}", payload])
    assert r.exit_code == 1 and "unreachable" in r.stderr
    # retried, and within --timeout (3 s): the delays 0.2 + 0.5 + 1.0 fit, the next 2.0 does not,
    # so no more than 4 attempts however slow the machine (a slow one makes fewer)
    assert re.search(r"\(after [234] attempts\)", r.stderr), r.stderr
    # the same failure, quiet: a short budget (its retries are proved above)
    quiet = _notify(["--quiet", "--timeout", "0.5", "--url", f"http://127.0.0.1:{_free_port()}{HOOK_PATH}", payload])
    assert (quiet.exit_code, quiet.stderr) == (1, "")


@contextlib.contextmanager
def trickling_receiver():
    """A loopback "receiver" that answers 202 one byte every 0.2 s (about 30 s in all): each byte
    resets an HTTP client's read timeout."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    body = b" " * 150 + b'{"accepted": true, "triggered": true, "session_id": "s"}'

    def answer():
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n")
                conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body))
                for i in range(len(body)):
                    if stop.wait(0.2):
                        return
                    conn.sendall(body[i : i + 1])

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}{HOOK_PATH}"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_notify_gives_up_on_a_trickling_receiver_within_its_timeout(hook_env, fixtures_dir):
    """--timeout bounds the whole delivery, not each read: a receiver (or whatever holds its port)
    that answers a byte at a time must not hold the agent's hook past it."""
    payload = (fixtures_dir / "webhooks/dsh-turn-end.json").read_text()
    with trickling_receiver() as url:
        r = _notify(["--timeout", "1", "--url", url, payload])
    assert r.exit_code == 1 and r.stdout == "", r.stderr
    assert "no answer within --timeout 1 s" in r.stderr, r.stderr


def test_notify_direct_gives_up_on_a_trickling_prefect_api_within_its_timeout(hook_env, fixtures_dir):
    """--direct records the turn end first, in the memory root the settings resolve to, which asks
    the Prefect API for the saved block: a server answering a byte at a time held the hook for as
    long as it trickled, whatever --timeout said. The recording has the --timeout too."""
    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    with trickling_receiver() as url:
        api = url.removesuffix(HOOK_PATH) + "/api"
        r = _notify(["--direct", "--timeout", "1", "--api-url", api, payload])
    assert r.exit_code == 1 and r.stdout == "", r.stderr
    assert "turn end not recorded within --timeout 1 s" in r.stderr, r.stderr


def test_notify_gives_up_on_a_stdin_never_closed_within_its_timeout(hook_env):
    """A hook that leaves the payload's pipe open held `notify` for as long, whatever --timeout said."""
    cmd = [sys.executable, "-m", "dsh_memory.cli", "notify", "--timeout", "1"]
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            code = proc.wait(timeout=60)  # stdin left open
        finally:
            proc.kill()
            proc.stdin.close()
        out, err = proc.stdout.read(), proc.stderr.read().decode()
    assert (code, out) == (1, b""), err
    assert "no payload on stdin within --timeout 1 s" in err, err


def test_a_prefect_api_password_is_never_shown(hook_env, fixtures_dir):
    """Basic auth in the Prefect API URL: a failed delivery named the URL, password included, on
    `notify`'s stderr and in the receiver's log lines."""
    from dsh_memory.hooks.events import EmitError

    for url in (f"http://alice:s3cretpw@127.0.0.1:{_free_port()}/api", "ftp://alice:s3cretpw@127.0.0.1/api"):
        with pytest.raises(EmitError) as err:
            post_events([], url, timeout=2)
        assert "s3cretpw" not in str(err.value) and "127.0.0.1" in str(err.value), err.value
    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    api = f"http://alice:s3cretpw@127.0.0.1:{_free_port()}/api"
    # (a generous budget: at 0.5 s a loaded machine's first attempt did not end in time, and the line said
    # "no answer within --timeout", naming no URL at all)
    r = _notify(["--direct", "--timeout", "10", "--api-url", api, payload], env={"DSH_MEMORY_IGNORE_BLOCKS": "1"})
    assert r.exit_code == 1 and "could not reach" in r.stderr and "s3cretpw" not in r.stderr, r.stderr


def test_notify_direct_retries_a_failing_prefect_api(hook_env, fixtures_dir, fake_prefect):
    fake_prefect.fail_next = 1
    stdin = (fixtures_dir / "webhooks/claude-stop.json").read_bytes()
    r = _notify(["--kind", "claude", "--direct", "--api-url", fake_prefect.api_url], input=stdin)
    assert (r.exit_code, r.stderr) == (0, "")
    assert len(fake_prefect.refused) == 1 and len(fake_prefect.events) == 1
    assert fake_prefect.refused[0][0]["id"] == fake_prefect.events[0]["id"]  # the same event, sent again


def test_notify_says_at_once_what_no_retry_can_change(hook_env, fixtures_dir, fake_prefect, monkeypatch):
    """A 202 whose body is not a JSON object printed "unexpected error: AttributeError"; a payload
    `null` was "a JSON NoneType"; an ftp:// --url, a PREFECT_API_KEY no header can carry and a
    Prefect API refusing the event (401) were retried for the whole --timeout (as unreachable).
    Each is one clear line at once, exit 1, nothing sent."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    payload = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    odd = Starlette(routes=[Route(HOOK_PATH, lambda _: JSONResponse([1, 2], status_code=202), methods=["POST"])])
    with serve(odd) as url:
        r = _notify(["--kind", "codex", "--url", url + HOOK_PATH, payload])
    assert r.exit_code == 1 and "receiver answered HTTP 202 without a JSON object: '[1,2]'" in r.stderr, r.stderr
    r = _notify(["null"])
    assert r.exit_code == 1 and r.stderr.strip().endswith("expected a JSON object, got null"), r.stderr
    assert _notify(["[]"]).stderr.strip().endswith("got an array")
    cases = [
        (
            ["--url", "ftp://127.0.0.1/hooks/turn-end"],
            {},
            "--url 'ftp://127.0.0.1/hooks/turn-end' is not an http(s) URL",
        ),
        (["--direct", "--api-url", "ftp://127.0.0.1/api"], {}, "'ftp://127.0.0.1/api' is not an http(s) URL"),
        (
            ["--direct", "--api-url", fake_prefect.api_url],
            {"PREFECT_API_KEY": "k\ney"},
            "PREFECT_API_KEY cannot be sent",
        ),
        (["--direct", "--api-url", fake_prefect.api_url], {"PREFECT_API_KEY": "kéy"}, "PREFECT_API_KEY cannot be sent"),
    ]
    for args, env, needle in cases:
        r = _notify(["--kind", "codex", "--timeout", "10", *args, payload], env=env)
        assert r.exit_code == 1 and needle in r.stderr and "attempt" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    fake_prefect.fail_next, fake_prefect.fail_status = 5, 401
    r = _notify(["--kind", "codex", "--timeout", "10", "--direct", "--api-url", fake_prefect.api_url, payload])
    assert r.exit_code == 1 and "HTTP 401" in r.stderr and "attempt" not in r.stderr, r.stderr
    assert len(fake_prefect.refused) == 1 and fake_prefect.events == []


def test_notify_waits_out_a_receiver_at_capacity(hook_env, fixtures_dir, fake_prefect):
    """A receiver answering 503 (its pending sessions at the bound) is retried until it takes
    the turn end: the hook neither drops it nor reports a success it did not get."""
    gate = threading.Event()

    def hanging_post(events, api_url, **kw):
        gate.wait(10)
        return post_events(events, api_url, **kw)

    fwd = TurnEndForwarder(fake_prefect.api_url, max_pending=1, interval_seconds=0.05, post=hanging_post)
    app = create_receiver_app(roots=ROOTS, api_url=fake_prefect.api_url, secret=None, forwarder=fwd)
    with serve(app) as url:
        ids = ["0a0b0c0d-0000-4000-8000-000000000001", "0a0b0c0d-0000-4000-8000-000000000002"]
        assert httpx.post(url + HOOK_PATH, json=_turn(fixtures_dir, ids[0], 1)).status_code == 202
        deadline = time.monotonic() + 5
        while fwd._pending:  # taken into the hanging POST
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert (
            httpx.post(url + HOOK_PATH, json=_turn(fixtures_dir, "0a0b0c0d-0000-4000-8000-000000000003", 1)).status_code
            == 202
        )
        threading.Timer(0.6, gate.set).start()  # capacity frees up while notify retries
        r = _notify(["--kind", "dsh", "--url", url + HOOK_PATH, json.dumps(_turn(fixtures_dir, ids[1], 5))])
        assert (r.exit_code, r.stderr) == (0, "")
        assert fwd.flush(10)
    assert {e["payload"]["session_id"]: e["payload"]["seq"] for e in fake_prefect.events}[ids[1]] == 5


# ------------------------------------------------------------- the real Prefect server


def test_event_arrives_on_a_real_prefect_server(prefect_api, hook_env, fixtures_dir, monkeypatch):
    from prefect.server.events.schemas.events import Event

    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    dsh = (fixtures_dir / "webhooks/dsh-turn-end.json").read_bytes()
    Event.model_validate(build_event(parse_turn_end(dsh, roots=ROOTS)))  # the server's own schema
    app = create_receiver_app(roots=ROOTS, secret=None)  # api_url from PREFECT_API_URL
    with TestClient(app, base_url=BASE) as c:
        r = c.post(HOOK_PATH, content=dsh, headers={"Content-Type": "application/json"})
    assert r.status_code == 202 and r.json()["triggered"] is True
    fwd = app.state.turn_end.forwarder
    assert fwd.flush(20) and (fwd.forwarded, fwd.failed_posts) == (1, 0), fwd.last_error
    codex = (fixtures_dir / "webhooks/codex-notify.json").read_text()
    r = _notify(["--direct", codex])
    assert (r.exit_code, r.stderr) == (0, "")
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    with StateStore(MemorySettings.from_env().memory_root) as state:  # recorded, as the receiver does
        assert TurnEnds(state).pending() == 1

    def read_back(session_id):
        flt = {"filter": {"event": {"name": [EVENT_NAME]}, "any_resource": {"id": [f"dsh.session.{session_id}"]}}}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = httpx.post(f"{prefect_api}/events/filter", json=flt, timeout=10).json()["events"]
            if events:
                return events
            time.sleep(0.5)
        return []

    [ev] = read_back("6a9d2f4b-3e8c-4b1a-9d7f-5c2e8b4a1f06")
    assert ev["payload"] == {
        "session_id": "6a9d2f4b-3e8c-4b1a-9d7f-5c2e8b4a1f06",
        "turn": 2,
        "reason": "completed",
        "seq": 49,
        "source": "dsh",
    }
    assert ev["resource"]["dsh.source"] == "dsh"
    [ev] = read_back("01a13b2f-6147-7112-94d6-9f81b6dffce8")
    assert ev["payload"]["source"] == "codex"


def test_notify_direct_records_in_the_memory_root_the_saved_settings_pin(
    prefect_api, hook_env, fixtures_dir, tmp_path, monkeypatch
):
    """The extraction run reads the turn ends of the memory root its settings resolve to (a root
    pinned in the saved block wins over DSH_MEMORY_ROOT): `notify --direct` records there too,
    not in the environment's root, where no run would look."""
    from dsh_memory.blocks import MemorySettingsBlock, register_blocks
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    from .test_blocks import _delete_defaults

    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    pinned = tmp_path / "pinned"
    register_blocks()
    MemorySettingsBlock(memory_root=str(pinned)).save("default", overwrite=True)
    try:
        codex = (fixtures_dir / "webhooks/codex-notify.json").read_text()
        r = _notify(["--direct", "--quiet", codex])
    finally:
        _delete_defaults()
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")
    with StateStore(pinned) as state:
        assert TurnEnds(state).pending() == 1
    assert not (tmp_path / "mem").exists()  # DSH_MEMORY_ROOT (hook_env): untouched


def test_the_receiver_records_each_sessions_newest_turn_end_in_the_state(tmp_path, fixtures_dir, fake_prefect):
    """The debounce is data: a turn end accepted by the route is in the memory root's state
    database (storage/turn_ends.py) once the forwarder wakes, beside its Prefect event."""
    from dsh_memory.settings import MemorySettings
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    settings = MemorySettings(memory_root=tmp_path / "mem", roots=ROOTS, debounce_seconds=20)
    app = create_receiver_app(settings, api_url=fake_prefect.api_url, secret=None)
    ids = ["0a0b0c0d-0000-4000-8000-000000000051", "0a0b0c0d-0000-4000-8000-000000000052"]
    before = datetime.now(UTC)
    with serve(app) as url, httpx.Client(base_url=url, timeout=10) as c:
        for seq in range(3):
            for sid in ids:
                assert c.post(HOOK_PATH, json=_turn(fixtures_dir, sid, seq)).status_code == 202
        assert app.state.turn_end.forwarder.flush(20)
    with StateStore(settings.memory_root) as state:
        ends = TurnEnds(state)
        assert ends.pending() == 2 and ends.due(datetime.now(UTC), 20) == {}
        due = ends.due(datetime.now(UTC) + timedelta(seconds=25), 20)
    assert sorted(due) == ids and all(at >= before.timestamp() - 1 for at in due.values())
    assert {e["payload"]["session_id"] for e in fake_prefect.events} == set(ids)


@pytest.mark.parametrize("command", [["serve", "--no-boot-catch-up"], ["http"]])
def test_serve_shows_a_prefect_api_answer_in_its_warning_with_control_characters_visible(tmp_path, command):
    """`serve`'s (and `http`'s) console went out raw but for its own lines: a warning quoting
    outside text (here the Prefect API's answer to a refused event) sent its escape sequences to
    the terminal. Everything the process writes is `visible` now."""
    import anyio

    answered = threading.Event()

    async def events(request: Request) -> Response:
        if answered.is_set():
            return Response(status_code=204)
        answered.set()
        return Response("\x1b]0;owned\x07\x1b[2J\u202e", status_code=500)

    async def anything_else(request: Request) -> Response:  # serve's runner waits here meanwhile
        for _ in range(600):
            await anyio.sleep(0.1)
        return Response(status_code=503)

    routes = [
        Route("/api/events", events, methods=["POST"]),
        Route("/{rest:path}", anything_else, methods=["GET", "POST", "PATCH"]),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_API_URL"))}
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with serve(Starlette(routes=routes)) as api, open(log_path, "w") as log:
        env.update(
            HOME=str(tmp_path),
            DSH_MEMORY_ROOT=str(tmp_path / "mem"),
            DSH_MEMORY_PREFECT_HOME=str(tmp_path / "prefect-home"),
            DSH_MEMORY_IGNORE_BLOCKS="1",
            PREFECT_API_URL=api + "/api",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", *command, "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            body = {
                "sessionId": "0a0b0c0d-0000-4000-8000-000000000048",
                "turn": 1,
                "reason": {"kind": "completed"},
                "seq": 1,
            }
            body["header"] = {"cwd": "/home/alice/src/x", "origin": "user", "delegationDepth": 0}
            while True:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                with contextlib.suppress(httpx.HTTPError):
                    r = httpx.post(f"http://127.0.0.1:{port}{HOOK_PATH}", json=body, timeout=5)
                    assert r.status_code == 202, r.text
                    break
                time.sleep(0.5)
            while "refused the event" not in log_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    console = log_path.read_text()
    assert "\\x1b]0;owned\\x1b[2J\\u202e" in console, console[-3000:]  # the answer, as text
    assert not re.search("[\x1b\x9b\u202e]", console), console[-3000:]
