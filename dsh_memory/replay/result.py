"""What a replay found: the restated standing instructions, whether memory held each in time,
the new rules, per project and in total. `--json` prints `ReplayResult` (its first three keys are
the issue's contract: `summary`, `restated_items`, `new_rules`); the vault shows the last one,
kept at `<memory root>/.state/replay.json` (bookkeeping: never served by the read tools)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from dsh_memory.errors import DshMemoryError
from dsh_memory.storage.store_format import STATE_DIRNAME, _write_atomic, read_regular

RUN_TAG = "dsh-memory-replay"  # on the replay's flow runs in Prefect: not the live pipeline's

REPORT_NAME = "replay.json"
MAX_REPORT_BYTES = 8 * 1024 * 1024  # the vault reads it back: bounded


class Said(BaseModel):
    """One standing instruction as the user typed it, in one session."""

    session: str
    started: datetime | None = None
    project: str | None = None
    text: str


class Restated(Said):
    """A standing instruction of a session that restates one from an earlier session."""

    earlier: Said  # its first statement
    same_project: bool = True
    matched_by: str = ""  # 'words' or 'meaning'
    anticipated: bool = False  # the memory injected at this session's start held it
    held_by: str = ""  # the injected line that held it


@dataclass
class HistorySession:
    """One session of the replayed history: when it started, its project, its standing rules and
    those of them that restate an earlier session's. `context`: another project's session in a
    `--cwd` replay, kept for its global rules only (they reach the project's memory as the live
    pipeline's global memory does); neither it nor its rules are reported."""

    id: str
    started: datetime
    cwd: str | None
    project: str | None
    rules: list[str] = field(default_factory=list)
    restated: list[Restated] = field(default_factory=list)
    context: bool = False


class Totals(BaseModel):
    restated: int = 0
    anticipated: int = 0
    missed: int = 0
    new_rules: int = 0

    def add(self, item: Restated | None = None, new_rule: bool = False) -> None:
        if item is not None:
            self.restated += 1
            self.anticipated += item.anticipated
            self.missed += not item.anticipated
        self.new_rules += new_rule


class ProjectTotals(Totals):
    project: str | None = None  # None: sessions without a cwd
    sessions: int = 0


class ReplayResult(BaseModel):
    summary: Totals = Field(default_factory=Totals)
    restated_items: list[Restated] = Field(default_factory=list)
    new_rules: list[Said] = Field(default_factory=list)
    projects: list[ProjectTotals] = Field(default_factory=list)
    scope: str = "all"  # 'all' or the project replayed (--cwd)
    since: datetime | None = None
    last: int | None = None
    sessions: int = 0  # sessions replayed, in time order (the project's, with --cwd)
    context_sessions: int = 0  # other projects' sessions replayed for their global rules (--cwd), not reported
    left_out: int = 0  # older session logs beyond the bound (core.MAX_SESSIONS), not read
    items_cut: int = 0  # restated items and new rules left out of the saved report (MAX_REPORT_BYTES)
    extracted: int = 0  # sessions Phase 1 extracted (or found nothing in) in the temporary root
    failed: int = 0  # sessions Phase 1 failed on: the memory after them lacks what they said
    consolidations: int = 0  # Phase 2 runs (one before each session that restated a rule)
    provider: str = ""
    model: str = ""
    matcher: str = ""
    finished_at: datetime | None = None
    seconds: float = 0.0
    phase1_seconds: float = 0.0  # of which in the extract runs
    phase2_seconds: float = 0.0  # of which in the consolidate runs

    def tally(self) -> None:
        """summary and projects from restated_items and new_rules."""
        self.summary = Totals()
        by_project = {p.project: ProjectTotals(project=p.project, sessions=p.sessions) for p in self.projects}
        for item in self.restated_items:
            self.summary.add(item)
            by_project.setdefault(item.project, ProjectTotals(project=item.project)).add(item)
        for rule in self.new_rules:
            self.summary.add(new_rule=True)
            by_project.setdefault(rule.project, ProjectTotals(project=rule.project)).add(new_rule=True)
        self.projects = sorted(by_project.values(), key=lambda p: p.project or "")


def in_replay_run() -> bool:
    """Whether the current flow run is a replay's (tagged RUN_TAG, its subflows too). The one
    rule that keeps the live pipeline's view clean: status and the vault leave these runs out, and
    the flows publish no live artifact from them (`phase1-batch`, `phase2-consolidation`: the
    Prefect UI's latest batch and consolidation stay the pipeline's)."""
    from prefect.runtime import flow_run

    return RUN_TAG in (flow_run.get_tags() or [])


def report_path(memory_root: Path) -> Path:
    return Path(memory_root) / STATE_DIRNAME / REPORT_NAME


def save_report(memory_root: Path, result: ReplayResult) -> Path:
    """Keep `result` as the last replay (atomic write; the folder private to the user), redacted
    (a project is its sessions' cwd, and a key in a cwd must not reach the memory root). The vault
    reads it back, bounded: too long, its lists are cut to fit (the missed first), its totals kept."""
    from dsh_memory.transcript.redact import redact_obj

    result = ReplayResult.model_validate(redact_obj(result.model_dump(mode="json")))
    path = report_path(memory_root)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = result.model_dump_json(indent=1)
    items = sorted(result.restated_items, key=lambda i: i.anticipated)  # the missed first, in order
    rules, n = result.new_rules, len(items) + len(result.new_rules)
    while len(text.encode()) > MAX_REPORT_BYTES and n:
        n //= 2
        kept = {"restated_items": items[:n], "new_rules": rules[: max(0, n - len(items))]}
        cut = len(items) + len(rules) - len(kept["restated_items"]) - len(kept["new_rules"])
        text = result.model_copy(update={**kept, "items_cut": cut}).model_dump_json(indent=1)
    _write_atomic(path, text)
    return path


def load_report(memory_root: Path) -> ReplayResult | None:
    """The last replay, or None when there is none. A report that cannot be read (too big, not
    JSON, not a replay's) raises DshMemoryError saying why: it is not the same as no replay."""
    path = report_path(memory_root)
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            raise DshMemoryError(f"{path.name} is over {MAX_REPORT_BYTES} bytes")
        return ReplayResult.model_validate(json.loads(read_regular(path)))  # a FIFO: refused, never waited on
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as exc:
        raise DshMemoryError(f"{path.name} cannot be read: {type(exc).__name__}") from exc


def vault_page(memory_root: Path) -> dict:
    """The vault's `/vault/replay` data: the last replay, its missed items first."""
    try:
        result = load_report(memory_root)
    except DshMemoryError as exc:
        return {"replay": None, "error": str(exc)}
    if result is None:
        return {"replay": None}
    missed = [i for i in result.restated_items if not i.anticipated]
    held = [i for i in result.restated_items if i.anticipated]
    return {"replay": result, "missed": missed, "held": held}
