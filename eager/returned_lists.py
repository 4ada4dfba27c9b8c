"""A Python list of tensors returned by an eagerly run ``@script`` body.

The compiler makes a returned list one tensor where it packs (integer tensors of rank
0 or 1 and integers, :mod:`dsl.list_packing`: ``return [b, s]`` of two sizes) and refuses
it elsewhere (a list of float tensors is neither several outputs nor a sequence).  Eager
mode does the same with the same message, at the same expression of the ``return``.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from dsl.annotation_checks import NOT_A_TENSOR_HINT
from dsl.errors import DslTypeError
from eager import values
from eager.annotation_sites import returned_expression
from eager.call_site import caller_location
from eager.list_inputs import element_texts, packed_array
from eager.sequences import EagerSequence, is_tensor_item
from eager.tensor import EagerTensor

__all__ = ["is_returned_list", "packed_result"]


def is_returned_list(item: Any) -> bool:
    """A list or tuple holding tensors (not a sequence value, which is an output of its own)."""
    return isinstance(item, (list, tuple)) and not isinstance(item, EagerSequence) and any(
        is_tensor_item(part) for part in item)


def packed_result(item: list[Any] | tuple[Any, ...], python_function: Any, count: int, index: int) -> EagerTensor:
    """Result ``index`` of ``count``, a list holding tensors, packed into one 1-D tensor as
    the compiler packs it, or the compiler's ``DslTypeError`` at that result's expression.

    >>> packed_result([np.array(2), 3], None, 1, 0).array   # doctest: +SKIP
    array([2, 3])
    """
    found = returned_expression(python_function, count, index) if python_function is not None else None
    location = found[0] if found is not None else caller_location()
    arrays = [values.torch_to_numpy(part) if values.is_torch_tensor(part) else
              part.array if isinstance(part, EagerTensor) else
              np.asarray(part) if is_tensor_item(part) else part for part in item]
    if not all(isinstance(part, (np.ndarray, int, float, np.integer, np.floating)) for part in arrays):
        raise DslTypeError(f"a {type(item).__name__} of tensors is not a tensor", location, hint=NOT_A_TENSOR_HINT)
    written = ast.unparse(found[1]) if found is not None and found[1] is not None else "result"
    texts = element_texts(found[1] if found is not None else None, written, len(arrays))
    return EagerTensor(packed_array(arrays, texts, location))
