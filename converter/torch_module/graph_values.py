"""Arrays as the tensors a graph builder holds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["to_tensor"]


def to_tensor(array: np.ndarray) -> Any:
    """A torch tensor owning a copy of ``array`` (strings and dtypes torch lacks stay numpy)."""
    from eager.values import numpy_to_torch

    converted = numpy_to_torch(np.array(array, copy=True))
    return converted.clone() if isinstance(converted, torch.Tensor) else converted
