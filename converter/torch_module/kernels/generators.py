"""Operators that make tensors rather than transform them: Constant, ConstantOfShape,
Range, EyeLike, the window functions, Dropout (inference: the identity) and Bernoulli.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from converter.torch_module.kernels.arguments import IntsLike, ints, scalar, torch_dtype


def constant(
    value: torch.Tensor | None = None,
    value_float: float | None = None,
    value_floats: Sequence[float] | None = None,
    value_int: int | None = None,
    value_ints: Sequence[int] | None = None,
) -> torch.Tensor:
    if value is not None:
        return value
    if value_float is not None:
        return torch.tensor(value_float, dtype=torch.float32)
    if value_floats is not None:
        return torch.tensor(list(value_floats), dtype=torch.float32)
    if value_int is not None:
        return torch.tensor(value_int, dtype=torch.int64)
    return torch.tensor(list(value_ints or ()), dtype=torch.int64)


def constant_of_shape(input: IntsLike, value: torch.Tensor | None = None) -> torch.Tensor:
    fill = value if value is not None else torch.zeros((), dtype=torch.float32)
    return fill.reshape(()).expand(ints(input)).clone()


def range_(start: torch.Tensor, limit: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    first, last, step = (float(scalar(v) or 0) for v in (start, limit, delta))
    count = max(math.ceil((last - first) / step), 0)
    dtype = start.dtype if isinstance(start, torch.Tensor) else torch.int64
    return (first + torch.arange(count, dtype=torch.float64 if dtype.is_floating_point else torch.int64) * step).to(dtype)


def eye_like(input: torch.Tensor, dtype: int | None = None, k: int = 0) -> torch.Tensor:
    rows, columns = input.shape
    kind = torch_dtype(dtype) if dtype is not None else input.dtype
    diagonal = torch.arange(columns).reshape(1, -1) - torch.arange(rows).reshape(-1, 1) == k
    return diagonal.to(kind)


def _window(size: torch.Tensor | int, output_datatype: int, periodic: int, coefficients: Sequence[float]) -> torch.Tensor:
    length = int(scalar(size))  # type: ignore[arg-type]
    denominator = length if periodic else length - 1
    n = torch.arange(length, dtype=torch.float64)
    result = torch.zeros(length, dtype=torch.float64)
    for harmonic, coefficient in enumerate(coefficients):
        result = result + coefficient * torch.cos(2 * math.pi * harmonic * n / denominator)
    return result.to(torch_dtype(output_datatype))


def hann_window(size: torch.Tensor | int, output_datatype: int = 1, periodic: int = 1) -> torch.Tensor:
    return _window(size, output_datatype, periodic, (0.5, -0.5))


def hamming_window(size: torch.Tensor | int, output_datatype: int = 1, periodic: int = 1) -> torch.Tensor:
    return _window(size, output_datatype, periodic, (25 / 46, -21 / 46))


def blackman_window(size: torch.Tensor | int, output_datatype: int = 1, periodic: int = 1) -> torch.Tensor:
    return _window(size, output_datatype, periodic, (0.42, -0.5, 0.08))


def dropout(
    data: torch.Tensor,
    ratio: torch.Tensor | float | None = None,
    training_mode: torch.Tensor | bool | None = None,
    seed: int | None = None,
    is_test: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The data unchanged and an all-true mask, unless the node's own ``training_mode`` input
    is true (the builder owns ``module.train()``; this is the op's explicit switch)."""
    keep = torch.ones_like(data, dtype=torch.bool)
    rate = scalar(ratio) if ratio is not None else 0.5
    if training_mode is None or not bool(scalar(training_mode)) or not rate:
        return data, keep
    generator = torch.Generator().manual_seed(int(seed)) if seed is not None else None
    keep = torch.rand(data.shape, generator=generator).to(data.device) >= rate
    return torch.where(keep, data / (1 - rate), torch.zeros_like(data)), keep


def bernoulli(input: torch.Tensor, dtype: int | None = None, seed: float | None = None) -> torch.Tensor:
    kind = torch_dtype(dtype) if dtype is not None else input.dtype
    generator = None
    if seed is not None:
        generator = torch.Generator().manual_seed(int(seed))
    return torch.bernoulli(input.to(torch.float64), generator=generator).to(kind)
