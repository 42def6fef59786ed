"""The one uvicorn configuration every command that serves uses (`http`, `serve`): connections
are bounded, so a local process that opens connections and stalls cannot exhaust the server's
file descriptors and take the memory API down with it.

  * at most MAX_CONNECTIONS open at once: one more is closed as soon as it is accepted, and at
    most BACKLOG wait to be accepted (the event loop accepts them in one burst: with uvicorn's
    2,048 a burst alone could pass a 1,024 descriptor limit, and the loop dies logging it);
  * a connection must start a request within HEAD_SECONDS of connecting or of its last response
    (a request line and headers trickled a byte at a time count as none), else it is closed;
  * a request body must arrive within `guard.BODY_SECONDS` (408, in the guard).

Streams that are answering (MCP's SSE) are requests in progress: neither bound cuts them.
"""

from __future__ import annotations

import asyncio

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_CONNECTIONS = 256  # far above what local agents, hooks and a browser open together
BACKLOG = 128
HEAD_SECONDS = 10.0
_BUSY = object()  # "a request was in progress at the last look"


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with the two connection bounds above."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            transport.close()  # connection_lost drops it from the count
            return
        self._watch(_BUSY)

    def _watch(self, seen: object) -> None:
        """Every HEAD_SECONDS: a connection that was waiting for a request last time and still
        waits after the same cycle (no request started since) is closed."""
        if self.transport.is_closing():
            return
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and seen is self.cycle:
            self.transport.close()
            return
        self.loop.call_later(HEAD_SECONDS, self._watch, self.cycle if waiting else _BUSY)


def server_config(app, host: str, port: int, **options) -> uvicorn.Config:
    """The uvicorn Config of an app served on host:port, with the bounds above."""
    return uvicorn.Config(app, host=host, port=port, log_level="warning", http=BoundedH11, backlog=BACKLOG, **options)
