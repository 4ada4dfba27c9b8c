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

__all__ = ["packed_list"]

_INT64 = 7


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
        elem = packed_element_type(_described(arrays, texts), caller_location())
    except DslTypeError:  # again, with the items named as written (read only for the message)
        elem = packed_element_type(_described(arrays, _item_texts(index, count, len(items))), caller_location())
    dtype = types.numpy_dtype(elem if elem is not None else _INT64)
    parts = [np.asarray(item, dtype=dtype).reshape(-1) for item in arrays]
    return np.concatenate(parts), from_torch, from_eager


def _described(arrays: list[Any], texts: list[str]) -> list[Any]:
    return [ListTensor(text, values.elem_type_of_array(item), item.shape) if isinstance(item, np.ndarray) else item
            for item, text in zip(arrays, texts)]


def _item_texts(index: int, count: int, length: int) -> list[str]:
    """The items' source text: ``a`` for ``[a, b]``, ``repeats[0]`` for a list named ``repeats``."""
    written = caller_operands(count)[index] if user_frame() is not None else f"input {index}"
    try:
        expression = ast.parse(written, mode="eval").body
    except SyntaxError:
        expression = None
    if isinstance(expression, (ast.List, ast.Tuple)) and len(expression.elts) == length:
        return [ast.unparse(element) for element in expression.elts]
    return [f"{written}[{position}]" for position in range(length)]
