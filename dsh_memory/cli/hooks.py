"""`notify`: the command agents call when a turn ends (Codex `notify`, Claude Code `Stop` hook,
the DSH plugin / hook bridge).

It reads the payload from its last argument (Codex) or stdin (Claude Code, DSH bridge),
validates it with the receiver's own code, and delivers it to the local receiver (the running
`dsh-memory serve`'s, found through its state file, else `dsh-memory http` on the default port)
or straight to the Prefect API (`--direct`; the stack's when PREFECT_API_URL is unset). It always exits 0 and prints
nothing on stdout (a Claude Code Stop hook reads stdout/exit 2 as "keep going"): a hook must
never block or steer the agent. Reasons go to stderr. It never imports prefect.
"""

from __future__ import annotations

import os
import sys

import typer

DEFAULT_URL = "http://127.0.0.1:8765/hooks/turn-end"


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        typer.echo(f"dsh-memory notify: {message}", err=True)


def _read_payload(payload: str | None, max_bytes: int) -> bytes:
    if payload is not None:
        return payload.encode("utf-8", "surrogateescape")
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(max_bytes + 1) if stream is not None else sys.stdin.read(max_bytes + 1)
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")


def notify_once(
    raw: bytes,
    *,
    kind: str = "auto",
    url: str = DEFAULT_URL,
    direct: bool = False,
    api_url: str | None = None,
    timeout: float = 3.0,
) -> tuple[bool, str]:
    """Validate and deliver one payload. Returns (delivered, message); never raises."""
    try:
        from dsh_memory.hooks.payloads import MAX_BODY_BYTES, PayloadError, parse_turn_end

        try:
            turn = parse_turn_end(raw, kind=kind)
        except PayloadError as exc:
            return False, f"payload refused ({exc.status}): {exc}"
        if not turn.should_trigger:
            return False, f"not triggering for session {turn.session_id or '?'}: {turn.why_not}"
        if direct:
            from dsh_memory.hooks.events import EmitError, emit_turn_end
            from dsh_memory.settings_loader import prefect_api_url

            target = (api_url or prefect_api_url() or "").rstrip("/")
            if not target:
                return False, "--direct needs PREFECT_API_URL (or --api-url); nothing sent"
            try:
                emit_turn_end(turn, target, timeout=timeout)
            except EmitError as exc:
                return False, str(exc)
            return True, f"event sent to {target} for session {turn.session_id}"
        return _post_to_receiver(raw, turn.kind, url, timeout, MAX_BODY_BYTES)
    except Exception as exc:  # a hook must never fail the agent
        return False, f"unexpected error: {type(exc).__name__}: {exc}"


def _post_to_receiver(raw: bytes, kind: str, url: str, timeout: float, max_bytes: int) -> tuple[bool, str]:
    import httpx

    from dsh_memory.hooks.payloads import SECRET_ENV, SECRET_HEADER

    headers = {"Content-Type": "application/json"}
    if os.environ.get(SECRET_ENV):
        headers[SECRET_HEADER] = os.environ[SECRET_ENV]
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            resp = client.post(url, params={"kind": kind}, content=raw, headers=headers)
    except httpx.HTTPError as exc:
        return (
            False,
            f"receiver at {url} unreachable ({type(exc).__name__}); is `dsh-memory serve` (or `dsh-memory http`) running?",
        )
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if resp.status_code != 202:
        msg = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        return False, f"receiver answered HTTP {resp.status_code}: {msg or resp.text[:200]}"
    if not body.get("triggered"):
        return False, f"receiver accepted but did not trigger: {body.get('reason', '?')}"
    return True, f"receiver queued the event for session {body.get('session_id')}"


def register(app: typer.Typer) -> None:
    @app.command("notify", rich_help_panel="Triggers")
    def notify_cmd(
        payload: str | None = typer.Argument(
            None, help="The JSON payload (Codex passes it as the last argument); read from stdin when omitted"
        ),
        kind: str = typer.Option("auto", "--kind", help="dsh | codex | claude | auto"),
        url: str | None = typer.Option(
            None,
            "--url",
            help="The turn-end receiver; default: the running `dsh-memory serve`'s, else " + DEFAULT_URL,
        ),
        direct: bool = typer.Option(
            False, "--direct", help="Post the Prefect event straight to PREFECT_API_URL instead of the receiver"
        ),
        api_url: str | None = typer.Option(None, "--api-url", help="Prefect API URL for --direct"),
        timeout: float = typer.Option(3.0, "--timeout", min=0.1, max=60, help="Delivery timeout in seconds"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing, even on failure"),
    ) -> None:
        """Report a finished agent turn (hook entry point). Always exits 0; reasons go to stderr."""
        if kind not in ("auto", "dsh", "codex", "claude"):
            _say(f"unknown --kind {kind!r}; one of: dsh, codex, claude, auto", quiet)
            return
        from dsh_memory.hooks.payloads import MAX_BODY_BYTES

        try:
            raw = _read_payload(payload, MAX_BODY_BYTES)
        except (OSError, ValueError) as exc:
            _say(f"could not read the payload: {exc}", quiet)
            return
        if url is None:
            from dsh_memory.serve.stack_state import running_stack

            stack = running_stack()
            url = stack.hook_url if stack is not None else DEFAULT_URL
        ok, message = notify_once(raw, kind=kind, url=url, direct=direct, api_url=api_url, timeout=timeout)
        _say(message, quiet or ok)
