"""Phase 1 work for one session, as plain functions (Prefect tasks wrap them in tasks/extract.py).

prepare  : the session's evidence from its events (the no-op gate reads it) and, for a writer
           that reads transcripts, the rendered → redacted → budgeted transcript
call     : the writer chosen with the model (`PhaseModel.writer`):
           "model"    — the model writes the memory: one `memory_save` call over the transcript
           "evidence" — memory built from the evidence, the model writes a recap (phase1/steps.py)
           then the same clean-up and scope tags for both (postprocess)
apply    : rollout summary file → raw memory block → claim done/noop
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from dsh_memory.errors import LLMOutputError
from dsh_memory.llm.base import LLM, Completion, Writer
from dsh_memory.phase1 import prompt as phase1
from dsh_memory.phase1.evidence import Evidence, gather, trivial_reason
from dsh_memory.phase1.postprocess import Source, clean_text, is_content, scope_items
from dsh_memory.phase1.prompt import ExtractionOutput
from dsh_memory.phase1.selection import Decision
from dsh_memory.phase1.steps import extract_in_steps, grounds, users_words
from dsh_memory.scope import head_commit, project_root, untag
from dsh_memory.transcript.redact import redact
from dsh_memory.transcript.render import render_transcript


class Outcome(BaseModel):
    """What happened to one session: a row of the Phase 1 batch table (no transcript, no secrets)."""

    session: str
    source: str
    outcome: Literal["extracted", "noop", "failed", "skipped", "unreadable"]
    part: int = 1
    slug: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    error: str = ""
    reason: str = Field("", exclude=True)  # why it was skipped (logs only; not a table column)
    attempts: int = 0  # failed: attempts so far
    parked: bool = False  # failed: no automatic retry until the model works again (or --retry-parked)

    @classmethod
    def of(cls, decision: Decision, outcome: str, **fields: Any) -> Outcome:
        """The outcome of `decision`'s session (its id, source and part)."""
        return cls(session=decision.ref.id, source=decision.ref.source, outcome=outcome, part=decision.part, **fields)

    @classmethod
    def claimed_elsewhere(cls, decision: Decision) -> Outcome:
        """Skipped: another run holds the session's claim (it extracts it)."""
        return cls.of(decision, "skipped", reason="claimed by another run")


class Phase1Input(BaseModel):
    """What a writer gets for one session: its evidence, and the transcript when it reads one."""

    evidence: Evidence
    transcript: str = ""  # rendered, redacted, budgeted ("" for the evidence writer)


def prepare_input(decision: Decision, budget_tokens: int, writer: Writer | None) -> Phase1Input:
    """`material_for` a decision's session (its delta when it has a watermark)."""
    since = decision.watermark if decision.watermark >= 0 else None
    return material_for(decision.session, since, budget_tokens, writer)


def material_for(session, since: int | None = None, budget_tokens: int = 24000, writer: Writer | None = None):
    """The evidence of the session's events after `since` and, unless the writer is "evidence" or
    the gate finds nothing worth a call, its budgeted transcript (`writer` None: a worker's
    writer decides, so both)."""
    material = Phase1Input(evidence=gather(session, since))
    if writer != "evidence" and not trivial_reason(material.evidence):
        material.transcript = render_transcript(session, budget_tokens=budget_tokens, since_seq=since).text
    return material


def call_model(
    llm: LLM,
    material: Phase1Input,
    *,
    writer: Writer,
    cwd: str | None,
    source: str,
    delta_watermark: int | None,
    max_tokens: int,
    reasoning_effort: str,
    slot: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> ExtractionOutput:
    """One extraction: the no-op gate, the writer, the clean-up (see the module docstring). Raises
    the LLM error classes. `slot()` is held around the model's part only (llm/limit.py: the run's
    model slots), so the gate, the prompt and the clean-up of one session overlap another's call."""
    reason = trivial_reason(material.evidence)
    if reason:
        return ExtractionOutput(
            model=getattr(llm, "model", ""), provider=getattr(llm, "provider", ""), notes=[f"no-op gate: {reason}"]
        )
    if writer == "evidence":
        ground = grounds(material.evidence, cwd)  # what the recap sentence and every line may say
        with slot():
            output = extract_in_steps(llm, material.evidence, ground, cwd=cwd, max_tokens=max_tokens)
        return clean_output(output, ground, users_words(material.evidence))
    messages = phase1.build_messages(material.transcript, cwd=cwd, source=source, delta_watermark=delta_watermark)
    with slot():
        completion = llm.complete(
            messages, tool=phase1.MEMORY_SAVE_TOOL, max_tokens=max_tokens, reasoning_effort=reasoning_effort
        )
    return clean_output(parse_completion(completion), material.transcript)


def clean_output(output: ExtractionOutput, transcript_text: str, users: str | None = None) -> ExtractionOutput:
    """An extraction (every provider's) cleaned against the transcript (`postprocess.clean_text`;
    a raw memory left with headings only is empty) and its items scoped (`scope_items`) by the
    user's words: the transcript's, or `users` (`[user]` blocks) when the text is no transcript."""
    src = Source.of(transcript_text)
    caps = {"raw_memory": phase1.RAW_MEMORY_MAX_CHARS, "rollout_summary": phase1.SUMMARY_MAX_CHARS}
    lines = output.raw_memory.split("\n")
    proposed = {untag(ln).strip() for ln in lines if untag(ln) != ln}
    said = {"raw_memory": "\n".join(untag(ln) for ln in lines), "rollout_summary": output.rollout_summary}
    fields, notes = {}, []
    for key, text in said.items():  # the raw memory without its scope tags: tags are no words
        fields[key], dropped = clean_text(text, src, caps[key], memory=key == "raw_memory")
        notes += [f"{key}: {n} ×{k}" if k > 1 else f"{key}: {n}" for n, k in Counter(dropped).items()]
    if not any(is_content(ln) for ln in fields["raw_memory"].split("\n")):
        fields["raw_memory"] = ""  # headings only: nothing left worth keeping
    marked = "\n".join(
        ln + " [scope: global]" if ln.strip() in proposed else ln for ln in fields["raw_memory"].split("\n")
    )
    fields["raw_memory"], scope_notes = scope_items(marked, transcript_text if users is None else users)
    return output.model_copy(update={**fields, "notes": [*output.notes, *notes, *scope_notes]})


def parse_completion(completion: Completion) -> ExtractionOutput:
    from dsh_memory.llm.parse import extract_json_object

    args = next((c.arguments for c in completion.tool_calls if c.name == phase1.MEMORY_SAVE_TOOL.name), None)
    if args is None and completion.text:
        args = extract_json_object(completion.text)
    if not isinstance(args, dict):
        raise LLMOutputError("model did not call memory_save and its text holds no usable JSON object")
    fields = {}
    for key in ("raw_memory", "rollout_summary", "rollout_slug"):
        value = "" if args.get(key) is None else args[key]
        if isinstance(value, list):  # small models sometimes return bullet lists
            value = "\n".join(f"- {v}" if not str(v).lstrip().startswith("-") else str(v) for v in value)
        if not isinstance(value, str):
            raise LLMOutputError(f"memory_save.{key} must be a string, got {type(value).__name__}")
        fields[key] = redact(value.strip())
    missing = [k for k in ("raw_memory", "rollout_summary") if k not in args]
    if missing:
        raise LLMOutputError(f"memory_save is missing {', '.join(missing)}")
    return ExtractionOutput(
        **fields,
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
        model=completion.model,
        provider=completion.provider,
        reasoning_effort=completion.reasoning_effort,
        notes=list(completion.notes),
    )


def apply_output(store, state, decision: Decision, output: ExtractionOutput, now: datetime | None = None) -> Outcome:
    """Write files for one successful extraction and close its claim. Idempotent per (session, part)."""
    from dsh_memory.storage.store_format import RawBlock, slugify

    now = now or datetime.now(UTC)
    session, ref = decision.session, decision.ref
    usage = {"input_tokens": output.input_tokens, "output_tokens": output.output_tokens}
    answered = dict(usage=usage, model=output.model, provider=output.provider)  # what the claim records
    base = Outcome.of(decision, "noop", tokens_in=output.input_tokens, tokens_out=output.output_tokens)
    if output.is_noop:
        state.finish(ref.id, "noop", session.last_seq, now, **answered)
        return base

    project = project_root(session.cwd)
    slug = (
        decision.base_slug
        or slugify(output.rollout_slug)
        or slugify(redact(session.title or ""))
        or f"session-{ref.id[:8]}"
    )
    slug = slugify(slug) or f"session-{ref.id[:8]}"
    if decision.part > 1:
        slug = f"{slug[:70]}-part{decision.part}"
    provenance = {
        "session_id": ref.id,
        "source": ref.source,
        "cwd": session.cwd or "",
        "project": project or "",
        "path": str(ref.path),
        "updated_at": (session.updated_at or ref.updated_at).isoformat(),
        "part": decision.part,
        "extracted_at": now.isoformat(),
        "model": output.model,
        "provider": output.provider,
    }
    head = head_commit(session.cwd)
    if head:  # what the memory was learned against (`readpath.freshness` checks the tree as it is now)
        provenance["head"] = head
    if decision.watermark >= 0:
        provenance["since_seq"] = decision.watermark
    final_slug = store.write_rollout_summary(slug, provenance, output.rollout_summary)
    # append_raw replaces a block with the same id: a retried extraction never duplicates it.
    store.append_raw(
        RawBlock(
            id=f"{ref.id}#{decision.part}",
            session_id=ref.id,
            slug=final_slug,
            source=ref.source,
            cwd=session.cwd,
            project=project,
            updated_at=provenance["updated_at"],
            body=output.raw_memory,
        )
    )
    state.finish(ref.id, "done", session.last_seq, now, slug=decision.base_slug or final_slug, parts_inc=1, **answered)
    base.outcome = "extracted"
    base.slug = final_slug
    return base
