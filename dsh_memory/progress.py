"""In-process progress listeners (the CLI draws a progress bar from these; flows report).

`report(phase, n, total, label)` says n more items of `total` are finished.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Listener = Callable[[str, int, int, str], None]  # (phase, advanced_by, total, label)

_lock = threading.Lock()
_listeners: list[Listener] = []


def add_listener(fn: Listener) -> None:
    with _lock:
        _listeners.append(fn)


def remove_listener(fn: Listener) -> None:
    with _lock:
        if fn in _listeners:
            _listeners.remove(fn)


def report(phase: str, done: int, total: int, label: str = "") -> None:
    with _lock:
        listeners = list(_listeners)
    for fn in listeners:
        try:
            fn(phase, done, total, label)
        except Exception:  # a broken progress bar must never break the pipeline
            pass
