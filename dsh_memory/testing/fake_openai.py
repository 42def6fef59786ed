"""A scriptable fake OpenAI-compatible server on 127.0.0.1, for tests and benchmarks.

Real HTTP (ThreadingHTTPServer, one daemon thread per connection, HTTP/1.1 keep-alive), so the
client under test runs its actual transport, pooling and timeouts.

    with FakeOpenAIServer(latency_seconds=0.0) as srv:
        srv.script(Reply.tool({"raw_memory": "…"}), Reply.error(429, retry_after=2))
        llm = OpenAICompatLLM(srv.base_url, "fake-model")
        …
        assert "sk-" not in json.dumps(srv.requests)
        assert srv.max_in_flight <= 8

Reply source per chat request: the scripted queue first, then `handler(request_json)` (may
return None), then the default (a tool call with `{}` when tools were sent, else text "ok").
Endpoints: POST /chat/completions and /v1/chat/completions, GET /models and /v1/models.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. Build with the classmethods; `delay_seconds` adds latency to this one."""

    kind: str  # tool | raw_tool | text | truncated | error | drop
    arguments: dict[str, Any] | None = None
    raw_arguments: str | None = None
    content: str = ""
    tool_name: str | None = None  # default: the tool the request forced, else its first tool
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float | None = None
    prompt_tokens: int | None = None  # default: ~ request bytes / 4
    completion_tokens: int | None = None  # default: ~ answer bytes / 4
    model: str | None = None

    @classmethod
    def tool(cls, arguments: dict[str, Any], name: str | None = None, **kw: Any) -> Reply:
        return cls("tool", arguments=arguments, tool_name=name, **kw)

    @classmethod
    def raw_tool(cls, raw_arguments: str, name: str | None = None, content: str = "", **kw: Any) -> Reply:
        return cls("raw_tool", raw_arguments=raw_arguments, tool_name=name, content=content, **kw)

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        return cls("text", content=content, **kw)

    @classmethod
    def truncated(cls, partial_arguments: str | None = None, content: str = "", **kw: Any) -> Reply:
        """finish_reason "length"; with partial tool arguments when given, else partial text."""
        return cls("truncated", raw_arguments=partial_arguments, content=content, **kw)

    @classmethod
    def error(cls, status: int, body: Any = None, retry_after: str | float | None = None, **kw: Any) -> Reply:
        headers = dict(kw.pop("headers", {}) or {})
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if body is None:
            body = {"error": {"message": f"fake error {status}", "type": "fake_error", "code": status}}
        return cls("error", status=status, body=body, headers=headers, **kw)

    @classmethod
    def drop(cls, **kw: Any) -> Reply:
        """Close the connection without any response."""
        return cls("drop", **kw)

    @classmethod
    def keepalive(cls, seconds: float, then: Reply | None = None, every: float = 0.05) -> Reply:
        """Headers at once, then a blank line every `every` s for `seconds` (as DeepSeek keeps a
        non-streaming answer alive while it thinks), then `then`'s body (none: the stream ends)."""
        return cls("keepalive", body=then, delay_seconds=seconds, headers={"x-every": str(every)})

    @classmethod
    def slow_headers(cls, seconds: float, then: Reply | None = None, every: float = 0.05) -> Reply:
        """As `keepalive`, but the bytes trickle into a header line (an endpoint or proxy stuck before
        its answer's headers end): no read waits long, and no body arrives to read meanwhile."""
        return cls("keepalive", body=then, delay_seconds=seconds, headers={"x-every": str(every), "x-in-headers": "1"})


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """A client killed mid-request (the kill tests kill the CLI while it waits on the model)
        resets its connection: expected, not a traceback on the test run's stderr."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        latency_seconds: float = 0.0,
        handler: Callable[[dict], Reply | None] | None = None,
        models: list[str | dict] | None = None,
        model: str = "fake-model",
    ):
        self.latency_seconds = latency_seconds
        self.handler = handler
        self.models: list[str | dict] = list(models) if models is not None else [model]
        self.models_reply: Reply | None = None  # e.g. Reply.error(500) or Reply.drop() for GET /models
        self.model = model
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._requests: list[dict] = []
        self._headers: list[dict[str, str]] = []
        self._paths: list[str] = []
        self._in_flight = 0
        self.max_in_flight = 0
        self.models_calls = 0
        self.walked_away = 0  # kept-alive answers whose client left before the answer came
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        fake = self

        class Handler(_Handler):
            server_ref = fake

        httpd = _Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        httpd.request_queue_size = 256
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        """Base URL without /v1 (DeepSeek style)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """Base URL with /v1 (OpenAI / Ollama / vLLM style)."""
        return f"{self.root_url}/v1"

    # -- scripting and inspection -------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[dict]:
        """Copies of every chat request body received, in arrival order."""
        with self._lock:
            return json.loads(json.dumps(self._requests))

    @property
    def request_headers(self) -> list[dict[str, str]]:
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def paths(self) -> list[str]:
        with self._lock:
            return list(self._paths)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def _next_reply(self, request: dict) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.handler is not None:
            reply = self.handler(request)
            if reply is not None:
                return reply
        return Reply.tool({}) if request.get("tools") else Reply.text("ok")

    def _enter(self, path: str, headers: dict[str, str], body: dict) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._paths.append(path)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _sleep(self, reply: Reply) -> None:
        delay = self.latency_seconds if reply.delay_seconds is None else reply.delay_seconds
        if delay > 0:
            self._stopping.wait(delay)


def completion_body(reply: Reply, request: dict, default_model: str) -> dict:
    """The JSON body of a 200 chat completion for `reply`."""
    forced = (request.get("tool_choice") or {}) if isinstance(request.get("tool_choice"), dict) else {}
    tools = request.get("tools") or [{}]
    name = (
        reply.tool_name
        or (forced.get("function") or {}).get("name")
        or (tools[0].get("function") or {}).get("name")
        or "tool"
    )
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    finish = "stop"
    raw: str | None = None
    if reply.kind == "tool":
        raw = json.dumps(reply.arguments or {})
    elif reply.kind == "raw_tool":
        raw = reply.raw_arguments or ""
    elif reply.kind == "truncated":
        raw = reply.raw_arguments
        finish = "length"
    if raw is not None:
        message["tool_calls"] = [
            {"id": "call_fake_0", "type": "function", "function": {"name": name, "arguments": raw}}
        ]
        finish = "length" if reply.kind == "truncated" else "tool_calls"
    answer_chars = len(raw or "") + len(reply.content or "")
    prompt = (
        reply.prompt_tokens
        if reply.prompt_tokens is not None
        else max(1, len(json.dumps(request.get("messages", []))) // 4)
    )
    completion = reply.completion_tokens if reply.completion_tokens is not None else max(1, answer_chars // 4)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.get("model") or default_model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so client pools are exercised
    # TCP_NODELAY, as real model servers set it: the headers and the body go out in two writes,
    # and with Nagle's algorithm the body waited for the client's delayed ACK — 40 ms added to
    # every answer on a kept-alive connection (bench_phase1 counted it against Phase 1).
    disable_nagle_algorithm = True
    server_ref: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True  # the client gave up (e.g. its timeout fired)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _keepalive(self, reply: Reply, request: dict) -> None:
        """A 200 kept alive for `delay_seconds`, then the answer's JSON: blank lines of a chunked
        body, or (`x-in-headers`) dots of a header line that ends only with the wait."""
        then: Reply | None = reply.body
        body = json.dumps(completion_body(then, request, self.server_ref.model)).encode() if then else b""
        every, until = float(reply.headers["x-every"]), time.monotonic() + (reply.delay_seconds or 0)
        in_headers = "x-in-headers" in reply.headers
        try:
            if in_headers:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Thinking: ")
            else:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
            while time.monotonic() < until and not self.server_ref._stopping.is_set():
                self.wfile.write(b"." if in_headers else b"1\r\n\n\r\n")
                self.wfile.flush()
                time.sleep(every)
            if in_headers:
                self.wfile.write(
                    b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                )
            else:
                self.wfile.write((b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up (its deadline fired)
            if time.monotonic() < until:
                with self.server_ref._lock:
                    self.server_ref.walked_away += 1

    def _serve(self, reply: Reply, request: dict) -> None:
        fake = self.server_ref
        if reply.kind != "keepalive":
            fake._sleep(reply)
        if reply.kind == "drop":
            self._drop()
        elif reply.kind == "keepalive":
            self._keepalive(reply, request)
        elif reply.kind == "error":
            self._send(reply.status, reply.body, reply.headers)
        else:
            self._send(200, completion_body(reply, request, fake.model), reply.headers)

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/models", "/v1/models"):
            self._send(404, {"error": {"message": f"no route {path}"}})
            return
        fake = self.server_ref
        with fake._lock:
            fake.models_calls += 1
        if fake.models_reply is not None:
            self._serve(fake.models_reply, {})
            return
        data = [m if isinstance(m, dict) else {"id": m, "object": "model", "owned_by": "fake"} for m in fake.models]
        self._send(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in ("/chat/completions", "/v1/chat/completions"):
            self._send(404, {"error": {"message": f"no route {path}"}})
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        fake = self.server_ref
        fake._enter(path, {k.lower(): v for k, v in self.headers.items()}, request)
        try:
            try:
                reply = fake._next_reply(request)
            except Exception as exc:  # a broken test handler shows up as a 500, not a hang
                reply = Reply.error(500, {"error": {"message": f"fake handler failed: {exc!r}"}})
            self._serve(reply, request)
        finally:
            fake._leave()
