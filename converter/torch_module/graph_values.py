"""Arrays as the tensors a graph builder holds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["to_tensor"]


def to_tensor(array: np.ndarray, share: bool = False) -> Any:
    """A torch tensor of ``array`` (strings and dtypes torch lacks stay numpy): a copy, or
    with ``share`` (the caller owns ``array`` and lets the tensor write into it) the
    array's own memory when it is writable."""
    from eager.values import numpy_to_torch

    if share and array.flags.writeable and array.dtype.kind in "biufc":
        return numpy_to_torch(array)
    converted = numpy_to_torch(np.array(array, copy=True))  # (the tensor takes the copy's memory)
    return converted.contiguous() if isinstance(converted, torch.Tensor) else converted
