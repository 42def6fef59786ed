"""The loopback guard every served route sits behind (RPC, MCP, turn-end hooks), and the bind
check of every command that serves. One definition of the request-size bound, too.

  * `Host` must name a loopback address (DNS rebinding) → else 403;
  * an `Origin`, when present, must be loopback too (or an allowed host); `Origin: null` is refused → 403;
    requests without Origin (curl, local tools) are allowed: they already hold the machine;
  * POST bodies must be `application/json` → else 415, and at most MAX_BODY_BYTES → else 413;
    under the `form_paths` prefixes (the vault's actions, HTML forms) they must be
    `application/x-www-form-urlencoded` instead, same bound — the routes there check their own
    CSRF token (serve/vault/): a form is what a cross-site page can post without asking;
  * a POST body must arrive within BODY_SECONDS → else 408 (serve/bounded_http.py bounds the rest
    of a connection's life).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from dsh_memory.errors import UserInputError

if TYPE_CHECKING:  # starlette is imported by the app that mounts the guard, not by its users
    from starlette.types import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024  # every request body: RPC, MCP, turn-end webhooks, vault forms
BODY_SECONDS = 30.0  # ... and the time it may take to arrive (a stalled body holds a connection)
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


# A Host header is `host[:port]`: a DNS name, an IPv4 literal or a bracketed IPv6 literal. Anything
# else (userinfo `a@b`, an unbracketed IPv6, paths, spaces, empty labels, a trailing dot) is refused.
_HOST_HEADER = re.compile(r"^(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9-]+(?:\.[a-z0-9-]+)*))(?::[0-9]{1,5})?$")


def host_of(header: str) -> str | None:
    """The host of a Host header value ('127.0.0.1:8765', '[::1]:80', 'localhost'), or None
    when the value is not a well-formed `host[:port]`."""
    m = _HOST_HEADER.match(header.strip().lower())
    if m is None:
        return None
    return m["v6"] if m["v6"] is not None else m["name"]


def is_loopback_address(name: str, allowed: frozenset[str] = LOOPBACK_HOSTS) -> bool:
    """A bare host name or IP literal (a bind address, a URL's hostname) that is loopback."""
    name = name.strip().lower()
    if name in allowed:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_loopback_host(header: str, allowed: frozenset[str] = LOOPBACK_HOSTS) -> bool:
    """A Host header value that names a loopback address (strictly parsed)."""
    name = host_of(header)
    return name is not None and is_loopback_address(name, allowed)


def check_bind_host(host: str, allow_remote: bool = False, remedy: str = "pass --allow-remote to insist") -> None:
    """THE bind check of every command that serves (`http`, `serve`): loopback only unless the
    caller explicitly allows a remote interface. Raises UserInputError before anything starts."""
    if not allow_remote and not is_loopback_address(host):
        raise UserInputError(f"refusing to bind {host}: not loopback ({remedy})")


def is_loopback_origin(origin: str, allowed: frozenset[str] = LOOPBACK_HOSTS) -> bool:
    """An Origin header value whose host is loopback (or one of `allowed`, the hosts `--host`
    serves on: the vault's own pages post with that Origin)."""
    try:
        parts = urlsplit(origin.strip())
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and is_loopback_address(host, allowed)


class LoopbackGuard:
    """Pure ASGI middleware (streaming responses such as MCP's SSE pass through untouched)."""

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Sequence[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
        form_paths: Sequence[str] = (),
    ):
        self.app = app
        self.form_paths = tuple(form_paths)
        self.allowed = frozenset(LOOPBACK_HOSTS | {h.lower() for h in allowed_hosts})
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not is_loopback_host(headers.get("host", ""), self.allowed):
            await _deny(scope, receive, send, 403, "forbidden: non-loopback Host header")
            return
        origin = headers.get("origin")
        if origin is not None and not is_loopback_origin(origin, self.allowed):
            await _deny(scope, receive, send, 403, "forbidden: cross-origin request")
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        wanted = FORM_TYPE if self.form_paths and scope["path"].startswith(self.form_paths) else JSON_TYPE
        if ctype != wanted:
            await _deny(scope, receive, send, 415, f"request body must be {wanted}")
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _deny(scope, receive, send, 413, f"request body larger than {self.max_body} bytes")
            return
        # read (at most max_body bytes of) the body up front, in BODY_SECONDS, then replay it to the app
        chunks, size = [], 0
        with anyio.move_on_after(BODY_SECONDS) as deadline:
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
        if deadline.cancelled_caught:
            await _deny(scope, receive, send, 408, f"request body not received within {BODY_SECONDS:g} s")
            return
        body = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> dict:
            return body.pop() if body else await receive()

        await self.app(scope, replay, send)


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    from starlette.responses import JSONResponse

    await JSONResponse({"error": {"type": "Refused", "message": message}}, status_code=status)(scope, receive, send)
