"""The read path: each operation written once (summary, list_dir, read, search, add, delete_file);
CLI, HTTP RPC and MCP only translate. Each operation's parameters are declared once, as the fields
of its request model in models.py (OPERATIONS maps RPC method names to them); the adapters
generate their CLI options and MCP tool schemas from those fields (params.py). Usage (the
forgetting input) is recorded only for active rollout summaries returned by read or surfaced by
search, one record per file per call; injection never counts.
"""

from __future__ import annotations

from typing import Any

from dsh_memory.errors import UserInputError
from dsh_memory.readpath._common import validate
from dsh_memory.readpath.files import add, delete_file, list_dir, read
from dsh_memory.readpath.models import (
    AddRequest,
    DeleteRequest,
    ListRequest,
    ReadRequest,
    SearchRequest,
    SummaryRequest,
)
from dsh_memory.readpath.search import search
from dsh_memory.readpath.summary import summary

# RPC method (and CLI command) → (request model, core function). Read and search record usage.
OPERATIONS: dict[str, tuple[type[Any], Any]] = {
    "summary": (SummaryRequest, summary),
    "list": (ListRequest, list_dir),
    "read": (ReadRequest, read),
    "search": (SearchRequest, search),
    "add": (AddRequest, add),
    "delete-file": (DeleteRequest, delete_file),
}


def dispatch(
    store: Any,
    method: str,
    params: dict[str, Any] | None,
    *,
    max_summary_chars: int = 10_000,
    stale_after_days: int = 0,
    semantic_search: str = "auto",
    state: Any = None,
) -> Any:
    """Call one read-path operation by RPC name with a params dict (validated by its Request
    model, unknown fields refused). Returns a pydantic model. `state` receives usage records;
    `max_summary_chars`, `stale_after_days` and `semantic_search` are the memory context's settings."""
    if method not in OPERATIONS:
        raise UserInputError(f"unknown method {method!r}; one of: {', '.join(OPERATIONS)}")
    model, fn = OPERATIONS[method]
    req = validate(model, **(params or {}))
    settings = {
        "summary": {"max_chars": max_summary_chars, "stale_after_days": stale_after_days},
        "read": {"state": state},
        "search": {"state": state, "semantic_search": semantic_search},
    }
    return fn(store, **req.model_dump(), **settings.get(method, {}))
