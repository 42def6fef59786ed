"""Pipeline progress on stderr for `extract`, `run`, `demo` and `consolidate`: a live bar on a
terminal, else one "dsh-memory: " line per phase start and end and per finished session. Tasks
call `dsh_memory.progress.report`; the phases' start and end come from the flows' state hooks.
`import` counts its pieces the same way (`with_count`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from contextlib import nullcontext

from dsh_memory import progress
from dsh_memory.cli._common import is_terminal, shown_record
from dsh_memory.readpath._common import visible

PHASE_NAMES = {"phase1": "phase 1", "phase2": "phase 2"}
LINE_PREFIX = "dsh-memory: "
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
IMPORT_EVERY = 100  # off a terminal, `with_count` says how far it got once per this many items


def _run_logs_stay_in_the_run_log(record) -> bool:
    """Console filter for in-process runs: flow/task run records (Prefect's engine messages and
    our tasks' own lines, tracebacks included) are in the run's log in Prefect; the console shows
    the CLI's own lines instead (progress, one line per failed session, the summary). Any other
    warning still reaches the console, on one line, without its traceback, `visible`."""
    if record.name.startswith(RUN_LOGGERS) and record.levelno < 50:  # CRITICAL still shows
        return False
    if record.exc_info or record.exc_text:  # only the console sees these records
        record.exc_info = record.exc_text = record.stack_info = None
    return shown_record(record)


def quiet_console() -> None:
    """Install the filter on Prefect's console handler (idempotent; after Prefect set up logging)."""
    for handler in logging.getLogger().handlers:
        if type(handler).__name__ == "PrefectConsoleHandler":
            handler.addFilter(_run_logs_stay_in_the_run_log)  # once: addFilter skips a filter it holds


def with_progress(fn, label: str):
    """Run `fn` while showing pipeline progress on stderr (lines off a terminal: logs, CI, pipes)."""
    from dsh_memory.flows.consolidate import consolidate_flow  # Prefect's logging is set up from here on
    from dsh_memory.flows.extract import extract_flow

    progress.watch_flow(extract_flow, "phase1")  # phase start/end events from the flows' state hooks
    progress.watch_flow(consolidate_flow, "phase2")
    quiet_console()
    if is_terminal(sys.stderr):
        return _with_bar(fn, label)
    return _with_lines(fn)


def _with_lines(fn):
    lock = threading.Lock()
    done: dict[str, int] = {}

    def say(line: str) -> None:
        with lock:
            sys.stderr.write(LINE_PREFIX + visible(line) + "\n")
            sys.stderr.flush()

    def on_phase(phase: str, event: str, detail: str) -> None:
        if event == progress.STARTED:
            done[phase] = 0
        say(f"{PHASE_NAMES.get(phase, phase)} {event}" + (f" ({detail})" if detail else ""))

    def on_item(phase: str, n: int, total: int, name: str) -> None:
        with lock:
            done[phase] = done.get(phase, 0) + n
            count = done[phase]
        of = f"/{total}" if total else ""
        say(f"{PHASE_NAMES.get(phase, phase)}: session {name} finished ({count}{of})")

    if not os.environ.get("PREFECT_API_URL"):  # the first wait, silent otherwise (~15 s on a fresh home)
        say("starting a temporary Prefect server …")
    with progress.listening(on_item, on_phase):
        return fn()


def _with_bar(fn, label: str):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label),
        TextColumn("{task.fields[phase]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}", markup=False),  # a session id: never markup
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        current = [bar.add_task("", total=None, phase="")]  # one row: the running phase

        def on_phase(phase: str, event: str, detail: str) -> None:
            if event == progress.STARTED:  # a fresh row: phase 2 has no per-session count
                bar.remove_task(current[0])
                current[0] = bar.add_task("", total=None, phase=PHASE_NAMES.get(phase, phase))

        def on_item(phase: str, n: int, total: int, name: str) -> None:
            bar.update(current[0], advance=n, total=total or None, description=visible(name[:12]))

        with progress.listening(on_item, on_phase):
            return fn()


def with_count(fn, phase: str, noun: str, every: int = IMPORT_EVERY, of_total: bool = False):
    """Run `fn`, counting `phase`'s reports on stderr: a live count on a terminal, else one line
    every `every` items and one at the end (none for fewer: a short run stays quiet). `of_total`:
    a bar of done/total, else a line per report ("replay: 3/9 sessions")."""
    count = [0]
    bar = None
    if is_terminal(sys.stderr):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        shown = (BarColumn(), MofNCompleteColumn()) if of_total else (TextColumn("{task.completed:,} " + noun),)
        bar = Progress(TextColumn(phase), *shown, TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        task = bar.add_task("", total=None)

    def on_item(reported: str, n: int, total: int, label: str) -> None:
        if reported != phase:
            return
        count[0] += n
        if bar is not None:
            bar.update(task, advance=n, total=(total or None) if of_total else None)
        elif of_total or count[0] % every == 0:
            sys.stderr.write(
                f"{LINE_PREFIX}{phase}: " + (f"{count[0]}/{total}" if of_total else f"{count[0]:,}") + f" {noun}\n"
            )
            sys.stderr.flush()

    with progress.listening(on_item, lambda *_: None), bar or nullcontext():
        result = fn()
    if bar is None and not of_total and count[0] >= every:
        sys.stderr.write(f"{LINE_PREFIX}{phase}: {count[0]:,} {noun}, done\n")
    return result
