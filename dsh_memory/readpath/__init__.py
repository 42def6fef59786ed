"""The read path: each operation written once; CLI, HTTP RPC and MCP only translate.

    summary(store, max_chars)                 memory_summary.md (capped, cached) + instructions
    list_dir(store, path, cursor, max_results)  shallow listing, hides .state
    read(store, path, line_offset, max_lines)   line slice, size-capped          (records usage)
    search(store, queries, mode, …)             line modes or ranked BM25         (records usage)
    add(store, note, title)                     one new ad hoc note (the only agent write)
    delete_file(store, path)                    settings-page vault; refuses pipeline files

Usage (the forgetting input) is recorded only for active rollout summaries returned by read or
surfaced by search: one record per file per call.
"""

from __future__ import annotations

from typing import Any

from dsh_memory.readpath.files import PROTECTED_FILES, add, delete_file, list_dir, read
from dsh_memory.readpath.models import (
    AddRequest,
    AddResult,
    DeleteRequest,
    DeleteResult,
    Entry,
    ListRequest,
    ListResult,
    ReadRequest,
    ReadResult,
    SearchMatch,
    SearchRequest,
    SearchResult,
    Summary,
)
from dsh_memory.readpath.search import search
from dsh_memory.readpath.summary import instructions, summary

__all__ = [
    "PROTECTED_FILES",
    "AddRequest",
    "AddResult",
    "DeleteRequest",
    "DeleteResult",
    "Entry",
    "ListRequest",
    "ListResult",
    "ReadRequest",
    "ReadResult",
    "SearchMatch",
    "SearchRequest",
    "SearchResult",
    "Summary",
    "add",
    "delete_file",
    "dispatch",
    "instructions",
    "list_dir",
    "read",
    "search",
    "summary",
]


def dispatch(
    store: Any, method: str, params: dict[str, Any] | None, *, max_summary_chars: int = 10_000, state: Any = None
) -> Any:
    """Call one read-path operation by RPC name with a params dict (validated by its Request
    model, unknown fields refused). Returns a pydantic model. `state` receives usage records."""
    from dsh_memory.errors import UserInputError
    from dsh_memory.readpath._common import validate

    params = dict(params or {})
    if method == "summary":
        if params:
            raise UserInputError("summary takes no params")
        return summary(store, max_summary_chars)
    table: dict[str, tuple[type, Any]] = {
        "list": (ListRequest, list_dir),
        "read": (ReadRequest, read),
        "search": (SearchRequest, search),
        "add": (AddRequest, add),
        "delete-file": (DeleteRequest, delete_file),
    }
    if method not in table:
        raise UserInputError(f"unknown method {method!r}; one of: summary, {', '.join(table)}")
    model, fn = table[method]
    req = validate(model, **params)
    kwargs = {"state": state} if method in ("read", "search") else {}
    return fn(store, **req.model_dump(), **kwargs)
