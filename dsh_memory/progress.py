"""In-process progress: the pipeline reports, the CLI listens (a live bar on a terminal, plain
lines otherwise). Nothing here imports prefect. Tasks call `report(phase, n, total, label)` as
items finish (Phase 1: once per session); `phase_event(phase, "started" | "finished", detail)`
comes from the flows' state hooks (`watch_flow`). Phases: "phase1" (`extract`), "phase2" (`consolidate`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

Listener = Callable[[str, int, int, str], None]  # (phase, advanced_by, total, label)
PhaseListener = Callable[[str, str, str], None]  # (phase, "started" | "finished", detail)

STARTED, FINISHED = "started", "finished"

_lock = threading.Lock()
_listeners: list[Listener] = []
_phase_listeners: list[PhaseListener] = []
_watched: dict[str, str] = {}  # flow name → phase id


@contextmanager
def listening(on_item: Listener, on_phase: PhaseListener) -> Iterator[None]:
    """`on_item` hears every `report`, `on_phase` every `phase_event`, within the block."""
    with _lock:
        _listeners.append(on_item)
        _phase_listeners.append(on_phase)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(on_item)
            _phase_listeners.remove(on_phase)


def _tell(listeners: list, *args: Any) -> None:
    with _lock:
        listeners = list(listeners)
    for fn in listeners:
        with suppress(Exception):  # a broken progress bar must never break the pipeline
            fn(*args)


def report(phase: str, done: int, total: int, label: str = "") -> None:
    _tell(_listeners, phase, done, total, label)


def phase_event(phase: str, event: str, detail: str = "") -> None:
    _tell(_phase_listeners, phase, event, detail)


def _flow_started(flow: Any, flow_run: Any, state: Any) -> None:
    phase_event(_watched.get(flow.name, flow.name), STARTED, flow.name)


def _flow_finished(flow: Any, flow_run: Any, state: Any) -> None:
    phase_event(_watched.get(flow.name, flow.name), FINISHED, getattr(state, "name", "") or "")


def watch_flow(flow: Any, phase: str) -> None:
    """Report `phase` started / finished whenever `flow` (a Prefect Flow) runs in this process,
    as a flow or a subflow: its state hooks call `phase_event`. Idempotent."""
    with _lock:
        _watched[flow.name] = phase
        if _flow_started in flow.on_running_hooks:
            return
        flow.on_running_hooks.append(_flow_started)
        for hooks in (
            flow.on_completion_hooks,
            flow.on_failure_hooks,
            flow.on_crashed_hooks,
            flow.on_cancellation_hooks,
        ):
            hooks.append(_flow_finished)
