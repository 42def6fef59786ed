"""One end of a session's Phase 1 for both modes (tasks/_session.py `finish`): a model error here
and a worker's error text fail the session's claim the same way, against the route that
answered, and never the batch; an answer applies and ends the claim."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prefect import flow

from dsh_memory.context import MemoryContext
from dsh_memory.errors import LLMTransientError
from dsh_memory.phase1.extraction import ExtractionOutput
from dsh_memory.phase1.selection import Action, plan
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.tasks._session import finish, start
from tests.test_selection import _ref, _session

ANSWERS = {
    "local": LLMTransientError("HTTP 503 from the model"),
    "worker": "RuntimeError: extract-transcripts run ended Crashed",
    "applied": ExtractionOutput(
        raw_memory="- The user runs the tests with `make test`, not pytest.",
        rollout_summary="## Task\nFix the crash.\n\n## Outcome\n`make test` passes.",
        rollout_slug="crash-fix",
    ),
}


@pytest.mark.usefixtures("prefect_api")
def test_every_failure_ends_in_the_same_failed_claim_and_an_answer_ends_done(tmp_path):
    settings = MemorySettings(memory_root=tmp_path, idle_seconds=60, max_rollout_age_days=0, retry_limit=3)
    refs = [_ref(sid) for sid in ANSWERS]
    decisions = plan(refs, {}, settings, datetime.now(UTC), load=lambda r: _session(r.id, events=6))
    assert all(d.action == Action.EXTRACT for d in decisions)

    @flow
    def end_them():
        with MemoryContext.of(settings) as ctx:
            return {
                d.ref.id: finish(ctx, settings, d, ANSWERS[d.ref.id], ("route-provider", "route-model"))
                for d in decisions
                if start(ctx, settings, d, claimed=False)
            }

    outcomes = end_them()
    claims = StateStore(tmp_path).claims()
    for sid in ("local", "worker"):
        o, c = outcomes[sid], claims[sid]
        assert (o.outcome, o.attempts, o.parked) == ("failed", 1, False), o
        assert (c.status, c.attempts, c.provider, c.model) == ("failed", 1, "route-provider", "route-model")
        assert c.next_retry_at is not None and o.error and o.error[:30] in (c.error or "")
    assert "HTTP 503" in outcomes["local"].error and "ended Crashed" in outcomes["worker"].error
    assert outcomes["applied"].outcome == "extracted" and claims["applied"].status == "done"


def test_a_secret_in_the_sessions_title_never_names_its_recap(tmp_path):
    """Without a slug from the model the recap is named from the session's title (a log's, so
    untrusted): slugged unredacted, a token in it reached the file name, lowercased past the
    patterns that would have caught it later."""
    from dsh_memory.phase1.extraction import apply_output
    from dsh_memory.storage.store import MemoryStore

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    settings = MemorySettings(memory_root=tmp_path, idle_seconds=60, max_rollout_age_days=0)
    (d,) = plan(
        [_ref("t1")],
        {},
        settings,
        datetime.now(UTC),
        load=lambda r: _session(r.id, events=6, title=f"push with {token}"),
    )
    answer = ANSWERS["applied"].model_copy(update={"rollout_slug": ""})
    with StateStore(tmp_path) as state:
        state.try_start("t1", datetime.now(UTC))
        outcome = apply_output(MemoryStore(tmp_path), state, d, answer)
    assert outcome.outcome == "extracted" and outcome.slug.startswith("push-with")
    names = [p.name for p in tmp_path.rglob("*")]
    assert not any("a1b2c3d4e5f6" in n.lower() for n in names), names  # the key, however slugged
