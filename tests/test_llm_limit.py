"""The global LLM concurrency limit on a real Prefect server: slots are held per worker, never
more than the limit at once, returned at the end, and a dropped connection is retried."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from dsh_memory.llm.limit import LIMIT_NAME, open_limit


def _active(api_url: str) -> int:
    r = httpx.get(f"{api_url}/v2/concurrency_limits/{LIMIT_NAME}", timeout=10)
    r.raise_for_status()
    return r.json()["active_slots"]


@pytest.mark.usefixtures("prefect_api")
def test_limit_caps_concurrent_holders_and_returns_every_slot(prefect_api):
    limit = open_limit(2)
    assert limit is not None
    inside, peak, lock = 0, 0, threading.Lock()

    def work():
        nonlocal inside, peak
        for _ in range(3):
            with limit.slot():
                with lock:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(0.05)
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert peak <= 2 and _active(prefect_api) == 2  # one slot per worker while the run lasts
    limit.close()
    assert _active(prefect_api) == 0


def test_a_dropped_connection_is_retried_not_fatal():
    """Regression: a Prefect server closing a connection without answering failed the session."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dsh_memory.llm.limit import GlobalLimit

    calls = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(self.path)
            if len(calls) == 1:  # the first request: hang up without a response
                self.close_connection = True
                self.connection.shutdown(2)
                return
            body = b'{"lease_id": "lease-1"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        limit = GlobalLimit(f"http://127.0.0.1:{server.server_address[1]}/api")
        with limit.slot():
            pass
        limit.close()
    finally:
        server.shutdown()
    assert calls[:2] == ["/api/v2/concurrency_limits/increment-with-lease"] * 2
    assert calls[-1] == "/api/v2/concurrency_limits/decrement-with-lease"


def test_a_limit_the_server_refuses_is_disabled_with_a_warning(caplog):
    """open_limit returning None (no global limit for this run) is never silent."""
    import logging
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prefect.settings import PREFECT_API_URL, temporary_settings

    class Refuse(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _refuse(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"detail": "forbidden"}'
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = _refuse

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api"
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}), caplog.at_level(logging.WARNING):
            assert open_limit(3) is None
    finally:
        server.shutdown()
    (record,) = [r for r in caplog.records if LIMIT_NAME in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "disabled" in message and url in message and "403" in message, message


def test_the_limit_client_authenticates_like_every_other_prefect_client(monkeypatch):
    """Every lease request carries the configured auth (PREFECT_API_AUTH_STRING → Basic)."""
    import base64
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dsh_memory.llm.limit import GlobalLimit

    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization"))
            body = b'{"lease_id": "lease-1"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "admin:s3cret")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        limit = GlobalLimit(f"http://127.0.0.1:{server.server_address[1]}/api")
        with limit.slot():
            pass
        limit.close()
    finally:
        server.shutdown()
    expected = "Basic " + base64.b64encode(b"admin:s3cret").decode()
    assert seen and all(h == expected for h in seen), seen
