"""Retry policy shared by the model-calling tasks (used in their @task decorators)."""

from __future__ import annotations

import time

from dsh_memory.errors import LLMTransientError

MAX_RETRY_AFTER_SECONDS = 120.0


def transient_only(task, task_run, state) -> bool:
    """Retry only transient model errors; honour a longer Retry-After before the next try."""
    try:
        state.result()
    except LLMTransientError as exc:
        if exc.retry_after:
            time.sleep(min(float(exc.retry_after), MAX_RETRY_AFTER_SECONDS))
        return True
    except Exception:
        return False
    return False
