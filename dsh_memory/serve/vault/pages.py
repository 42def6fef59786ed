"""What each vault page shows, gathered from the core as plain dicts for the templates. The vault
is a person looking, not an agent using memory: its reads and searches record no usage
(`usage=False`), so browsing never changes what forgetting proposes.
"""

from __future__ import annotations

import re
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from dsh_memory.context import MemoryContext
from dsh_memory.errors import DshMemoryError, NotFoundError, UserInputError
from dsh_memory.imports import load_manifest
from dsh_memory.readpath import list_dir, read, search, summary
from dsh_memory.readpath._common import is_active_rollout
from dsh_memory.readpath.files import PROTECTED_FILES, RETIRED_DIR_NAME
from dsh_memory.readpath.health import memory_health
from dsh_memory.readpath.models import MAX_LIST_RESULTS, MAX_QUERIES, MAX_READ_LINES, shown_name
from dsh_memory.serve.deployments import ui_url
from dsh_memory.serve.preflight import preview_phase1
from dsh_memory.serve.status import PHASE1_FLOWS, local_status, server_status
from dsh_memory.settings_loader import describe_settings, prefect_api_url, resolve_settings
from dsh_memory.storage.store_format import parse_front_matter

NOTES_DIR = "extensions/ad_hoc/notes/"
RETIRED_PREFIX = f"rollout_summaries/{RETIRED_DIR_NAME}/"
LINES_BEFORE_CITED = 50  # a cited line past a file's first part is shown with this many lines above it
QUERY_TERMS = re.compile(r'"([^"]*)"|(\S+)')  # a "quoted phrase" or a word
PROVENANCE_SHOWN = ("session_id", "source", "cwd", "updated_at", "part", "extracted_at", "model", "provider", "path")


def _text(ctx: MemoryContext, rel: str) -> str | None:
    """The file's text; None when it is missing, a symlink (which summary and search skip too) or
    no regular file (a folder, a FIFO: read refuses them)."""
    try:
        return read(ctx.store, rel, max_lines=MAX_READ_LINES, usage=False).content
    except (NotFoundError, UserInputError):  # PathGuardError is a UserInputError
        return None


def _server() -> dict[str, Any]:
    """The Prefect side of the status, without importing prefect when no server is configured."""
    url = prefect_api_url(profile=True)
    if not url:
        return {"available": False, "reason": "no Prefect server configured (PREFECT_API_URL is unset)"}
    out = server_status(limit=20)
    out["ui_url"] = ui_url(url)
    for run in out.get("last_runs", []) + out.get("in_flight", []) + out.get("next_scheduled", []):
        run["url"] = f"{out['ui_url']}/runs/flow-run/{run['id']}"
    runs = out.get("last_runs", [])
    out["last_phase1"] = next((r for r in runs if r["flow"] in PHASE1_FLOWS), None)
    out["last_phase2"] = next((r for r in runs if r["flow"] == "consolidate"), None)
    return out


def overview(ctx: MemoryContext) -> dict[str, Any]:
    status = local_status(ctx)
    counts = status.get("counts") or {}
    try:
        pending: int | str = preview_phase1(ctx, datetime.now(UTC)).result.candidates
    except DshMemoryError as exc:
        pending = f"unknown ({exc})"
    summ = summary(ctx.store, ctx.settings.max_summary_chars)
    server = _server()
    phase2 = bool(status.get("phase2_running") or server.get("phase2_in_flight"))
    running = bool(status.get("phase1_running") or server.get("phase1_in_flight") or phase2)
    return {
        "status": status,
        "counts": {
            "processed": counts.get("done", 0) + counts.get("noop", 0),
            "pending": pending,
            "failed": counts.get("failed", 0),
            "parked": counts.get("parked", 0),
            "running": counts.get("running", 0),
            "raw_waiting": len(ctx.store.read_raw_blocks()),
            "notes_waiting": len(ctx.store.list_notes()),
        },
        "summary": summ,
        "budget": ctx.settings.max_summary_chars,
        "memory_md": _text(ctx, "MEMORY.md"),
        "server": server,
        "running": running,
        "phase2_running": phase2,
        "refresh": 4 if running else None,  # the spec's settings page polls every 4 s while in flight
        **_imported(ctx),
        "stale_after_days": ctx.settings.stale_after_days,
    }


def _imported(ctx: MemoryContext) -> dict[str, Any]:
    """What `dsh-memory import` brought in (newest first, at most 50, and how many): the manifest's entries."""
    try:
        rows = list(load_manifest(ctx.store).values())
    except DshMemoryError:
        rows = []
    rows.sort(key=lambda r: str(r.get("imported_at") or ""), reverse=True)
    return {"imported": rows[:50], "imported_total": len(rows)}


def browse(ctx: MemoryContext) -> dict[str, Any]:
    store = ctx.store
    usage = ctx.state.usage() if ctx.state_exists() else {}
    retired_at = ctx.state.retired() if ctx.state_exists() else {}
    health = memory_health(store, usage, ctx.settings.max_summary_chars, ctx.settings.stale_after_days)
    per_file = {f["path"]: f for f in health["memory_files"]}
    summaries = []
    for info in store.list_rollout_summaries():
        count, last = usage.get(info.rel, (0, None))
        row = per_file.get(info.rel) or {}
        summaries.append(
            {
                "path": info.rel,
                "slug": info.slug,
                "prov": info.provenance or {},
                "uses": count,
                "last": last,
                "items": row.get("items", 0),
                "stale": row.get("stale", 0),
            }
        )
    all_notes, all_retired = store.list_notes(), store.retired_slugs()
    notes = []
    for rel in all_notes[:MAX_LIST_RESULTS]:  # each list of the page at most a listing's bound
        fields, body = parse_front_matter(_text(ctx, rel) or "")
        first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
        note = {
            "path": shown_name(rel),
            "title": fields.get("title") or first[:120],
            "created": fields.get("created_at"),
        }
        notes.append(note)
    skills, skills_cut = [], False
    with suppress(NotFoundError):
        listing = list_dir(store, "skills", max_results=MAX_LIST_RESULTS)
        skills_cut = listing.next_cursor is not None
        for e in listing.entries:
            if e.type == "directory":
                skills.append({"name": e.path.rsplit("/", 1)[-1], "path": f"{e.path}/SKILL.md"})
    retired = [
        {"name": shown_name(s), "path": f"{RETIRED_PREFIX}{shown_name(s)}.md", "retired_at": retired_at.get(s)}
        for s in all_retired[:MAX_LIST_RESULTS]
    ]
    handbook = [f for f in health["memory_files"] if not f["path"].startswith("rollout_summaries/")]
    return {
        "summaries": summaries[:MAX_LIST_RESULTS],
        "notes": notes,
        "skills": skills,
        "retired": retired,
        "totals": {"summaries": len(summaries), "notes": len(all_notes), "retired": len(all_retired)},
        "skills_cut": skills_cut,
        "handbook": handbook,
        "stale_after_days": ctx.settings.stale_after_days,
    }


def file_view(ctx: MemoryContext, path: str, view: str = "rendered", line: int | None = None) -> dict[str, Any]:
    """One file (rendered or numbered lines) or one directory's listing, with the actions it allows."""
    listing = list_dir(ctx.store, path, max_results=MAX_LIST_RESULTS)
    rel = listing.path
    if not (len(listing.entries) == 1 and listing.entries[0].type == "file" and listing.entries[0].path == rel):
        cut = MAX_LIST_RESULTS if listing.next_cursor else None  # a listing's bound: say it is not all
        return {"path": rel, "directory": True, "entries": listing.entries, "cut": cut}
    result = shown = read(ctx.store, rel, max_lines=MAX_READ_LINES, usage=False)
    # a cited line past the first part: around it (one the file no longer has: from the top)
    if view == "lines" and line and result.end_line < line <= result.total_lines:
        start = max(1, line - LINES_BEFORE_CITED)
        shown = read(ctx.store, rel, start_line=start, max_lines=MAX_READ_LINES, usage=False)
    fields, body = parse_front_matter(result.content) if rel.endswith(".md") else ({}, result.content)
    session = str(fields.get("session_id") or "") if rel.startswith("rollout_summaries/") else ""
    return {
        "path": rel,
        "directory": False,
        "view": "lines" if view == "lines" else "rendered",
        "line": line,
        "lines": list(enumerate(shown.content.splitlines(), start=shown.start_line)),
        "shown": (shown.start_line, shown.end_line) if view == "lines" else (1, result.end_line),
        "fields": [(k, fields[k]) for k in PROVENANCE_SHOWN if fields.get(k) not in (None, "")],
        "body": body,
        "truncated": shown.truncated or shown.start_line > 1 if view == "lines" else result.truncated,
        "total_lines": result.total_lines,
        "deletable": rel.startswith(NOTES_DIR) or is_active_rollout(rel),
        "protected": rel in PROTECTED_FILES,
        "retired_name": rel[len(RETIRED_PREFIX) : -3]
        if rel.startswith(RETIRED_PREFIX) and rel.endswith(".md")
        else None,
        "session": session,
    }


def _queries(q: str, mode: str) -> list[str]:
    """The search box as queries: a question for ranked; for the line modes every word, a "quoted
    phrase" as one (as `dsh-memory search WORD "A PHRASE"` takes them)."""
    if mode == "ranked":
        return [q]
    terms = [t for t in (a or b for a, b in QUERY_TERMS.findall(q)) if t.strip()] or [q]
    if len(terms) > MAX_QUERIES:
        raise UserInputError(f'{mode} takes at most {MAX_QUERIES} words or "phrases" (ranked takes a whole question)')
    return terms


def search_view(ctx: MemoryContext, q: str, mode: str = "ranked", path: str | None = None) -> dict[str, Any]:
    found = None
    if q.strip():
        semantic = ctx.settings.semantic_search
        queries = _queries(q, mode)
        found = search(
            ctx.store, queries, mode=mode, path=path or None, max_results=50, usage=False, semantic_search=semantic
        )
    return {"q": q, "mode": mode, "path": path or "", "result": found}


def sessions_view(ctx: MemoryContext) -> dict[str, Any]:
    """The sessions the pipeline knows (its claims), newest first, with their summaries."""
    if not ctx.state_exists():
        return {"sessions": [], "total": 0}
    by_session: dict[str, list[str]] = {}
    for info in ctx.store.list_rollout_summaries():
        sid = str((info.provenance or {}).get("session_id") or "")
        by_session.setdefault(sid, []).append(info.rel)
    overrides = ctx.state.overrides()
    rows = [
        {
            "id": c.session_id,
            "status": c.shown_status,
            "updated": c.updated_at,
            "attempts": c.attempts,
            "error": (c.error or "")[:300],
            "summaries": by_session.get(c.session_id, []),
            "excluded": overrides.get(c.session_id) == "exclude",
        }
        for c in ctx.state.claims().values()
    ]
    rows.sort(key=lambda r: (r["updated"] or datetime.min.replace(tzinfo=UTC), r["id"]), reverse=True)
    return {"sessions": rows[:MAX_LIST_RESULTS], "total": len(rows)}  # the newest, at most a listing's bound


def settings_view() -> dict[str, Any]:
    data = describe_settings(resolve_settings())
    ui = ui_url(data["prefect_api_url"])
    data["blocks_url"] = f"{ui}/blocks" if ui else None
    return data
