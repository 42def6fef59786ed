"""Process-wide cancellation for long in-process work (a local model decode, a remote model's
answer: either can take minutes).

The CLI sets it on Ctrl-C / SIGTERM; worker threads check it between tokens and while they wait
for a remote answer (`interruptible`), so the process exits promptly instead of waiting for every
model call in flight to finish. `bounded` gives up waiting on a call after a budget (a peer that
trickles its answer), for the hook and forwarder paths that have no CANCELLED to watch.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from typing import TypeVar

from dsh_memory.errors import LLMFatalError

CANCELLED = threading.Event()
_POLL_SECONDS = 0.2  # how soon a waiting caller notices CANCELLED

T = TypeVar("T")


def check() -> None:
    if CANCELLED.is_set():
        raise LLMFatalError("cancelled: the process is shutting down")


def wait(ready: Callable[[float], bool]) -> None:
    """Blocks until `ready(timeout)` (a lock's acquire, an event's wait) says True, checking
    CANCELLED every _POLL_SECONDS: a Ctrl-C / SIGTERM stops the wait with LLMFatalError."""
    while not ready(_POLL_SECONDS):
        check()


class Overdue(TimeoutError):
    """`interruptible`'s call was still running at its deadline."""


def _started(call: Callable[[], T]) -> Future[T]:
    """`call()` running in a daemon thread (an abandoned call cannot hold the process's exit), in a
    copy of the caller's context (Prefect's settings and run contexts are context variables): its
    future, which carries its result or exception."""
    outcome: Future[T] = Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.set_result(call())
        except BaseException as exc:  # handed to whoever reads the future
            outcome.set_exception(exc)

    threading.Thread(target=context.run, args=(run,), name="dsh-memory-call", daemon=True).start()
    return outcome


def bounded(call: Callable[[], T], budget: float) -> Future[T]:
    """`call()` waited for `budget` seconds at most: its future, done or not. An HTTP timeout bounds
    each read, so a peer answering a byte at a time would hold the caller for as long as it
    trickled; this bounds the whole of it."""
    outcome = _started(call)
    futures.wait([outcome], budget)
    return outcome


def interruptible(call: Callable[[], T], deadline_seconds: float | None = None) -> T:
    """`call()`, a blocking wait on something outside the process (a model's HTTP request, which
    no signal reaches in a worker thread), made in a daemon thread while the caller watches
    CANCELLED: on Ctrl-C / SIGTERM the caller stops waiting at once (LLMFatalError, as `check`);
    after `deadline_seconds` it stops waiting too (Overdue). Its result or exception otherwise."""
    check()
    until = time.monotonic() + deadline_seconds if deadline_seconds is not None else None
    outcome = _started(call)

    def finished(timeout: float) -> bool:
        if futures.wait([outcome], timeout).done:
            return True
        if until is not None and time.monotonic() > until:
            raise Overdue(f"still running after {deadline_seconds:g} s")
        return False

    wait(finished)
    return outcome.result()
