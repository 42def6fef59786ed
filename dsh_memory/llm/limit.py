"""The global concurrency limit on model calls, shared by every run on a Prefect server.

Every Phase 1 worker thread holds one lease-based slot of the limit `dsh-memory-llm` while it
makes model calls, so the number of model calls in flight across all runs never exceeds the
limit. A worker takes its slot before its first call; a background thread renews every lease
the run holds (every lease_seconds / 3), and the run returns every slot when its batch ends.
Leases expire on the server within `lease_seconds` (60 s, the server minimum) of a killed process, so a crash never
leaks a slot (unlike Prefect's slot counters in ephemeral mode) nor stalls the next run long.

Why not `prefect.concurrency.sync.concurrency()` around each call: it opens a new API client
(and TLS context) for every acquire and release, and on the SQLite server each acquire/release
is a write that contends with the run's own state updates (HTTP 503 "database is locked",
retried by the client with multi-second sleeps). Measured in bench/bench_phase1.py: 4-10x the
ideal wall time. One slot per worker keeps the server out of the hot path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

LIMIT_NAME = "dsh-memory-llm"
RETRY_STATUSES = (423, 503)  # limit busy / SQLite server busy: ask again soon


class GlobalLimit:
    def __init__(
        self,
        api_url: str,
        name: str = LIMIT_NAME,
        lease_seconds: float = 60.0,
        max_wait_seconds: float = 3600.0,
        poll_seconds: float = 0.05,
    ):
        import httpx

        self.name = name
        self.lease_seconds = lease_seconds
        self.max_wait_seconds = max_wait_seconds
        self.poll_seconds = poll_seconds
        from dsh_memory.settings_loader import prefect_auth_headers

        # Auth like every other Prefect client here (PREFECT_API_AUTH_STRING / PREFECT_API_KEY).
        self._http = httpx.Client(base_url=api_url.rstrip("/"), timeout=30.0, headers=prefect_auth_headers())
        self._local = threading.local()
        self._leases: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="dsh-memory-llm-leases", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            with self._lock:
                leases = list(self._leases)
            for lease_id in leases:
                try:
                    if not self._renew(lease_id):  # expired anyway: its worker takes a new one
                        with self._lock:
                            self._leases.discard(lease_id)
                except Exception:  # transient: try again next round
                    pass

    def _post(self, path: str, body: dict):
        """POST to the Prefect API; a busy limit/server is polled, a dropped keep-alive connection
        (the server closes idle ones) is retried; a server that stays away is a transient error."""
        import httpx

        from dsh_memory.errors import LLMTransientError

        deadline = time.monotonic() + self.max_wait_seconds
        delay = self.poll_seconds
        transport_failures = 0
        while True:
            try:
                r = self._http.post(path, json=body)
            except httpx.TransportError as exc:
                transport_failures += 1
                if transport_failures > 5:
                    raise LLMTransientError(f"Prefect API unreachable for the LLM concurrency limit: {exc}") from None
                time.sleep(0.1 * transport_failures)
                continue
            if r.status_code in RETRY_STATUSES and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 1.5, 1.0)
                continue
            return r

    def _acquire(self) -> str:
        body = {"names": [self.name], "slots": 1, "mode": "concurrency", "lease_duration": self.lease_seconds}
        r = self._post("/v2/concurrency_limits/increment-with-lease", body)
        r.raise_for_status()
        lease_id = r.json()["lease_id"]
        with self._lock:
            self._leases.add(lease_id)
        return lease_id

    def _renew(self, lease_id: str) -> bool:
        r = self._post(f"/v2/concurrency_limits/leases/{lease_id}/renew", {"lease_duration": self.lease_seconds})
        return r.status_code < 300

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold this worker's slot for one model call (taken on first use, renewed in the background)."""
        lease_id = getattr(self._local, "lease_id", None)
        with self._lock:
            alive = lease_id in self._leases
        if not alive:
            self._local.lease_id = self._acquire()
        yield

    def close(self) -> None:
        """Return every slot this run holds."""
        self._stop.set()
        self._renewer.join(timeout=10)
        with self._lock:
            leases, self._leases = list(self._leases), set()
        for lease_id in leases:
            try:
                self._post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": lease_id})
            except Exception:  # the lease expires on the server anyway
                pass
        self._http.close()


def _logger():
    """The run logger inside a flow/task run (so the warning is in the run history), else ours."""
    try:
        from prefect.logging import get_run_logger

        return get_run_logger()
    except Exception:  # not inside a run
        return log


def open_limit(limit: int, name: str = LIMIT_NAME) -> GlobalLimit | None:
    """Create or resize the limit on the configured server and return a handle to it.
    None in ephemeral mode (no server lease protects a slot there; this run's own worker count
    still bounds its calls) or when the server refuses: then a warning says why."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        _logger().debug("no Prefect server configured: the global LLM limit %r is not used", name)
        return None
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(name, limit)
    except Exception as exc:
        _logger().warning(
            "global LLM limit %r disabled for this run (model calls bounded by this run's %d workers only): "
            "could not create it on %s: %s: %s",
            name,
            limit,
            url,
            type(exc).__name__,
            exc,
        )
        return None
    return GlobalLimit(url, name)
