"""`POST /hooks/turn-end`: validate a turn-end notification, answer 202 at once, post the
Prefect event `dsh.turn.ended` in the background.

Mounted by `dsh_memory.serve.http_app.create_app` behind its `LoopbackGuard` (loopback Host/Origin →
403, `application/json` → 415, body cap → 413). The route repeats the JSON and size checks so it
is safe on its own too (`create_receiver_app` adds the guard for standalone use).

Statuses: 202 accepted (triggered or deliberately ignored) · 400 invalid payload, nothing changes ·
401 missing/wrong `X-DSH-Memory-Secret` when DSH_MEMORY_HOOK_SECRET is set · 413 too large ·
415 not JSON. Delivery happens on one daemon thread fed by a bounded queue; failures are logged
and counted, never raised into the server. A dropped or failed event is not lost work: the
scheduled catch-up finds the session anyway.
"""

from __future__ import annotations

import hmac
import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dsh_memory.hooks.events import EmitError, emit_turn_end
from dsh_memory.hooks.payloads import (
    KINDS,
    MAX_BODY_BYTES,
    SECRET_ENV,
    SECRET_HEADER,
    PayloadError,
    TurnEnd,
    parse_turn_end,
)
from dsh_memory.settings import SourceRoots
from dsh_memory.settings_loader import prefect_api_url

log = logging.getLogger(__name__)

HOOK_PATH = "/hooks/turn-end"
NO_SERVER = "no Prefect server configured"
_FROM_ENV: Any = object()


class EventSender:
    """A bounded queue drained by one lazily started daemon thread."""

    def __init__(
        self,
        api_url: str,
        *,
        maxsize: int = 256,
        timeout: float = 5.0,
        emit: Callable[..., Any] = emit_turn_end,
    ):
        self.api_url = api_url
        self.timeout = timeout
        self._emit = emit
        self._queue: queue.Queue[TurnEnd] = queue.Queue(maxsize=maxsize)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.sent = self.failed = self.dropped = 0
        self.last_error = ""

    def submit(self, turn: TurnEnd) -> bool:
        """Queue one event; False (and counted as dropped) when the queue is full."""
        self._ensure_thread()
        try:
            self._queue.put_nowait(turn)
        except queue.Full:
            self.dropped += 1
            log.warning("turn-end event queue full; dropped the event for session %s", turn.session_id)
            return False
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event was attempted. True when drained within `timeout`."""
        q = self._queue
        with q.all_tasks_done:
            return q.all_tasks_done.wait_for(lambda: q.unfinished_tasks == 0, timeout=timeout)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dsh-turn-end-sender", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            turn = self._queue.get()
            try:
                self._emit(turn, self.api_url, timeout=self.timeout)
                self.sent += 1
            except EmitError as exc:
                self.failed += 1
                self.last_error = str(exc)
                log.warning("turn-end event for session %s not delivered: %s", turn.session_id, exc)
            except Exception as exc:  # never let the sender die: the server must keep answering
                self.failed += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("unexpected error posting the turn-end event for session %s", turn.session_id)
            finally:
                self._queue.task_done()


def _refuse(status: int, message: str, kind: str = "Refused") -> JSONResponse:
    return JSONResponse({"accepted": False, "error": {"type": kind, "message": message}}, status_code=status)


class TurnEndReceiver:
    """Configuration + sender for the route. `api_url`/`secret` default to the environment
    (PREFECT_API_URL, DSH_MEMORY_HOOK_SECRET), read when this object is built."""

    def __init__(
        self,
        settings: Any = None,
        *,
        roots: SourceRoots | None = None,
        api_url: str | None = _FROM_ENV,
        secret: str | None = _FROM_ENV,
        sender: EventSender | None = None,
        env: Mapping[str, str] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        e = os.environ if env is None else env
        if roots is None:
            roots = getattr(settings, "roots", None)
            if roots is None or all(v is None for v in roots.model_dump().values()):
                roots = SourceRoots.from_env(e)
        self.roots = roots
        self.api_url = prefect_api_url(e) if api_url is _FROM_ENV else (api_url or None)
        self.secret = (e.get(SECRET_ENV) or None) if secret is _FROM_ENV else (secret or None)
        self.max_body = max_body_bytes
        if sender is None and self.api_url:
            sender = EventSender(self.api_url)
        self.sender = sender

    def _authorized(self, request: Request) -> bool:
        if not self.secret:
            return True
        given = request.headers.get(SECRET_HEADER, "")
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self.secret.encode("utf-8"))

    async def handle(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return _refuse(401, f"missing or wrong {SECRET_HEADER} header", "Unauthorized")
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return _refuse(415, "request body must be application/json")
        length = request.headers.get("content-length", "")
        if length and (not length.isdigit() or int(length) > self.max_body):
            return _refuse(413, f"request body larger than {self.max_body} bytes")
        kind = request.query_params.get("kind", "auto")
        if kind not in ("auto", *KINDS):
            return _refuse(400, f"unknown kind; one of: auto, {', '.join(KINDS)}", "InvalidPayload")
        body = await request.body()
        try:
            turn = await run_in_threadpool(parse_turn_end, body, kind, self.roots, self.max_body)
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
        elif self.sender is None:
            answer["reason"] = NO_SERVER
        elif not self.sender.submit(turn):
            answer["reason"] = "event queue full; the scheduled catch-up will pick the session up"
        else:
            answer["triggered"] = True
        return JSONResponse(answer, status_code=202)

    def routes(self) -> list[Route]:
        return [Route(HOOK_PATH, self.handle, methods=["POST"], name="turn_end")]


def turn_end_routes(settings: Any = None, **kwargs: Any) -> list[Route]:
    """The `POST /hooks/turn-end` route, configured from `settings` and the environment."""
    return TurnEndReceiver(settings, **kwargs).routes()


def create_receiver_app(settings: Any = None, **kwargs: Any) -> Starlette:
    """The receiver alone, behind the same loopback guard as the RPC app."""
    from dsh_memory.serve.guard import LoopbackGuard

    receiver = TurnEndReceiver(settings, **kwargs)
    app = Starlette(routes=receiver.routes())
    app.add_middleware(LoopbackGuard, max_body_bytes=receiver.max_body)
    app.state.turn_end = receiver
    return app
