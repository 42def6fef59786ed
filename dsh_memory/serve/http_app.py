"""Loopback HTTP: `POST /dsh-memory/rpc` (the read path + get-state + delete-file), `GET /healthz`,
`POST /hooks/turn-end`, the memory vault's pages at `/` (serve/vault/), and optionally the MCP
streamable-HTTP endpoint at `/mcp`, all behind `serve.guard.LoopbackGuard` (nothing in front of
it does auth or CSRF). Translation only: `dispatch()` runs the core; errors map to statuses in
`_error()` alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from dsh_memory.context import MemoryContext, context_of
from dsh_memory.errors import DshMemoryError, UserInputError
from dsh_memory.hooks.receiver import TurnEndReceiver
from dsh_memory.readpath import OPERATIONS, dispatch
from dsh_memory.serve.guard import LoopbackGuard
from dsh_memory.serve.status import local_status  # the CLI `status`'s, too

log = logging.getLogger(__name__)

RPC_PATH = "/dsh-memory/rpc"
# the read-path operations (params validated by their request models in `dispatch`) + get-state
RPC_METHODS = ("get-state", *OPERATIONS)
RPC_KEYS = {"method", "params", "id"}


def _error(exc: BaseException) -> JSONResponse:
    """THE place where errors become HTTP statuses."""
    if isinstance(exc, DshMemoryError):
        body = {"type": type(exc).__name__, "code": exc.code, "message": str(exc)}
        return JSONResponse({"error": body}, status_code=exc.http_status)
    log.exception("unexpected error in RPC", exc_info=exc)
    return JSONResponse(
        {"error": {"type": "InternalError", "message": "internal error (see server log)"}}, status_code=500
    )


def rpc_call(ctx: MemoryContext, method: str, params: dict[str, Any]) -> Any:
    """One RPC method on the memory context (settings, store, state store)."""
    if method == "get-state":
        if params:
            raise UserInputError("get-state takes no params")
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in local_status(ctx).items()}
    return dispatch(ctx, method, params)


def create_app(
    settings: MemoryContext | Any = None,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    mcp: bool = True,
    vault: bool = True,
    allowed_hosts: Sequence[str] = (),
) -> Starlette:
    """The loopback app. `settings`: a MemoryContext, plain MemorySettings (tests), or None for
    `memory_context()`, shared by the RPC, the hooks, MCP and the vault. `extra_routes` are
    mounted behind the same guard."""
    mem = context_of(settings)

    async def rpc(request: Request) -> JSONResponse:
        try:
            try:
                body = json.loads(await request.body())
            except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
                raise UserInputError("request body is not valid JSON") from None
            params = body.get("params") if isinstance(body, dict) else []
            params = {} if params is None else params  # null or missing: no params
            if not isinstance(params, dict) or not isinstance(body.get("method"), str) or set(body) - RPC_KEYS:
                raise UserInputError('body must be {"method": "...", "params": {...}}')
            if body["method"] not in RPC_METHODS:
                raise UserInputError(f"unknown method {body['method']!r}; one of: {', '.join(RPC_METHODS)}")
            result = await run_in_threadpool(rpc_call, mem, body["method"], params)
        except Exception as exc:
            return _error(exc)
        data = result.model_dump(mode="json") if hasattr(result, "model_dump") else result
        if body["method"] == "summary":
            data["injection"] = result.injection()
        return JSONResponse({"result": data})

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    routes: list[BaseRoute] = [Route(RPC_PATH, rpc, methods=["POST"]), Route("/healthz", healthz, methods=["GET"])]
    routes += extra_routes
    turn_end = TurnEndReceiver(mem.settings)  # POST /hooks/turn-end
    routes += turn_end.routes()
    form_paths: tuple[str, ...] = ()
    if vault:
        from dsh_memory.serve.vault import ACTION_PREFIX, vault_routes

        routes += vault_routes(mem, allowed_hosts)
        form_paths = (ACTION_PREFIX,)
    mcp_server = None
    if mcp:
        from mcp.server.transport_security import TransportSecuritySettings

        from dsh_memory.serve.mcp_server import build_server

        mcp_server = build_server(mem)
        # the SDK's own app carries the /mcp route; its session manager runs in our lifespan. The
        # guard checks Host and Origin for it as for every route (the SDK's check knew loopback
        # only: 421 on the host `--allow-remote` serves)
        own_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        routes += list(mcp_server.streamable_http_app(streamable_http_path="/mcp", transport_security=own_check).routes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        try:
            async with mcp_server.session_manager.run() if mcp_server else contextlib.nullcontext():
                yield
        finally:
            await run_in_threadpool(turn_end.close)  # forward the pending turn ends first
            mem.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(LoopbackGuard, allowed_hosts=allowed_hosts, form_paths=form_paths)
    app.state.turn_end = turn_end
    return app
