"""Shared CLI plumbing: error → exit-code mapping in one place (`run`), JSON output, and text
output that shows what came from outside (session logs, file names, model output) with its
control characters made visible (`shown`, `say`): such text never drives the terminal."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, NoReturn

import typer

from dsh_memory import cancel
from dsh_memory.errors import DshMemoryError, ServiceUnavailableError
from dsh_memory.readpath._common import BEYOND_C0, visible

# What JSON leaves raw (it escapes C0 only) that a terminal would obey: C1 controls (U+009B is
# CSI), bidi overrides; and lone surrogates, which a UTF-8 stdout cannot encode. They can only
# stand inside a JSON string, so a \u escape is the same value.
_RAW_IN_JSON = re.compile(f"[{BEYOND_C0}]")


def emit_json(data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write(_RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")


def shown(data: Any) -> Any:
    """`data` for a text printer: every string in it (dict keys, list items…) `visible`, so an
    escape sequence or a bidi override from a session log is printed as `\\x1b`, `\\u202e`, never
    sent to the terminal (whatever the printer cuts or pads, before rich lays out a table).
    --json prints the data itself, exact (`emit_json` escapes them)."""
    if isinstance(data, str):
        return visible(data)
    if isinstance(data, dict):
        return {shown(k): shown(v) for k, v in data.items()}
    if type(data) in (list, tuple):
        return type(data)(map(shown, data))
    return data


def say(message: Any, err: bool = False, nl: bool = True) -> None:
    """`typer.echo` for a line that may hold text from outside (`shown`)."""
    typer.echo(visible(str(message)), err=err, nl=nl)


def shown_record(record: logging.LogRecord) -> bool:
    """Filter of a log handler that writes to the terminal: the message `visible` (a warning
    names a session log's path, a model's error…)."""
    with suppress(Exception):  # a record whose arguments do not fit: logging reports it itself
        record.msg, record.args = visible(record.getMessage()), None
    return True


def _interrupt(signum, frame):
    cancel.CANCELLED.set()  # first: worker threads stop model calls in flight
    raise KeyboardInterrupt


INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C
READER_GONE_EXIT = 141  # 128 + SIGPIPE, what shells report for `git log | head`


def reader_gone() -> NoReturn:
    """The reader of our output went away (`dsh-memory search x | head`): stop quietly, as `cat`
    does. stdout and stderr now lead to /dev/null, so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a stream without a file descriptor (captured output)
            os.dup2(devnull, stream.fileno())
    raise typer.Exit(READER_GONE_EXIT)


def is_terminal(stream: Any) -> bool:
    """`stream` is a terminal; a closed one (`>&-`, `2>&-`: Python's None) is not."""
    return stream is not None and stream.isatty()


class _VisibleText:
    """A text stream writing what it is given `visible` to `stream`, which it reports as no
    terminal: a writer deciding on colours then sends none (they would show as `\\x1b[…`)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible(text))
        return len(text)

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding…
        return getattr(self._stream, name)


def visible_console() -> None:
    """From now on, everything this process writes to stdout and stderr is `visible`: for the
    servers (`serve`, `http`), whose console shows more than their own lines — log records and
    warnings, which quote outside text (a Prefect API's answer, an error's message). Called before
    Prefect and the MCP SDK set up their logging, so their handlers write here too (plain text,
    without colours)."""
    if sys.stdout is not None and not isinstance(sys.stdout, _VisibleText):
        sys.stdout = _VisibleText(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, _VisibleText):
        sys.stderr = _VisibleText(sys.stderr)


def plain_console(fit: bool = False):
    """A rich console for command output: what it prints is never read as markup nor emoji codes
    (paths, errors and model text may hold `[...]`, `:x:`; style goes through `Text`); a reader
    that went away is a quiet exit 141 (rich's own: exit 1); piped (no terminal, no COLUMNS) a
    line is not wrapped nor a table squeezed into 80 columns ("2026-12-04T17:28:2…") unless `fit`
    asks for the terminal's width (80 when piped)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            reader_gone()

    piped = not fit and not is_terminal(sys.stdout) and not os.environ.get("COLUMNS")
    return _Console(markup=False, emoji=False, highlight=False, soft_wrap=not fit, width=1000 if piped else None)


def fail(exc: DshMemoryError, as_json: bool = False) -> NoReturn:
    """Report `exc` and exit with its code: one `error: …` line on stderr, or with --json
    `{"error": {"code", "message"}}` on stdout and nothing else. Exit codes never depend on --json."""
    message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())  # one line
    if as_json:
        emit_json({"error": {"code": exc.code, "message": message}})
    else:
        say(f"error: {message}", err=True)
    raise typer.Exit(exc.exit_code)


def run(fn: Callable[[], Any], as_json: bool = False) -> Any:
    """Call `fn`; THE place where failures become exit codes (docs/cli.md: "Exit codes"). Our
    errors, an unreachable Prefect API and file-system errors print one line (`fail`); anything
    else is a bug and keeps its traceback. Ctrl-C / SIGTERM cancel in-process work and exit 130."""
    previous = {}
    if threading.current_thread() is threading.main_thread():  # only it may set signal handlers
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, _interrupt)
    try:
        return fn()
    except DshMemoryError as exc:
        fail(exc, as_json)
    except KeyboardInterrupt:
        interrupted(as_json)
    except BrokenPipeError:
        raise  # not a failure: the reader of our output went away (`reader_gone`, via the app)
    except Exception as exc:
        # Ctrl-C landed in clean-up code that then failed itself: e.g. inside a lock's `with` block
        # of Python's threading code, whose exit then fails ("release unlocked lock").
        if any(isinstance(cur, KeyboardInterrupt) for cur in _chain(exc)):
            interrupted(as_json)
        known = prefect_unavailable(exc)
        if known is None and isinstance(exc, OSError) and exc.strerror:  # a failure of the environment
            known = DshMemoryError(exc.strerror + (f": {exc.filename}" if exc.filename else ""))
        if known is None:
            raise
        fail(known, as_json)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupted(as_json: bool) -> NoReturn:
    """Ctrl-C / SIGTERM: cancel in-process work, say so (as JSON with --json), exit 130."""
    cancel.CANCELLED.set()
    if as_json:
        emit_json({"error": {"code": "interrupted", "message": "interrupted"}})
    else:
        typer.echo("interrupted", err=True)
    raise typer.Exit(INTERRUPTED_EXIT) from None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling, each once."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def show(
    fn: Callable[[], Any],
    as_json: bool,
    text: Callable[[Any], None],
    failure: Callable[[Any], DshMemoryError | None] = lambda data: None,
) -> None:
    """`run(fn)`, then print its result: as JSON with --json, else with `text` (given it `shown`). When
    `failure(result)` is an error, exit with it (`fail`) after the text; with --json the error
    alone is printed."""
    data = run(fn, as_json)
    if not as_json:
        text(shown(data))
    if (exc := failure(data)) is not None:
        fail(exc, as_json)
    if as_json:
        emit_json(data)


def prefect_unavailable(exc: BaseException) -> ServiceUnavailableError | None:
    """A ServiceUnavailableError when `exc` (or its cause) says the configured Prefect API
    does not answer: Prefect's "Failed to reach API" or a connection failure to that URL."""
    from dsh_memory.settings_loader import prefect_api_url, shown_url

    url = prefect_api_url(profile=True)  # without a trailing slash
    if not url:
        return None
    for cur in _chain(exc):
        reason = _unreachable_reason(cur, url)
        if reason:
            return ServiceUnavailableError(
                f"the Prefect API at {shown_url(url)} does not answer ({reason}): start it "
                "(`prefect server start`, or `dsh-memory serve`), or unset PREFECT_API_URL to run "
                "on a temporary in-process Prefect engine"
            )
    return None


def _unreachable_reason(exc: BaseException, url: str) -> str | None:
    if isinstance(exc, RuntimeError) and str(exc).startswith("Failed to reach API at"):
        return "connection failed"
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        try:
            target = str(exc.request.url)
        except RuntimeError:  # no request attached
            return None
        if target.startswith(url):
            return type(exc).__name__
    return None


def prefect_env_defaults() -> None:
    """Prefect's environment for this command, set before prefect's settings are first read
    (importing prefect reads them): no prefect import, nothing started."""
    # The first ephemeral start migrates a fresh database (~30 s here): allow for it.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Said once, in one line, by prefect_env when the temporary server needs that home.
    warnings.filterwarnings("ignore", message="Failed to create the Prefect home directory")


def prefect_env() -> None:
    """Environment for running flows in-process, right before the first flow runs: without a
    Prefect API, the temporary in-process server is tethered to this process."""
    prefect_env_defaults()
    if not os.environ.get("PREFECT_API_URL"):  # a temporary server: it must die with this process
        _writable_prefect_home()
        from dsh_memory.serve.prefect_server import tether_ephemeral_server

        tether_ephemeral_server()


def _writable_prefect_home() -> None:
    """The temporary server keeps its database in Prefect's home: when that cannot be made (HOME
    points nowhere, a read-only disk) it never starts, and Prefect waits its whole startup timeout
    before a traceback. Say so at once, in one line (exit 6)."""
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home).expanduser()
    try:
        home.mkdir(exist_ok=True)  # as Prefect does: a parent that does not exist is a wrong HOME
        if not os.access(home, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as exc:
        raise ServiceUnavailableError(
            f"Prefect cannot keep its temporary server's database in {home} "
            f"({exc.strerror or exc}): set PREFECT_HOME (or HOME) to a writable directory, or "
            "PREFECT_API_URL to a running Prefect server"
        ) from None


def read_bounded(
    fd: int, limit: int, timeout: float, done: Callable[[bytes], bool] | None = None
) -> tuple[bytes, bool]:
    """Up to `limit` bytes of `fd` (a hook's stdin): until its end, until `done(what came)`, or what
    came by `timeout`, and whether the timeout ended it (a writer that leaves its pipe open)."""
    deadline, raw = time.monotonic() + timeout, b""
    while len(raw) < limit:
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return raw, True
        chunk = os.read(fd, limit - len(raw))
        if not chunk:
            break
        raw += chunk
        if done is not None and done(raw):
            break
    return raw, False
