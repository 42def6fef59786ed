"""`dsh-memory serve`: the whole local stack in one command (docs/running.md, "One process"), one
per Prefect home (serve/stack_state.py): Prefect (PREFECT_API_URL, else a child `prefect server
start`), the loopback HTTP app in a thread, a throttled boot catch-up, then the prefect.yaml
deployments until Ctrl-C / SIGTERM, at most `flow_run_limit` flow runs at once.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn

from dsh_memory.context import MemoryContext, memory_context
from dsh_memory.errors import DshMemoryError, ServiceUnavailableError
from dsh_memory.serve.bounded_http import server_config
from dsh_memory.serve.deployments import CATCH_UP, runner_deployments, ui_url
from dsh_memory.serve.guard import check_bind_host
from dsh_memory.serve.http_app import create_app
from dsh_memory.serve.stack_state import (
    StackLock,
    default_prefect_home,
    http_url,
    info_for_this_process,
    read_state,
    state_path,
)
from dsh_memory.settings_loader import resolve_settings
from dsh_memory.storage.state_schema import proc_stat

BOOT_DELAY_SECONDS = 1.0  # the catch-up retries while serve() is still registering the deployments
BOOT_THROTTLE_SECONDS = 60.0
RUNNER_POLL_SECONDS = 2.0  # one cheap API call per poll
HARD_STOP_SECONDS = 3.0  # serve stopping after its Prefect server died (its graceful stop cannot report)
PORT_WAIT_SECONDS = 10.0  # a port another process is about to release (a previous stack stopping)


def serve_stack(host: str, port: int, prefect_port: int, boot_catch_up: bool, echo: Callable[[str], None]) -> None:
    """Start the stack and serve the deployments until Ctrl-C / SIGTERM; what was started is
    stopped in reverse order (the HTTP app, then the Prefect server), then the lock is released."""
    check_bind_host(  # before anything starts (or is attached to): UserInputError
        host,
        remedy="`serve` binds loopback only; for remote clients run "
        "`dsh-memory http --allow-remote` behind an authenticating proxy",
    )
    # A bad environment value (DSH_MEMORY_CONCURRENCY=abc): ConfigError (exit 4) now, not after
    # the Prefect server started (~15 s) — even when a saved block would set that field.
    resolve_settings(use_blocks=False)
    prefect_home = default_prefect_home()
    lock = StackLock(prefect_home).acquire()  # a second serve: StackAlreadyRunning (exit 5)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with ExitStack() as started:
            try:
                wait_for_port(host, port, "the memory API", "--port")  # a busy port: nothing started yet
                api_url, server = _start_prefect(prefect_home, prefect_port, echo, started)
                ctx = memory_context(writes=True)  # after attaching: a saved settings block applies
                settings = ctx.settings
                _start_http(host, port, ctx, echo, started)
                lock.publish(info_for_this_process(prefect_home, api_url, server.port if server else None, host, port))
                echo(f"stack state: {state_path(prefect_home)} (status, notify and the CLI find it there)")
                if boot_catch_up:
                    _schedule_boot_catch_up(settings, echo)
                from prefect import serve

                deployments = runner_deployments(settings)
                echo(
                    f"serving {len(deployments)} deployments: "
                    + ", ".join(d.name for d in deployments)
                    + f" (turn-end debounce {settings.debounce_seconds}s, at most {settings.flow_run_limit} flow runs"
                    " at once). Ctrl-C stops everything."
                )
                # `limit`: at most this many flow-run processes (serve()'s default is unlimited);
                # `query_seconds`: Prefect's default (10 s) would add to every triggered run's latency.
                poll = None if os.environ.get("PREFECT_RUNNER_POLL_FREQUENCY") else RUNNER_POLL_SECONDS
                serve(*deployments, print_starting_message=False, limit=settings.flow_run_limit, query_seconds=poll)
            except KeyboardInterrupt:
                echo("stopping …")
            except Exception:
                if not SERVER_DIED:
                    raise
            if reason := SERVER_DIED.pop("reason", None):  # everything it started stops first
                raise ServiceUnavailableError(reason)
    finally:
        lock.release()  # removes the state file
        signal.signal(signal.SIGTERM, previous)


def _start_prefect(home: Path, port: int, echo: Callable[[str], None], started: ExitStack) -> tuple[str, Any]:
    """The Prefect API the stack uses: PREFECT_API_URL's, else a local server started on `port`
    (returned too, stopped when `started` closes)."""
    url = os.environ.get("PREFECT_API_URL", "")
    server = None
    if url:
        echo(f"attaching to the Prefect server at {url}")
    else:
        from dsh_memory.serve.prefect_server import PrefectServer

        # fixed: a UI that moves is a UI nobody finds
        wait_for_port("127.0.0.1", port, "the Prefect server", "--prefect-port")
        echo(f"starting a local Prefect server (home {home}, port {port}) …")
        server = PrefectServer(home, port=port, ui=True).start(timeout=240)
        started.callback(server.stop)
        started.callback(_stop_when_gone(server).set)  # runs first: a stop is no death
        url = server.api_url
        os.environ["PREFECT_API_URL"] = url  # flow-run subprocesses inherit it
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()  # and every thread of this process sees it
    echo(f"Prefect UI: {url.removesuffix('/api')}")
    return url, server


SERVER_DIED: dict[str, str] = {}  # why the watcher stopped serve (read once it has stopped)


def _stop_when_gone(server) -> threading.Event:
    """Stop `serve` (SIGTERM to itself) when the Prefect server it started exits on its own: the
    stack would otherwise look alive while nothing runs its flows. The event is set on a stop."""
    stopping = threading.Event()

    def watch() -> None:
        while server.proc.poll() is None:
            if stopping.wait(0.25):
                return
        if not stopping.is_set():
            reason = SERVER_DIED["reason"] = (  # the main thread pops it when its stop is graceful
                f"the Prefect server serve started exited (code {server.proc.returncode}; log "
                f"{server.home / 'server.log'}): the stack stopped; start it again with `dsh-memory serve`"
            )
            os.kill(os.getpid(), signal.SIGTERM)
            # The runner's graceful stop retries the dead API (a minute and more after flow runs):
            # past this, exit without it (the kernel frees the lock; the state file's pid is gone).
            time.sleep(HARD_STOP_SECONDS)
            if (info := read_state(server.home)) is not None and info.pid == os.getpid():
                state_path(server.home).unlink(missing_ok=True)
            for pid in _children():  # the runner's flow-run processes: nothing to report to
                with suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
            sys.stderr.write(f"error: {reason}\n")
            os._exit(ServiceUnavailableError.exit_code)

    threading.Thread(target=watch, name="dsh-memory-prefect-watch", daemon=True).start()
    return stopping


def _children() -> list[int]:
    """This process's child processes (Linux /proc; none elsewhere)."""
    me = str(os.getpid())
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if proc_stat(int(p.name))[1:2] == [me]]


def _start_http(host: str, port: int, ctx, echo: Callable[[str], None], started: ExitStack) -> None:
    """The loopback HTTP app in a thread; stopped when `started` closes (its shutdown forwards
    the pending turn ends first, ≤ 10 s)."""
    http = uvicorn.Server(server_config(create_app(ctx), host, port, lifespan="on"))
    http.install_signal_handlers = lambda: None  # the main thread owns signals
    thread = threading.Thread(target=http.run, name="dsh-memory-http", daemon=True)
    thread.start()

    def stop() -> None:
        http.should_exit = True
        thread.join(timeout=20)

    started.callback(stop)
    for _ in range(200):
        if http.started or not thread.is_alive():
            break
        time.sleep(0.05)
    if not http.started:
        raise DshMemoryError(f"the memory API could not start on {host}:{port} (see the lines above)")
    base = http_url(host, port)
    echo(f"memory API: {base}/dsh-memory/rpc  MCP: {base}/mcp  turn-end hook: {base}/hooks/turn-end")
    echo(f"memory vault: {base}/")


def _schedule_boot_catch_up(settings, echo: Callable[[str], None]) -> None:
    """Schedule the catch-up deployment BOOT_DELAY_SECONDS from now, unless Phase 1 ran less than
    BOOT_THROTTLE_SECONDS ago."""
    threading.Timer(BOOT_DELAY_SECONDS, _boot_catch_up, (settings, echo)).start()


def _boot_catch_up(settings, echo: Callable[[str], None]) -> None:
    """The boot catch-up itself (a timer's thread): one line when the state database cannot be
    read, not a thread's traceback (the stack keeps serving; each run says why it fails)."""
    try:
        with MemoryContext.of(settings) as ctx:
            meta = ctx.state.get_meta()
    except DshMemoryError as exc:
        echo(f"boot catch-up not scheduled: {exc}")
        return
    last = meta.last_phase1_at
    if last and (datetime.now(UTC) - last).total_seconds() < BOOT_THROTTLE_SECONDS:
        echo("boot catch-up skipped: Phase 1 ran less than a minute ago")
        return
    from prefect.deployments import run_deployment

    for _ in range(30):  # serve() registers the deployments shortly after start
        try:
            run = run_deployment(CATCH_UP, timeout=0)  # named catch-up/<start> once it starts
            echo(f"boot catch-up scheduled: {ui_url(os.environ.get('PREFECT_API_URL'))}/runs/flow-run/{run.id}")
            return
        except Exception:
            time.sleep(1)
    echo("boot catch-up could not be scheduled (deployment not registered)")


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now. Probed the way uvicorn binds (with
    SO_REUSEADDR), so a port whose last connections linger in TIME_WAIT counts as free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def wait_for_port(host: str, port: int, what: str, option: str, seconds: float = PORT_WAIT_SECONDS) -> None:
    """Return when host:port is free; retried for `seconds` (a stack that is stopping), then a
    clear error: the port is fixed, it never moves to a random one."""
    deadline = time.monotonic() + seconds
    while not port_free(host, port):
        if time.monotonic() >= deadline:
            raise DshMemoryError(
                f"port {port} on {host} ({what}) is in use by another process: stop it, or choose another "
                f"port with {option}"
            )
        time.sleep(0.5)
