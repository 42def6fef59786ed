"""OpenAICompatLLM against endpoints that trickle or stall, over real loopback HTTP (the fake
OpenAI-compatible server): every wait on the network is bounded as a whole, and a call given up
does not hold a connection later calls need."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from dsh_memory.errors import LLMTransientError
from dsh_memory.llm.base import ToolSpec
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

MSGS = [{"role": "user", "content": "transcript"}]
SAVE = ToolSpec(name="memory_save", description="Save", parameters={"type": "object", "properties": {}})
POOL = 32  # the connections OpenAICompatLLM's pool was capped at


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


@pytest.mark.parametrize(
    "stall",
    [Reply.slow_headers(30.0), Reply.keepalive(30.0)],
    ids=["headers-trickle", "body-trickle"],
)
def test_a_model_lookup_that_trickles_is_given_up_and_the_call_goes_on_without_it(srv, stall):
    """GET /models (a generic endpoint asked for an effort) had only the per-read timeout: an
    endpoint trickling its answer a byte at a time held the first call (and, behind the caps
    lock, every other) for as long as it trickled. The lookup is bounded as a whole; one that
    timed out is a failed lookup: the provider's default effort, noted, and not tried again."""
    srv.models_reply = stall
    with OpenAICompatLLM(srv.base_url, "fake-model", timeout_seconds=0.5) as client:
        started = time.monotonic()
        first = client.complete(MSGS, tool=SAVE, reasoning_effort="high")
        assert time.monotonic() - started < 20  # the lookup's bound (0.5 s), not the trickle's 30 s
        second = client.complete(MSGS, tool=SAVE, reasoning_effort="high")
    assert first.tool_calls and first.reasoning_effort == "" and second.reasoning_effort == ""
    assert all("reasoning_effort" not in r for r in srv.requests)
    assert [n for n in first.notes if "metadata unavailable" in n] == [
        "model metadata unavailable (no answer within 0.5 s)"
    ]
    assert srv.models_calls == 1  # resolved once: the second call did not wait for it again


@pytest.mark.parametrize(
    "stall",
    [Reply.slow_headers(120.0, then=Reply.text("late")), Reply.keepalive(120.0, every=60.0)],
    ids=["headers-trickle", "silent-after-headers"],
)
def test_calls_given_up_at_their_deadline_let_go_of_their_connections(srv, stall):
    """A call given up at its deadline went on reading in its thread: from headers that trickle
    in (no read waits long enough for the read timeout) until they ended, from a silent answer
    until the read timeout. Each held a connection of the client's pool: a pool's worth of them
    left the next call waiting for a slot past its own deadline. Connections in use are not capped."""
    srv.script(*[stall] * POOL)
    with OpenAICompatLLM(srv.base_url, "fake-model", timeout_seconds=60, deadline_seconds=1.0) as client:

        def overdue(_: int) -> str:
            with pytest.raises(LLMTransientError, match="deadline") as ei:
                client.complete(MSGS)
            return str(ei.value)

        with ThreadPoolExecutor(POOL) as pool:
            assert len(list(pool.map(overdue, range(POOL)))) == POOL
        client.deadline_seconds = 30.0  # the next call: a generous deadline, answered at once
        srv.script(Reply.text("on time"))
        assert client.complete(MSGS).text == "on time"
    assert srv.request_count == POOL + 1


def test_a_client_killed_mid_request_is_no_traceback_on_the_fake_models_stderr(capfd):
    """The kill tests kill the CLI while it waits on the fake model; the reset connection printed
    a socketserver traceback on the test run's stderr (four in one CI run), between the dots."""
    import socket
    import struct

    with FakeOpenAIServer() as fake:
        host, port = fake.base_url.split("//")[1].split("/")[0].split(":")
        for _ in range(3):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            s.close()
        # Each connection's handler thread gets the reset at once (the old code printed within
        # milliseconds); watch its stderr for two seconds, then stop the server.
        seen, until = "", time.monotonic() + 2
        while time.monotonic() < until:
            seen += capfd.readouterr().err
            time.sleep(0.1)
    assert "Traceback" not in seen + capfd.readouterr().err, seen
