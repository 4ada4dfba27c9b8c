"""Python literals and outer-scope constants as tensors of the right element type.

A literal beside a tensor of known element type takes that type
(:func:`dsl.operators.literal_elem_type`), so ``x * 2`` with FLOAT16 ``x`` multiplies by
a FLOAT16 2 and needs no cast; numpy values keep the dtype the user gave them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import ir, types
from dsl.errors import DslTypeError
from dsl.operators import literal_elem_type
from dsl.opsets import to_tensor

__all__ = ["array_data", "is_tensor_literal", "literal_tensor"]

_REPRESENTATIVE = {
    types.FLOAT.enum: 1.0,
    types.INT64.enum: 1,
    types.BOOL.enum: True,
    types.STRING.enum: "",
}


def array_data(value: Any) -> Any:
    """An object offering numpy's ``__array__`` (an eager tensor that a Python function of
    the user's computed while compiling, a torch tensor) as its numpy array, which keeps
    its dtype as a constant; any other value unchanged."""
    if isinstance(value, (np.ndarray, np.generic, ir.Tensor, ir.Value, type)) or not hasattr(value, "__array__"):
        return value
    return np.asarray(value)


def is_tensor_literal(value: Any) -> bool:
    """True for what can become a Constant: numbers, strings, numpy data, (nested) lists of them."""
    if isinstance(value, (bool, int, float, str, np.ndarray, np.generic, ir.Tensor)):
        return True
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(is_tensor_literal(v) and not isinstance(v, ir.Tensor) for v in value)
    return False


def literal_tensor(value: Any, beside_elem: int | None, location: Any) -> ir.Tensor:
    """``value`` as a Tensor: numpy keeps its dtype; Python literals adapt to ``beside_elem``."""
    if isinstance(value, ir.Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return to_tensor(np.asarray(value))
    if not is_tensor_literal(value):
        raise DslTypeError(
            f"a {type(value).__name__} cannot be used as a tensor",
            location,
            hint="tensors are computed by ops; numbers, lists of numbers and numpy arrays become constants",
        )
    own = types.element_type_of_python(value)
    if own is None:
        raise DslTypeError(
            f"cannot make a tensor of {value!r}: its elements have mixed types",
            location,
            hint="use numbers of one kind, or a numpy array with an explicit dtype",
        )
    elem = own
    if beside_elem is not None:
        adapted = literal_elem_type(_REPRESENTATIVE.get(own, value), beside_elem)
        if adapted is not None:
            elem = adapted
    try:
        return to_tensor(value, elem)
    except (OverflowError, ValueError, TypeError) as err:
        raise DslTypeError(
            f"the constant {value!r} does not fit {types.element_type_name(elem)}: {err}",
            location,
            hint="write a value of the tensor's element type, or cast explicitly with op.Cast",
        ) from None
