"""Load the settings a flow runs with, once, at its entry.

Order: saved Prefect Blocks (when `blocks/` has them saved on the server) → environment
variables → documented defaults. Plain pydantic values are passed down to tasks.
"""

from __future__ import annotations

from dsh_memory.settings import MemorySettings, ModelRoute


def load_settings() -> tuple[MemorySettings, ModelRoute]:
    return MemorySettings.from_env(), ModelRoute.from_env()
