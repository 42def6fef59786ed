"""`POST /hooks/turn-end`: validate a turn-end notification and answer 202 at once; the forwarder
(hooks/forwarder.py) records it and forwards the Prefect event `dsh.turn.ended`. Statuses and what
they promise: docs/agents.md ("Turn-end notifications"). Mounted behind `LoopbackGuard`, which
refuses a body that is not JSON (415) or larger than MAX_BODY_BYTES (413) before it gets here.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dsh_memory.hooks.forwarder import TurnEndForwarder
from dsh_memory.hooks.payloads import KINDS, MAX_BODY_BYTES, SECRET_HEADER, PayloadError, hook_secret, parse_turn_end
from dsh_memory.settings import SourceRoots
from dsh_memory.settings_loader import prefect_api_url
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.turn_ends import TurnEnds

log = logging.getLogger(__name__)

HOOK_PATH = "/hooks/turn-end"
NO_SERVER = "no Prefect server configured"
_FROM_ENV: Any = object()


def _refuse(status: int, message: str, kind: str = "Refused", headers: dict | None = None) -> JSONResponse:
    body = {"accepted": False, "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


class TurnEndReceiver:
    """Configuration + forwarder for the route. `api_url`/`secret` default to the environment
    (PREFECT_API_URL, DSH_MEMORY_HOOK_SECRET), read when this object is built."""

    def __init__(
        self,
        settings: Any = None,
        *,
        roots: SourceRoots | None = None,
        api_url: str | None = _FROM_ENV,
        secret: str | None = _FROM_ENV,
        forwarder: TurnEndForwarder | None = None,
    ):
        if roots is None:
            roots = getattr(settings, "roots", None)
            if roots is None or all(v is None for v in roots.model_dump().values()):
                roots = SourceRoots.from_env()
        self.roots = roots
        self.api_url = prefect_api_url() if api_url is _FROM_ENV else (api_url or None)
        self.secret = hook_secret() if secret is _FROM_ENV else (secret or None)
        self.max_body = MAX_BODY_BYTES
        self._state = None
        if forwarder is None and self.api_url:
            # turn ends are recorded in the memory root's state database (not without a memory root)
            record = None
            if getattr(settings, "memory_root", None) is not None:
                self._state = StateStore(settings.memory_root)
                record = TurnEnds(self._state).record
            # a session's next event may wait a quarter of the debounce (at most 10 s) after one was
            # forwarded: the turn end itself is recorded at once
            debounce = getattr(settings, "debounce_seconds", None)
            gap = min(10.0, debounce / 4) if debounce else 0.0
            forwarder = TurnEndForwarder(self.api_url, min_gap_seconds=gap, record=record)
        self.forwarder = forwarder

    def close(self, timeout: float | None = None) -> bool:
        """Record and forward what is pending (the app's shutdown). True when nothing was left behind."""
        try:
            return self.forwarder.close(timeout) if self.forwarder is not None else True
        finally:
            if self._state is not None:
                self._state.close()

    def _authorized(self, request: Request) -> bool:
        if not self.secret:
            return True
        given = request.headers.get(SECRET_HEADER, "").encode("latin-1")  # the header's bytes, as sent
        return hmac.compare_digest(given, self.secret.encode("utf-8", "surrogateescape"))

    async def handle(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return _refuse(401, f"missing or wrong {SECRET_HEADER} header", "Unauthorized")
        kind = request.query_params.get("kind", "auto")
        if kind not in ("auto", *KINDS):
            return _refuse(400, f"unknown kind; one of: auto, {', '.join(KINDS)}", "InvalidPayload")
        body = await request.body()
        try:
            # on the event loop: parsing a bounded body is CPU work that holds the GIL in any thread,
            # so a worker thread only added a hand-off to every request (and to its tail latency)
            turn = parse_turn_end(body, kind, self.roots, self.max_body)
        except PayloadError as exc:
            return _refuse(exc.status, str(exc), "InvalidPayload" if exc.status == 400 else "Refused")
        answer: dict[str, Any] = {
            "accepted": True,
            "triggered": False,
            "session_id": turn.session_id,
            "kind": turn.kind,
        }
        if not turn.should_trigger:
            answer["reason"] = turn.why_not
        elif self.forwarder is None:
            answer["reason"] = NO_SERVER
        elif not self.forwarder.submit(turn):
            wait = max(1, round(self.forwarder.interval * 2))  # two cadences
            return _refuse(
                503,
                f"{self.forwarder.max_pending} sessions already wait to be forwarded to Prefect (or recorded); nothing was "
                f"taken, send it again in {wait} s",
                "Overloaded",
                headers={"Retry-After": str(wait)},
            )
        else:
            answer["triggered"] = True
        return JSONResponse(answer, status_code=202)

    def routes(self) -> list[Route]:
        return [Route(HOOK_PATH, self.handle, methods=["POST"], name="turn_end")]
