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
"""

from __future__ import annotations

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
def run_slots(size: int, name: str = LIMIT_NAME, *, calls: int | None = None) -> Iterator[None]:
    """This run's model slots: `size` (the settings' concurrency), or `calls` when it has fewer
    model calls to make, taken from the global limit `name` (sized `size`) too when a Prefect
    server is configured (see the module docstring)."""
    size = max(1, int(size))
    occupy = max(1, min(size, calls or size))
    token = _SLOTS.set(threading.BoundedSemaphore(occupy))
    try:
        with _global_slots(size, occupy, name):
            yield
    finally:
        _SLOTS.reset(token)


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
