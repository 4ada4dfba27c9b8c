"""A Python list of integers and integer tensors where an op takes one tensor.

``op.Tile(x, [a, b])``, ``op.Reshape(x, [b, s, heads, -1])`` with ``b`` a tensor or a
symbolic size: the list is packed into one 1-D tensor (each tensor reshaped to ``[-1]``,
each run of numbers a constant, all concatenated), as onnxscript's tracing packs it.
The compiler and eager mode pack the same lists and refuse the same ones, with the
messages made here: a float, boolean or string tensor (a list of such tensors may mean
a stack or a sequence), a tensor of rank 2 or more, tensors of different element types,
and a non-integer number beside tensors.  What the compiler does not know (an element
type, a rank) it cannot refuse; eager mode knows both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl import types
from dsl.errors import DslTypeError
from dsl.shape_sizes import shape_text

__all__ = ["INTEGER_TYPES", "ListTensor", "packed_element_type"]

INTEGER_TYPES = frozenset(
    types.element_type_of_dtype(np.dtype(name))
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
)
_CONCAT_HINT = "use op.Concat(a, b, axis=0) to join tensors, or op.SequenceConstruct(a, b) for a sequence"


@dataclass(frozen=True)
class ListTensor:
    """A tensor item of a list: its source text, element type and shape (None: unknown)."""

    text: str
    elem: int | None
    shape: tuple[Any, ...] | None


def packed_element_type(items: Sequence[Any], location: Any = None) -> int | None:
    """The element type of the 1-D tensor a list packs into (its tensors' one integer type;
    None where none is known), or a ``DslTypeError`` at ``location`` for a list that does
    not pack.  ``items`` are :class:`ListTensor` objects and Python numbers.

    >>> packed_element_type([ListTensor("a", 7, (1,)), 2, ListTensor("b", 7, ())])
    7
    >>> packed_element_type([ListTensor("x", 1, ("N",))])
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: a list of tensors is not a tensor: x is FLOAT[N], and a list packs into one tensor only from integers (sizes, repeats, axes)
    ...
    """
    tensors = [item for item in items if isinstance(item, ListTensor)]
    for tensor in tensors:
        if tensor.elem is not None and tensor.elem not in INTEGER_TYPES:
            raise DslTypeError(
                f"a list of tensors is not a tensor: {tensor.text} is {_type_text(tensor)}, and a list packs "
                "into one tensor only from integers (sizes, repeats, axes)", location, hint=_CONCAT_HINT)
        if tensor.shape is not None and len(tensor.shape) > 1:
            raise DslTypeError(
                f"a list packs into a 1-D tensor from numbers, scalars and 1-D tensors, but {tensor.text} is "
                f"{_type_text(tensor)} (rank {len(tensor.shape)})", location,
                hint=f"flatten it first (op.Reshape({tensor.text}, [-1])) or pass it as a tensor of its own")
    elems = sorted({tensor.elem for tensor in tensors if tensor.elem is not None})
    if len(elems) > 1:
        names = " and ".join(types.element_type_name(elem) for elem in elems)
        raise DslTypeError(f"the tensors of a list are {names}: one list packs into a tensor of one element type",
                           location, hint="cast them to one type first: op.Cast(t, to=INT64.dtype)")
    if tensors:
        for item in items:
            if not isinstance(item, ListTensor) and (
                    isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer))):
                raise DslTypeError(
                    f"a list of integer tensors holds {item!r}: it packs into one integer tensor",
                    location, hint="write integers beside the tensors, or join float tensors with op.Concat")
    return elems[0] if elems else None


def _type_text(tensor: ListTensor) -> str:
    name = types.element_type_name(tensor.elem) if tensor.elem is not None else "a tensor"
    if tensor.shape is None:
        return f"{name}[...]"
    if not tensor.shape:
        return name
    return name + shape_text(tensor.shape)
