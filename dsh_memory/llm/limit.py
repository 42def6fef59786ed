"""How many model calls run at once: the run's model slots.

A run holds `settings.concurrency` model slots (`run_slots`): at most that many of its calls wait
on the model at once, while more workers (`worker_count`) prepare and write other sessions, so
the model is never idle between two calls (bench/bench_phase1.py: wall ÷ ideal). The slots are
the run's, not a task parameter: `model_slot()` finds them in a context variable, which the
tasks of the run's map inherit (Prefect's thread-pool runner copies the context on submit).

Across runs and hosts, with a Prefect server configured, the run takes its slots from the global
concurrency limit `dsh-memory-llm` (created or resized to `settings.concurrency`) with Prefect's
own `concurrency()`, once for the whole run, as many as it has calls to make (at most the
limit): Prefect leases and renews them, so runs on every host together never call the model
more often at once than the limit, and a run that finds too few free waits for them. A killed
run's lease expires on the server within about a minute (until then its slots stay taken). In
ephemeral mode there are no leases (a killed process would hold its slots forever), so the
bound is the run's alone.

The lease costs a few round-trips to the server (the limit's upsert, the acquisition, and at the
end the release). A flow takes it on a thread of its own (`GlobalLease`) as soon as it knows how
many calls it has, so it is held by the time the run's claims are taken, and returns it while the
run finishes its bookkeeping: neither waits on the other (bench/bench_phase1.py: the start).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from dsh_memory import cancel

log = logging.getLogger(__name__)

LIMIT_NAME = "dsh-memory-llm"
LEASE_SECONDS = 60.0  # the server's minimum: how long a killed run's slots stay taken

_SLOTS: ContextVar[threading.BoundedSemaphore | None] = ContextVar("dsh_memory_model_slots", default=None)


def worker_count(size: int) -> int:
    """Workers for `size` model slots: half as many again prepare and write sessions meanwhile."""
    return size + max(1, (size + 1) // 2)


@contextmanager
def run_slots(
    size: int, name: str = LIMIT_NAME, *, calls: int | None = None, lease: GlobalLease | None = None
) -> Iterator[None]:
    """This run's model slots: `size` (the settings' concurrency), or `calls` when it has fewer
    model calls to make, taken from the global limit `name` (sized `size`) too when a Prefect
    server is configured (see the module docstring). With a `lease` taken ahead
    (`GlobalLease`), its slots are the run's: this waits until it is held and, on the way out,
    asks for its release without waiting for it (the flow joins it later)."""
    own = lease is None
    if lease is None:
        lease = GlobalLease(size, name, calls=calls)
    token = _SLOTS.set(threading.BoundedSemaphore(lease.occupy))
    try:
        lease.wait()
        yield
    finally:
        _SLOTS.reset(token)
        lease.release()
        if own:
            lease.join()


class GlobalLease:
    """The run's share of the global limit, taken on a thread of its own from the moment this is
    created (the flow plans, recovers and claims meanwhile) and held until `release()`.

    `wait()` returns once the slots are held (at once without a Prefect server, or when the limit
    is disabled with a warning) and raises what taking them raised. `join()` waits for the
    release. The thread runs in a copy of the creator's context (Prefect's settings, the run's
    logger)."""

    def __init__(self, size: int, name: str = LIMIT_NAME, *, calls: int | None = None):
        self.size = max(1, int(size))
        self.occupy = max(1, min(self.size, calls or self.size))
        self.name = name
        self._held = threading.Event()
        self._released = threading.Event()
        self._error: BaseException | None = None
        run = contextvars.copy_context().run
        self._thread = threading.Thread(target=run, args=(self._hold,), name="dsh-memory-llm-lease", daemon=True)
        self._thread.start()

    def _hold(self) -> None:
        try:
            with _global_slots(self.size, self.occupy, self.name):
                self._held.set()
                self._released.wait()
        except BaseException as exc:  # handed to wait(): raised in the flow, as if taken there
            if self._held.is_set():  # returning them failed: they are the server's at the lease's end
                _logger().warning(
                    "global LLM limit %r: this run's %d slots were not returned (%s: %s); the server "
                    "frees them when their lease expires (%.0f s)",
                    *(self.name, self.occupy, type(exc).__name__, exc, LEASE_SECONDS),
                )
            self._error = exc
        finally:
            self._held.set()

    def wait(self) -> None:
        """Until the slots are held; raises what taking them raised. Ctrl-C / SIGTERM stop it."""
        while not self._held.wait(0.2):
            cancel.check()
        if self._error is not None:
            raise self._error

    def release(self) -> None:
        """Return the slots (on the lease's thread; returns at once)."""
        self._released.set()

    def join(self, timeout: float | None = 30.0) -> None:
        """Release, and wait until the slots are returned."""
        self.release()
        self._thread.join(timeout)


@contextmanager
def model_slot() -> Iterator[None]:
    """One of the run's model slots, held around one model call (unbounded outside `run_slots`)."""
    slots = _SLOTS.get()
    if slots is None:
        yield
        return
    while not slots.acquire(timeout=0.2):
        cancel.check()  # Ctrl-C / SIGTERM: stop waiting for a slot
    try:
        yield
    finally:
        slots.release()


@contextmanager
def _global_slots(size: int, occupy: int, name: str) -> Iterator[None]:
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        _logger().debug("no Prefect server configured: the global LLM limit %r is not used", name)
        yield
        return
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(name, size)
    except Exception as exc:
        _logger().warning(
            "global LLM limit %r disabled for this run (model calls bounded by this run's %d slots only): "
            "could not create it on %s: %s: %s",
            *(name, size, url, type(exc).__name__, exc),
        )
        yield
        return
    from prefect.concurrency.sync import concurrency

    with concurrency(
        name, occupy=occupy, lease_duration=LEASE_SECONDS, strict=True, raise_on_lease_renewal_failure=False
    ):
        yield


def _logger():
    """The run logger inside a flow/task run (so the warning is in the run history), else ours."""
    try:
        from prefect.logging import get_run_logger

        return get_run_logger()
    except Exception:  # not inside a run
        return log
