"""Phase 1 candidate selection: which sessions to extract now, and why the others wait.

Pure logic over discovery refs, claims and settings. Cheap checks (stat-derived times, claims)
come first; a session log is read only when its file changed since the last look. A session that
did its work in another folder is filed under that folder (`work_folder`).

Freshness by intent. A session NAMED by the caller (`only_ids`: the turn-end trigger's
extract-session run, `dsh-memory extract SESSION`) is an explicit request:
- `recheck_interval_seconds` does not apply to it — the interval spaces out the catch-up scans'
  re-reads of unchanged-looking sessions, not requests for one session that grew;
- any growth (≥ 1 new event) is extracted once the session has gone quiet: no write for half the
  debounce window (the trigger fires a full debounce after the last turn end,
  so a finished session qualifies). `min_delta_events` still applies while the log is being
  written — it bounds churn on active sessions, not the last turn of a finished one.
Scans (catch-up, `extract --all`) keep both guards: a grown session waits for the recheck
interval and for `min_delta_events` new events (its small last delta is extracted on the next
turn-end trigger, or once it grows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Session, SessionRef
from dsh_memory.phase1.work_folder import work_folder
from dsh_memory.scope import excluded_by
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state_schema import owner_is_gone


class Action(StrEnum):
    EXTRACT = "extract"
    SKIP = "skip"
    BASELINE = "baseline"  # legacy done claim without watermark: record the watermark only
    UNREADABLE = "unreadable"  # the log cannot be read: that claim fails alone


EXTRACT, SKIP, BASELINE, UNREADABLE = Action.EXTRACT, Action.SKIP, Action.BASELINE, Action.UNREADABLE


class ReasonKind(StrEnum):
    """The kind of a Decision's reason: what code branches on (the reason text is for people)."""

    EXCLUDED = "excluded"  # override: exclude
    TOO_OLD = "too_old"  # older than max_rollout_age_days
    ACTIVE = "active"  # written to within idle_seconds
    RUNNING_ELSEWHERE = "running_elsewhere"  # a fresh running claim
    PARKED = "parked"  # failed retry_limit times
    BACKOFF = "backoff"  # failed, next retry not due
    LEGACY_DONE = "legacy_done"  # done claim without watermark: baseline it
    UP_TO_DATE = "up_to_date"  # unchanged since the claim
    RECHECKED_RECENTLY = "rechecked_recently"  # changed, but looked at within recheck_interval
    UNKNOWN_VERSION = "unknown_version"  # log format version we do not know
    SUBAGENT = "subagent"  # not a root session
    NON_INTERACTIVE = "non_interactive"  # codex exec
    NO_HUMAN_PROMPT = "no_human_prompt"
    TOO_FEW_NEW_EVENTS = "too_few_new_events"  # grew by fewer than min_delta_events: checked, not extracted
    GREW = "grew"  # grew enough: extract the delta
    RETRY_AFTER_FAILURE = "retry_after_failure"
    NEVER_PROCESSED = "never_processed"
    LEGACY_NOOP = "legacy_noop"  # noop claim without watermark: one full re-extraction
    UNREADABLE = "unreadable"
    ID_COLLISION = "id_collision"  # another log of the same source has this session id


@dataclass
class Decision:
    ref: SessionRef
    action: Action
    kind: ReasonKind
    reason: str  # the same, for people: "grew by 3 events (< 5)"
    watermark: int = -1  # extract events with seq > watermark
    part: int = 1
    session: Session | None = field(default=None, repr=False)
    base_slug: str | None = None

    def row(self) -> DecisionRow:
        shared = {name: getattr(self, name) for name in ("action", "kind", "reason", "watermark", "part")}
        return DecisionRow(session=self.ref.id, source=self.ref.source, **shared)


class DecisionRow(BaseModel):
    """A Decision without the session it read: the dry-run table row, and what bookkeeping needs."""

    session: str
    source: str
    action: Action
    # For the bookkeeping in this run; not a table column (nor in --json: the reason says it).
    kind: ReasonKind | None = Field(None, exclude=True)
    reason: str
    watermark: int
    part: int


def _age(now: datetime, t: datetime) -> float:
    return (now - t).total_seconds()


def plan(
    refs: Iterable[SessionRef],
    claims: dict[str, Any],
    settings: MemorySettings,
    now: datetime,
    *,
    load: Callable[[SessionRef], Session],
    only_ids: set[str] | None = None,
    backfill: bool = False,
    respect_idle: bool = True,
    overrides: dict[str, str] | None = None,
) -> list[Decision]:
    """One Decision per discovered session (restricted to `only_ids` when given). A session of a
    project in `settings.exclude_projects` is skipped after reading its header alone (the cwd
    `readers.header.session_cwd` finds there), before anything else is looked at."""
    overrides = overrides or {}
    if settings.exclude_projects:
        from dsh_memory.readers.header import session_cwd
    out: list[Decision] = []
    explicit = only_ids is not None  # named sessions: an explicit request (freshness by intent)
    for ref in refs:
        if only_ids is not None and ref.id not in only_ids:
            continue
        why = _excluded(session_cwd(ref), settings) if settings.exclude_projects else None
        if why:
            out.append(Decision(ref, SKIP, ReasonKind.EXCLUDED, why))
            continue
        claim, override = claims.get(ref.id), overrides.get(ref.id)
        try:
            out.append(_decide(ref, claim, settings, now, load, backfill, respect_idle, override, explicit))
        except SessionReadError as exc:  # the log cannot be read: that claim fails alone
            out.append(Decision(ref, UNREADABLE, ReasonKind.UNREADABLE, f"unreadable: {exc.reason}"))
    return out


def _excluded(cwd: str | None, settings: MemorySettings) -> str | None:
    """Why a session of this folder is skipped (`settings.exclude_projects`), or None."""
    pattern = excluded_by(cwd, settings.exclude_projects)
    return None if pattern is None else f"excluded: its project matches {pattern}"


def _decide(ref, claim, settings, now, load, backfill, respect_idle, override, explicit) -> Decision:
    skip = partial(Decision, ref, SKIP)
    if override == "exclude":
        return skip(ReasonKind.EXCLUDED, "excluded by override")
    if getattr(ref, "collision_with", None) is not None:
        return skip(
            ReasonKind.ID_COLLISION,
            f"same session id as {ref.collision_with}: not extracted (it would overwrite that session's memory)",
        )
    updated = ref.updated_at
    if not backfill and settings.max_rollout_age_days and now - updated > timedelta(days=settings.max_rollout_age_days):
        return skip(ReasonKind.TOO_OLD, f"older than {settings.max_rollout_age_days} days (use --backfill)")
    if respect_idle and _age(now, updated) < settings.idle_seconds:
        return skip(
            ReasonKind.ACTIVE, f"active: last write {int(_age(now, updated))}s ago (< idle {settings.idle_seconds}s)"
        )

    watermark, part, base_slug = -1, 1, None
    if claim is not None:
        status = claim.status
        fresh = claim.started_at and _age(now, claim.started_at) < settings.stale_claim_seconds
        if status == "running" and fresh and not owner_is_gone(claim.owner):  # a dead owner's: taken over now
            return skip(ReasonKind.RUNNING_ELSEWHERE, "being extracted by another run")
        if status == "failed":
            if claim.parked:
                return skip(
                    ReasonKind.PARKED,
                    f"parked after {claim.attempts} failed attempts (resumes when the model works again,"
                    " or: dsh-memory extract --retry-parked)",
                )
            if claim.next_retry_at and claim.next_retry_at > now:
                return skip(
                    ReasonKind.BACKOFF, f"retry backoff until {claim.next_retry_at.isoformat(timespec='seconds')}"
                )
        if status in ("done", "noop"):
            legacy = claim.last_seq is None or claim.last_seq < 0
            if legacy and status == "done":
                sess = load(ref)
                return Decision(
                    ref,
                    BASELINE,
                    ReasonKind.LEGACY_DONE,
                    "legacy done claim: baseline the watermark",
                    watermark=sess.last_seq,
                    session=sess,
                )
            if not legacy:
                if claim.updated_at and updated <= claim.updated_at:
                    return skip(ReasonKind.UP_TO_DATE, "up to date")
                checked = claim.last_checked_at or claim.updated_at
                if not explicit and checked and _age(now, checked) < settings.recheck_interval_seconds:
                    return skip(ReasonKind.RECHECKED_RECENTLY, "rechecked recently")
                watermark = claim.last_seq
                part = (claim.parts or 1) + 1
                base_slug = claim.slug
        elif status in ("failed", "running") and claim.last_seq is not None and claim.last_seq >= 0:
            # A previous part succeeded before this failure: continue from its watermark.
            watermark, part, base_slug = claim.last_seq, (claim.parts or 0) + 1, claim.slug

    sess = load(ref)
    elsewhere = work_folder(sess)
    if elsewhere:  # filed under the folder it worked in, where its commands ran and its edits wrote
        sess = sess.model_copy(update={"cwd": elsewhere, "meta": {**sess.meta, "started_in": sess.cwd}})
        why = _excluded(elsewhere, settings)
        if why:
            return skip(ReasonKind.EXCLUDED, why, session=sess)
    if sess.meta.get("unknown_version") and override != "include":
        return skip(
            ReasonKind.UNKNOWN_VERSION,
            f"unknown log format version {sess.format_version} (read best-effort, not extracted)",
            session=sess,
        )
    if not sess.is_root:
        return skip(ReasonKind.SUBAGENT, "subagent session (its parent's log covers it)", session=sess)
    if not sess.interactive and not settings.include_codex_exec and override != "include":
        return skip(ReasonKind.NON_INTERACTIVE, "non-interactive session (codex exec)", session=sess)
    if not sess.human_prompts:
        return skip(ReasonKind.NO_HUMAN_PROMPT, "no human prompt", session=sess)
    kind, reason = ReasonKind.NEVER_PROCESSED, "never processed"
    if watermark >= 0:
        new = len(sess.events_after(watermark))
        quiet = explicit and _age(now, updated) >= settings.debounce_seconds / 2  # see the module docstring
        needed = 1 if quiet else settings.min_delta_events
        if new < needed:
            return skip(
                ReasonKind.TOO_FEW_NEW_EVENTS, f"grew by {new} events (< {needed})", watermark=watermark, session=sess
            )
        small = " (quiet: its last turns)" if new < settings.min_delta_events else ""
        kind, reason = ReasonKind.GREW, f"grew by {new} events since seq {watermark}{small}"
    elif claim is not None and claim.status == "failed":
        kind, reason = ReasonKind.RETRY_AFTER_FAILURE, "retry after failure"
    elif claim is not None and claim.status == "noop" and (claim.last_seq is None or claim.last_seq < 0):
        kind, reason = ReasonKind.LEGACY_NOOP, "legacy noop claim: one full re-extraction"
    return Decision(ref, EXTRACT, kind, reason, watermark=watermark, part=part, session=sess, base_slug=base_slug)
