"""The loopback guard parses Host strictly: only `host[:port]` naming a loopback address passes."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
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
