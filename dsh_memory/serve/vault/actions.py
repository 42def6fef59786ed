"""The vault's corrections: each one says what it will do (`plan`, the confirm step) and then
does it (`run`) by calling the same core function as the CLI. `extract` and `consolidate` start a
deployment run: without a Prefect server they say so instead of pretending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from dsh_memory.consolidation.forget import forget_session, restore_summary
from dsh_memory.context import MemoryContext
from dsh_memory.errors import UserInputError
from dsh_memory.models import extract_command
from dsh_memory.readpath import AddRequest, add, delete_file, list_dir
from dsh_memory.readpath._common import is_active_rollout, validate
from dsh_memory.serve.deployments import CONSOLIDATE, EXTRACT_SESSION, start_run
from dsh_memory.serve.vault.render import reader_url
from dsh_memory.settings_loader import prefect_api_url

MAX_FIELD_CHARS = 25_000  # the longest field: a note (at most 20,000 characters)


@dataclass
class Plan:
    """What an action will do, shown before it is done."""

    title: str
    steps: list[str]
    fields: dict[str, str]
    preview: str = ""  # e.g. the note as it will be written
    blocked: str = ""  # why it cannot be done here (then there is no confirm button)
    danger: bool = False


@dataclass
class Outcome:
    message: str
    details: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, url)


def _one(form: dict[str, str], name: str) -> str:
    value = form.get(name, "")
    if not value.strip():
        raise UserInputError(f"{name} is required")
    return value.strip() if name != "note" else value


def _no_server() -> str:
    if prefect_api_url(profile=True):
        return ""
    return (
        "No Prefect server is configured (PREFECT_API_URL is unset), so nothing here would run it. "
        "Start the stack with `dsh-memory serve`, or run the command shown below in a terminal."
    )


def _excluded(ctx: MemoryContext, sid: str) -> str:
    if not ctx.state_exists() or ctx.state.overrides().get(sid) != "exclude":
        return ""
    return "This session is excluded (forgotten): extraction skips it, so a run would do nothing."


def plan(ctx: MemoryContext, action: str, form: dict[str, str]) -> Plan:
    if action == "add":
        project = form.get("project", "").strip() or None  # none: the person chose every project
        req = validate(
            AddRequest,
            note=_one(form, "note"),
            title=form.get("title", "").strip() or None,
            cwd=project,
            scope="project" if project else "global",
        )
        where = f"the project of {project}" if project else "every project (global)"
        return Plan(
            "Add a note",
            [
                "Write a new note into extensions/ad_hoc/notes/ (secrets are redacted before writing).",
                f"The next consolidation folds it into MEMORY.md and the summary of {where} as the "
                "highest-priority evidence, then moves it to extensions/ad_hoc/archive/.",
            ],
            {"note": req.note, "title": req.title or "", "project": project or ""},
            preview=req.note,
        )
    if action == "delete":
        path = _one(form, "path")
        rel = list_dir(ctx.store, path).path  # refuses escapes, names a missing file
        steps = [f"Delete {rel} for good: it is not moved anywhere and cannot be restored."]
        if is_active_rollout(rel):
            steps.append(
                "What consolidation already took from it stays in MEMORY.md and the summary until the next "
                "consolidation; to drop a whole session and keep it from being learned again, use Forget."
            )
        return Plan(f"Delete {rel}", steps, {"path": rel}, danger=True)
    if action == "forget":
        sid = _one(form, "session")
        summaries = ctx.store.list_rollout_summaries()  # as retire_session matches them: None is no session
        mine = [i.rel for i in summaries if str((i.provenance or {}).get("session_id") or "") == sid]
        raw = sum(1 for b in ctx.store.read_raw_blocks() if b.session_id == sid)
        return Plan(
            f"Forget session {sid}",
            [
                "Drop its extraction record and exclude it from future extraction (it is not learned again).",
                f"Retire its {len(mine)} rollout summaries into rollout_summaries/.retired/ (recoverable): "
                + (", ".join(mine) or "none"),
                f"Move its {raw} not yet consolidated raw memories to the archive.",
                "What MEMORY.md and the summary learned from it stays (a consolidation keeps it): edit them to drop it.",
            ],
            {"session": sid},
            danger=True,
        )
    if action == "restore":
        name = _one(form, "name").removesuffix(".md")
        return Plan(
            f"Restore {name}",
            [
                f"Move rollout_summaries/.retired/{name}.md back to rollout_summaries/ (another name if taken).",
                "It joins the consolidation index again; the restore counts as a use, so forgetting leaves it "
                "alone for max_unused_days.",
            ],
            {"name": name},
        )
    if action == "extract":
        sid = _one(form, "session")
        return Plan(
            f"Re-run extraction for {sid}",
            [
                "Ask the Prefect server to run the extract-session deployment for this session now.",
                "Phase 1 extracts it when it is new, grew since its last extraction, or failed; an up-to-date "
                "session is left as it is. A successful extraction then requests a consolidation.",
                f"From a terminal: {extract_command(sid)}",
            ],
            {"session": sid},
            blocked=_excluded(ctx, sid) or _no_server(),
        )
    if action == "consolidate":
        return Plan(
            "Consolidate now",
            [
                "Ask the Prefect server to run the consolidate deployment now, even inside the cooldown "
                "(force): raw memories and notes are folded into MEMORY.md and memory_summary.md.",
                "From a terminal: dsh-memory consolidate --force",
            ],
            {},
            blocked=_no_server(),
        )
    raise UserInputError(f"unknown action {action!r}")


def run(ctx: MemoryContext, action: str, form: dict[str, str]) -> Outcome:
    """Do what `plan` described (validated again: the form came back from the browser); refused
    while the saved settings are unknown (`ResolvedSettings.require_saved`): they name the root."""
    ctx.resolved.require_saved()
    p = plan(ctx, action, form)
    if p.blocked:
        raise UserInputError(p.blocked)
    now = datetime.now(UTC)
    if action == "add":
        project = p.fields["project"] or None
        scope = "project" if project else "global"
        res = add(ctx.store, p.fields["note"], title=p.fields["title"] or None, cwd=project, scope=scope)
        links = [("Open it", reader_url(res.path)), ("Notes", "/vault/browse#notes")]
        return Outcome(f"Added the note {res.path} ({res.scope}).", links=links)
    if action == "delete":
        rel = delete_file(ctx.store, p.fields["path"]).path
        return Outcome(f"Deleted {rel}.", links=[("Browse", "/vault/browse")])
    if action == "forget":
        r = forget_session(ctx, p.fields["session"], now)
        return Outcome(
            f"Forgot session {r['session_id']}.",
            [
                f"extraction record {'dropped' if r['claim_dropped'] else 'absent'}; excluded from extraction",
                f"retired: {', '.join(r['retired']) or 'nothing'}",
                f"raw memories archived: {r['raw_blocks_archived']}",
            ],
            [("Retired summaries", "/vault/browse#retired")],
        )
    if action == "restore":
        r = restore_summary(ctx.store, ctx.state, p.fields["name"], now)
        return Outcome(f"Restored {r['restored']} as {r['path']}.", links=[("Open it", reader_url(r["path"]))])
    if action == "extract":
        started = start_run(EXTRACT_SESSION, {"session": p.fields["session"]})
    else:
        started = start_run(CONSOLIDATE, {"force": True})
    return Outcome(
        f"Started flow run {started['name']} ({started['deployment']}).",
        links=[("Follow it in the Prefect UI", started["url"])],
    )


def parse_form(body: bytes) -> dict[str, Any]:
    """An urlencoded body (the guard bounded its size) as one value per field."""
    try:
        text = body.decode("utf-8")
        pairs = parse_qs(text, keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise UserInputError("the form could not be read (not UTF-8, or too many fields)") from None
    form = {}
    for k, values in pairs.items():
        # a browser sends every line break as CRLF: back to the text as typed (and as maxlength counted it)
        values = [v.replace("\r\n", "\n").replace("\r", "\n") for v in values]
        if len(values) != 1 or len(values[0]) > MAX_FIELD_CHARS:
            raise UserInputError(f"form field {k[:40]!r} must appear once, at most {MAX_FIELD_CHARS} characters")
        form[k] = values[0]
    return form
