"""`http` (loopback RPC + MCP over streamable HTTP) and `mcp` (MCP over stdio)."""

from __future__ import annotations

import sys

import typer

from dsh_memory.cli._common import run, visible_console
from dsh_memory.errors import DshMemoryError, UserInputError


def register(app: typer.Typer) -> None:
    @app.command("http", rich_help_panel="Serve memory")
    def http_cmd(
        host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback by default)"),
        port: int = typer.Option(8765, "--port", min=1, max=65535),
        allow_remote: bool = typer.Option(
            False, "--allow-remote", help="Allow a non-loopback --host (no auth: put a proxy in front)"
        ),
        no_mcp: bool = typer.Option(False, "--no-mcp", help="Do not serve MCP at /mcp"),
    ) -> None:
        """Serve the memory vault at /, POST /dsh-memory/rpc, POST /hooks/turn-end (what `notify`
        delivers; forwarded to PREFECT_API_URL), GET /healthz and MCP at /mcp."""

        visible_console()  # its log records quote outside text (a Prefect API's answer)

        def go():
            import uvicorn

            from dsh_memory.serve.bounded_http import server_config
            from dsh_memory.serve.guard import check_bind_host, is_loopback_address
            from dsh_memory.serve.http_app import create_app
            from dsh_memory.serve.stack import wait_for_port
            from dsh_memory.serve.stack_state import http_url

            check_bind_host(host, allow_remote)
            wait_for_port(host, port, "the memory API", "--port", seconds=0)  # busy: one line, exit 1
            extra = () if is_loopback_address(host) else (host,)
            app = create_app(mcp=not no_mcp, allowed_hosts=extra)
            base = http_url(host, port)
            typer.echo(
                f"dsh-memory: {base}/dsh-memory/rpc"
                + ("" if no_mcp else "  (MCP at /mcp)")
                + f"  turn-end hook: {base}/hooks/turn-end"
                + f"  vault: {base}/",
                err=True,
            )
            server = uvicorn.Server(server_config(app, host, port))
            server.run()
            if not server.started:
                raise DshMemoryError(f"the memory API could not start on {host}:{port} (see the lines above)")

        run(go)

    @app.command("mcp", rich_help_panel="Serve memory")
    def mcp_cmd() -> None:
        """Run the MCP server on stdio (for Claude Code, Codex, DSH…)."""
        from dsh_memory.serve.mcp_server import main

        def go():
            if sys.stdin is None or sys.stdout is None:  # `<&-` / `>&-`: no client to talk to
                raise UserInputError(
                    "`dsh-memory mcp` speaks MCP over stdin and stdout, and one of them is closed: "
                    "let an MCP client start it (e.g. `claude mcp add dsh-memory -- dsh-memory mcp`)"
                )
            main()

        run(go)
