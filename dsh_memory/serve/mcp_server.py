"""The MCP server (official `mcp` SDK, v2 `MCPServer`): four tools, the summary as a resource and
a prompt. Transports: stdio (`dsh-memory mcp`, `python -m dsh_memory.serve.mcp_server`) and streamable
HTTP, mounted at `/mcp` by `dsh_memory.serve.http_app.create_app` (loopback only).

Translation only: each tool calls one read-path function; `_call` is the single place where our
errors become tool errors the model can read and act on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from dsh_memory.errors import DshMemoryError
from dsh_memory.readpath.models import ListResult, ReadResult, SearchResult  # tool signatures

T = TypeVar("T")

SERVER_NAME = "dsh-memory"
SUMMARY_URI = "memory://summary"

LIST_DESC = (
    "List one directory of your long-term memory (shallow, sorted). Start at '' (the root): "
    "MEMORY.md is the handbook, rollout_summaries/ holds per-session recaps, skills/ holds "
    "promoted procedures, extensions/ad_hoc/notes/ holds notes waiting for consolidation. "
    "Pass next_cursor back as cursor to get the next page."
)
READ_DESC = (
    "Read lines of one memory file. Returns content with start_line/end_line (1-based) so you can "
    "cite it as path:start-end. Use start_line from a search hit to jump to it. If truncated is "
    "true, call again with start_line = end_line + 1. Memory may be stale: verify before acting."
)
SEARCH_DESC = (
    "Search your long-term memory. mode='ranked' (BM25, best first; stemmed words, CJK works) for "
    "topics and questions; mode='any' (default: lines containing any query, case-insensitive "
    "substrings) for exact names, paths, error messages; 'all_on_same_line' or 'all_within_lines' "
    "(all queries within within_lines lines) to narrow down. normalized=true ignores punctuation "
    "and spacing (foo-bar = foo_bar = foo bar). Each match has path and line range to cite "
    "(path:match_line-match_end_line); open more with memory_read."
)
ADD_DESC = (
    "Save a note to long-term memory. Use ONLY when the user explicitly asks you to remember, "
    "forget or correct something. Write one short, self-contained note in plain words (what, "
    "and why/when it applies). It is merged into memory at the next consolidation; it never "
    "overwrites anything."
)
INSTRUCTIONS = (
    "Long-term memory from earlier coding sessions. Read the memory://summary resource (or the "
    "`memory` prompt) first; then memory_search / memory_read for details, citing path:start-end. "
    "Memory may be stale: verify against the current code. Use memory_add only when asked."
)


def _call(fn: Callable[[], T]) -> T:
    """THE error mapping of this adapter: our exceptions → ToolError (is_error + message)."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return fn()
    except DshMemoryError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def build_server(settings: Any = None):
    """An MCPServer bound to one memory root: a MemoryContext, plain MemorySettings, or None for
    `memory_context()` (saved block > environment > default, like every entry point)."""
    from mcp.server.mcpserver import MCPServer

    from dsh_memory import readpath as rp
    from dsh_memory.context import context_of

    ctx = context_of(settings)
    settings, store = ctx.settings, ctx.store

    def state():
        return ctx.state

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(name="memory_list", description=LIST_DESC)
    def memory_list(
        path: Annotated[str, Field(description="Directory relative to the memory root; '' for the root")] = "",
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page")] = None,
        max_results: Annotated[int, Field(ge=1, le=2000, description="Entries per page")] = 200,
    ) -> ListResult:
        return _call(lambda: rp.list_dir(store, path, cursor=cursor, max_results=max_results))

    @server.tool(name="memory_read", description=READ_DESC)
    def memory_read(
        path: Annotated[str, Field(description="File relative to the memory root, e.g. MEMORY.md")],
        start_line: Annotated[int, Field(ge=1, description="First line to return (1-based)")] = 1,
        max_lines: Annotated[int, Field(ge=1, le=5000, description="At most this many lines")] = 400,
    ) -> ReadResult:
        return _call(lambda: rp.read(store, path, line_offset=start_line - 1, max_lines=max_lines, state=state()))

    @server.tool(name="memory_search", description=SEARCH_DESC)
    def memory_search(
        queries: Annotated[
            list[str], Field(min_length=1, description="One or more queries (keywords, names, phrases)")
        ],
        mode: Annotated[
            Literal["any", "all_on_same_line", "all_within_lines", "ranked"], Field(description="Matching mode")
        ] = "any",
        within_lines: Annotated[int, Field(ge=1, le=200, description="Window size for all_within_lines")] = 5,
        case_sensitive: bool = False,
        normalized: Annotated[bool, Field(description="Ignore punctuation/spacing differences")] = False,
        context_lines: Annotated[int, Field(ge=0, le=20, description="Extra lines around each match")] = 0,
        path: Annotated[str | None, Field(description="Only search under this file or directory")] = None,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page")] = None,
        max_results: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> SearchResult:
        return _call(
            lambda: rp.search(
                store,
                queries,
                mode=mode,
                within_lines=within_lines,
                case_sensitive=case_sensitive,
                normalized=normalized,
                context_lines=context_lines,
                path_prefix=path,
                cursor=cursor,
                max_results=max_results,
                state=state(),
            )
        )

    @server.tool(name="memory_add", description=ADD_DESC)
    def memory_add(
        note: Annotated[str, Field(min_length=1, max_length=20_000, description="The note, in plain words")],
        title: Annotated[str | None, Field(max_length=120, description="Optional short title")] = None,
    ) -> dict[str, str]:
        res = _call(lambda: rp.add(store, note, title=title))
        return {"path": res.path, "status": "saved; merged into memory at the next consolidation"}

    @server.resource(
        SUMMARY_URI,
        name="memory_summary",
        mime_type="text/markdown",
        description="How to use memory, followed by the memory summary (empty when there is no memory yet)",
    )
    def summary_resource() -> str:
        return rp.summary(store, settings.max_summary_chars).injection()

    @server.prompt(name="memory", description="Load long-term memory (instructions + summary) into the conversation")
    def memory_prompt() -> str:
        text = rp.summary(store, settings.max_summary_chars).injection()
        return text or "Long-term memory is empty so far: nothing to recall yet."

    return server


def main() -> None:
    """stdio transport (what `dsh-memory mcp` runs)."""
    build_server().run("stdio")


if __name__ == "__main__":
    main()
