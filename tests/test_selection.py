"""Phase 1 selection: every Decision carries a ReasonKind, and the pipeline branches on it, never
on the reason text (which is for people and may be reworded)."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Event, EventKind, Session, SessionRef
from dsh_memory.phase1.selection import Action, ReasonKind, plan
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state_schema import Claim

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _ref(sid: str = "s1", age_seconds: float = 3600) -> SessionRef:
    mtime = (NOW - timedelta(seconds=age_seconds)).timestamp()
    return SessionRef(id=sid, source="dsh", path=Path(f"/logs/{sid}.jsonl"), size=1, mtime_ns=int(mtime * 1e9))


def _session(sid: str = "s1", events: int = 3, **kw) -> Session:
    evs = [Event(seq=i, kind=EventKind.HUMAN if i == 0 else EventKind.ASSISTANT, text=f"e{i}") for i in range(events)]
    return Session(id=sid, source="dsh", path=Path(f"/logs/{sid}.jsonl"), events=evs, last_seq=events - 1, **kw)


def _claim(status: str, *, last_seq: int = -1, age_seconds: float = 7200, **kw) -> Claim:
    at = NOW - timedelta(seconds=age_seconds)
    base = dict(
        session_id="s1",
        status=status,
        attempts=1,
        next_retry_at=None,
        last_seq=last_seq,
        parts=1,
        updated_at=at,
        started_at=at,
        last_checked_at=None,
        error=None,
        slug="the-slug",
        source="dsh",
        path=None,
        input_tokens=0,
        output_tokens=0,
        model="",
        provider="",
        parked=False,
    )
    return Claim(**{**base, **kw})


def _decide(claim=None, session=None, ref=None, only_ids=None, **settings):
    settings = MemorySettings(
        **{
            "memory_root": Path("/nowhere"),
            "idle_seconds": 60,
            "max_rollout_age_days": 0,
            "min_delta_events": 5,
            **settings,
        }
    )
    ref = ref or _ref()
    sess = session or _session()

    def load(r):
        if isinstance(sess, Exception):
            raise sess
        return sess

    # As the callers do: named sessions (extract-session, `extract SESSION`) skip the idle check.
    idle = only_ids is None
    (d,) = plan([ref], {"s1": claim} if claim else {}, settings, NOW, load=load, only_ids=only_ids, respect_idle=idle)
    return d


@pytest.mark.parametrize(
    ("kwargs", "action", "kind"),
    [
        ({}, Action.EXTRACT, ReasonKind.NEVER_PROCESSED),
        ({"ref": _ref(age_seconds=5)}, Action.SKIP, ReasonKind.ACTIVE),
        ({"ref": _ref(age_seconds=3 * 86400), "max_rollout_age_days": 1}, Action.SKIP, ReasonKind.TOO_OLD),
        ({"claim": _claim("running", age_seconds=5)}, Action.SKIP, ReasonKind.RUNNING_ELSEWHERE),
        ({"claim": _claim("failed", parked=True)}, Action.SKIP, ReasonKind.PARKED),
        ({"claim": _claim("failed", next_retry_at=NOW + timedelta(hours=1))}, Action.SKIP, ReasonKind.BACKOFF),
        ({"claim": _claim("failed")}, Action.EXTRACT, ReasonKind.RETRY_AFTER_FAILURE),
        ({"claim": _claim("done")}, Action.BASELINE, ReasonKind.LEGACY_DONE),
        ({"claim": _claim("noop")}, Action.EXTRACT, ReasonKind.LEGACY_NOOP),
        ({"claim": _claim("done", last_seq=2, age_seconds=60)}, Action.SKIP, ReasonKind.UP_TO_DATE),
        (
            {"claim": _claim("done", last_seq=2, last_checked_at=NOW - timedelta(seconds=10), age_seconds=7200)},
            Action.SKIP,
            ReasonKind.RECHECKED_RECENTLY,
        ),
        ({"session": _session(is_root=False)}, Action.SKIP, ReasonKind.SUBAGENT),
        ({"session": _session(interactive=False)}, Action.SKIP, ReasonKind.NON_INTERACTIVE),
        ({"session": _session(events=0)}, Action.SKIP, ReasonKind.NO_HUMAN_PROMPT),
        ({"session": _session(meta={"unknown_version": True})}, Action.SKIP, ReasonKind.UNKNOWN_VERSION),
        ({"session": SessionReadError("/logs/s1.jsonl", "truncated")}, Action.UNREADABLE, ReasonKind.UNREADABLE),
    ],
)
def test_every_decision_has_a_reason_kind(kwargs, action, kind):
    d = _decide(**kwargs)
    assert (d.action, d.kind) == (action, kind), d.reason
    assert d.reason  # the text stays, for people


def test_grown_sessions_are_told_apart_by_kind_not_text():
    claim = _claim("done", last_seq=2, age_seconds=7200, updated_at=NOW - timedelta(hours=3))
    few = _decide(claim=claim, session=_session(events=5), recheck_interval_seconds=0)
    assert few.action is Action.SKIP and few.kind is ReasonKind.TOO_FEW_NEW_EVENTS and few.watermark == 2
    many = _decide(claim=claim, session=_session(events=20), recheck_interval_seconds=0)
    assert many.action is Action.EXTRACT and many.kind is ReasonKind.GREW and many.part == 2


def test_a_named_session_that_grew_is_extracted_inside_the_recheck_interval():
    """Issue #19: one new turn on a session extracted 6 minutes earlier stayed stale — the
    triggered run said "rechecked recently" and 4 new events were below min_delta_events."""
    claim = _claim(
        "done", last_seq=2, updated_at=NOW - timedelta(minutes=6), last_checked_at=NOW - timedelta(minutes=6)
    )
    session = _session(events=7)  # 4 new events (< min_delta_events 5)
    quiet = _ref(age_seconds=30)  # written 30 s ago; debounce 20 s: the trigger's session went quiet
    triggered = _decide(claim=claim, session=session, ref=quiet, only_ids={"s1"}, debounce_seconds=20)
    assert (triggered.action, triggered.kind, triggered.watermark, triggered.part) == (
        Action.EXTRACT,
        ReasonKind.GREW,
        2,
        2,
    )
    # The scans keep both guards: the recheck interval, then min_delta_events.
    scan = _decide(claim=claim, session=session, ref=quiet, debounce_seconds=20, idle_seconds=10)
    assert (scan.action, scan.kind) == (Action.SKIP, ReasonKind.RECHECKED_RECENTLY)
    scan = _decide(
        claim=claim, session=session, ref=quiet, debounce_seconds=20, idle_seconds=10, recheck_interval_seconds=0
    )
    assert (scan.action, scan.kind) == (Action.SKIP, ReasonKind.TOO_FEW_NEW_EVENTS)


def test_a_named_session_still_being_written_needs_min_delta_events():
    claim = _claim("done", last_seq=2, updated_at=NOW - timedelta(minutes=6))
    busy = _ref(age_seconds=3)  # written 3 s ago: its next turn is under way
    few = _decide(claim=claim, session=_session(events=7), ref=busy, only_ids={"s1"}, debounce_seconds=20)
    assert (few.action, few.kind) == (Action.SKIP, ReasonKind.TOO_FEW_NEW_EVENTS)
    many = _decide(claim=claim, session=_session(events=9), ref=busy, only_ids={"s1"}, debounce_seconds=20)
    assert (many.action, many.kind) == (Action.EXTRACT, ReasonKind.GREW)
    # Nothing new at all: still up to date, named or not.
    same = _decide(claim=_claim("done", last_seq=2, age_seconds=1), ref=_ref(age_seconds=30), only_ids={"s1"})
    assert same.kind is ReasonKind.UP_TO_DATE


def test_the_pipeline_never_branches_on_a_reason_text():
    """No `"…" in x.reason` / `x.reason == "…"` / `.reason.startswith(…)` in flows/ or tasks/."""
    offenders = []
    for path in [*(REPO / "flows").glob("*.py"), *(REPO / "tasks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr == "reason" for s in sides):
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value
                if isinstance(target, ast.Attribute) and target.attr == "reason":
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


def _worked_in(cwd: str, folder: str, n: int = 12, extra: int = 0) -> Session:
    """A session started in `cwd` whose `n` commands ran in `folder` (Codex's `workdir`), with
    `extra` more run in `cwd` itself."""
    from tests.session_helpers import make_session

    runs = [("tool", "shell_command", {"command": "npm test", "workdir": folder}, "Exit code: 0\nOutput:\nok", False)]
    here = [("tool", "shell_command", {"command": "git status", "workdir": cwd}, "Exit code: 0\nOutput:\n", False)]
    return make_session(("user", "Fix the dashboard."), *(runs * n), *(here * extra), cwd=cwd, source="codex")


@pytest.mark.parametrize(
    ("cwd", "folder", "extra", "filed_under", "commands"),
    [
        # all its work in a sibling repository, or in a project under the home it was started from
        ("/work/ws/portfolio", "/work/ws/dashboard", 0, "/work/ws/dashboard", ["npm test"]),
        ("/home/dev", "/home/dev/src/shop", 2, "/home/dev/src/shop", ["npm test"]),
        # … not a project's own subfolder (a monorepo's package), nor a scratch folder, nor half of it
        (
            "/work/ws/portfolio",
            "/work/ws/portfolio/packages/ui",
            0,
            "/work/ws/portfolio",
            ["cd packages/ui && npm test"],
        ),
        ("/work/ws/portfolio", "/tmp/scratch", 0, "/work/ws/portfolio", []),
        ("/work/ws/portfolio", "/work/ws/dashboard", 8, "/work/ws/portfolio", []),
    ],
)
def test_a_session_whose_work_ran_in_another_folder_is_filed_under_it(cwd, folder, extra, filed_under, commands):
    """An unseen Codex session started in one repository ran all its 248 commands in a sibling
    (`workdir`), and two sessions started in `~` worked in one project under it: filed under the
    folder they were started from, their memory landed in the wrong project and their commands read
    as another repository's."""
    d = _decide(session=_worked_in(cwd, folder, extra=extra))
    assert d.action is Action.EXTRACT
    assert d.session.cwd == filed_under
    assert d.session.meta.get("started_in", cwd) == cwd
    from dsh_memory.phase1.evidence import gather

    assert [c.line for c in gather(d.session).commands] == commands  # (another repository's run is none)


def test_a_session_filed_under_an_excluded_folder_it_worked_in_is_skipped():
    d = _decide(session=_worked_in("/work/ws/portfolio", "/work/ws/private"), exclude_projects=["/work/ws/private"])
    assert (d.action, d.kind) == (Action.SKIP, ReasonKind.EXCLUDED)
