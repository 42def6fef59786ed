"""Helpers shared by the two blocks: mirrored fields, path checks, provenance.
A field left empty is `None`; bounds and descriptions come from the plain settings models, so the
two cannot drift apart (a test checks every field is mirrored).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from prefect.blocks.core import Block
from pydantic import BaseModel, Field

from dsh_memory.settings import env_mapping, environment_values

OFF = "off"
_BOUNDS = ("ge", "gt", "le", "lt", "min_length", "max_length")

# Keys Prefect itself may keep in a block document's data; never a schema mismatch.
PREFECT_DATA_KEYS = frozenset({"block_type_slug", "_block_document_id", "_block_document_name", "_is_anonymous"})


class SettingsBlock(Block):
    """Base of dsh-memory's blocks, which share their metadata's shape: Prefect derives the slug
    from `_block_type_name` and the description from the docstring's first section; the code
    example loads the "default" block and turns it into plain settings with `_to_plain`."""

    _to_plain: ClassVar[str] = ""  # the method returning the plain settings object

    @classmethod
    def holding(cls, values: Mapping[str, Any], only: set[str] | None = None) -> Any:
        """A block holding plain `values` (`settings_values`, `route_values`): only the fields
        named in `only`, when given."""
        return cls(**{k: v for k, v in values.items() if (only is None or k in only) and v is not None})

    @classmethod
    def get_code_example(cls) -> str:
        return (
            f"```python\nfrom dsh_memory.blocks import {cls.__name__}\n\n"
            f'{cls.__name__}.load("default").{cls._to_plain}()\n```'
        )


def mirror(model: type[BaseModel], name: str, unset: str) -> Any:
    """An optional block field with the bounds of `model.<name>` and a description saying what
    applies when it is left empty (`unset`, e.g. "$DSH_MEMORY_IDLE_SECONDS, else {default}": the
    field's default, a text quoted, fills in `{default}`)."""
    src = model.model_fields[name]
    bounds = {a: getattr(m, a) for m in src.metadata for a in _BOUNDS if getattr(m, a, None) is not None}
    default = repr(src.default) if isinstance(src.default, str) else str(src.default)
    return Field(None, description=f"{src.description}. Empty: {unset.format(default=default)}.", **bounds)


def check_path(value: str | None, allow_off: bool = False) -> str | None:
    """Absolute paths (or ~) only: a relative path would depend on the worker's directory."""
    value = (value or "").strip()
    if not value:
        return None  # unset, or the "" the UI sends for a cleared field: treat it as unset
    if "\0" in value:  # no path holds one (the environment cannot carry it; a block can)
        raise ValueError("a path cannot contain a NUL character")
    if allow_off and value.lower() == OFF:
        return OFF
    if not Path(value).expanduser().is_absolute():
        hint = f", or '{OFF}' to disable this source" if allow_off else ""
        raise ValueError(f"must be an absolute path (or start with ~){hint}")
    return value


def expand(value: str, env: Mapping[str, str] | None = None) -> Path:
    """`~` expanded with the HOME of `env` (as the settings' own defaults are), else the process's."""
    home = env_mapping(env).get("HOME")
    if home and (value == "~" or value.startswith("~/")):
        return Path(home) / value[2:]
    return Path(value).expanduser()


def sources(
    fields: Iterable[str],
    block: BaseModel | None,
    env_names: Mapping[str, tuple[str, ...]],
    env: Mapping[str, str] | None,
) -> dict[str, str]:
    """Where each effective value comes from: 'block', 'env' or 'default' (block > env > default),
    the environment read as the settings read it (`environment_values`)."""
    from_env = environment_values(env_names, env_mapping(env))
    pinned = set() if block is None else {name for name in fields if getattr(block, name) is not None}
    return {name: "block" if name in pinned else "env" if name in from_env else "default" for name in fields}
