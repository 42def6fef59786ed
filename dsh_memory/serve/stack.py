"""`dsh-memory serve`: the whole local stack in one command.

1. Prefect: attach to PREFECT_API_URL when set, otherwise start `prefect server start` (SQLite,
   127.0.0.1) as a child process and wait until healthy.
2. The loopback HTTP app (RPC, MCP at /mcp, turn-end receiver at /hooks/turn-end) in a thread;
   a non-loopback --host is refused before step 1 (`serve.guard.check_bind_host`).
3. Boot catch-up: a few seconds after start, one `catch-up` run (throttled).
4. Serve the prefect.yaml deployments (schedules + the debounced turn-end trigger) until
   Ctrl-C / SIGTERM; then stop everything this process started.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("dsh_memory.serve.stack")

BOOT_DELAY_SECONDS = 5.0
BOOT_THROTTLE_SECONDS = 60.0


def default_prefect_home() -> Path:
    return Path(os.environ.get("DSH_MEMORY_PREFECT_HOME") or Path.home() / ".dsh-memory" / "prefect").expanduser()


class Stack:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        prefect_port: int = 4200,
        prefect_home: Path | None = None,
        boot_catch_up: bool = True,
        echo=print,
    ):
        self.host, self.port, self.prefect_port = host, port, prefect_port
        self.prefect_home = prefect_home or default_prefect_home()
        self.boot_catch_up = boot_catch_up
        self.echo = echo
        self.server = None
        self.http = None
        self._http_thread: threading.Thread | None = None
        self.api_url = ""

    # -- 1. Prefect ------------------------------------------------------------------------
    def start_prefect(self) -> str:
        url = os.environ.get("PREFECT_API_URL", "")
        if url:
            self.echo(f"attaching to the Prefect server at {url}")
        else:
            from dsh_memory.serve.prefect_server import PrefectServer, free_port

            port = self.prefect_port if _port_free(self.prefect_port) else free_port()
            self.echo(f"starting a local Prefect server (home {self.prefect_home}, port {port}) …")
            self.server = PrefectServer(self.prefect_home, port=port, ui=True).start(timeout=240)
            url = self.server.api_url
            os.environ["PREFECT_API_URL"] = url  # flow-run subprocesses inherit it
            from prefect.context import refresh_global_settings_context

            refresh_global_settings_context()  # and every thread of this process sees it
        self.api_url = url
        self.echo(f"Prefect UI: {url.removesuffix('/api')}")
        return url

    # -- 2. HTTP app -----------------------------------------------------------------------
    def start_http(self, settings) -> None:
        import uvicorn

        from dsh_memory.serve.http_app import create_app

        self.check()
        app = create_app(settings)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning", lifespan="on")
        self.http = uvicorn.Server(config)
        self.http.install_signal_handlers = lambda: None  # the main thread owns signals
        self._http_thread = threading.Thread(target=self.http.run, name="dsh-memory-http", daemon=True)
        self._http_thread.start()
        for _ in range(200):
            if self.http.started:
                break
            time.sleep(0.05)
        self.echo(
            f"memory API: http://{self.host}:{self.port}/dsh-memory/rpc  MCP: http://{self.host}:{self.port}/mcp"
            f"  turn-end hook: http://{self.host}:{self.port}/hooks/turn-end"
        )

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
    def check(self) -> None:
        """Refuse a configuration that cannot work before anything starts (UserInputError)."""
        from dsh_memory.serve.guard import check_bind_host

        check_bind_host(
            self.host,
            remedy="`serve` binds loopback only; for remote clients run "
            "`dsh-memory http --allow-remote` behind an authenticating proxy",
        )

    def run(self) -> None:
        self.check()  # before anything starts (or is attached to)
        from dsh_memory.context import memory_context
        from dsh_memory.serve.deployments import runner_deployments

        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.start_prefect()
            ctx = memory_context()  # after attaching: a saved settings block applies
            settings = ctx.settings
            self.start_http(ctx)
            if self.boot_catch_up:
                self.schedule_boot_catch_up(settings)
            from prefect import serve

            deployments = runner_deployments(debounce_seconds=settings.debounce_seconds)
            self.echo(
                f"serving {len(deployments)} deployments: "
                + ", ".join(d.name for d in deployments)
                + f" (turn-end debounce {settings.debounce_seconds}s). Ctrl-C stops everything."
            )
            serve(*deployments, print_starting_message=False)
        except KeyboardInterrupt:
            self.echo("stopping …")
        finally:
            self.stop()
            signal.signal(signal.SIGTERM, previous)

    def stop(self) -> None:
        if self.http is not None:
            self.http.should_exit = True
            if self._http_thread:
                self._http_thread.join(timeout=10)
            self.http = None
        if self.server is not None:
            self.server.stop()
            self.server = None


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
