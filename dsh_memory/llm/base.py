"""The LLM seam. One protocol, implemented by the OpenAI-compatible HTTP client
(`openai_compat.py`) and the in-process llama.cpp provider (`local.py`).

Errors are classified once, by the implementation, into the `dsh_memory.errors` LLM classes:
`LLMTransientError` (retry), `LLMFatalError` (do not retry), `LLMTruncatedError`
(finish_reason == "length"; `.partial` holds the Completion that arrived).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from dsh_memory.errors import LLMOutputError
from dsh_memory.llm.parse import loads_truncated


class ToolSpec(BaseModel):
    """A function the model must call. `parameters` is a JSON schema (object)."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolCall(BaseModel):
    name: str
    arguments: dict[str, Any]  # parsed; a call whose arguments do not parse is an LLMOutputError
    raw_arguments: str = ""


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class Completion(BaseModel):
    text: str = ""  # visible text content (may be empty when a tool was called)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""  # the model that answered
    provider: str = ""  # "openai" / "local" / …
    reasoning_effort: str = ""  # the effort actually applied ("" = provider default)
    notes: list[str] = Field(default_factory=list)  # e.g. "effort 'max' unsupported → default"


@runtime_checkable
class LLM(Protocol):
    provider: str
    model: str

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tool: ToolSpec | None = None,
        max_tokens: int = 4096,
        reasoning_effort: str = "",
        temperature: float | None = None,
    ) -> Completion:
        """Send chat messages; when `tool` is given, force a call to it (tool_choice).

        Raises LLMTransientError / LLMFatalError / LLMTruncatedError / LLMOutputError.
        """
        ...


def partial_call(name: str, raw: str, notes: list[str]) -> ToolCall:
    """The tool call of an answer cut off at max_tokens, its arguments closed leniently."""
    try:
        args = loads_truncated(raw)
        notes.append("truncated tool arguments closed leniently")
    except ValueError:
        args = None
        notes.append("truncated tool arguments unparseable (see raw_arguments)")
    return ToolCall(name=name, arguments=args if isinstance(args, dict) else {}, raw_arguments=raw)


def output_error(message: str, completion: Completion) -> LLMOutputError:
    """An LLMOutputError carrying the answer, for run logs (redact first)."""
    exc = LLMOutputError(message)
    exc.completion = completion  # type: ignore[attr-defined]
    return exc


# Who writes the memory, chosen once with the model: "model" — the model writes it (one
# `memory_save` call per session, its own handbook in Phase 2); "evidence" — a small model cannot,
# so Phase 1 builds memory from the session's evidence and the model writes a recap sentence, and
# Phase 2 merges mechanically (phase1/steps.py, consolidation/mechanical.py).
Writer = Literal["model", "evidence"]


def writer_for(llm: LLM) -> Writer:
    """The in-process model is a 1.5B classifier-sized model: the evidence writer; any endpoint
    (DeepSeek, OpenAI, a local server) writes memory itself."""
    return "evidence" if getattr(llm, "provider", "") == "local" else "model"
