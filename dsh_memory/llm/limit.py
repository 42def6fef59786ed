"""How many model calls run at once: `size` per run, and across all runs on a Prefect server.

A run's workers outnumber its model slots (`worker_count`): while `size` calls wait on the model,
the other workers claim, render and redact the next sessions and write the last ones' files, so
the model is never idle between two calls (bench/bench_phase1.py: wall ÷ ideal).

`LocalLimit` bounds this run's calls. `GlobalLimit` (a Prefect server is configured) also holds
one lease of the global limit `dsh-memory-llm` per call in flight, shared by every run, so the
number of model calls in flight across all runs never exceeds the limit. Leases are pooled: a
call takes a free lease of this run or, when none is free, a new one (never more than `size`); a
background thread renews them (every lease_seconds / 3) and the run returns them when its batch
ends. A killed run's leases expire on the server within `lease_seconds` (60 s, the server
minimum) — and sooner: each run records its leases in `<PREFECT_HOME>/dsh-memory-leases/`, and
the next run returns those of a process that no longer runs before it takes its own.

Why not `prefect.concurrency.sync.concurrency()` around each call: it opens a new API client
(and TLS context) for every acquire and release, and on the SQLite server each acquire/release
is a write that contends with the run's own state updates (HTTP 503 "database is locked",
retried by the client with multi-second sleeps), so model slots would sit idle while their
calls wait on the database (bench/bench_phase1.py measures the wall time against the ideal).
Pooled leases keep the server out of the hot path.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dsh_memory import cancel

log = logging.getLogger(__name__)

LIMIT_NAME = "dsh-memory-llm"
RETRY_STATUSES = (423, 503)  # limit busy / SQLite server busy: ask again soon
LEASES_DIR = "dsh-memory-leases"


def worker_count(size: int) -> int:
    """Workers for `size` model slots: half as many again prepare and write sessions meanwhile."""
    return size + max(1, (size + 1) // 2)


class LocalLimit:
    """At most `size` model calls of this run at once."""

    def __init__(self, size: int):
        self.size = max(1, int(size))
        self._free = threading.BoundedSemaphore(self.size)

    def _take(self) -> None:
        while not self._free.acquire(timeout=0.2):
            cancel.check()  # Ctrl-C / SIGTERM: stop waiting for a slot

    @contextmanager
    def slot(self) -> Iterator[None]:
        self._take()
        try:
            yield
        finally:
            self._free.release()

    def close(self) -> None:
        pass


class GlobalLimit(LocalLimit):
    def __init__(
        self,
        api_url: str,
        name: str = LIMIT_NAME,
        size: int = 1,
        records: Path | None = None,
        lease_seconds: float = 60.0,
        max_wait_seconds: float = 3600.0,
        poll_seconds: float = 0.05,
    ):
        import httpx

        super().__init__(size)
        self.name = name
        self._records = records  # where this run records its leases (None: not recorded)
        self.lease_seconds = lease_seconds
        self.max_wait_seconds = max_wait_seconds
        self.poll_seconds = poll_seconds
        from dsh_memory.settings_loader import prefect_auth_headers

        # Auth like every other Prefect client here (PREFECT_API_AUTH_STRING / PREFECT_API_KEY).
        self._http = httpx.Client(base_url=api_url.rstrip("/"), timeout=30.0, headers=prefect_auth_headers())
        self._leases: set[str] = set()  # every lease this run holds
        self._idle: list[str] = []  # the ones no call is using
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

    def _post(self, path: str, body: dict, give_up: Callable[[], bool] | None = None):
        """POST to the Prefect API; a busy limit/server is polled, a dropped keep-alive connection
        (the server closes idle ones) is retried; a server that stays away is a transient error.
        Returns None when `give_up()` turns true while polling a busy limit."""
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
                if give_up is not None and give_up():
                    return None
                time.sleep(delay)
                delay = min(delay * 1.5, 1.0)
                continue
            return r

    def _acquire(self, give_up: Callable[[], bool] | None = None) -> str | None:
        body = {"names": [self.name], "slots": 1, "mode": "concurrency", "lease_duration": self.lease_seconds}
        r = self._post("/v2/concurrency_limits/increment-with-lease", body, give_up)
        if r is None:
            return None
        r.raise_for_status()
        lease_id = r.json()["lease_id"]
        with self._lock:
            self._leases.add(lease_id)
            self._record()
        return lease_id

    def _record(self) -> None:
        """Write this run's leases where the next run looks for a dead run's (under self._lock)."""
        if self._records is None:
            return
        from dsh_memory.storage.state_schema import current_owner

        owner = current_owner()
        path = self._records / f"{owner.replace(':', '_').replace('/', '_')}.json"
        body = {"owner": owner, "api_url": str(self._http.base_url), "leases": sorted(self._leases)}
        try:
            self._records.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(body))
            os.replace(tmp, path)
        except OSError as exc:  # only costs the next run a wait if this one is killed
            log.debug("could not record LLM leases in %s: %s", path, exc)

    def _has_idle(self) -> bool:
        with self._lock:
            return bool(self._idle)

    def _renew(self, lease_id: str) -> bool:
        r = self._post(f"/v2/concurrency_limits/leases/{lease_id}/renew", {"lease_duration": self.lease_seconds})
        return r.status_code < 300

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of this run's slots and a lease of the global limit for one model call."""
        self._take()
        lease_id = None
        try:
            while lease_id is None:
                with self._lock:
                    while self._idle and lease_id is None:
                        candidate = self._idle.pop()
                        lease_id = candidate if candidate in self._leases else None  # dropped when expired
                if lease_id is None:
                    # While the limit is busy, a lease this run's other calls return is taken
                    # instead: waiting on the server for a NEW one while this run's own leases
                    # sit idle deadlocked runs that held the whole limit between them.
                    lease_id = self._acquire(give_up=self._has_idle)
            yield
        finally:
            if lease_id is not None:
                with self._lock:
                    if lease_id in self._leases:
                        self._idle.append(lease_id)
            self._free.release()

    def close(self) -> None:
        """Return every slot this run holds."""
        self._stop.set()
        self._renewer.join(timeout=10)
        with self._lock:
            leases, self._leases, self._idle = list(self._leases), set(), []
        self._release(leases)
        if self._records is not None:
            with self._lock:
                self._record()  # empty: nothing left for the next run to return
        self._http.close()

    def _release(self, leases: list[str]) -> None:
        for lease_id in leases:
            try:
                self._post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": lease_id})
            except Exception:  # the lease expires on the server anyway
                pass

    def return_dead_runs_leases(self) -> int:
        """Return the leases recorded by runs whose process is gone (this host only); how many."""
        if self._records is None or not self._records.is_dir():
            return 0
        from dsh_memory.storage.state_schema import owner_is_gone

        returned = 0
        for path in self._records.glob("*.json"):
            try:
                body = json.loads(path.read_text())
                owner, api_url, leases = body["owner"], body["api_url"], list(body["leases"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if api_url != str(self._http.base_url) or not owner_is_gone(owner):
                continue
            self._release([str(x) for x in leases])
            returned += len(leases)
            path.unlink(missing_ok=True)
        return returned


def _logger():
    """The run logger inside a flow/task run (so the warning is in the run history), else ours."""
    try:
        from prefect.logging import get_run_logger

        return get_run_logger()
    except Exception:  # not inside a run
        return log


def open_limit(limit: int, name: str = LIMIT_NAME) -> LocalLimit:
    """This run's model slots: a `GlobalLimit` created (or resized) on the configured server, or
    a `LocalLimit` in ephemeral mode (no server lease protects a slot there) or when the server
    refuses — then a warning says why."""
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME

    url = PREFECT_API_URL.value()
    if not url:
        _logger().debug("no Prefect server configured: the global LLM limit %r is not used", name)
        return LocalLimit(limit)
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(name, limit)
    except Exception as exc:
        _logger().warning(
            "global LLM limit %r disabled for this run (model calls bounded by this run's %d slots only): "
            "could not create it on %s: %s: %s",
            name,
            limit,
            url,
            type(exc).__name__,
            exc,
        )
        return LocalLimit(limit)
    handle = GlobalLimit(url, name, size=limit, records=Path(PREFECT_HOME.value()) / LEASES_DIR)
    returned = handle.return_dead_runs_leases()
    if returned:
        _logger().info("returned %d LLM limit slot(s) held by a run that is gone", returned)
    return handle
