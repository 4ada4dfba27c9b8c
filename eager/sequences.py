"""ONNX sequences (and optionals) as eager values: lists of tensors, and None.

onnxruntime's Python API takes a ``seq(tensor)`` input as a list of arrays and returns
one as a list, and an ``optional`` as its value or None; eager mode uses the same
representation, so a sequence made by ``op.SequenceConstruct`` can be handed to any
sequence op or returned from a function like the exported model returns it.

Ops return sequences as :class:`EagerSequence`, a ``list`` that also remembers its
element type (an empty sequence has no element to read it from) and whose subscript
means what it means in compiled code: ``seq[i]`` is ``SequenceAt`` (negative positions
count from the end, a tensor position runs the op itself), and a slice is an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import types
from dsl.errors import DslTypeError, EagerError
from eager import values
from eager.call_site import caller_location
from eager.script_context import operator_opset
from eager.tensor import EagerTensor

__all__ = ["EagerSequence", "is_tensor_item", "sequence_arrays"]


class EagerSequence(list):
    """A sequence value: a list of tensors that knows its element type even when empty.

    >>> import numpy as np
    >>> from dsl import opset18 as op
    >>> parts = op.SequenceConstruct(np.zeros(2, np.float32), np.ones(3, np.float32))
    >>> len(parts), parts[-1]
    (2, array([1., 1., 1.], dtype=float32))
    """

    __slots__ = ("elem_type",)

    def __init__(self, items: Any = (), elem_type: int | None = None) -> None:
        super().__init__(items)
        self.elem_type = elem_type

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int:
            if -len(self) <= index < len(self):
                return list.__getitem__(self, index)
            raise EagerError(
                f"SequenceAt: position {index} is out of range for a sequence of {len(self)} tensor(s)",
                caller_location(),
                hint="positions go from -len to len - 1",
            )
        if isinstance(index, (slice, tuple)) or index is None or index is Ellipsis:
            raise DslTypeError(
                "a sequence can only be indexed by one position",
                caller_location(),
                hint="write seq[i]; use op.SequenceErase/op.SplitToSequence to build other sequences",
            )
        if isinstance(index, (np.integer, bool)):
            return self[int(index)]
        return operator_opset().get_op("SequenceAt")(self, index)  # a tensor position: the op runs

    def __repr__(self) -> str:
        name = "?" if self.elem_type is None else types.element_type_name(self.elem_type)
        return f"EagerSequence({name}, {list.__repr__(self)})"


def is_tensor_item(value: Any) -> bool:
    """Whether a list item is a tensor (so the list is a sequence, not a list literal)."""
    return isinstance(value, (np.ndarray, EagerTensor)) or values.is_torch_tensor(value)


def sequence_arrays(items: list[Any], known_elem: int | None) -> tuple[list[np.ndarray], int | None, bool, bool]:
    """The items of a sequence as arrays, their common element type, and where they came from.

    Returns ``(arrays, elem_type, any_from_torch, any_eager)``; ``elem_type`` is None for
    an empty sequence of unknown type.  Items of different element types are an error:
    an ONNX sequence holds tensors of one element type.
    """
    arrays: list[np.ndarray] = []
    elem = known_elem
    from_torch = False
    eager_in = False
    for position, item in enumerate(items):
        if isinstance(item, EagerTensor):
            array = item.array
            from_torch = from_torch or item.from_torch
            eager_in = True
        elif isinstance(item, np.ndarray):
            array = item
        elif values.is_torch_tensor(item):
            array = values.torch_to_numpy(item)
            from_torch = True
        else:
            raise DslTypeError(
                f"item {position} of a sequence is a {type(item).__name__}, not a tensor",
                caller_location(),
                hint="a sequence holds tensors: numpy arrays, torch tensors or values computed by ops",
            )
        item_elem = values.elem_type_of_array(array)
        if item_elem is None:
            raise DslTypeError(
                f"item {position} of a sequence has dtype {array.dtype}, which ONNX has no element type for",
                caller_location(),
                hint="convert it with .astype(...) to a numeric, bool or string dtype",
            )
        if item_elem == types.STRING.enum and array.dtype != object:
            array = array.astype(object)
        if elem is None:
            elem = item_elem
        elif item_elem != elem:
            raise DslTypeError(
                f"item {position} of a sequence is {types.element_type_name(item_elem)}, the sequence holds "
                f"{types.element_type_name(elem)}",
                caller_location(),
                hint="an ONNX sequence holds tensors of one element type; cast with op.Cast(..., to=...)",
            )
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        arrays.append(array)
    return arrays, elem, from_torch, eager_in
