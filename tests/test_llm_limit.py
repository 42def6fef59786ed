"""Model slots belong to the run (dsh_memory/llm/limit.py): `run_slots` sizes them from the
settings, `model_slot()` finds them without any task parameter, and on a real Prefect server the
run takes them from the global limit `dsh-memory-llm` through Prefect's own `concurrency()`:
held while the run lasts, returned at its end, and a second run waits for them."""

from __future__ import annotations

import contextvars
import inspect
import logging
import re
import threading
import time
import uuid

import pytest
from prefect.settings import PREFECT_API_URL, temporary_settings

from dsh_memory.llm.limit import LIMIT_NAME, model_slot, run_slots, worker_count
from dsh_memory.tasks.extract import extract_session, llm_extract
from tests.flow_helpers import prefect_proxy


def _active(name: str) -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name).active_slots


def _hammer(threads: int, fill: int, rounds: int = 3, hold: float = 0.05) -> int:
    """`threads` workers of this run each making `rounds` model calls; the peak of calls at once.
    Each worker runs in a copy of this context, as Prefect's thread-pool runner does. `fill` is
    the bound the test expects: a call waits inside (up to 30 s, once) until that many are inside
    or every worker with calls left is, then holds `hold` — so the peak reaches the bound however
    slowly threads start on a busy machine, and a call over the bound still shows as a higher peak."""
    inside, peak, busy = 0, 0, threads  # busy: workers with calls left
    cond, gave_up = threading.Condition(), threading.Event()

    def filled() -> bool:
        return inside >= min(fill, busy)

    def work():
        nonlocal inside, peak, busy
        for n in range(rounds):
            with model_slot():
                with cond:
                    inside += 1
                    peak = max(peak, inside)
                    cond.notify_all()
                    if not gave_up.is_set() and not cond.wait_for(filled, timeout=30):
                        gave_up.set()  # fewer get in than expected: the peak says so, no more waiting
                time.sleep(hold)
                with cond:
                    inside -= 1
                    busy -= n == rounds - 1
                    cond.notify_all()

    workers = [threading.Thread(target=contextvars.copy_context().run, args=(work,)) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=120)
    return peak


def test_workers_outnumber_slots_but_calls_never_exceed_them():
    assert worker_count(8) == 12 and worker_count(1) == 2
    with temporary_settings(restore_defaults={PREFECT_API_URL}), run_slots(2):
        assert _hammer(threads=worker_count(2), fill=2) == 2
    assert _hammer(threads=3, fill=3, rounds=1) == 3  # outside a run nothing is bounded


def test_no_task_parameter_carries_the_bound():
    for t in (extract_session, llm_extract):
        assert not [p for p in inspect.signature(t.fn).parameters if "limit" in p or "slot" in p], t.name


@pytest.mark.usefixtures("prefect_api")
def test_the_run_holds_its_slots_of_the_global_limit_and_returns_them():
    name = f"dsh-memory-test-{uuid.uuid4().hex[:8]}"
    with run_slots(2, name):
        assert _active(name) == 2
        assert _hammer(threads=5, fill=2) == 2
    assert _active(name) == 0
    with run_slots(3):  # the real limit is created (or resized) to the run's size
        assert _active(LIMIT_NAME) == 3
    assert _active(LIMIT_NAME) == 0


@pytest.mark.usefixtures("prefect_api")
def test_a_second_run_waits_for_the_first_runs_slots():
    """Across runs (and hosts) the global limit bounds the model calls: a run whose slots another
    run holds enters only when that run has returned them."""
    name = f"dsh-memory-test-{uuid.uuid4().hex[:8]}"
    order: list[str] = []
    trying = threading.Event()

    def second():
        trying.set()
        with run_slots(2, name):
            order.append("second in")

    with run_slots(2, name):
        t = threading.Thread(target=second)
        t.start()
        trying.wait(10)
        threading.Event().wait(1.0)  # gives an unbounded second run the chance to get in early
        order.append("first out")
    t.join(timeout=120)
    assert order == ["first out", "second in"]
    assert _active(name) == 0


@pytest.mark.usefixtures("prefect_api")
def test_a_run_takes_only_the_slots_it_has_calls_for():
    """Two one-session runs share a limit of 2 at once; neither waits for the other."""
    name = f"dsh-memory-test-{uuid.uuid4().hex[:8]}"
    with run_slots(2, name, calls=1):
        assert _active(name) == 1
        with run_slots(2, name, calls=1):
            assert _active(name) == 2
            assert _hammer(threads=3, fill=1, rounds=1) == 1  # this run's own bound: its one call
    assert _active(name) == 0
    with run_slots(2, name, calls=5):  # more calls than the limit: the limit
        assert _active(name) == 2


@pytest.fixture()
def refusing_api():
    """A stand-in Prefect API on loopback that answers every request 403 (it forwards nothing)."""
    import json

    forbidden = json.dumps({"detail": "forbidden"}).encode()
    with prefect_proxy("http://127.0.0.1:9/api", lambda path, forward: (403, forbidden, "application/json")) as url:
        yield url


def test_a_limit_the_server_refuses_is_disabled_with_a_warning(refusing_api, caplog):
    """A run without the global limit (only its own slots) is never silent about it."""
    import logging

    with temporary_settings(updates={PREFECT_API_URL: refusing_api}), caplog.at_level(logging.WARNING):
        with run_slots(3):
            assert _hammer(threads=4, fill=3, rounds=1) == 3
    (record,) = [r for r in caplog.records if LIMIT_NAME in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "disabled" in message and refusing_api in message and "403" in message, message


def _leases_through(monkeypatch, url: str) -> None:
    """Only the run's own lease client goes through `url`; events and renewals reach the server."""
    from dsh_memory.llm import limit

    own_client = limit._client

    def through_proxy():
        with temporary_settings(updates={PREFECT_API_URL: url}):
            return own_client()

    monkeypatch.setattr(limit, "_client", through_proxy)


@pytest.fixture(params=[1, 2], ids=["once", "twice"])
def busy_api(request, prefect_api):
    """A proxy that refuses the first one or two lease requests with a bare 503, as the server
    does when its SQLite is busy (right after another run, or on a machine busy with others)."""
    refused: list[str] = []
    asked: list[str] = []  # each lease request that arrived

    def answer(path, forward):
        if path.endswith("/increment-with-lease"):
            asked.append(path)
            if len(refused) < request.param:
                refused.append(path.rsplit("/", 1)[-1])
                return 503, b'{"exception_message": "Service Unavailable"}', "application/json"
        return forward()

    with prefect_proxy(prefect_api, answer) as url:
        yield url, refused, asked, request.param


class _PlannedWaits(logging.Handler):
    """The waits the Prefect client plans before it sends a request again, read from its own
    debug line ("Another attempt will be made in 0.11s."): what it chose, not a wall clock."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seconds: list[float] = []

    def emit(self, record):
        m = re.search(r"Another attempt will be made in ([\d.]+)s", record.getMessage())
        if m:
            self.seconds.append(float(m.group(1)))


def test_a_lease_the_busy_server_refused_is_asked_again_at_once(busy_api, monkeypatch):
    """The Prefect client sends a refused request again after 2 s (±20% jitter: never before
    1.6 s); the run's lease request, after 0.1 s: the run gets its slots without that wait, holds
    them and returns them. The wait is the one the client planned (its debug line), so the test
    holds on a machine of any speed, and on one whose server is busy too."""
    url, refused, asked, times = busy_api
    _leases_through(monkeypatch, url)
    waits, client_log = _PlannedWaits(), logging.getLogger("prefect.client")
    monkeypatch.setattr(client_log, "level", logging.DEBUG)
    client_log.addHandler(waits)
    name = f"dsh-memory-test-{uuid.uuid4().hex[:8]}"
    try:
        with run_slots(2, name):
            assert _active(name) == 2
            assert _hammer(threads=4, fill=2, rounds=1) == 2
    finally:
        client_log.removeHandler(waits)
    assert _active(name) == 0
    assert refused == ["increment-with-lease"] * times
    # The real server behind the proxy may itself answer 503 on a busy machine (its SQLite locked),
    # so the lease may be asked more than twice: each time again after the run's own short wait.
    # (Another client's retry there plans its own ≥ 1.6 s back-off: not one of the lease's.)
    soon = [s for s in waits.seconds if s < 1.0]
    assert len(asked) >= times + 1 and len(soon) == len(asked) - 1, (asked, waits.seconds)


@pytest.fixture()
def garbled_lease_api(prefect_api):
    """A proxy that passes every request on but garbles the answer to a granted lease request:
    the slots are taken at the server, the lease's `limits` are not a list (an answer the run
    cannot parse), its `lease_id` is intact."""
    import json

    garbled: list[str] = []

    def answer(path, forward):
        status, content, ctype = forward()
        if path.endswith("/increment-with-lease") and status == 200:
            granted = json.loads(content)
            garbled.append(granted["lease_id"])
            content = json.dumps({**granted, "limits": "garbled"}).encode()
        return status, content, ctype

    with prefect_proxy(prefect_api, answer) as url:
        yield url, garbled


def test_a_granted_lease_whose_answer_cannot_be_read_is_returned(garbled_lease_api, monkeypatch):
    """The server granted the run's lease request but its answer cannot be parsed: the run gives
    that lease back (it cannot hold it) and takes its slots through Prefect's `concurrency()`;
    at the end every slot is free again (none left taken by the unread lease)."""
    url, garbled = garbled_lease_api
    _leases_through(monkeypatch, url)
    name = f"dsh-memory-test-{uuid.uuid4().hex[:8]}"
    with run_slots(2, name, calls=1):
        assert _active(name) == 1
    assert len(garbled) == 1
    assert _active(name) == 0
