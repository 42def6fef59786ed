"""`retry_condition_fn` of the model-calling tasks (their @task decorators hold the rest of the
policy). It decides, it never sleeps: a transient model error (429, 5xx, timeouts) is retried
after the task's next delay, unless the server asked for a longer wait (Retry-After) than that
delay can be after Prefect's jitter: then the session's claim fails and is retried after the
claims' backoff, Phase 1's one failure path. Fatal errors are never retried. `raised` (what a
failed state raised) also serves tasks/remote.py's condition (`sent_again`).
"""

from __future__ import annotations

from dsh_memory.errors import LLMTransientError

RETRY_JITTER_FACTOR = 0.5  # the model tasks' retry_jitter_factor


def _shortest_wait(task, task_run) -> float:
    """The shortest delay Prefect can wait before this retry: the task's delay for it (the
    engine's `retry_delay_seconds[min(retries, len - 1)]`) jittered down as far as it goes."""
    delays = task.retry_delay_seconds
    if isinstance(delays, list):
        delays = delays[min(max(0, task_run.run_count - 1), len(delays) - 1)] if delays else 0
    from prefect.utilities.math import lower_clamp_multiple

    factor, wait = task.retry_jitter_factor, float(delays or 0)
    return wait * lower_clamp_multiple(1 + factor) if factor else wait


def raised(state) -> Exception | None:
    """What a task run's failed `state` raised (its result re-raises it), or None."""
    try:
        state.result()
    except Exception as exc:
        return exc
    return None


def transient_only(task, task_run, state) -> bool:
    """Retry transient model errors whose Retry-After (if any) the next delay covers. Never sleeps."""
    exc = raised(state)
    if not isinstance(exc, LLMTransientError):
        return False
    return not exc.retry_after or float(exc.retry_after) <= _shortest_wait(task, task_run)
