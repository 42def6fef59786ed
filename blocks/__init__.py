"""Prefect Blocks of dsh-memory: pipeline settings and the model route (API key as a secret).

Register the block types with `prefect block register -m dsh_memory.blocks` (or `register_blocks()`,
or `dsh-memory settings save`, which also saves the current values as the "default" blocks).
Flows load the blocks named "default" once at their entry (`dsh_memory.settings_loader`);
a field left empty in a block follows the environment, then the documented default.
"""

from __future__ import annotations

from dsh_memory.blocks.memory_settings import MemorySettingsBlock
from dsh_memory.blocks.model_route import ModelRouteBlock

DEFAULT_BLOCK_NAME = "default"
BLOCK_TYPES = (MemorySettingsBlock, ModelRouteBlock)

__all__ = ["DEFAULT_BLOCK_NAME", "BLOCK_TYPES", "MemorySettingsBlock", "ModelRouteBlock", "register_blocks"]


def register_blocks() -> list[str]:
    """Register both block types (and their schemas) on the configured Prefect API; returns their slugs."""
    for cls in BLOCK_TYPES:
        cls.register_type_and_schema()
    return [cls.get_block_type_slug() for cls in BLOCK_TYPES]
