"""Phase 1 split in two for workers on other machines (`extract_on_workers`): the pure step
(flows/extract_transcripts.py, on any worker) turns `TranscriptJob`s (a session's redacted,
budgeted transcript and what the model call needs) into `JobResult`s, and never sees the memory
root, the session logs or the claims; the single writer (tasks/remote.py) claims and renders the
jobs and applies the results. A worker's answer is untrusted input: `accept` validates, redacts and
caps it again before anything is written.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError

from dsh_memory.phase1 import prompt as phase1
from dsh_memory.phase1.evidence import Evidence
from dsh_memory.phase1.prompt import ExtractionOutput
from dsh_memory.transcript.redact import redact, redact_obj

MAX_BATCH_SESSIONS = 50  # sessions per extract-transcripts run at most (its parameters hold their transcripts)
MAX_TRANSCRIPT_CHARS = 1_000_000  # far above any budget: a bound, not a budget
MAX_ERROR_CHARS = 300


class TranscriptJob(BaseModel):
    """One session for the pure step. `text` is the rendered transcript, already redacted ("" when
    the evidence shows nothing worth a model call)."""

    session_id: str = Field(max_length=300)
    source: str = Field(max_length=20)
    cwd: str | None = Field(None, max_length=4096)
    watermark: int
    to_seq: int
    text: str = Field(max_length=MAX_TRANSCRIPT_CHARS)
    evidence: Evidence = Field(description="The session's evidence (the gate; the evidence writer)")
    cache_scope: str = Field("", max_length=4096, description="The main host's memory root: part of the cache key")

    def redacted(self) -> TranscriptJob:
        """This job with every text redacted but its session id (the key its result comes back
        under): a run's parameters are stored by the Prefect server as they are, and the cwd and
        the evidence (commands, edited paths…) are the session's own words."""
        fields = redact_obj(self.model_dump(mode="json", exclude={"session_id"}))
        return TranscriptJob.model_validate({**fields, "session_id": self.session_id})


class JobResult(BaseModel):
    """What the pure step returns for one job: an extraction, or why there is none."""

    session_id: str = Field(max_length=300)
    output: ExtractionOutput | None = None
    error: str = Field("", max_length=MAX_ERROR_CHARS)


def job_results(answers: object, session_ids: list[str]) -> list[JobResult]:
    """One JobResult per session sent, from a run's decoded result (a worker's, untrusted). An entry
    that does not validate, or a session answered twice or not at all, fails that session alone,
    saying why; entries for sessions not sent are dropped (a worker ends no session it was not
    sent). A result that is not a list at all is the run's fault: ValueError."""
    if not isinstance(answers, list):
        raise ValueError(f"the run's result is a JSON {type(answers).__name__}, not a list of results")
    entries: dict[str, list] = {sid: [] for sid in session_ids}
    for a in answers:
        sid = a.get("session_id") if isinstance(a, dict) else None
        if isinstance(sid, str) and sid in entries:
            entries[sid].append(a)
    return [_one_result(sid, entries[sid]) for sid in session_ids]


def _one_result(session_id: str, entries: list) -> JobResult:
    if len(entries) != 1:
        why = (
            f"the worker returned {len(entries)} results for it" if entries else "the worker returned no result for it"
        )
        return JobResult(session_id=session_id, error=why)
    try:
        result = JobResult.model_validate(entries[0])
    except ValidationError as exc:  # named by field, without the worker's values
        fields = ", ".join(".".join(map(str, e["loc"])) or "?" for e in exc.errors()[:5])
        return JobResult(
            session_id=session_id, error=f"the worker's result for it is not valid: {fields}"[:MAX_ERROR_CHARS]
        )
    return result.model_copy(update={"error": redact(result.error)[:MAX_ERROR_CHARS]})


def accept(output: ExtractionOutput) -> ExtractionOutput:
    """A worker's extraction made safe to write: redacted again (a worker may run an older or a
    modified redactor) and capped like the model's own output."""
    caps = {
        "raw_memory": phase1.RAW_MEMORY_MAX_CHARS,
        "rollout_summary": phase1.SUMMARY_MAX_CHARS,
        "rollout_slug": 120,
        "model": 200,
        "provider": 50,
    }
    fields = {k: redact(getattr(output, k))[:cap] for k, cap in caps.items()}
    notes = [redact(n)[:300] for n in output.notes[:20]]
    return output.model_copy(update={**fields, "notes": notes})


def batches(items: list, runs: int) -> list[list]:
    """`items` split over about `runs` extract-transcripts runs (the writer keeps that many in
    flight), each at most MAX_BATCH_SESSIONS: a run costs a process start on its worker, so a few
    large runs beat many small ones, and each run extracts its sessions in parallel itself."""
    size = min(MAX_BATCH_SESSIONS, max(1, -(-len(items) // max(1, runs))))
    return [items[i : i + size] for i in range(0, len(items), size)]
