"""Phase 1 split in two for workers on other machines (`extract_on_workers`): the pure step
(flows/extract_transcripts.py, on any worker) turns `TranscriptJob`s (a session's redacted,
budgeted transcript and what the model call needs) into `JobResult`s, and never sees the memory
root, the session logs or the claims; the single writer (tasks/remote.py) claims and renders the
jobs and applies the results. A worker's answer is untrusted input: `accept` validates, redacts and
caps it again before anything is written.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dsh_memory.phase1 import prompt as phase1
from dsh_memory.phase1.evidence import Evidence
from dsh_memory.phase1.prompt import ExtractionOutput
from dsh_memory.transcript.redact import redact

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


class JobResult(BaseModel):
    """What the pure step returns for one job: an extraction, or why there is none."""

    session_id: str = Field(max_length=300)
    output: ExtractionOutput | None = None
    error: str = Field("", max_length=MAX_ERROR_CHARS)


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
