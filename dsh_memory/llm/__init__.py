"""The one LLM seam: `LLM.complete(...)` → `Completion`. See `base.py`."""
