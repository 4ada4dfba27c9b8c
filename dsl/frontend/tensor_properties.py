"""``x.shape``, ``x.ndim`` and ``x.dtype`` inside ``@script``, as eager mode gives them.

Eagerly ``x.shape`` is a tuple of ints.  Compiled, it is a tuple too: a Python ``int``
where the size is static (annotated or inferred), a :class:`SymbolicSize` where it is not.
A symbolic size stays a Python object while the program only passes it around (``b, s,
d = x.shape``); where it is used as a tensor (``op.Reshape(x, [b, s, -1])``, ``s * 2``) it
lowers to ``Gather(Shape(x), axis)``, so a graph whose sizes are all static has no Shape
node at all.  ``x.dtype`` is the :class:`~dsl.dtypes.DType` eager mode gives (an int that is
the ONNX element type and compares equal to numpy's dtype).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir
from dsl.dtypes import dtype_of
from dsl.errors import DslTypeError
from dsl.opsets import to_tensor

if TYPE_CHECKING:
    from dsl.frontend.builder import GraphBuilder

__all__ = ["RankUnknownShape", "SymbolicSize", "has_symbolic_size", "lower_sizes", "read_property"]

_INT64 = 7


class SymbolicSize:
    """Axis ``axis`` of ``value``'s shape, not known when compiling; ``name`` is the size's
    name in the annotation (``"B"``) when it has one."""

    __slots__ = ("axis", "name", "value")

    def __init__(self, value: ir.Value, axis: int, name: str | None) -> None:
        self.value = value
        self.axis = axis
        self.name = name

    def __repr__(self) -> str:
        return self.name or f"{self.value.name}.shape[{self.axis}]"

    def __index__(self) -> int:
        raise DslTypeError(
            f"the size {self!r} is only known when the model runs, but a Python int is needed here",
            None, hint="use it as a tensor (in a shape list, arithmetic with tensors), or annotate the input "
            "with a static size")


class RankUnknownShape:
    """``x.shape`` where the rank of ``x`` is not known: ``x.shape[i]`` works (a symbolic
    size), its length does not."""

    __slots__ = ("value",)

    def __init__(self, value: ir.Value) -> None:
        self.value = value

    def __getitem__(self, index: Any) -> SymbolicSize:
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return SymbolicSize(self.value, int(index), None)
        raise self.unknown("sliced")

    def __len__(self) -> int:
        raise self.unknown("measured")

    def __iter__(self) -> Any:
        raise self.unknown("unpacked")

    def unknown(self, what: str) -> DslTypeError:
        return DslTypeError(
            f"the rank of {self.value.name} is not known here, so its shape cannot be {what}", None,
            hint=f"annotate {self.value.name} with its axes (FLOAT['N', 'C']), or index one size: "
            f"{self.value.name}.shape[-1]")

    def __repr__(self) -> str:
        return f"{self.value.name}.shape"


def read_property(value: ir.Value, attribute: str, shape: Any, elem: int | None, location: Any) -> Any:
    """The Python value of ``value.shape`` / ``.ndim`` / ``.dtype`` (None for another attribute),
    given what is known of its ``shape`` and element type ``elem``."""
    if attribute == "shape":
        if shape is None:
            return RankUnknownShape(value)
        return tuple(
            int(size) if isinstance(size, (int, np.integer)) else SymbolicSize(value, axis, size)
            for axis, size in enumerate(shape)
        )
    if attribute == "ndim":
        if shape is None:
            raise DslTypeError(f"the rank of {value.name} is not known here", location,
                               hint=f"annotate {value.name} with its axes (FLOAT['N', 'C'])")
        return len(shape)
    if attribute == "dtype":
        if elem is None:
            raise DslTypeError(f"the element type of {value.name} is not known here", location,
                               hint=f"annotate {value.name} (FLOAT[...]) or cast it with op.Cast")
        return dtype_of(elem)
    return None


def has_symbolic_size(value: Any) -> bool:
    """Whether a Python value is a symbolic size or a list/tuple holding one."""
    if isinstance(value, SymbolicSize):
        return True
    return isinstance(value, (list, tuple)) and any(isinstance(item, SymbolicSize) for item in value)


def lower_sizes(builder: GraphBuilder, value: Any, location: Any) -> ir.Value:
    """A symbolic size as a 0-d INT64 tensor, or a list/tuple of sizes and ints as a 1-D one
    (``Shape(x)`` itself where it is the whole shape of one tensor)."""
    if isinstance(value, SymbolicSize):
        return _size(builder, value, location, ())
    items = list(value)
    owners = {item.value for item in items if isinstance(item, SymbolicSize)}
    if len(owners) == 1:
        owner = next(iter(owners))
        known = builder.ctx.shapes.shape(owner)
        if known is not None and len(known) == len(items) and all(
            (isinstance(item, SymbolicSize) and item.axis == axis) or item == known[axis]
            for axis, item in enumerate(items)
        ):
            return _shape_of(builder, owner, location)
    parts: list[ir.Value | None] = []
    numbers: list[int] = []
    for item in items:
        if not isinstance(item, SymbolicSize):
            numbers.append(int(item))
            continue
        if numbers:
            parts.append(builder.constant(to_tensor(np.array(numbers, dtype=np.int64)), location))
            numbers = []
        parts.append(_size(builder, item, location, (1,)))
    if numbers:
        parts.append(builder.constant(to_tensor(np.array(numbers, dtype=np.int64)), location))
    if len(parts) == 1:
        only = parts[0]
        assert only is not None
        return only
    return builder.operator("Concat", parts, location, axis=0)


def _shape_of(builder: GraphBuilder, value: ir.Value, location: Any) -> ir.Value:
    key = ("shape of", value)
    found = builder.find_constant(key)
    if found is None:
        found = builder.operator("Shape", [value], location)
        builder.remember_constant(key, found)
    return found


def _size(builder: GraphBuilder, size: SymbolicSize, location: Any, index_shape: tuple[int, ...]) -> ir.Value:
    key = ("size of", size.value, size.axis, index_shape)
    found = builder.find_constant(key)
    if found is None:
        shape = _shape_of(builder, size.value, location)
        index = builder.constant(to_tensor(np.full(index_shape, size.axis, dtype=np.int64)), location)
        found = builder.operator("Gather", [shape, index], location, axis=0)
        builder.remember_constant(key, found)
    return found
