"""Process-wide cancellation for long in-process work (a local model decode can take minutes).

The CLI sets it on Ctrl-C / SIGTERM; worker threads check it between tokens, so the process
exits promptly instead of waiting for every decode in flight to finish.
"""

from __future__ import annotations

import threading

from dsh_memory.errors import LLMFatalError

CANCELLED = threading.Event()


def check() -> None:
    if CANCELLED.is_set():
        raise LLMFatalError("cancelled: the process is shutting down")
