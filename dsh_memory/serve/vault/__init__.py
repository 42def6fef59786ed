"""The memory vault: server-rendered pages to see, search, correct and restore what the agents
remember, served by the loopback HTTP app at `/` (`vault_routes` lists them; what each page shows
and does: docs/vault.md; how it defends itself: docs/security.md, The vault). A correction is a
POST to /vault/act/<action>: first the confirm step, then `confirm=yes`, with a CSRF token (a
signed double submit): another site, or another local app on a loopback port (cookies are not
port-bound), can neither read a token out of our pages (no CORS) nor compute one (the secret never
leaves this process).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from dsh_memory.context import MemoryContext
from dsh_memory.errors import DshMemoryError
from dsh_memory.replay.result import vault_page
from dsh_memory.serve.guard import host_of, is_loopback_address, is_loopback_host
from dsh_memory.serve.vault import actions, pages
from dsh_memory.serve.vault.render import STATIC, environment

log = logging.getLogger(__name__)

ACTION_PREFIX = "/vault/act/"
NAV = [("/", "Overview"), ("/vault/browse", "Browse"), ("/vault/search", "Search"), ("/vault/sessions", "Sessions")]
NAV += [("/vault/settings", "Settings"), ("/vault/replay", "Replay")]

COOKIE = "dsh_memory_vault"
FIELD = "csrf"
NONCE_BYTES = 32

# Nothing inline, nothing from elsewhere: styles and (no) scripts from this server only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # not no-referrer: under it Chromium sends `Origin: null` with the pages' own form posts,
    # which the guard (rightly) refuses; same-origin still sends nothing to other sites.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Vault:
    def __init__(self, ctx: MemoryContext, remote_hosts: Sequence[str] = ()):
        self.ctx = ctx
        # what the server binds beyond loopback (`http --host 0.0.0.0 --allow-remote`): it answers
        # the network there even when this page was opened at 127.0.0.1
        self.remote = ", ".join(h for h in remote_hosts if not is_loopback_address(h)) or None
        self.secret = secrets.token_bytes(32)  # signs the CSRF tokens; never leaves this process
        self.env = environment()

    def csrf_token(self, nonce: str, action: str) -> str:
        return hmac.new(self.secret, f"{nonce}|{action}".encode(), hashlib.sha256).hexdigest()

    def csrf_valid(self, nonce: str | None, action: str, token: str | None) -> bool:
        if not nonce or not token or len(nonce) > 200 or len(token) > 200:
            return False
        # as bytes: compare_digest refuses a str with non-ASCII characters (a forged form's token)
        return hmac.compare_digest(self.csrf_token(nonce, action).encode(), token.encode())

    def render(self, request: Request, template: str, code: int = 200, **data: Any) -> HTMLResponse:
        nonce = request.cookies.get(COOKIE) or ""
        fresh = not (0 < len(nonce) <= 200)
        if fresh:
            nonce = secrets.token_urlsafe(NONCE_BYTES)
        host = request.headers.get("host", "")
        html = self.env.get_template(template).render(
            nav=NAV,
            here=request.url.path,
            memory_root=str(self.ctx.memory_root),
            served_on=self.remote if is_loopback_host(host) else host_of(host),  # `http --allow-remote`
            csrf=lambda action: self.csrf_token(nonce, action),
            csrf_field=FIELD,
            **data,
        )
        # a lone surrogate (JSON's "\udce9" in a hand-edited bookkeeping file) is shown escaped, not a 500
        response = HTMLResponse(html.encode("utf-8", "backslashreplace"), status_code=code, headers=HEADERS)
        if fresh:  # the nonce's cookie: not readable by scripts, never sent cross-site
            response.set_cookie(COOKIE, nonce, httponly=True, samesite="strict", path="/")
        return response

    def error(self, request: Request, exc: BaseException) -> HTMLResponse:
        if isinstance(exc, DshMemoryError):
            return self.render(request, "error.html", exc.http_status, message=str(exc), kind=type(exc).__name__)
        log.exception("unexpected error in the vault", exc_info=exc)
        return self.render(request, "error.html", 500, message="internal error (see the server log)", kind="Error")

    def route(self, template: str, gather, *args: Any, query=None):
        """The GET route of a page: `template` rendered with `gather(*args, *query(request.query_params))`."""

        async def endpoint(request: Request) -> Response:
            extra = query(request.query_params) if query else ()
            try:
                data = await run_in_threadpool(gather, *args, *extra)
            except Exception as exc:
                return self.error(request, exc)
            return self.render(request, template, **data)

        return endpoint

    # -- POST actions ------------------------------------------------------------------------
    async def act(self, request: Request) -> Response:
        action = request.path_params["action"]
        try:
            form = actions.parse_form(await request.body())
        except DshMemoryError as exc:
            return self.error(request, exc)
        if not self.csrf_valid(request.cookies.get(COOKIE), action, form.get(FIELD)):
            return self.render(
                request,
                "error.html",
                403,
                kind="Refused",
                message="missing or invalid CSRF token: reload the page and try again "
                "(tokens end when the server restarts)",
            )
        try:
            if form.get("confirm") != "yes":
                plan = await run_in_threadpool(actions.plan, self.ctx, action, form)
                return self.render(request, "confirm.html", action=action, plan=plan)
            outcome = await run_in_threadpool(actions.run, self.ctx, action, form)
        except Exception as exc:
            return self.error(request, exc)
        return self.render(request, "done.html", action=action, outcome=outcome)


class _Static(StaticFiles):
    """The vault's static files, sent with the pages' headers."""

    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def _file_query(q) -> tuple:
    line = q.get("line", "")
    ok = line.isascii() and line.isdigit() and len(line) < 9  # not "²": a digit int() refuses
    return q.get("path", ""), q.get("view", "rendered"), int(line) if ok else None


def _search_query(q) -> tuple:
    return q.get("q", ""), q.get("mode", "ranked"), q.get("path") or None


def vault_routes(ctx: MemoryContext, remote_hosts: Sequence[str] = ()) -> list[BaseRoute]:
    """The vault's routes for `create_app` (which mounts them behind its LoopbackGuard, with form
    bodies allowed under ACTION_PREFIX only); `remote_hosts`: the guard's allowed hosts."""
    v = Vault(ctx, remote_hosts)
    return [
        Route("/", v.route("overview.html", pages.overview, ctx), methods=["GET"]),
        Route("/vault/browse", v.route("browse.html", pages.browse, ctx), methods=["GET"]),
        Route("/vault/file", v.route("file.html", pages.file_view, ctx, query=_file_query), methods=["GET"]),
        Route("/vault/search", v.route("search.html", pages.search_view, ctx, query=_search_query), methods=["GET"]),
        Route("/vault/sessions", v.route("sessions.html", pages.sessions_view, ctx), methods=["GET"]),
        Route("/vault/settings", v.route("settings.html", pages.settings_view), methods=["GET"]),
        Route("/vault/replay", v.route("replay.html", vault_page, ctx.memory_root), methods=["GET"]),
        Route(ACTION_PREFIX + "{action:str}", v.act, methods=["POST"]),
        Mount("/vault/static", app=_Static(directory=str(STATIC)), name="vault-static"),
    ]
