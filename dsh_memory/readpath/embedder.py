"""The optional semantic half of ranked search: a small static embedding model, installed with
`pip install 'dsh-memory[semantic]'` (hash-pinned: requirements-semantic.txt).

The model is WordLlama `l2_supercat` at 256 dimensions (MIT, LICENSES/WordLlama-LICENSE.txt): one
vector per token of a Llama-2 tokenizer, a text's vector is the mean of its tokens' vectors. Its
weights (16 MB) and tokenizer ship inside the `wordllama` wheel; they are read from there by path,
never through `wordllama.WordLlama.load` (that one looks for the tokenizer in a folder that does not
exist and then downloads it from Hugging Face, and importing `wordllama` configures the root
logger). Nothing is downloaded at run time: a missing file means no embedder, never a fetch.
Runs on CPU with numpy: ~25 µs per line of text.

When `wordllama` (or numpy / tokenizers / safetensors) is not installed, or its files are not the
pinned ones, `get()` is None and ranked search is lexical only."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

MODEL_ID = "wordllama-l2_supercat-256"  # stored with the index: other vectors are rebuilt
DIM = 256
WEIGHTS = "weights/l2_supercat_256.safetensors"
TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
SHA256 = {  # the files of wordllama 0.4.0.post1 (requirements-semantic.txt); others are not loaded
    WEIGHTS: "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    TOKENIZER: "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
}
MAX_TOKENS = 256  # a text's first tokens are enough to say what it is about (and bound the cost)
CACHE_LINES = 50_000  # line vectors kept in memory (a long-running server re-reads the same lines)


class Embedder:
    """Unit-length float32 vectors for texts (the mean of their token vectors)."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(self, folder: Path) -> None:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        for name, digest in SHA256.items():
            if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest:
                raise ValueError(f"{folder / name}: not the pinned file (sha256 differs)")
        with safe_open(str(folder / WEIGHTS), framework="np") as f:
            self._table = np.ascontiguousarray(f.get_tensor("embedding.weight"), dtype=np.float32)
        if self._table.shape[1] != DIM:
            raise ValueError(f"{WEIGHTS}: expected {DIM} dimensions, found {self._table.shape[1]}")
        self._tok = Tokenizer.from_file(str(folder / TOKENIZER))
        self._tok.no_padding()
        self._tok.enable_truncation(MAX_TOKENS)
        self._np = np
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        """(len(texts), DIM) float32, each row unit length (a text with no tokens: zeros)."""
        np = self._np
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        table = self._table
        for i, enc in enumerate(self._tok.encode_batch(texts, add_special_tokens=False)):
            if enc.ids:
                out[i] = table[np.minimum(enc.ids, len(table) - 1)].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def embed_lines(self, lines: list[str]) -> Any:
        """embed(), with the vectors of lines seen before taken from memory."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in lines if t not in self._cache))
        if missing:
            vecs = self.embed(missing)
            with self._lock:
                if len(self._cache) + len(missing) > CACHE_LINES:
                    self._cache.clear()
                self._cache.update(zip(missing, vecs, strict=True))
        with self._lock:
            rows = [self._cache.get(t) for t in lines]
        if any(r is None for r in rows):  # evicted by another thread meanwhile
            return self.embed(lines)
        return self._np.stack(rows) if rows else self._np.zeros((0, DIM), dtype=self._np.float32)


def _folder() -> Path | None:
    """Where the installed `wordllama` package keeps its files (without importing it)."""
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if (folder / WEIGHTS).is_file() and (folder / TOKENIZER).is_file() else None


@cache
def _load() -> Embedder | None:
    folder = _folder()
    if folder is None:
        return None
    try:
        return Embedder(folder)
    except Exception:  # numpy / tokenizers / safetensors missing, or a damaged install: lexical only
        return None


def get() -> Embedder | None:
    """The embedder, loaded once per process (~0.1 s); None when the `semantic` extra is absent."""
    return _load()


# The semantic half (fusion.py) is off unless DSH_MEMORY_SEMANTIC_SEARCH=1 and the `semantic` extra
# is installed: on the held-out half of bench/search_eval it is not ahead of lexical-only on every
# metric (README, Benchmarks). SEMANTIC overrides the environment (bench/ compares both in one run).
SEMANTIC_ENV = "DSH_MEMORY_SEMANTIC_SEARCH"
SEMANTIC: bool | None = None


def active() -> Embedder | None:
    """The embedder when the semantic half is on (and installed), else None: lexical only."""
    on = SEMANTIC if SEMANTIC is not None else os.environ.get(SEMANTIC_ENV, "").strip().lower() in ("1", "true", "on")
    return get() if on else None
