"""Process-wide cancellation for long in-process work (a local model decode, a remote model's
answer: either can take minutes).

The CLI sets it on Ctrl-C / SIGTERM; worker threads check it between tokens and while they wait
for a remote answer (`interruptible`), so the process exits promptly instead of waiting for every
model call in flight to finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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


def interruptible(call: Callable[[], T], deadline_seconds: float | None = None) -> T:
    """`call()`, a blocking wait on something outside the process (a model's HTTP request, which
    no signal reaches in a worker thread), made in a daemon thread while the caller watches
    CANCELLED: on Ctrl-C / SIGTERM the caller stops waiting at once (LLMFatalError, as `check`)
    and the abandoned call cannot hold the process's exit; after `deadline_seconds` it stops
    waiting too (Overdue). Its result or exception otherwise."""
    check()
    until = time.monotonic() + deadline_seconds if deadline_seconds is not None else None
    done = threading.Event()
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller, raised there
            outcome["error"] = exc
        finally:
            done.set()

    def finished(timeout: float) -> bool:
        if done.wait(timeout):
            return True
        if until is not None and time.monotonic() > until:
            raise Overdue(f"still running after {deadline_seconds:g} s")
        return False

    threading.Thread(target=target, name="dsh-memory-call", daemon=True).start()
    wait(finished)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
