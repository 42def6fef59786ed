"""Prefect Blocks of dsh-memory: pipeline settings and the model route (API key as a secret).

Register the block types with `prefect block register -m dsh_memory.blocks` (or `register_blocks()`,
or `dsh-memory settings save`, which also saves the current values as the "default" blocks).
Flows load the blocks named "default" once at their entry (`dsh_memory.settings_loader`);
a field left empty in a block follows the environment, then the documented default.
"""

from __future__ import annotations

from dsh_memory.blocks.memory_settings import MemorySettingsBlock
from dsh_memory.blocks.model_route import ModelRouteBlock

__all__ = ["MemorySettingsBlock", "ModelRouteBlock", "register_blocks"]


def register_blocks() -> None:
    """Register both block types (and their schemas) on the configured Prefect API."""
    for cls in (MemorySettingsBlock, ModelRouteBlock):
        cls.register_type_and_schema()
