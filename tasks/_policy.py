"""Retry policy of the model-calling tasks, used in their @task decorators.

`retry_condition_fn=transient_only`: retry transient model errors only (429, 5xx, timeouts,
dropped connections); it decides, it never sleeps. A server-given Retry-After is noted for the
delay below.

`retry_delay_seconds=RetryDelays(…)`: the delay before retry n. Prefect 3.9 accepts a number, a
list or a callable there, but a callable is evaluated once, at decoration time, with the number
of retries (`Task.__init__`), so it can see neither the settings nor the error. The engine reads
the list when a retry is due (`task_engine.SyncTaskRunEngine.handle_retry`:
`retry_delay_seconds[min(retries, len - 1)]`, then jitter, then an `AwaitingRetry` state
scheduled that far ahead, which `wait_until_ready` waits for). `RetryDelays` is that list: item n
is the scheduled backoff (optionally scaled by a base taken from the task run's parameters, i.e.
`settings.llm_retry_delay_seconds`), never shorter than the Retry-After the server gave for this
run. So the engine does the waiting, the wait is visible as `AwaitingRetry` in the run history,
and tests/test_retry_policy.py pins this contract of Prefect's engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from dsh_memory.errors import LLMTransientError

MAX_RETRY_AFTER_SECONDS = 120.0
RETRY_JITTER_FACTOR = 0.5  # the model tasks' retry_jitter_factor

_retry_after: dict[str, float] = {}  # task run id → seconds the server asked for, until the engine reads it
_lock = threading.Lock()


def transient_only(task, task_run, state) -> bool:
    """Retry only transient model errors; note a Retry-After for `RetryDelays`. Never sleeps."""
    try:
        state.result()
    except LLMTransientError as exc:
        if exc.retry_after:
            with _lock:
                _retry_after[str(task_run.id)] = min(float(exc.retry_after), MAX_RETRY_AFTER_SECONDS)
        return True
    except Exception:
        return False
    return False


def _current_run() -> tuple[str | None, dict[str, Any], float]:
    """(task run id, its parameters, its task's retry_jitter_factor) when inside a task run."""
    from prefect.context import TaskRunContext

    ctx = TaskRunContext.get()
    if ctx is None or ctx.task_run is None:
        return None, {}, 0.0
    return str(ctx.task_run.id), ctx.parameters or {}, float(ctx.task.retry_jitter_factor or 0.0)


def _jitter_low_end(jitter_factor: float) -> float:
    """The smallest multiple of a delay Prefect's jitter (clamped_poisson_interval) can produce."""
    if not jitter_factor:
        return 1.0
    from prefect.utilities.math import lower_clamp_multiple

    return lower_clamp_multiple(1 + jitter_factor)


class RetryDelays(list):
    """`retry_delay_seconds` that honours the server's Retry-After (see the module docstring).

    `delays`: the backoff per retry, in seconds (or in units of `base(parameters)` when given).
    """

    def __init__(self, delays: Iterable[float], *, base: Callable[[dict[str, Any]], float] | None = None):
        super().__init__(float(d) for d in delays)
        self.base = base

    def __getitem__(self, index):  # type: ignore[override]
        scheduled = super().__getitem__(index)
        if isinstance(index, slice):
            return scheduled
        run_id, parameters, jitter_factor = _current_run()
        if self.base is not None and parameters:
            scheduled *= float(self.base(parameters))
        with _lock:
            retry_after = _retry_after.pop(run_id, 0.0) if run_id else 0.0
        # The engine jitters the delay downwards by up to 1 - low end: keep Retry-After above that.
        floor = retry_after / _jitter_low_end(jitter_factor) if retry_after else 0.0
        return max(scheduled, floor)
