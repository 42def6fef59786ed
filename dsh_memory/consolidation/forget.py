"""Forgetting and restoring on demand: `dsh-memory forget SESSION`, `forget --project ROOT` and
`restore NAME` (the vault's forget and restore too). Apart from apply.py because a user runs them,
not a consolidation; each is recoverable (retired, archived, excluded; never deleted).
"""

from __future__ import annotations

import os
from contextlib import ExitStack, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from dsh_memory import scope as sc
from dsh_memory.errors import NotFoundError, UserInputError
from dsh_memory.models import SessionRef
from dsh_memory.readers.header import session_cwd
from dsh_memory.settings import SourceRoots
from dsh_memory.storage.locks import AlreadyRunning, phase_lock
from dsh_memory.storage.state_schema import owner_is_gone
from dsh_memory.storage.store_format import parse_front_matter
from dsh_memory.transcript.secret_rules import MARKER_PREFIX


def forget_session(ctx: Any, session: str, now: datetime) -> dict:
    """`forget SESSION` as the CLI and the vault say it: `retire_session` of the session the
    state knows, else of the session log `session` names (its id, or a prefix as `sessions`
    prints it); NotFoundError, nothing excluded, when neither knows it."""
    from dsh_memory import readers

    sid, in_logs = session, False
    if ctx.state.get_claim(session) is None:  # not extracted yet, or a prefix `sessions` prints
        with suppress(NotFoundError):
            sid, in_logs = readers.find(ctx.settings.roots, session).id, True
    before = ctx.state.overrides().get(sid)
    result = retire_session(ctx.store, ctx.state, sid, now)
    if not (in_logs or result["claim_dropped"] or result["retired"] or result["raw_blocks_archived"]):
        ctx.state.set_override(sid, before)  # no such session: nothing to exclude
        raise NotFoundError(f"nothing known about session {session}")
    return result


def retire_session(store: Any, state: Any, session_id: str, now: datetime) -> dict:
    """`dsh-memory forget SESSION`: drop the extraction record, retire every rollout summary (all
    parts) whose provenance names this session, move its not-yet-consolidated raw blocks to the
    archive, and exclude the session from future extraction (so it is not re-learned). What the
    handbook and summary learned from it stays: a consolidation keeps it."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise UserInputError("forget needs a session id")
    claim = state.get_claim(session_id)
    if claim is not None and claim.status == "running" and not owner_is_gone(claim.owner):
        # its extraction would write the recap and raw memory after this, and close the claim
        msg = f"session {session_id} is being extracted right now: forget it once that run ends"
        raise AlreadyRunning("extract", msg)
    _retired_ready(store)
    state.set_override(session_id, "exclude")  # first: a kill after the drop must not leave it extractable
    dropped = state.forget(session_id)
    unconsumed = {b.id for b in store.read_raw_blocks() if b.session_id == session_id}
    archived = store.archive_raw_blocks(unconsumed)
    retired: list[str] = []
    for info in store.list_rollout_summaries():
        if str((info.provenance or {}).get("session_id") or "") == session_id and store.retire_summary(info.slug):
            state.mark_retired(info.slug, now)
            retired.append(info.slug)
    return {
        "session_id": session_id,
        "claim_dropped": bool(dropped),
        "retired": retired,
        "raw_blocks_archived": archived,
        "excluded": True,
    }


def _retired_ready(store: Any) -> None:
    """Forgetting moves recaps into rollout_summaries/.retired: a file in its place fails here,
    before anything changed (it failed after the session was excluded and its claim dropped)."""
    try:
        store.retired_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserInputError(f"{store.retired_dir} is not a folder: move it away, then forget again") from None


def restore_summary(store: Any, state: Any, name: str, now: datetime) -> dict:
    """`dsh-memory restore NAME` and the vault's restore: move a retired rollout summary back
    among the active ones, drop its retired mark, and count the restore as a use (a summary a
    user brought back gets a full `max_unused_days` before forgetting may propose it again).
    The next consolidation sees it in the index again. NotFoundError when nothing is retired
    under that name."""
    slug = store.restore_summary(name)
    state.unmark_retired(slug)
    state.unmark_retired(str(name).removesuffix(".md"))
    rel = f"rollout_summaries/{slug}.md"
    state.record_usage(rel, now)
    return {"restored": str(name).removesuffix(".md"), "slug": slug, "path": rel}


def forget_project(store: Any, state: Any, root: str, now: datetime, roots: SourceRoots) -> dict:
    """`dsh-memory forget --project ROOT`: retire every memory of the project `root` (a repository
    root, or a folder inside or a worktree of one), recoverably (docs/cli.md); NotFoundError when
    the project has nothing in memory. A rollout summary is the project's by its provenance
    `project`, else the repository of its `cwd`; the project's MEMORY.md task groups and summary
    part are kept together as one retired summary, `rollout_summaries/.retired/forgotten-<label>-
    handbook.md`, which `dsh-memory restore` brings back to the read tools. Runs
    under Phase 2's lock, so no consolidation rewrites the handbook meanwhile; refused while a
    session of the project (its log under the session `roots`) is being extracted."""
    if not isinstance(root, str) or not root.strip() or "\x00" in root:
        raise UserInputError("forget --project needs a repository root")
    asked = sc._norm(os.path.abspath(os.path.expanduser(root.strip())))  # `.` is the current folder
    targets = {asked, sc.project_root(asked) or asked}

    def mine(project: str | None) -> bool:
        return any(sc.matches(project, t, is_repo=True) for t in targets)

    with ExitStack() as held:
        try:
            held.enter_context(phase_lock(store.root, "phase2"))
        except AlreadyRunning:
            raise AlreadyRunning("phase2", "a consolidation is running: forget the project once it ends") from None
        busy = _running_here(state, roots, mine)
        if busy:  # its run would write the project's recap and raw memory after this
            msg = f"session {busy[0]} of this project is being extracted right now: forget it once that run ends"
            raise AlreadyRunning("extract", msg)
        _retired_ready(store)
        retired, sessions = [], set()
        for info in store.list_rollout_summaries():
            prov = info.provenance or {}
            if mine(prov.get("project") or sc.project_root(str(prov.get("cwd") or "")) or None):
                if prov.get("session_id"):  # excluded first: a run killed after the retire is not re-learned
                    sessions.add(str(prov["session_id"]))
                    state.set_override(str(prov["session_id"]), "exclude")
                if store.retire_summary(info.slug):
                    state.mark_retired(info.slug, now)
                    retired.append(info.slug)
        blocks = {b.id for b in store.read_raw_blocks() if mine(b.project or sc.project_root(b.cwd))}
        archived = store.archive_raw_blocks(blocks)
        notes = [rel for rel in store.list_notes() if mine(_note_project(store, rel))]
        notes_archived = store.archive_notes(notes) if notes else 0
        handbook = _cut_handbook(store, mine, now, sc.project_root(asked) or asked)
    if not (retired or archived or notes_archived or handbook):
        raise NotFoundError(f"nothing in memory for project {asked}")
    if handbook:
        retired.append(handbook)
    return {
        "project": sc.project_root(asked) or asked,
        "retired": retired,
        "raw_blocks_archived": archived,
        "notes_archived": notes_archived,
        "sessions_excluded": sorted(sessions),
    }


def _running_here(state: Any, roots: SourceRoots, mine) -> list[str]:
    """The sessions being extracted (a live running claim) whose log's header names a cwd in the
    project `mine` names. A claim keeps its log's path redacted (a key in a project folder's name
    must not reach the state database), so the log is found again by session id through the
    readers; a kept path with no marker (a log outside today's `roots`) is read as it is."""
    from dsh_memory import readers

    running = [c for c in state.claims().values() if c.status == "running" and not owner_is_gone(c.owner)]
    logs = {r.id: r for r in readers.discover(roots)} if running else {}
    return [c.session_id for c in running if _in_project(logs.get(c.session_id) or _kept_log(c), mine)]


def _kept_log(claim: Any) -> SessionRef | None:
    """The log a claim's kept path names, when it is whole (no marker) and still there."""
    if not claim.path or MARKER_PREFIX in claim.path:
        return None
    try:
        st = os.stat(claim.path)
        return SessionRef(
            id=claim.session_id, source=claim.source, path=Path(claim.path), size=st.st_size, mtime_ns=st.st_mtime_ns
        )
    except (OSError, ValueError):  # the log is gone, or the claim names no known source
        return None


def _in_project(ref: SessionRef | None, mine) -> bool:
    cwd = session_cwd(ref) if ref is not None else None
    return bool(cwd) and mine(sc.project_root(cwd) or cwd)


def _note_project(store: Any, rel: str) -> str | None:
    try:
        fields, _ = parse_front_matter(store.read_text(rel)[:8192])
    except (OSError, ValueError):
        return None
    project = fields.get("project")
    return str(project) if project else None


def _cut_handbook(store: Any, mine, now: datetime, project: str) -> str | None:
    """Cut the project's task groups out of MEMORY.md and its part out of memory_summary.md; keep
    them as one retired summary. Returns its slug, or None when there was nothing to cut."""
    files = (("MEMORY.md", sc.handbook_groups), ("memory_summary.md", sc.summary_groups))
    split = [(rel, *_split(store, rel, spans, mine)) for rel, spans in files]
    if not any(cut for _, _, cut in split):
        return None
    body = ["# Forgotten handbook of project " + project, ""]
    for rel, _, cut in split:
        body += [f"## From {rel}", "", *cut, ""] if cut else []
    prov = {"session_id": None, "source": "handbook", "cwd": project, "project": project, "updated_at": now.isoformat()}
    slug = store.write_rollout_summary(f"forgotten-{sc.label(project)}-handbook", prov, "\n".join(body))
    store.retire_summary(slug)
    for rel, kept, cut in split:
        if cut:
            store.atomic_write(rel, "\n".join(kept).rstrip("\n") + "\n")
    return slug


def _split(store: Any, rel: str, spans, mine) -> tuple[list[str], list[str]]:
    """(lines kept, lines cut) of `rel`: the spans whose project is `mine` are cut."""
    try:
        text = store.read_text(rel)
    except (OSError, NotFoundError):
        return [], []
    lines = text.split("\n")
    starts = spans(lines) + [(len(lines), None)]
    kept: list[str] = []
    cut: list[str] = []
    for (start, project), (end, _) in zip(starts, starts[1:], strict=False):
        (cut if project and mine(project) else kept).extend(lines[start:end])
    return kept, cut
