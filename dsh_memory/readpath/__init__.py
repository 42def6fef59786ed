"""The read path: each operation written once (summary, list_dir, read, search, add, delete_file);
CLI, HTTP RPC and MCP only translate. Each operation's parameters are declared once, as the fields
of its request model in models.py (OPERATIONS maps RPC method names to them); the adapters
generate their CLI options and MCP tool schemas from those fields (params.py). Usage (the
forgetting input) is recorded only for active rollout summaries returned by read or surfaced by
search, one record per file per call; injection never counts.
"""

from __future__ import annotations

from typing import Any

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


def call(ctx: Any, method: str, **params: Any) -> Any:
    """Run one read-path operation with the memory context's settings (summary's budget and
    staleness, search's semantic_search) and its state store (read and search record usage there).
    `params` go to the core function as given: each validates its own request. `add` writes: it is
    refused while the saved settings are unknown (`ResolvedSettings.require_saved`)."""
    if method == "add":
        ctx.resolved.require_saved()
    settings = ctx.settings
    context_params = {
        "summary": {"max_chars": settings.max_summary_chars, "stale_after_days": settings.stale_after_days},
        "read": {"state": ctx.state},
        "search": {"state": ctx.state, "semantic_search": settings.semantic_search},
    }
    return OPERATIONS[method][1](ctx.store, **params, **context_params.get(method, {}))


def dispatch(ctx: Any, method: str, params: dict[str, Any] | None, **context: Any) -> Any:
    """Call one read-path operation by RPC name (one of OPERATIONS) with a params dict, validated
    by its Request model first (unknown fields refused); `context`: what the adapter itself knows
    (add's `session_cwd`). Returns a pydantic model."""
    model, _ = OPERATIONS[method]
    return call(ctx, method, **validate(model, **(params or {})).model_dump(), **context)
