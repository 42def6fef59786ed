"""Loopback HTTP: `POST /dsh-memory/rpc` (the read path + get-state + delete-file), `GET /healthz`,
and optionally the MCP streamable-HTTP endpoint at `/mcp`.

The app guards itself (nothing in front of it does auth or CSRF):
  * `Host` must name a loopback address (DNS rebinding) → else 403;
  * an `Origin`, when present, must be loopback too; `Origin: null` is refused → 403;
    requests without Origin (curl, local tools) are allowed: they already hold the machine;
  * POST bodies must be `application/json` → else 415, and at most MAX_BODY_BYTES → else 413.

Translation only: `dispatch()` runs the core; errors map to statuses in `_error()` alone.
Other routes (turn-end webhook receiver…) plug in via `create_app(extra_routes=…)` or by
building on `rpc_routes()` / `LoopbackGuard` directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dsh_memory.errors import DshMemoryError, UserInputError

log = logging.getLogger(__name__)

RPC_PATH = "/dsh-memory/rpc"
MAX_BODY_BYTES = 1024 * 1024
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RPC_METHODS = ("summary", "list", "read", "search", "add", "get-state", "delete-file")


def _hostname(value: str) -> str:
    """Host part of a Host header value ('127.0.0.1:8765', '[::1]:80', 'localhost')."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback_host(host: str, allowed: frozenset[str] = LOOPBACK_HOSTS) -> bool:
    name = _hostname(host).rstrip(".")
    return name in allowed or name.startswith("127.") and name.replace(".", "").isdigit()


def check_bind_host(host: str, allow_remote: bool = False, remedy: str = "pass --allow-remote to insist") -> None:
    """THE bind check of every command that serves (`http`, `serve`): loopback only unless the
    caller explicitly allows a remote interface. Raises UserInputError before anything starts."""
    if not allow_remote and not is_loopback_host(host):
        raise UserInputError(f"refusing to bind {host}: not loopback ({remedy})")


def is_loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin.strip())
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and is_loopback_host(host)


class LoopbackGuard:
    """Pure ASGI middleware (streaming responses such as MCP's SSE pass through untouched)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str] = (), max_body_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.allowed = frozenset(LOOPBACK_HOSTS | {h.lower() for h in allowed_hosts})
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if not host or not is_loopback_host(host, self.allowed):
            await _deny(scope, receive, send, 403, "forbidden: non-loopback Host header")
            return
        origin = headers.get("origin")
        if origin is not None and not is_loopback_origin(origin):
            await _deny(scope, receive, send, 403, "forbidden: cross-origin request")
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            await _deny(scope, receive, send, 415, "request body must be application/json")
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _deny(scope, receive, send, 413, f"request body larger than {self.max_body} bytes")
            return
        # read (at most max_body bytes of) the body up front, then replay it to the app
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _deny(scope, receive, send, 413, f"request body larger than {self.max_body} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    await JSONResponse({"error": {"type": "Refused", "message": message}}, status_code=status)(scope, receive, send)


def _error(exc: BaseException) -> JSONResponse:
    """THE place where errors become HTTP statuses."""
    if isinstance(exc, DshMemoryError):
        body = {"type": type(exc).__name__, "code": exc.code, "message": str(exc)}
        return JSONResponse({"error": body}, status_code=exc.http_status)
    log.exception("unexpected error in RPC", exc_info=exc)
    return JSONResponse(
        {"error": {"type": "InternalError", "message": "internal error (see server log)"}}, status_code=500
    )


def get_state(settings: Any, state: Any = None) -> dict[str, Any]:
    """Pipeline status for the settings page: running flags, pending, last runs, claim counts.
    One implementation (dsh_memory.serve.status.local_status) serves the CLI `status` and this RPC."""
    from dsh_memory.serve.status import local_status

    out = local_status(settings)
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in out.items()}


class RpcContext:
    """What the RPC handlers share: one store, one state store, the settings."""

    def __init__(self, settings: Any):
        from dsh_memory.storage.state import StateStore
        from dsh_memory.storage.store import MemoryStore

        self.settings = settings
        self.store = MemoryStore(settings.memory_root)
        self.state = StateStore(settings.memory_root)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        if method == "get-state":
            if params:
                raise UserInputError("get-state takes no params")
            return get_state(self.settings, self.state)
        from dsh_memory.readpath import dispatch

        return dispatch(self.store, method, params, max_summary_chars=self.settings.max_summary_chars, state=self.state)


def rpc_routes(ctx: RpcContext) -> list[BaseRoute]:
    async def rpc(request: Request) -> JSONResponse:
        try:
            try:
                body = json.loads(await request.body())
            except (ValueError, UnicodeDecodeError):
                raise UserInputError("request body is not valid JSON") from None
            if not isinstance(body, dict) or not isinstance(body.get("method"), str):
                raise UserInputError('body must be {"method": "...", "params": {...}}')
            params = body.get("params") or {}
            if not isinstance(params, dict) or set(body) - {"method", "params", "id"}:
                raise UserInputError('body must be {"method": "...", "params": {...}}')
            if body["method"] not in RPC_METHODS:
                raise UserInputError(f"unknown method {body['method']!r}; one of: {', '.join(RPC_METHODS)}")
            result = await run_in_threadpool(ctx.call, body["method"], params)
        except Exception as exc:
            return _error(exc)
        data = result.model_dump(mode="json") if hasattr(result, "model_dump") else result
        if body["method"] == "summary":
            data["injection"] = result.injection()
        return JSONResponse({"result": data})

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return [Route(RPC_PATH, rpc, methods=["POST"]), Route("/healthz", healthz, methods=["GET"])]


def create_app(
    settings: Any = None,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    mcp: bool = True,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The loopback app. `mcp=True` also serves the MCP server (streamable HTTP) at `/mcp`.
    `extra_routes` are mounted behind the same guard (e.g. a turn-end webhook receiver)."""
    if settings is None:
        from dsh_memory.settings import MemorySettings

        settings = MemorySettings.from_env()
    ctx = RpcContext(settings)
    routes: list[BaseRoute] = rpc_routes(ctx) + list(extra_routes)
    # --- turn-end receiver: POST /hooks/turn-end (dsh_memory/hooks/receiver.py) ---
    from dsh_memory.hooks.receiver import turn_end_routes

    routes += turn_end_routes(settings)
    # --- end turn-end receiver ---
    mcp_server = None
    if mcp:
        from dsh_memory.serve.mcp_server import build_server

        mcp_server = build_server(settings)
        # the SDK's own app carries the /mcp route; its session manager runs in our lifespan
        routes += list(mcp_server.streamable_http_app(streamable_http_path="/mcp").routes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(LoopbackGuard, allowed_hosts=allowed_hosts, max_body_bytes=max_body_bytes)
    app.state.rpc = ctx
    app.state.mcp_server = mcp_server
    return app
