"""The MCP server (official `mcp` SDK, v2 `MCPServer`): five tools, the summary as a resource and
a prompt, over stdio (`dsh-memory mcp`) or streamable HTTP at `/mcp` (`http_app.create_app`).
Translation only: each tool calls one read-path function with the input schema of the operation's
request model (the CLI's and the RPC's); `_call` alone turns our errors into tool errors (or
a resource's, the prompt's).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import ConfigDict, SkipValidation, create_model

from dsh_memory import __version__
from dsh_memory import readpath as rp
from dsh_memory.context import context_of
from dsh_memory.errors import DshMemoryError
from dsh_memory.readpath import embedder
from dsh_memory.readpath.models import ListResult, ReadResult, SearchResult
from dsh_memory.readpath.params import fields, with_signature

T = TypeVar("T")

SERVER_NAME = "dsh-memory"
TOOL_PREFIX = "memory_"  # tool name = prefix + read-path operation: memory_read is `read`
SUMMARY_URI = "memory://summary"
PROJECT_SUMMARY_URI = "memory://summary/{project}"

SUMMARY_DESC = (
    "Load your long-term memory: how to use it, then the memory summary (an index of what you "
    "know from earlier sessions). Call it once at the start of a task when the memory://summary "
    "resource was not loaded; empty when there is no memory yet. Pass cwd (your working directory) "
    "to get only global memory plus your project's, and the names of the other projects."
)
LIST_DESC = (
    "List one directory of your long-term memory (shallow, sorted). Start at '' (the root): "
    "MEMORY.md is the handbook, rollout_summaries/ holds per-session recaps, skills/ holds "
    "promoted procedures, extensions/ad_hoc/notes/ holds notes waiting for consolidation. "
    "Pass next_cursor back as cursor to get the next page."
)
READ_DESC = (
    "Read lines of one memory file. Returns content with start_line/end_line (1-based) so you can "
    "cite it as path:start-end. Pass a search hit's start_line as start_line to jump to it. If "
    "next_start_line is set, more lines follow: call again with start_line = next_start_line (a "
    "line longer than the size cap comes cut: truncated, with its head only). Memory may be "
    "stale: verify before acting."
)
SEARCH_DESC = (
    "Search your long-term memory. mode='ranked' for questions and topics: ask in plain words (a "
    "question or keywords; stopwords dropped, words stemmed, CJK works) and get the lines that answer "
    "first, each cited as path:match_line-match_end_line (a line that asks runs on to the answer below "
    "it); this server ranks {ranking}. mode='any' (default: lines containing any query, case-insensitive substrings) for exact "
    "names, paths, error messages; 'all_on_same_line' or 'all_within_lines' (all queries within "
    "within_lines lines) to narrow down. normalized=true ignores punctuation and spacing (foo-bar = "
    "foo_bar = foo bar); path limits the search to a file or directory; context_lines adds lines around "
    "each hit. A call returns at most max_results matches (default 20) and max_chars characters "
    "(default 8,000, about 2,000 tokens); truncated=true means there is more: pass next_cursor back as "
    "cursor; skipped names the files it could not search (over 4 MiB, not UTF-8). Open a hit with "
    "memory_read (start_line). Pass cwd (your working directory) to get your project's and global memory only; other_projects=true adds the other projects' hits after them. "
    "Every hit says its scope (global, or project <root>): a project's rule holds in that project only."
)
ADD_DESC = (
    "Save a note to long-term memory. Use ONLY when the user explicitly asks you to remember, "
    "forget or correct something. Write one short, self-contained note in plain words (what, "
    "and why/when it applies). It is for your project only: pass cwd (your working directory; over "
    "stdio it defaults to this server's). scope='global' puts it into every project's sessions: only "
    "when the user says it holds everywhere. It is merged into memory at the next consolidation; it "
    "never overwrites anything."
)
INSTRUCTIONS = (
    "Long-term memory from earlier coding sessions. Read the memory://summary resource (or the "
    "`memory` prompt, or call memory_summary) first; then memory_search / memory_read for details, "
    "citing path:start-end. Memory may be stale: verify against the current code. Use memory_add "
    "only when asked."
)


def _call(fn: Callable[[], T], error: Callable[[str], Exception] | None = None) -> T:
    """THE error mapping of this adapter: our exceptions → ToolError (is_error + message), or
    `error(message)` for a resource or the prompt (the SDK's catch-all says "Error creating
    resource…" or "Internal server error" and logs a traceback)."""
    try:
        return fn()
    except DshMemoryError as exc:
        raise (error or ToolError)(f"{type(exc).__name__}: {exc}") from exc


def make_tool(run: Callable[..., Any], name: str, model: type, description: str, returns: Any, read_only: bool):
    """An SDK Tool for `run(**params)`: its parameters are `model`'s fields (type, bounds,
    description, default), and unknown arguments are refused like the RPC refuses them (a
    misspelled or retired name such as line_offset must not be silently ignored); the input schema
    says so (additionalProperties)."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            p.name, kw, default=inspect.Parameter.empty if p.required else p.default, annotation=p.annotated()
        )
        for p in fields(model)
    ]
    with_signature(run, params, name=name, doc=description, returns=returns)
    # Reads change nothing an agent can see (usage telemetry is bookkeeping); memory_add only ever
    # adds a new note: not destructive, not idempotent (a second call adds a second note).
    if read_only:
        hints = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
    else:
        hints = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
    tool = Tool.from_function(run, name=name, description=description, annotations=hints)
    loose = tool.fn_metadata.arg_model
    config = ConfigDict(**{**loose.model_config, "extra": "forbid"})  # type: ignore[typeddict-item]
    strict = type(loose.__name__, (loose,), {"model_config": config, "__module__": loose.__module__})
    tool.parameters = strict.model_json_schema(by_alias=True)  # what clients are told
    tool.fn_metadata.arg_model = _passthrough(loose)  # what is checked: by the core, once
    return tool


_UNSET: Any = object()


def _passthrough(typed: type) -> type:
    """An argument model that hands every argument on as given (a missing one left out, an unknown
    one kept): the operation's request model checks them (`readpath.dispatch`), as for the CLI and
    the RPC, and a bad one is one line ("invalid arguments: start_line: Input should be
    greater than or equal to 1"), where the SDK's own check answered with pydantic's multi-line
    report."""

    class Given(ArgModelBase):
        model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

        def model_dump_one_level(self) -> dict[str, Any]:
            given = {k: v for k, v in super().model_dump_one_level().items() if v is not _UNSET}
            return {**given, **(self.model_extra or {})}

    def kind(annotation: Any) -> Any:
        """Text (str, str | None, a Literal) as `str`, so that the SDK hands it on as sent: it
        parses a string argument of any other type as JSON, a note '{"retries": 3}' into a dict."""
        origin = get_origin(annotation)
        text = annotation is str or origin is Literal or (origin in (Union, UnionType) and str in get_args(annotation))
        return Annotated[str, SkipValidation] if text else Any

    fields: dict[str, Any] = {name: (kind(f.annotation), _UNSET) for name, f in typed.model_fields.items()}
    return create_model(typed.__name__, __base__=Given, **fields)


def build_server(settings: Any = None, *, session_cwd: str | None = None):
    """An MCPServer bound to one memory root: a MemoryContext, plain MemorySettings, or None for
    `memory_context()` (saved block > environment > default, like every entry point).
    `session_cwd`: the directory the agent works in, when known (stdio: the client starts the
    server there): memory_add's default cwd, and the project a note's cwd must lie within."""
    ctx = context_of(settings)
    context = {"add": {"session_cwd": session_cwd}}

    def tool(
        operation: str,
        description: str,
        returns: Any,
        shape: Callable[[Any], Any] = lambda res: res,
        *,
        read_only: bool = True,
    ):
        """The tool of one read-path operation: its parameters are generated from the operation's
        request model (`readpath.OPERATIONS`); it validates them with that model and runs the core
        function with this context's settings (`readpath.dispatch`, as the RPC does) and returns
        `shape(result)`."""

        def run(**params: Any) -> Any:
            return _call(lambda: shape(rp.dispatch(ctx, operation, params, **context.get(operation, {}))))

        model, _ = rp.OPERATIONS[operation]
        return make_tool(run, TOOL_PREFIX + operation, model, description, returns, read_only)

    def summary_text(s: Any) -> str:
        return s.injection() or "Long-term memory is empty so far: nothing to recall yet."

    tools = [
        tool("summary", SUMMARY_DESC, str, summary_text),
        tool("list", LIST_DESC, ListResult),
        tool("read", READ_DESC, ReadResult),
        tool("search", SEARCH_DESC.format(ranking=embedder.ranking(ctx.settings.semantic_search)), SearchResult),
        tool(
            "add",
            ADD_DESC,
            dict[str, str],
            lambda res: {
                "path": res.path,
                "scope": res.scope,
                "status": "saved; merged into memory at the next consolidation",
            },
            read_only=False,
        ),
    ]

    def invalid(message: str) -> MCPError:
        return MCPError(INVALID_PARAMS, message)

    class Server(MCPServer):
        async def get_prompt(self, name: str, arguments: Any = None, context: Any = None) -> Any:
            """An unknown prompt or arguments it does not take: that line, not "Internal server error"."""
            try:
                return await super().get_prompt(name, arguments, context)
            except ValueError as exc:
                raise invalid(str(exc)) from None

    server = Server(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING", tools=tools)

    @server.resource(
        SUMMARY_URI,
        name="memory_summary",
        mime_type="text/markdown",
        description="How to use memory, followed by the memory summary (empty when there is no memory yet)",
    )
    def summary_resource() -> str:
        return _call(lambda: rp.call(ctx, "summary").injection(), ResourceError)  # '' when there is no memory yet

    @server.resource(
        PROJECT_SUMMARY_URI,
        security=ResourceSecurity(reject_absolute_paths=False),  # a project is an absolute path; never opened
        name="memory_summary_for_project",
        mime_type="text/markdown",
        description="How to use memory, then the global part of the summary plus one project's part; "
        "{project} is the project's directory, percent-encoded (e.g. %2Fhome%2Fme%2Fsrc%2Fapp)",
    )
    def project_summary_resource(project: str) -> str:  # the SDK has percent-decoded it
        # the project is validated like the tool's `cwd` (the RPC's dispatch)
        return _call(lambda: rp.dispatch(ctx, "summary", {"cwd": project}).injection(), ResourceError)

    @server.prompt(name="memory", description="Load long-term memory (instructions + summary) into the conversation")
    def memory_prompt() -> str:
        return _call(lambda: summary_text(rp.call(ctx, "summary")), invalid)

    return server


def main() -> None:
    """stdio transport (what `dsh-memory mcp` runs), in the directory the agent's client started it."""
    build_server(session_cwd=os.getcwd()).run("stdio")


if __name__ == "__main__":
    main()
