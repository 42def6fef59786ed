"""The Prefect event a turn end becomes: `dsh.turn.ended` on resource `dsh.session.<id>`, with
ids and small scalars only (no transcript text, paths or secrets). Delivered with plain HTTP,
`POST {PREFECT_API_URL}/events` with a JSON list (the self-hosted server's events endpoint), so the
CLI hook path never imports prefect. The `extract-session` deployment's trigger on it wakes the
debounced extraction run (prefect.yaml).
"""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

from dsh_memory.hooks.payloads import TurnEnd
from dsh_memory.settings_loader import is_loopback_url, prefect_auth_headers, shown_url

EVENT_NAME = "dsh.turn.ended"
RESOURCE_PREFIX = "dsh.session."


class EmitError(RuntimeError):
    """The event could not be delivered (no server, refused, timed out). `transient`: another
    attempt may work (no answer, a 5xx, 408, 429); not for a refusal or a request that cannot be made."""

    def __init__(self, message: str, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


def build_event(turn: TurnEnd, *, occurred: datetime | None = None) -> dict[str, Any]:
    """The JSON form accepted by `POST /api/events` (prefect.server.events.schemas.events.Event)."""
    if not turn.should_trigger or not turn.session_id:
        raise ValueError(f"this turn end does not trigger extraction: {turn.why_not or 'no session id'}")
    when = occurred or datetime.now(UTC)
    return {
        "id": str(uuid.uuid4()),
        "occurred": when.isoformat(),
        "event": EVENT_NAME,
        "resource": {
            "prefect.resource.id": RESOURCE_PREFIX + turn.session_id,
            "prefect.resource.name": f"{turn.kind} session {turn.session_id}",
            "dsh.source": turn.kind,
            "dsh.session.id": turn.session_id,
        },
        "related": [],
        "payload": {
            "session_id": turn.session_id,
            "turn": turn.turn,
            "reason": turn.reason,
            "seq": turn.seq,
            "source": turn.kind,
        },
    }


def post_events(events: list[dict[str, Any]], api_url: str, *, timeout: float = 5.0, client: Any = None) -> None:
    """POST a list of events to `{api_url}/events` (one request). Raises EmitError on failure.
    `client`: a long-lived `httpx.Client` (the receiver's); a one-shot client otherwise."""
    import httpx

    url = api_url.rstrip("/") + "/events"
    auth = prefect_auth_headers()
    if any(not " " <= c <= "~" for c in "".join(auth.values())):
        raise EmitError(
            "PREFECT_API_KEY cannot be sent in an HTTP header: it holds a line break, a control or a "
            "non-ASCII character",
            transient=False,
        )
    hdrs = {"Content-Type": "application/json", **auth}
    try:
        with nullcontext(client) if client is not None else new_client(url, timeout) as c:
            resp = c.post(url, json=events, headers=hdrs, timeout=timeout)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        # the URL without its password (basic auth), here and below: on notify's stderr, in the log
        message = f"the Prefect API URL {api_url!r} is not an http(s) URL: {exc}"
        raise EmitError(shown_url(message), transient=False) from None
    except httpx.HTTPError as exc:
        raise EmitError(f"could not reach the Prefect API at {shown_url(api_url)}: {type(exc).__name__}") from None
    if resp.status_code >= 300:
        raise EmitError(
            f"Prefect API refused the event: HTTP {resp.status_code} {resp.text[:200]}",
            transient=resp.status_code >= 500 or resp.status_code in (408, 429),
        )


def new_client(url: str, timeout: float) -> Any:
    """An `httpx.Client` for the events endpoint: environment proxies apply to remote servers
    only, never to loopback."""
    import httpx

    return httpx.Client(timeout=timeout, trust_env=not is_loopback_url(url))
