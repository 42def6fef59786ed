"""The receiver's delivery (docs/agents.md, "Turn-end notifications"), by two daemon threads:

- recording: every accepted turn end is written with `record` (storage/turn_ends.py) within
  RECORD_EVERY_SECONDS, batched in one call, by its own thread, so neither the request path nor
  the writes wait on the database or on a slow Prefect API; a failing database is retried with
  backoff, and its error said once (again only when it changes, and when recording works again);
- forwarding: one pending entry per session (a newer turn end replaces it), all forwarded each
  `interval_seconds` as ONE `POST {api}/events`, except a session forwarded less than
  `min_gap_seconds` ago. `submit` True means "will be forwarded": a failed POST or write is
  retried (backoff; same event ids; a newer entry wins). Beyond `max_pending` sessions waiting to
  be forwarded (or recorded) a new one is refused, never accepted and then dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dsh_memory.cancel import bounded
from dsh_memory.hooks.events import EmitError, build_event, new_client, post_events
from dsh_memory.hooks.payloads import TurnEnd
from dsh_memory.settings_loader import shown_url

log = logging.getLogger("dsh_memory.hooks.forwarder")


# Turn ends arriving within this of a write wait for the next one: a storm costs a few writes a
# second, not one per turn end (the debounce is seconds; this is its error).
RECORD_EVERY_SECONDS = 0.2
BATCH_MAX = 500  # turn ends per POST


class TurnEndForwarder:
    """Pending turn ends (one per session) forwarded in batches by one daemon thread."""

    def __init__(
        self,
        api_url: str,
        *,
        interval_seconds: float = 2.0,
        max_pending: int = 10_000,
        min_gap_seconds: float = 0.0,
        backoff_max_seconds: float = 30.0,
        post: Callable[..., Any] = post_events,
        record: Callable[[list[tuple[str, datetime]]], Any] | None = None,
    ):
        self.api_url = api_url
        self.interval = interval_seconds
        self.max_pending = max_pending
        self.min_gap = min_gap_seconds
        self._sent_at: dict[str, float] = {}  # session → when its last event was forwarded (within min_gap)
        self.timeout = 10.0  # a POST in all, however slowly its answer trickles
        self.backoff_max = backoff_max_seconds
        self.close_timeout = 10.0
        self._post = post
        self._record = record
        self._unrecorded: dict[str, datetime] = {}  # session → newest turn end not recorded yet
        self._record_at = 0.0  # monotonic: the next write not before (RECORD_EVERY_SECONDS, a retry)
        self._record_backoff = 0.0  # the wait before the next retry of a failed write
        self._record_error = ""  # the failing write's error, as last logged ("" while writes work)
        self._pending: dict[str, dict[str, Any]] = {}  # session → its event (id kept across retries)
        self._in_flight = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._recorder: threading.Thread | None = None
        self._closing = False
        self._stopped = False
        self._flushers = 0  # callers waiting in flush(): skip the cadence wait
        self._client: Any = None
        # counters (read by tests and logs)
        self.received = self.replaced = self.refused = 0
        self.forwarded = self.posts = self.failed_posts = 0
        self.recorded = self.failed_records = 0
        self.last_error = ""

    # -- the route's side ------------------------------------------------------------------
    def submit(self, turn: TurnEnd) -> bool:
        """Take a turn end for forwarding. False only when `max_pending` other sessions wait
        already to be forwarded or recorded (or the forwarder is closed): the caller must say so,
        nothing was taken."""
        sid = turn.session_id
        with self._cond:
            if self._closing:
                self.refused += 1
                return False
            if sid in self._pending:
                self.replaced += 1
            elif len(self._pending) >= self.max_pending or (
                sid not in self._unrecorded and len(self._unrecorded) >= self.max_pending
            ):  # turn ends a failing database still owes stay in memory too
                self.refused += 1
                return False
            # when the turn ended (received here), not when its batch goes out: the recorded turn
            # end and the event's `occurred`
            received_at = datetime.now(UTC)
            self._pending[sid] = build_event(turn, occurred=received_at)
            if self._record is not None:
                self._unrecorded[sid] = received_at
            self.received += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dsh-turn-end-forwarder", daemon=True)
                self._thread.start()
            if self._record is not None and (self._recorder is None or not self._recorder.is_alive()):
                self._recorder = threading.Thread(target=self._run_recorder, name="dsh-turn-end-recorder", daemon=True)
                self._recorder.start()
            self._cond.notify_all()
        return True

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._pending) + self._in_flight

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is unrecorded, pending or in flight. True when that happened within
        `timeout`."""
        with self._cond:
            self._flushers += 1
            self._cond.notify_all()  # skip the cadence wait
            try:
                return self._cond.wait_for(
                    lambda: not self._pending and not self._in_flight and not self._unrecorded, timeout=timeout
                )
            finally:
                self._flushers -= 1

    def close(self, timeout: float | None = None) -> bool:
        """Forward what is pending (retrying until `timeout`, default `close_timeout`), then stop
        the thread. Refuses new turn ends from now on. True when everything was forwarded."""
        timeout = self.close_timeout if timeout is None else timeout
        with self._cond:
            self._closing = True
            self._record_at = min(self._record_at, time.monotonic() + 1.0)  # no long backoff now
            self._cond.notify_all()
        done = self.flush(timeout)
        with self._cond:
            left = len(self._pending) + self._in_flight
            unrecorded = len(self._unrecorded)
            self._stopped = True  # the thread ends after its current attempt
            self._cond.notify_all()
        if not done and left:
            log.error(
                "%d turn-end event(s) not forwarded at shutdown (%s); the scheduled catch-up will find those sessions",
                left,
                self.last_error or "Prefect API slow",
            )
        if unrecorded:
            log.error("%d turn end(s) not recorded at shutdown (%s)", unrecorded, self.last_error or "database slow")
        for thread in (self._thread, self._recorder):
            if thread is not None:
                thread.join(timeout=max(1.0, self.timeout))
        return done

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.0
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._pending or self._stopped or self._done_closing())
                    if self._stopped or self._done_closing():
                        return
                    self._pause(backoff)
                    if self._stopped:
                        return
                    batch = self._take()
                ok = self._send(batch)
                with self._cond:
                    self._in_flight = 0
                    if ok and self.min_gap:
                        sent = time.monotonic()
                        self._sent_at.update((sid, sent) for sid, _ in batch)
                    if not ok:
                        for sid, event in batch:  # back in, unless a newer turn end arrived
                            self._pending.setdefault(sid, event)
                    self._cond.notify_all()
                backoff = 0.0 if ok else min(self.backoff_max, max(0.5, backoff * 2))
        finally:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _pause(self, backoff: float) -> None:  # under self._cond
        """A steady cadence: turn ends arriving meanwhile join this batch (or replace their
        session's entry). After a failure, the backoff instead (≤ 1 s while closing)."""
        if backoff:
            pause = min(backoff, 1.0) if self._closing else backoff
            hurry: Callable[[], bool] = lambda: self._stopped  # noqa: E731
        else:
            pause = self.interval
            hurry = lambda: self._flushers > 0 or self._closing  # noqa: E731
        deadline = time.monotonic() + pause
        while not (hurry() or time.monotonic() >= deadline):
            self._cond.wait(max(0.0, deadline - time.monotonic()))  # a flush or close wakes it

    def _run_recorder(self) -> None:
        """The recording thread: asleep until a turn end is taken or a write is due (RECORD_EVERY_SECONDS,
        a retry); ends once stopped, or closing with everything recorded."""
        with self._cond:
            while not (self._stopped or (self._closing and not self._unrecorded)):
                if self._may_record():
                    self._record_now()
                else:
                    self._cond.wait(max(0.0, self._record_at - time.monotonic()) if self._unrecorded else None)

    def _done_closing(self) -> bool:  # under self._cond
        return self._closing and not self._pending and not self._unrecorded

    def _may_record(self) -> bool:  # under self._cond
        return bool(self._unrecorded) and time.monotonic() >= self._record_at

    def _record_now(self) -> None:  # under self._cond; released around the write
        """Record every turn end taken since the last write, in one call. They stay in
        `_unrecorded` until written (flush, close and the bound see them)."""
        if not self._may_record():
            return
        ends = dict(self._unrecorded)
        self._cond.release()
        try:
            self._record(list(ends.items()))
            error = ""
        except Exception as exc:  # never let the thread die; retried, a newer turn end wins
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._cond.acquire()
        if error:
            self.failed_records += 1
            self.last_error = error
            self._record_backoff = min(self.backoff_max, max(0.5, self._record_backoff * 2))
            wait = min(self._record_backoff, 1.0) if self._closing else self._record_backoff  # as a POST's
            self._record_at = time.monotonic() + wait
            if error != self._record_error:  # said once, not once per retry
                log.warning("recording %d turn end(s) failed, will retry (backoff): %s", len(ends), error)
                self._record_error = error
        else:
            for sid, at in ends.items():  # a newer turn end taken meanwhile stays
                if self._unrecorded.get(sid) == at:
                    del self._unrecorded[sid]
            self.recorded += len(ends)
            self._record_at = time.monotonic() + RECORD_EVERY_SECONDS
            if self._record_error:
                log.warning("recording turn ends works again")
            self._record_backoff, self._record_error = 0.0, ""
        self._cond.notify_all()

    def _take(self) -> list[tuple[str, dict[str, Any]]]:  # under self._cond
        """Up to BATCH_MAX pending entries; a session forwarded less than `min_gap` ago waits
        (not when flushing or closing)."""
        now = time.monotonic()
        hold = 0.0 if self._flushers or self._closing else self.min_gap
        if self._sent_at:
            self._sent_at = {s: t for s, t in self._sent_at.items() if now - t < self.min_gap}
        ready = [s for s in self._pending if not (hold and now - self._sent_at.get(s, now - hold) < hold)]
        batch = [(sid, self._pending.pop(sid)) for sid in ready[:BATCH_MAX]]
        self._in_flight = len(batch)
        return batch

    def _send(self, batch: list[tuple[str, dict[str, Any]]]) -> bool:
        if not batch:
            return True
        events = [event for _, event in batch]
        try:
            self._post_within_timeout(events)
        except Exception as exc:  # never let the thread die: the server must keep answering
            message = str(exc) if isinstance(exc, EmitError) else f"{type(exc).__name__}: {exc}"
            with self._cond:
                self.failed_posts += 1
                self.last_error = message
            log.warning("forwarding %d turn-end event(s) failed, will retry: %s", len(events), message)
            return False
        with self._cond:
            self.posts += 1
            self.forwarded += len(batch)
        return True

    def _post_within_timeout(self, events: list[dict[str, Any]]) -> None:
        """POST `events`, given up after `timeout` seconds in all (EmitError), not only without a
        byte for that long: a Prefect API answering a byte at a time would hold every turn end
        behind this POST. A POST given up has its client closed, which fails its next read."""
        if self._client is None:
            self._client = new_client(self.api_url, self.timeout)
        client = self._client
        outcome = bounded(lambda: self._post(events, self.api_url, timeout=self.timeout, client=client), self.timeout)
        if not outcome.done():
            self._client = None
            client.close()
            raise EmitError(f"no answer from the Prefect API at {shown_url(self.api_url)} within {self.timeout:g} s")
        outcome.result()  # its error raised
