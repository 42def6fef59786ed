"""The read-path parameters as every adapter sees them, read from the request models (models.py,
where each operation's parameters are declared once: name, type, default, bounds, description).

No adapter writes a bound, a default or a help text of its own: the CLI turns each `Param` into a
typer argument or option, the MCP server into an annotated tool parameter (the SDK builds the
tool's input schema from it), and the RPC validates with the model itself (`dispatch`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class Param:
    """One field of a request model."""

    name: str
    annotation: Any  # the field's type: int, bool, str | None, list[str], Literal[...]
    required: bool
    default: Any  # None when required
    description: str
    metadata: tuple[Any, ...] = ()  # pydantic's constraints (annotated_types Ge, Le, MinLen…)

    def _bound(self, attr: str) -> Any:
        return next((getattr(m, attr) for m in self.metadata if getattr(m, attr, None) is not None), None)

    ge = property(lambda self: self._bound("ge"))
    le = property(lambda self: self._bound("le"))
    min_length = property(lambda self: self._bound("min_length"))
    max_length = property(lambda self: self._bound("max_length"))

    @property
    def choices(self) -> tuple[str, ...]:
        """The allowed values of a Literal field, else ()."""
        return get_args(self.annotation) if get_origin(self.annotation) is Literal else ()

    @property
    def option(self) -> str:
        """The command-line spelling: start_line → --start-line."""
        return "--" + self.name.replace("_", "-")

    def annotated(self) -> Any:
        """The type with its constraints and description attached, for anything that builds a
        pydantic model from a signature (the MCP SDK does)."""
        return Annotated[(self.annotation, *self.metadata, Field(description=self.description))]


def fields(model: type[BaseModel]) -> list[Param]:
    """The parameters of one operation, in declaration order."""
    return [
        Param(
            name=name,
            annotation=info.annotation,
            required=info.is_required(),
            default=None if info.is_required() else info.get_default(call_default_factory=True),
            description=info.description or "",
            metadata=tuple(info.metadata),
        )
        for name, info in model.model_fields.items()
    ]


def with_signature(
    fn: Callable[..., Any],
    parameters: list[inspect.Parameter],
    *,
    name: str,
    doc: str | None = None,
    returns: Any = inspect.Signature.empty,
) -> Callable[..., Any]:
    """Give `fn` (which takes **kwargs) a generated signature: typer and the MCP SDK both read
    `inspect.signature`, which returns `__signature__` as is."""
    fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__annotations__ = {}
    return fn
