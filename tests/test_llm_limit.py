"""Model slots: this run's own bound (`LocalLimit`) and the global LLM concurrency limit on a real
Prefect server: never more calls than the limit at once, leases pooled and returned at the end, a
killed run's leases returned by the next run, a dropped connection retried."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from dsh_memory.llm.limit import LIMIT_NAME, LocalLimit, open_limit, worker_count


def _active(api_url: str) -> int:
    r = httpx.get(f"{api_url}/v2/concurrency_limits/{LIMIT_NAME}", timeout=10)
    r.raise_for_status()
    return r.json()["active_slots"]


def _hammer(limit, threads: int, rounds: int = 3, hold: float = 0.05) -> int:
    """`threads` workers each making `rounds` calls through `limit`; the peak of calls at once."""
    inside, peak, lock = 0, 0, threading.Lock()

    def work():
        nonlocal inside, peak
        for _ in range(rounds):
            with limit.slot():
                with lock:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(hold)
                with lock:
                    inside -= 1

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=60)
    return peak


def test_workers_outnumber_slots_but_calls_never_exceed_them():
    assert worker_count(8) == 12 and worker_count(1) == 2
    assert _hammer(LocalLimit(2), threads=worker_count(2)) == 2


@pytest.mark.usefixtures("prefect_api")
def test_limit_caps_concurrent_calls_pools_leases_and_returns_every_slot(prefect_api):
    limit = open_limit(2)
    assert type(limit).__name__ == "GlobalLimit"
    peak = _hammer(limit, threads=5)
    assert peak == 2  # five workers, two calls at once
    assert _active(prefect_api) == 2  # two pooled leases, reused call after call, held while the run lasts
    limit.close()
    assert _active(prefect_api) == 0


@pytest.mark.usefixtures("prefect_api")
def test_runs_holding_the_limit_between_them_reuse_their_own_leases(prefect_api):
    """Regression (#19, the storm bench): two runs held one lease each of a limit of 2; each
    run's second call waited on the server for a NEW lease while its own first lease sat idle —
    a deadlock until max_wait_seconds (an hour). Now a waiting call takes the idle lease."""
    from dsh_memory.llm.limit import GlobalLimit

    name = f"dsh-memory-test-{time.monotonic_ns()}"
    httpx.post(f"{prefect_api}/v2/concurrency_limits/", json={"name": name, "limit": 2}, timeout=10).raise_for_status()
    runs = [GlobalLimit(prefect_api, name, size=2, max_wait_seconds=8, poll_seconds=0.05) for _ in range(2)]
    errors: list[BaseException] = []
    calls = []

    def work(limit, hold: float):
        try:
            with limit.slot():
                time.sleep(hold)
                calls.append(1)
        except BaseException as exc:  # the failure before the fix: HTTP 423 after max_wait_seconds
            errors.append(exc)

    try:
        for limit in runs:  # each run takes one lease: the limit is full
            with limit.slot():
                pass
        threads = [threading.Thread(target=work, args=(limit, hold)) for limit in runs for hold in (0.3, 0.3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [] and len(calls) == 4
    finally:
        for limit in runs:
            limit.close()
    r = httpx.post(f"{prefect_api}/v2/concurrency_limits/filter", json={}, timeout=10).json()
    assert {x["name"]: x["active_slots"] for x in r}[name] == 0


_HOLDER = """
import threading, time
from dsh_memory.llm.limit import open_limit
limit = open_limit(2)
entered = threading.Barrier(3)
def hold():
    with limit.slot():
        entered.wait()
        time.sleep(600)
for _ in range(2):
    threading.Thread(target=hold, daemon=True).start()
entered.wait()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.usefixtures("prefect_api")
def test_a_killed_runs_slots_are_returned_by_the_next_run_at_once(prefect_api):
    """Regression (#14): after a kill -9 the next run waited up to the 60 s lease for its slots."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert proc.stdout.readline().strip() == "held"
        assert _active(prefect_api) == 2
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert _active(prefect_api) == 2  # the server still counts the dead run's leases
    limit = open_limit(2)
    try:
        assert _active(prefect_api) == 0  # returned before this run takes any
        with limit.slot(), limit.slot():  # both slots free for this run at once
            assert _active(prefect_api) == 2
    finally:
        limit.close()
    assert _active(prefect_api) == 0


@contextmanager
def _scripted_api(answer):
    """A stand-in Prefect API on loopback: `answer(request)` gives (status, JSON body) for each
    request, or None to hang up without a response. Yields the API URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            reply = answer(self)
            if reply is None:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            status, body = reply
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()


def _one_call(api_url: str) -> None:
    """One model slot taken and returned through a GlobalLimit on `api_url`."""
    from dsh_memory.llm.limit import GlobalLimit

    limit = GlobalLimit(api_url)
    with limit.slot():
        pass
    limit.close()


def test_a_dropped_connection_is_retried_not_fatal():
    """Regression: a Prefect server closing a connection without answering failed the session."""
    calls = []

    def answer(request):
        calls.append(request.path)
        return None if len(calls) == 1 else (200, {"lease_id": "lease-1"})  # the first: hang up

    with _scripted_api(answer) as api_url:
        _one_call(api_url)
    assert calls[:2] == ["/api/v2/concurrency_limits/increment-with-lease"] * 2
    assert calls[-1] == "/api/v2/concurrency_limits/decrement-with-lease"


def test_a_limit_the_server_refuses_is_disabled_with_a_warning(caplog):
    """A run without the global limit (only its own slots) is never silent about it."""
    import logging

    from prefect.settings import PREFECT_API_URL, temporary_settings

    with _scripted_api(lambda request: (403, {"detail": "forbidden"})) as url:
        with temporary_settings(updates={PREFECT_API_URL: url}), caplog.at_level(logging.WARNING):
            limit = open_limit(3)
            assert type(limit) is LocalLimit and limit.size == 3
    (record,) = [r for r in caplog.records if LIMIT_NAME in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "disabled" in message and url in message and "403" in message, message


def test_the_limit_client_authenticates_like_every_other_prefect_client(monkeypatch):
    """Every lease request carries the configured auth (PREFECT_API_AUTH_STRING → Basic)."""
    import base64

    seen: list[str | None] = []

    def answer(request):
        seen.append(request.headers.get("Authorization"))
        return 200, {"lease_id": "lease-1"}

    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "admin:s3cret")
    with _scripted_api(answer) as api_url:
        _one_call(api_url)
    expected = "Basic " + base64.b64encode(b"admin:s3cret").decode()
    assert seen and all(h == expected for h in seen), seen
