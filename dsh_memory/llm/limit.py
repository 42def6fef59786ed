"""How many model calls run at once: the run's model slots.

A run holds `settings.concurrency` model slots (`run_slots`): at most that many of its calls wait
on the model at once, while more workers (`worker_count`) prepare and write other sessions, so
the model is never idle between two calls (bench/bench_phase1.py). `model_slot()` finds the slots
in a context variable, which the tasks of the run's map inherit (Prefect's thread-pool runner
copies the context on submit).

With a Prefect server, the run also takes its slots, once, from the global concurrency limit
`dsh-memory-llm` (created or resized to `settings.concurrency`), so runs on every host together
never call the model more often at once than the limit. It asks for the lease itself through a
client that resends a request refused by the server's busy SQLite (503) after 0.1 s instead of
the Prefect client's 2 s (`_retry_soon`), and holds it as Prefect's `concurrency()` holds its own;
when the slots are taken (423), `concurrency()` waits for them. A killed run's lease expires
within about a minute. In ephemeral mode there are no leases (a killed process would hold its
slots forever): the bound is the run's alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from contextvars import ContextVar

from prefect.client.orchestration import get_client
from prefect.concurrency.sync import concurrency
from prefect.logging import get_run_logger
from prefect.settings import PREFECT_API_URL

from dsh_memory import cancel

log = logging.getLogger(__name__)

LIMIT_NAME = "dsh-memory-llm"
LEASE_SECONDS = 60.0  # the server's minimum: how long a killed run's slots stay taken
RETRY_SOON = "0.1"  # s: when a request the server's busy database refused is sent again (`_retry_soon`)

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
    cancel.wait(lambda timeout: slots.acquire(timeout=timeout))  # Ctrl-C / SIGTERM: stop waiting
    try:
        yield
    finally:
        slots.release()


def _global_slots(size: int, occupy: int, name: str) -> AbstractContextManager:
    url = PREFECT_API_URL.value()
    if not url:
        _logger().debug("no Prefect server configured: the global LLM limit %r is not used", name)
        return nullcontext()
    try:
        with _client() as client:
            client.upsert_global_concurrency_limit_by_name(name, size)
            lease = _lease_now(client, name, occupy)
    except Exception as exc:
        _logger().warning(
            "global LLM limit %r disabled for this run (model calls bounded by this run's %d slots only): "
            "could not create it on %s: %s: %s",
            *(name, size, url, type(exc).__name__, exc),
        )
        return nullcontext()
    if lease is not None:
        return _holding(lease, occupy)
    return concurrency(
        name, occupy=occupy, lease_duration=LEASE_SECONDS, strict=True, raise_on_lease_renewal_failure=False
    )


def _client():
    """A Prefect client whose requests refused by a busy server are retried soon (`_retry_soon`)."""
    return get_client(sync_client=True, httpx_settings={"event_hooks": {"response": [_retry_soon]}})


def _retry_soon(response) -> None:
    """A 503 without Retry-After: the server's SQLite was busy (its `increment-with-lease`
    transaction fails at once when the server's own writers commit in between, as right after a
    run); sent again after RETRY_SOON s instead of the Prefect client's 2 s back-off."""
    if response.status_code == 503 and "retry-after" not in response.headers:
        response.headers["Retry-After"] = RETRY_SOON


def _lease_now(client, name: str, occupy: int):
    """The lease of `occupy` slots if they are free now, else None: then Prefect's
    `concurrency()` takes them, waiting while other runs hold them (423), as it always did."""
    try:
        from prefect.client.schemas.responses import ConcurrencyLimitWithLeaseResponse

        _lease_parts()  # a Prefect without them: its concurrency() alone
        response = client.increment_concurrency_slots_with_lease(
            names=[name], slots=occupy, mode="concurrency", lease_duration=LEASE_SECONDS
        )
    except Exception:  # 423: the limit is full; 503 after the quick retries
        return None
    try:
        answer = response.json()
    except Exception:  # not JSON: no lease to hold or give back
        return None
    with suppress(Exception):  # an answer this Prefect cannot read: given back below
        lease = ConcurrencyLimitWithLeaseResponse.model_validate(answer)
        if lease.limits:
            return lease
    # The server granted slots this run cannot hold: they are given back, else concurrency() would
    # wait for them until the lease expires. An answer without a lease id cannot be given back.
    if isinstance(answer, dict) and "lease_id" in answer:
        _release(answer["lease_id"])
    return None


def _lease_parts():
    from prefect.concurrency._events import emit_concurrency_acquisition_events, emit_concurrency_release_events
    from prefect.concurrency._leases import maintain_concurrency_lease
    from prefect.concurrency.context import ConcurrencyContext

    return (
        emit_concurrency_acquisition_events,
        emit_concurrency_release_events,
        maintain_concurrency_lease,
        ConcurrencyContext,
    )


@contextmanager
def _holding(lease, occupy: int) -> Iterator[None]:
    """A lease `_lease_now` took, held as Prefect's `concurrency()` holds the one it takes
    (prefect/concurrency/_sync.py): its events, renewed while held, released at the end; if the
    release fails, the run's concurrency context releases it as it exits (else it expires)."""
    acquired_events, released_events, maintain, concurrency_context = _lease_parts()
    ctx = concurrency_context.get()
    if ctx is not None:
        ctx.cleanup_lease_ids.append(lease.lease_id)
    events = acquired_events(lease.limits, occupy)
    try:
        with maintain(lease.lease_id, LEASE_SECONDS, raise_on_lease_renewal_failure=False):
            yield
    finally:
        if _release(lease.lease_id) and ctx is not None and lease.lease_id in ctx.cleanup_lease_ids:
            ctx.cleanup_lease_ids.remove(lease.lease_id)
        released_events(lease.limits, occupy, events)


def _release(lease_id) -> bool:
    """Gives the lease's slots back; False, with a warning, if the server did not take them."""
    try:
        with _client() as client:
            client.release_concurrency_slots_with_lease(lease_id=lease_id)
    except Exception as exc:
        _logger().warning("could not release the LLM slots' lease %s: %s: %s", lease_id, type(exc).__name__, exc)
        return False
    return True


def _logger():
    """The run logger inside a flow/task run (so the warning is in the run history), else ours."""
    try:
        return get_run_logger()
    except Exception:  # not inside a run
        return log
