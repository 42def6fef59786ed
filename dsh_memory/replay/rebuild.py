"""The replay's memory at the start of each session that restates a rule, and each restated rule
checked against what would have been injected there: one `replay` flow run (tagged RUN_TAG).

Phase 1 reads one session and no memory, so the sessions before the last restatement go through
one `extract` run into `<root>/../extracted`. Then, before each restating session, the output of
the sessions before it moves into `root` and the consolidate flow's body (`consolidate_step`)
merges it, as a step of this run: a flow run per consolidation cost ≈1.4 s against ≈0.2 s for the
mechanical merge itself. The consolidations share one context over `root`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_memory import progress
from dsh_memory.errors import DshMemoryError, NoModelRouteError
from dsh_memory.phase1.facts import BULLET
from dsh_memory.replay.result import RUN_TAG, HistorySession, ReplayResult

if TYPE_CHECKING:
    from dsh_memory.context import MemoryContext
    from dsh_memory.replay.rules import Matcher

PHASE = "replay"


def rebuild(
    history: list[HistorySession], root: Path, ctx: MemoryContext, matcher: Matcher, result: ReplayResult
) -> None:
    """Fill `result` (extracted, consolidations, each restated rule's `held_by`) for `history`,
    its memory rebuilt in `root` (temporary; `ctx`'s own root is never written). One flow run,
    named for the sessions it replays, its extract run a subflow of it."""
    from prefect import flow, tags

    @flow(name="replay", flow_run_name=f"replay/{len(history)} sessions", log_prints=False)
    def replay_run() -> None:
        _steps(history, root, ctx, matcher, result)

    with tags(RUN_TAG):
        replay_run()


def _steps(
    history: list[HistorySession], root: Path, ctx: MemoryContext, matcher: Matcher, result: ReplayResult
) -> None:
    from dsh_memory.context import MemoryContext
    from dsh_memory.flows.consolidate import consolidate_step
    from dsh_memory.flows.extract import extract_flow
    from dsh_memory.readpath.summary import summary
    from dsh_memory.storage.store import MemoryStore

    total = len(history)
    checks = [i for i, s in enumerate(history) if s.restated]
    needed = [h.id for h in history[: checks[-1]]] if checks else []
    staging, memory = MemoryStore(root.parent / "extracted"), MemoryStore(root)
    relayed = [0]  # Phase 1's per-session reports

    def relay(phase: str, n: int, _total: int, label: str) -> None:
        if phase == "phase1":
            relayed[0] += n
            progress.report(PHASE, n, total, label)

    with progress.listening(relay, lambda *_: None):
        if needed:
            extract = extract_flow.with_options(flow_run_name=f"replay/extract/{len(needed)} sessions")
            t = time.monotonic()
            p1 = extract(session_ids=needed, backfill=True, respect_idle=False, memory_root=str(staging.root))
            result.phase1_seconds = round(time.monotonic() - t, 1)
            if p1.skipped_no_route:
                raise NoModelRouteError(p1.error or "no model route")
            result.extracted = sum(1 for o in p1.outcomes if o.outcome in ("extracted", "noop"))
            result.failed = sum(1 for o in p1.outcomes if o.outcome in ("failed", "unreadable"))
            result.provider, result.model = p1.provider or "", p1.model or ""
    if total > relayed[0]:  # the sessions after the last restatement (and those Phase 1 skipped)
        progress.report(PHASE, total - relayed[0], total, "checked")
    memory.ensure_layout()
    blocks = staging.read_raw_blocks() if needed else []
    recaps = staging.list_rollout_summaries() if needed else []
    settings = ctx.settings.model_copy(update={"memory_root": root})  # what `consolidate --root` resolves
    max_chars, done = settings.max_summary_chars, 0
    with MemoryContext.of(settings, ctx.route).for_run() as phase2:
        for i in checks:
            ids = {h.id for h in history[done:i]}
            done = i
            if _move(staging, memory, ids, blocks, recaps):  # else nothing new to merge
                t = time.monotonic()
                p2 = consolidate_step(phase2, force=True)
                result.phase2_seconds += time.monotonic() - t
                if str(p2.outcome).startswith("error"):
                    raise DshMemoryError(f"replay stopped: consolidation failed before {history[i].id}: {p2.error}")
                result.consolidations += p2.outcome == "consolidated"
            s = history[i]
            injected = summary(memory, max_chars, cwd=s.cwd).content
            lines = [BULLET.sub("", ln).strip() for ln in injected.splitlines()]
            lines = [ln for ln in lines if ln and not ln.startswith("#") and ln != "v1"]
            for item in s.restated:
                item.held_by = matcher.holder([item.earlier.text, item.text], lines)
                item.anticipated = bool(item.held_by)
    result.phase2_seconds = round(result.phase2_seconds, 1)


def _move(staging, memory, ids: set[str], blocks: list, recaps: list) -> int:
    """Phase 1's output for the sessions `ids` (raw memory blocks, recaps) from `staging` into
    `memory`, as Phase 1 would have written it there; how many raw blocks."""
    for info in recaps:
        if str(info.provenance.get("session_id")) in ids:
            memory.atomic_write(info.rel, staging.read_text(info.rel))
    moved = [b for b in blocks if b.session_id in ids]
    for block in moved:
        memory.append_raw(block)
    return len(moved)
