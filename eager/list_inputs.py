"""A Python list holding integer tensors where an op takes one tensor, eagerly.

``op.Tile(x, [a, b])`` with ``a`` and ``b`` one-element INT64 tensors runs with the
repeats ``[a, b]`` packed into one 1-D tensor, exactly as the compiler packs the list
(Reshape to ``[-1]`` and Concat), and a list the compiler refuses is refused here with
the same message (:mod:`dsl.list_packing`).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from dsl import types
from dsl.errors import DslTypeError
from dsl.list_packing import ListTensor, packed_element_type
from eager import values
from eager.call_site import caller_location, caller_operands, user_frame
from eager.sequences import is_tensor_item
from eager.tensor import EagerTensor

__all__ = ["element_texts", "packed_array", "packed_list"]


def packed_list(items: list[Any] | tuple[Any, ...], index: int, count: int) -> tuple[np.ndarray, bool, bool]:
    """Input ``index`` of ``count`` given as a list holding tensors: ``(array, from_torch,
    from_eager)``, the list packed into one 1-D array, or the compiler's ``DslTypeError``.

    >>> packed_list([np.array([2]), 3], 1, 2)[0]
    array([2, 3])
    """
    arrays: list[Any] = []
    from_torch = from_eager = False
    for item in items:
        if isinstance(item, EagerTensor):
            arrays.append(item.array)
            from_torch, from_eager = from_torch or item.from_torch, True
        elif values.is_torch_tensor(item):
            arrays.append(values.torch_to_numpy(item))
            from_torch = True
        elif is_tensor_item(item):
            arrays.append(np.asarray(item))
        else:
            arrays.append(item.item() if isinstance(item, np.generic) else item)
    texts = [f"item {position}" for position in range(len(items))]
    try:
        return packed_array(arrays, texts, caller_location()), from_torch, from_eager
    except DslTypeError:  # again, with the items named as written (read only for the message)
        return packed_array(arrays, _item_texts(index, count, len(items)), caller_location()), from_torch, from_eager


def packed_array(arrays: list[Any], texts: list[str], location: Any) -> np.ndarray:
    """The items (arrays and Python numbers, named ``texts`` in a message) packed into one
    1-D array of their one integer type (INT64 for numbers alone), or the compiler's
    ``DslTypeError`` at ``location`` for a list that does not pack.

    >>> packed_array([np.array([2], np.int32), 3], ["a", "3"], None)
    array([2, 3], dtype=int32)
    """
    described = [ListTensor(text, values.elem_type_of_array(item), item.shape) if isinstance(item, np.ndarray)
                 else item for item, text in zip(arrays, texts, strict=True)]
    elem = packed_element_type(described, location)
    dtype = types.numpy_dtype(elem if elem is not None else types.INT64.enum)
    return np.concatenate([np.asarray(item, dtype=dtype).reshape(-1) for item in arrays])


def element_texts(node: ast.expr | None, written: str, length: int) -> list[str]:
    """The items' source as the compiler names them: ``a`` for ``[a, b]``, else
    ``written[0]``, ``written[1]``... (``node``: the list's parsed expression, if any)."""
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == length:
        return [ast.unparse(element) for element in node.elts]
    return [f"{written}[{position}]" for position in range(length)]


def _item_texts(index: int, count: int, length: int) -> list[str]:
    """The items' source text: ``a`` for ``[a, b]``, ``repeats[0]`` for a list named ``repeats``."""
    written = caller_operands(count)[index] if user_frame() is not None else f"input {index}"
    try:
        expression: ast.expr | None = ast.parse(written, mode="eval").body
    except SyntaxError:
        expression = None
    return element_texts(expression, written, length)
