"""The one LLM seam: `LLM.complete(...)` → `Completion`. See `base.py`."""

from dsh_memory.llm.base import LLM, Completion, ToolCall, ToolSpec, Usage

__all__ = ["LLM", "Completion", "ToolCall", "ToolSpec", "Usage"]
