"""Shared by the semantic-search tests: a Python prelude that makes the embedding model's package
unimportable in a subprocess (as when it is not installed), without touching the venv."""

from __future__ import annotations

import textwrap

BLOCK_WORDLLAMA = textwrap.dedent(
    """
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "wordllama" or name.startswith("wordllama."):
                raise ModuleNotFoundError(name)
            return None
    sys.meta_path.insert(0, Block())
    """
)
