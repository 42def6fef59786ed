"""The loopback guard parses Host strictly: only `host[:port]` naming a loopback address passes."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from dsh_memory.errors import UserInputError
from dsh_memory.serve.guard import LoopbackGuard, check_bind_host, host_of, is_loopback_address, is_loopback_host


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = Starlette(routes=[Route("/ok", lambda request: PlainTextResponse("ok"))])
    app.add_middleware(LoopbackGuard)
    return TestClient(app)


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:80", "[::1]", "[::1]:8765", "127.9.8.7:1", "LOCALHOST"],
)
def test_loopback_hosts_pass(client, host):
    r = client.get("/ok", headers={"host": host})
    assert r.status_code == 200, (host, r.text)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:80@evil.com",  # userinfo smuggling
        "evil.com@127.0.0.1",
        "localhost.",  # trailing dot
        "127.0.0.1.",
        "localhost..",
        "::1",  # unbracketed IPv6
        "::1:8765",
        "[::1",
        "127.0.0.1:80:81",
        "127.0.0.1 :80",
        "127.0.0.1/x",
        "127.0.0.1:port",
        "evil.com",
        "127.0.0.1.evil.com",
        "0.0.0.0",
        "[::ffff:10.0.0.1]",
        "",
    ],
)
def test_malformed_or_remote_hosts_are_refused(client, host):
    r = client.get("/ok", headers={"host": host})
    assert r.status_code == 403, (host, r.status_code)
    assert not is_loopback_host(host)


def test_host_of_and_addresses():
    assert host_of("[::1]:80") == "::1" and host_of("LocalHost:1") == "localhost"
    assert host_of("a@b") is None and host_of("x.") is None
    assert is_loopback_address("::1") and is_loopback_address("127.0.0.2") and not is_loopback_address("10.0.0.1")
    assert not is_loopback_address("127.000.0.1")  # no octal-looking literals


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "::", "example.com"])
def test_bind_check_refuses_remote_interfaces(host):
    with pytest.raises(UserInputError, match="refusing to bind"):
        check_bind_host(host)
    check_bind_host(host, allow_remote=True)
    check_bind_host("::1")


# --- a local process that opens connections and stalls cannot take the server down -------------


def _stalled(port: int, request: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request)
    return s


def _closed_or_answered(s: socket.socket, seconds: float = 60) -> bytes:
    """What the server sent before closing `s` (b'' when it closed without a word); fails (a
    timeout) when it does neither within `seconds`."""
    s.settimeout(seconds)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with our request unread: a reset, as good as a close
        pass
    return data


HEAD = b"POST /dsh-memory/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n"
BODY = HEAD + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"


async def _slow(request):
    await asyncio.sleep(3)
    return PlainTextResponse("done")


def test_stalled_connections_are_bounded_and_let_go(monkeypatch):
    """Beyond MAX_CONNECTIONS a new connection is closed at once; a request whose headers or body
    stall is let go (closed, or 408), while a request in progress is never cut."""
    from dsh_memory.serve import bounded_http, guard
    from tests.vault_helpers import served

    monkeypatch.setattr(bounded_http, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(bounded_http, "HEAD_SECONDS", 0.5)
    monkeypatch.setattr(guard, "BODY_SECONDS", 1.0)
    app = Starlette(routes=[Route("/healthz", lambda r: JSONResponse({"ok": True})), Route("/slow", _slow)])
    app.add_middleware(LoopbackGuard)
    with served(app) as base, httpx.Client(base_url=base, timeout=60) as worker:
        port = int(base.rsplit(":", 1)[1])
        assert worker.get("/healthz").status_code == 200  # its connection: one of the 8
        held = [_stalled(port, HEAD) for _ in range(7)]
        extra = _stalled(port, HEAD)
        assert _closed_or_answered(extra) == b""  # closed at once: no descriptor held for it
        # the stalled headers are let go within HEAD_SECONDS or two, never answered
        assert [_closed_or_answered(s) for s in held] == [b""] * 7
        body = _stalled(port, BODY)
        assert b" 408 " in _closed_or_answered(body).split(b"\r\n", 1)[0]
        assert worker.get("/slow").text == "done"  # 3 s in progress: six HEAD_SECONDS
        for s in [*held, extra, body]:
            s.close()


def test_a_connection_flood_does_not_take_dsh_memory_http_down(tmp_path):
    """1,500 connections with stalled bodies against `dsh-memory http` under a 1,024 descriptor
    limit (a common default): it keeps running, and answers once they are gone."""
    import resource
    import subprocess
    import sys

    from tests.vault_helpers import free_port

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this test opens 1,500 connections: the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    port = free_port()
    env = {**os.environ, "DSH_MEMORY_ROOT": str(tmp_path / "memories"), "DSH_HOME": str(tmp_path / "dsh")}
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh_memory.cli", "http", "--port", str(port), "--no-mcp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)),
    )
    flood: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            assert server.poll() is None and time.monotonic() < deadline, "dsh-memory http did not come up"
            time.sleep(0.3)
        for _ in range(1500):
            try:
                flood.append(_stalled(port, BODY))
            except OSError:  # refused or reset once the backlog is full: the flood is held off
                pass
        _answers(port)  # one request in the flood (answered or not)
        for s in flood:
            s.close()
        flood.clear()
        deadline = time.monotonic() + 120
        while not _answers(port):
            assert server.poll() is None, "dsh-memory http died: " + server.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "dsh-memory http does not answer after the flood"
            time.sleep(0.3)
    finally:
        for s in flood:
            s.close()
        server.terminate()
        server.wait(timeout=30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
