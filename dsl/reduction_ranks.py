"""The shape of a reduction whose axes are a run-time input: what the axes' count says.

The compiler's shape table (:mod:`dsl.shape_rules`) and the export's settling of output
ranks (:mod:`converter.output_ranks`) both use this one rule, so ``len(y.shape)`` while
compiling and the model's declared output rank agree.  With ``keepdims`` the rank is the
data's (an axis of size 1 stays 1; another may become 1); no axes reduce all of them, or
none with ``noop_with_empty_axes``; one axis removes one; two or more may name one axis
twice, which onnxruntime reduces once, so their count does not fix the rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["reduced_shape"]


def reduced_shape(data: Sequence[Any], axes_shape: Sequence[Any] | None, keepdims: bool,
                  noop_with_empty_axes: bool) -> tuple[Any, ...] | None:
    """The shape (sizes as in :mod:`dsl.shape_rules`: int, str, None) of reducing ``data``
    over axes known only at run time, an input of shape ``axes_shape`` (its count of axes
    may be unknown too), or None where the rank depends on the axes' values.

    >>> reduced_shape((3, 1, "N"), (1,), True, False), reduced_shape((3, 4), (1,), False, False)
    ((None, 1, None), (None,))
    >>> reduced_shape((3, 4), (0,), False, False), reduced_shape((3, 4), (2,), False, False)
    ((), None)
    """
    data = tuple(data)
    axes_count = None
    if axes_shape is not None and len(axes_shape) == 1 and isinstance(axes_shape[0], int):
        axes_count = int(axes_shape[0])
    if axes_count == 0:
        if noop_with_empty_axes:
            return data
        return (1,) * len(data) if keepdims else ()
    if keepdims:
        return tuple(1 if size == 1 else None for size in data)
    if axes_count == 1:
        return (None,) * (len(data) - 1)
    return None
