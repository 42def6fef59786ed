"""`notify`: the command agents call when a turn ends (Codex `notify`, Claude Code `Stop` hook,
the DSH plugin / hook bridge); what it reads, its retries and exit codes: docs/agents.md. It
validates with the receiver's own code and delivers to the local receiver (the running `serve`'s,
found through its state file) or, with `--direct`, to the Prefect API after recording the turn
end itself (storage/turn_ends.py). Never exit 2 nor stdout, and no prefect import (but where
`--direct` finds a saved settings block, validated as its Prefect Block class).
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

import typer
from typer.core import TyperCommand

from dsh_memory.cli._common import read_bounded, say
from dsh_memory.errors import DshMemoryError

DEFAULT_URL = "http://127.0.0.1:8765/hooks/turn-end"
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)  # between attempts, while the --timeout budget lasts


class _Retry(Exception):
    """A transient delivery failure: worth another attempt."""


def _say(message: str, quiet: bool) -> None:
    if not quiet:
        say(f"dsh-memory notify: {message}", err=True)


def _read_payload(payload: str | None, max_bytes: int, timeout: float) -> bytes:
    """The payload argument, else stdin up to `max_bytes + 1` bytes; TimeoutError when stdin is
    not closed within `timeout` (a hook that leaves its pipe open)."""
    if payload is not None:
        return payload.encode("utf-8", "surrogateescape")
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # no file behind it (a test runner's stream)
        data = getattr(sys.stdin, "buffer", sys.stdin).read(max_bytes + 1)  # bytes, or text without a buffer
        return data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
    raw, late = read_bounded(fd, max_bytes + 1, timeout)
    if late:
        raise TimeoutError
    return raw


def notify_once(
    raw: bytes, *, kind: str, url: str, direct: bool, api_url: str | None, timeout: float
) -> tuple[bool | None, str]:
    """Validate and deliver one payload. Returns (delivered, message): True delivered, None
    deliberately not triggered, False refused or not delivered. Never raises."""
    try:
        from dsh_memory.hooks.payloads import PayloadError, parse_turn_end

        try:
            turn = parse_turn_end(raw, kind=kind)
        except PayloadError as exc:
            return False, f"payload refused ({exc.status}): {exc}"
        if not turn.should_trigger:
            return None, f"not triggering for session {turn.session_id or '?'}: {turn.why_not}"
        import httpx  # noqa: F401 (here, not in the delivery thread: its import is no part of --timeout)

        if direct:
            from dsh_memory.settings_loader import prefect_api_url

            target = (api_url or prefect_api_url() or "").rstrip("/")
            if not target:
                return False, "--direct needs PREFECT_API_URL (or --api-url); nothing sent"
            from dsh_memory.cancel import bounded
            from dsh_memory.hooks.events import build_event

            event = build_event(turn)  # built once: a retry re-sends the same event id
            # the settings it resolves ask the Prefect API, which may trickle: given up at --timeout
            recorded = bounded(lambda: _record(turn.session_id), timeout)
            unrecorded = (
                recorded.result() if recorded.done() else f" (turn end not recorded within --timeout {timeout:g} s)"
            )
            ok, message = _with_retries(lambda left: _emit_direct(event, target, left), timeout)
            return ok, message + unrecorded
        return _with_retries(lambda left: _post_to_receiver(raw, turn.kind, url, left), timeout)
    except DshMemoryError as exc:  # a setting no delivery can work with (the hook secret)
        return False, str(exc)
    except Exception as exc:  # a hook must never fail the agent
        return False, f"unexpected error: {type(exc).__name__}: {exc}"


def _with_retries(attempt: Callable[[float], tuple[bool, str]], budget: float) -> tuple[bool, str]:
    """`attempt(seconds left)` until it succeeds, fails for good, or the budget is spent; a
    transient failure (`_Retry`) waits RETRY_DELAYS between attempts. In a daemon thread given up
    at the budget: an HTTP timeout bounds each read, so a peer answering a byte at a time would
    hold the hook forever."""
    from dsh_memory.cancel import bounded

    outcome = bounded(lambda: _attempts(attempt, budget), budget)
    if not outcome.done():
        return False, f"no answer within --timeout {budget:g} s"
    return outcome.result()  # an exception re-raised, for notify_once's one-line report


def _attempts(attempt: Callable[[float], tuple[bool, str]], budget: float) -> tuple[bool, str]:
    deadline = time.monotonic() + budget
    for tries in itertools.count(1):
        try:
            return attempt(max(0.1, deadline - time.monotonic()))
        except _Retry as exc:
            delay = RETRY_DELAYS[min(tries - 1, len(RETRY_DELAYS) - 1)]
            if time.monotonic() + delay >= deadline:
                return False, f"{exc} (after {tries} attempt{'s' if tries > 1 else ''})"
            time.sleep(delay)


def _record(session_id: str) -> str:
    """Record the turn end where the debounced extraction run reads it: the memory root its
    settings resolve to (a root pinned in the saved block wins); '' or why it was not."""
    try:
        from dsh_memory.settings_loader import resolve_settings
        from dsh_memory.storage.state import StateStore
        from dsh_memory.storage.turn_ends import TurnEnds

        with StateStore(resolve_settings().settings.memory_root, timeout_s=2.0) as state:
            TurnEnds(state).record([(session_id, datetime.now(UTC))])
        return ""
    except Exception as exc:  # the event still goes out; the catch-up finds the session
        return f" (turn end not recorded: {type(exc).__name__})"


def _emit_direct(event: dict, target: str, timeout: float) -> tuple[bool, str]:
    from dsh_memory.hooks.events import EmitError, post_events

    try:
        post_events([event], target, timeout=timeout)
    except EmitError as exc:
        if not exc.transient:  # refused, or a request no attempt can make: say so at once
            return False, str(exc)
        raise _Retry(str(exc)) from None
    return True, f"event sent to {target} for session {event['payload']['session_id']}"


def _post_to_receiver(raw: bytes, kind: str, url: str, timeout: float) -> tuple[bool, str]:
    import httpx

    from dsh_memory.hooks.payloads import SECRET_HEADER, hook_secret

    headers: dict[str, str | bytes] = {"Content-Type": "application/json"}
    if secret := hook_secret():  # as UTF-8 bytes, which the receiver compares (any secret)
        headers[SECRET_HEADER] = secret.encode("utf-8", "surrogateescape")
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            resp = client.post(url, params={"kind": kind}, content=raw, headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:  # no attempt can work
        return False, f"--url {url!r} is not an http(s) URL: {exc}"
    except httpx.HTTPError as exc:
        raise _Retry(
            f"receiver at {url} unreachable ({type(exc).__name__}); is `dsh-memory serve` (or `dsh-memory http`) running?"
        ) from None
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if resp.status_code != 202:
        msg = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        message = f"receiver answered HTTP {resp.status_code}: {msg or resp.text[:200]}"
        if resp.status_code >= 500:  # 503 at capacity, or a server error: worth another try
            raise _Retry(message)
        return False, message
    if not isinstance(body, dict):  # whatever holds the port is not our receiver
        return False, f"receiver answered HTTP 202 without a JSON object: {resp.text[:200]!r}"
    if not body.get("triggered"):
        return False, f"receiver accepted but did not trigger: {body.get('reason', '?')}"
    return True, f"receiver will forward the event for session {body.get('session_id')}"


class _HookCommand(TyperCommand):
    """A usage error (a bad option, an extra argument) exits 1 with one line, never 2: a Claude
    Code Stop hook takes exit 2 as "keep going" and feeds stderr to the model."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        quiet = "--quiet" in args or "-q" in args  # before parsing consumes `args`
        try:
            return super().parse_args(ctx, args)
        except Exception as exc:  # click's UsageError (typer's own copy of click): exit code 2
            if getattr(exc, "exit_code", None) != 2 or not hasattr(exc, "format_message"):
                raise
            _say(exc.format_message(), quiet)
            raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    @app.command("notify", rich_help_panel="Triggers", cls=_HookCommand)
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
        api_url: str | None = typer.Option(
            None, "--api-url", help="Prefect API URL for --direct, in place of PREFECT_API_URL (its saved settings too)"
        ),
        timeout: float = typer.Option(
            3.0,
            "--timeout",
            min=0.1,
            max=60,
            help="Seconds for delivery, retries included (as long again to read stdin, and with --direct to record the turn end)",
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing, even on failure"),
    ) -> None:
        """Report a finished agent turn (hook entry point). Exit 0 delivered or deliberately
        ignored, 1 refused or not delivered (retried first); reasons go to stderr."""
        if kind not in ("auto", "dsh", "codex", "claude"):
            _say(f"unknown --kind {kind!r}; one of: dsh, codex, claude, auto", quiet)
            raise typer.Exit(1)
        from dsh_memory.hooks.payloads import MAX_BODY_BYTES

        try:
            raw = _read_payload(payload, MAX_BODY_BYTES, timeout)
        except TimeoutError:
            _say(f"no payload on stdin within --timeout {timeout:g} s (its end was never closed)", quiet)
            raise typer.Exit(1) from None
        except (OSError, ValueError) as exc:
            _say(f"could not read the payload: {exc}", quiet)
            raise typer.Exit(1) from None
        if url is None:
            from dsh_memory.serve.stack_state import running_stack

            stack = running_stack()
            url = stack.hook_url if stack is not None else DEFAULT_URL
        before = os.environ.get("PREFECT_API_URL")
        if direct and api_url:  # the server the event goes to is the one whose saved settings apply
            os.environ["PREFECT_API_URL"] = api_url
        if quiet:  # nothing printed, a warning logged on the way included (the settings' own)
            logging.disable(logging.CRITICAL)
        try:
            ok, message = notify_once(raw, kind=kind, url=url, direct=direct, api_url=api_url, timeout=timeout)
        finally:
            logging.disable(logging.NOTSET)
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before
        _say(message, quiet or ok is True)
        if ok is False:
            raise typer.Exit(1)
