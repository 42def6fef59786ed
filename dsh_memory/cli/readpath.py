"""`summary`, `list`, `read`, `search`, `add`: the read path on the command line. Translation
only; each command's arguments and options are generated from its request model (`readpath.params`).
Text output shows memory's control characters as `\x1b` (`readpath._common.visible`); --json escapes them.
No prefect import here, so these commands stay fast enough for agent hooks (`summary --inject`).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer

from dsh_memory.cli._common import read_bounded, show
from dsh_memory.readpath import OPERATIONS, call
from dsh_memory.readpath._common import visible
from dsh_memory.readpath.params import fields, with_signature

PANEL = "Read memory"
_KW = inspect.Parameter.KEYWORD_ONLY


def _core(operation: str, params: dict[str, Any]) -> Any:
    """Run one read-path operation on THE memory context (saved block > environment > default)
    with its settings (`readpath.call`); a relative --cwd is taken from where the command runs.
    A Prefect API that does not answer the saved settings' lookup holds no command past its
    bound (`settings_loader.SETTINGS_LOOKUP_SECONDS`): the hooks' `summary --inject` included."""
    from dsh_memory.context import memory_context

    cwd = params.get("cwd")
    if cwd and cwd.strip() and not os.path.isabs(os.path.expanduser(cwd)):  # `--cwd .`: where this runs
        params = {**params, "cwd": os.path.abspath(os.path.expanduser(cwd))}
    return call(memory_context(writes=operation == "add"), operation, **params)


def _cli_param(p: Any, positional: bool) -> inspect.Parameter:
    """One request-model field as a typer argument (positional) or option: default, bounds and
    help all come from the model. Literal fields stay plain strings here so that a bad value is
    the core's one-line error (exit 2), like every other invalid argument."""
    default = ... if p.required else p.default
    annotation = str if p.choices else p.annotation
    if positional:
        info = typer.Argument(default, help=p.description, show_default=not p.required and bool(p.default))
    else:
        info = typer.Option(default, p.option, min=p.ge, max=p.le, help=p.description)
    return inspect.Parameter(p.name, _KW, default=info, annotation=annotation)


def _flag(name: str, decl: str, help: str) -> inspect.Parameter:
    return inspect.Parameter(name, _KW, default=typer.Option(False, decl, help=help), annotation=bool)


def command(
    app: typer.Typer,
    operation: str,
    *,
    arguments: Sequence[str] = (),
    flags: Sequence[inspect.Parameter] = (),
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `body(as_json, **values)` as `dsh-memory <operation>`: the fields of the
    operation's request model (`readpath.OPERATIONS`; those in `arguments` positional, the rest
    options), then CLI-only `flags`, then --json. `body` prints the text output, or with --json
    returns what is printed as JSON."""
    model, _ = OPERATIONS[operation]

    def decorate(body: Callable[..., None]) -> Callable[..., None]:
        params = [_cli_param(p, p.name in arguments) for p in fields(model)]
        params += [*flags, _flag("as_json", "--json", "Print JSON")]

        def cmd(**values: Any) -> None:
            show(lambda: body(**values), values["as_json"], lambda printed: None)

        with_signature(cmd, params, name=body.__name__, doc=body.__doc__)
        app.command(operation, rich_help_panel=PANEL)(cmd)
        return body

    return decorate


HOOK_STDIN_MAX_BYTES = 1_000_000
HOOK_STDIN_SECONDS = 3.0  # notify's default --timeout: what a hook waits for a payload at most


def hook_cwd(stream: Any, timeout: float = HOOK_STDIN_SECONDS) -> str | None:
    """The `cwd` of a hook's JSON payload on `stream` (bounded read); None when it has none, is
    not JSON or is not a string: a session-start hook must never fail the session. Read until the
    payload is whole, its end, the size bound or `timeout`: an agent that leaves the pipe open
    does not hold the session's start."""
    try:
        if stream is None or stream.isatty():
            return None
        data = json.loads(_hook_payload(stream, timeout) or "null")
    except (OSError, ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep to parse
        return None
    cwd = data.get("cwd") if isinstance(data, dict) else None
    return cwd if isinstance(cwd, str) and cwd.strip() and len(cwd) <= 4096 and "\x00" not in cwd else None


def _hook_payload(stream: Any, timeout: float) -> str:
    """What `stream` holds up to HOOK_STDIN_MAX_BYTES: until its end, or as soon as what came is
    one whole JSON value, or what came by `timeout`. A file name's bytes that are no UTF-8 stay
    what they are (surrogateescape, as `os.fsdecode`)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # no file behind it (a test runner's stream)
        return stream.read(HOOK_STDIN_MAX_BYTES)
    raw, _ = read_bounded(
        fd, HOOK_STDIN_MAX_BYTES, timeout, lambda raw: raw.rstrip().endswith(b"}") and _whole_json(raw)
    )
    return raw.decode("utf-8-sig", "surrogateescape")


def _whole_json(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8-sig", "surrogateescape"))
    except (ValueError, RecursionError):
        return False
    return True


def _hook_dir() -> str:
    """The directory the hook runs in; one deleted since is still named by the shell's $PWD
    (its repository still the project around it), else the error says to pass --cwd."""
    from dsh_memory.errors import UserInputError

    try:
        return os.getcwd()
    except OSError:
        pwd = os.environ.get("PWD") or ""
        if os.path.isabs(pwd):
            return pwd
        raise UserInputError("the directory this runs in no longer exists and $PWD names none: pass --cwd") from None


def _print_match(m) -> None:
    head = f"{m.path}:{m.match_line}-{m.match_end_line}"
    if m.score is not None:
        head += f"  (score {m.score:.2f})"
    if m.scope:
        head += f"  [{m.scope}]"
    typer.echo(visible(head))
    for i, line in enumerate(m.content.splitlines(), start=m.start_line):
        mark = ">" if m.match_line <= i <= m.match_end_line else " "
        typer.echo(f"{mark}{i:>6}  {visible(line)}")


def register(app: typer.Typer) -> None:
    inject = _flag(
        "inject",
        "--inject",
        "Print the block a session-start hook injects (instructions + summary); nothing when memory is empty",
    )

    from_hook = _flag(
        "from_hook",
        "--from-hook",
        'Take --cwd from a session-start hook\'s JSON on stdin (Claude Code sends {"cwd": …}); '
        "without one, the directory the hook runs in",
    )

    @command(app, "summary", flags=[inject, from_hook])
    def summary_cmd(as_json: bool, inject: bool, from_hook: bool, cwd: str | None) -> Any:
        """Show memory_summary.md (capped at max_summary_chars); with --cwd, the global part plus
        that project's part."""
        if from_hook and cwd is None:  # hooks run in the session's project: never every project's part
            cwd = hook_cwd(sys.stdin) or _hook_dir()
        s = _core("summary", {"cwd": cwd})
        if as_json:
            return {**s.model_dump(), "injection": s.injection()}
        if inject:
            text = s.injection()
            if text:
                typer.echo(text, nl=False)
        elif s.empty:
            typer.echo("(memory is empty: no memory_summary.md yet)", err=True)
        else:
            typer.echo(s.content)

    @command(app, "list", arguments=["path"])
    def list_cmd(as_json: bool, **params: Any) -> Any:
        """List one directory of the memory (shallow, sorted)."""
        res = _core("list", params)
        if as_json:
            return res.model_dump()
        for e in res.entries:
            size = "" if e.size is None else f"{e.size:>9}"
            kind, slash = ("d", "/") if e.type == "directory" else ("f", "")
            typer.echo(visible(f"{kind} {size:>9}  {e.path}{slash}" + (f"  [{e.scope}]" if e.scope else "")))
        if res.next_cursor:
            typer.echo(f"… more: --cursor {res.next_cursor}", err=True)

    @command(app, "read", arguments=["path"])
    def read_cmd(as_json: bool, **params: Any) -> Any:
        """Print a slice of one memory file (line-numbered)."""
        res = _core("read", params)
        if as_json:
            return res.model_dump()
        for i, line in enumerate(res.content.splitlines(), start=res.start_line):
            typer.echo(f"{i:>6}  {visible(line)}")
        if res.truncated:
            nxt = f"; more: --start-line {res.next_start_line}" if res.next_start_line is not None else ""
            typer.echo(f"… truncated at line {res.end_line} of {res.total_lines}{nxt}", err=True)

    @command(app, "search", arguments=["queries"])
    def search_cmd(as_json: bool, **params: Any) -> Any:
        """Search the memory; every hit is printed as path:start-end for citation."""
        res = _core("search", params)
        if as_json:
            return res.model_dump()
        if not res.matches:
            typer.echo("no matches", err=True)
        for m in res.matches:
            _print_match(m)
        if res.skipped:
            typer.echo(visible(res.skipped), err=True)
        if res.next_cursor:
            typer.echo(f"… more: --cursor {res.next_cursor}", err=True)

    @command(app, "add", arguments=["note"])
    def add_cmd(as_json: bool, **params: Any) -> Any:
        """Add an ad hoc note for this directory's project (--cwd: another's; --scope global: every
        project's); the next consolidation merges it into memory.

        Run in / or the home directory (no repository, no project), it needs --cwd or --scope global.
        """
        from dsh_memory.errors import UserInputError
        from dsh_memory.readpath.files import no_project

        here = os.getcwd()
        if not params["cwd"] and params["scope"] == "project" and no_project(here):
            raise UserInputError(
                f"{visible(here)[:200]} is no project (not a repository): run add in the project's directory, "
                "or pass --cwd (this directory, for sessions started in it) or --scope global"
            )
        res = _core("add", {**params, "cwd": params["cwd"] or here})
        if as_json:
            return res.model_dump()
        typer.echo(visible(f"{res.path}  [{res.scope}]"))
