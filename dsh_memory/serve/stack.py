"""`dsh-memory serve`: the whole local stack in one command (docs/running.md, "One process"), one
per Prefect home (serve/stack_state.py): Prefect (PREFECT_API_URL, else a child `prefect server
start`), the loopback HTTP app in a thread, a throttled boot catch-up, then the prefect.yaml
deployments until Ctrl-C / SIGTERM, at most `flow_run_limit` flow runs at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime

from dsh_memory.errors import DshMemoryError
from dsh_memory.serve.stack_state import StackLock, default_prefect_home, info_for_this_process, state_path

log = logging.getLogger("dsh_memory.serve.stack")

BOOT_DELAY_SECONDS = 5.0
BOOT_THROTTLE_SECONDS = 60.0
RUNNER_POLL_SECONDS = 2.0  # one cheap API call per poll
PORT_WAIT_SECONDS = 10.0  # a port another process is about to release (a previous stack stopping)


class Stack:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        prefect_port: int = 4200,
        boot_catch_up: bool = True,
        echo=print,
    ):
        self.host, self.port, self.prefect_port = host, port, prefect_port
        self.prefect_home = default_prefect_home()
        self.boot_catch_up = boot_catch_up
        self.echo = echo
        self.server = None
        self.http = None
        self._http_thread: threading.Thread | None = None
        self.api_url = ""

    # -- 1. Prefect ------------------------------------------------------------------------
    def start_prefect(self) -> None:
        url = os.environ.get("PREFECT_API_URL", "")
        if url:
            self.echo(f"attaching to the Prefect server at {url}")
        else:
            from dsh_memory.serve.prefect_server import PrefectServer

            port = self.prefect_port  # fixed: a UI that moves is a UI nobody finds
            wait_for_port("127.0.0.1", port, "the Prefect server", "--prefect-port")
            self.echo(f"starting a local Prefect server (home {self.prefect_home}, port {port}) …")
            self.server = PrefectServer(self.prefect_home, port=port, ui=True).start(timeout=240)
            url = self.server.api_url
            os.environ["PREFECT_API_URL"] = url  # flow-run subprocesses inherit it
            from prefect.context import refresh_global_settings_context

            refresh_global_settings_context()  # and every thread of this process sees it
        self.api_url = url
        self.echo(f"Prefect UI: {url.removesuffix('/api')}")

    # -- 2. HTTP app -----------------------------------------------------------------------
    def start_http(self, settings) -> None:
        import uvicorn

        from dsh_memory.serve.http_app import create_app

        wait_for_port(self.host, self.port, "the memory API", "--port")
        app = create_app(settings)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning", lifespan="on")
        self.http = uvicorn.Server(config)
        self.http.install_signal_handlers = lambda: None  # the main thread owns signals
        self._http_thread = threading.Thread(target=self.http.run, name="dsh-memory-http", daemon=True)
        self._http_thread.start()
        for _ in range(200):
            if self.http.started or not self._http_thread.is_alive():
                break
            time.sleep(0.05)
        if not self.http.started:
            raise DshMemoryError(f"the memory API could not start on {self.host}:{self.port} (see the lines above)")
        self.echo(
            f"memory API: http://{self.host}:{self.port}/dsh-memory/rpc  MCP: http://{self.host}:{self.port}/mcp"
            f"  turn-end hook: http://{self.host}:{self.port}/hooks/turn-end"
        )
        self.echo(f"memory vault: http://{self.host}:{self.port}/")

    # -- 3. boot catch-up ------------------------------------------------------------------
    def schedule_boot_catch_up(self, settings) -> None:
        def fire() -> None:
            from dsh_memory.context import MemoryContext
            from dsh_memory.serve.deployments import CATCH_UP

            with MemoryContext.of(settings) as ctx:
                meta = ctx.state.get_meta()
            last = meta.last_phase1_at
            if last and (datetime.now(UTC) - last).total_seconds() < BOOT_THROTTLE_SECONDS:
                self.echo("boot catch-up skipped: Phase 1 ran less than a minute ago")
                return
            from prefect.deployments import run_deployment

            for _ in range(30):  # serve() registers the deployments shortly after start
                try:
                    run = run_deployment(CATCH_UP, timeout=0)
                    self.echo(f"boot catch-up scheduled: flow run {run.name}")
                    return
                except Exception:
                    time.sleep(1)
            self.echo("boot catch-up could not be scheduled (deployment not registered)")

        threading.Timer(BOOT_DELAY_SECONDS, fire).start()

    # -- 4. serve ------------------------------------------------------------------------
    def run(self) -> None:
        from dsh_memory.serve.guard import check_bind_host

        check_bind_host(  # before anything starts (or is attached to): UserInputError
            self.host,
            remedy="`serve` binds loopback only; for remote clients run "
            "`dsh-memory http --allow-remote` behind an authenticating proxy",
        )
        lock = StackLock(self.prefect_home).acquire()  # a second serve: StackAlreadyRunning (exit 5)
        from dsh_memory.context import memory_context
        from dsh_memory.serve.deployments import runner_deployments

        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.start_prefect()
            ctx = memory_context()  # after attaching: a saved settings block applies
            settings = ctx.settings
            self.start_http(ctx)
            lock.publish(
                info_for_this_process(
                    self.prefect_home, self.api_url, self.server.port if self.server else None, self.host, self.port
                )
            )
            self.echo(f"stack state: {state_path(self.prefect_home)} (status, notify and the CLI find it there)")
            if self.boot_catch_up:
                self.schedule_boot_catch_up(settings)
            from prefect import serve

            deployments = runner_deployments(settings)
            self.echo(
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
            self.echo("stopping …")
        finally:
            self.stop()
            lock.release()  # removes the state file
            signal.signal(signal.SIGTERM, previous)

    def stop(self) -> None:
        if self.http is not None:
            self.http.should_exit = True  # its shutdown forwards the pending turn ends first (≤ 10 s)
            if self._http_thread:
                self._http_thread.join(timeout=20)
            self.http = None
        if self.server is not None:
            self.server.stop()
            self.server = None


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now. Probed the way uvicorn binds (with
    SO_REUSEADDR), so a port whose last connections linger in TIME_WAIT counts as free."""
    import socket

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
