"""Resize (opsets 10-19) and Upsample: separable interpolation, one weight matrix per axis.

Each resized axis gets an ``[output, input]`` matrix built in Python from the ONNX
formulas (coordinate transformation, nearest rounding, linear and cubic coefficients,
antialias, exclude_outside, tf_crop_and_resize extrapolation), then applied with one
matrix product, so the result is differentiable in the data.  The arithmetic is done
in float64 and cast back to the input's type (rounded and clamped for integers), as
the ONNX reference does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from converter.torch_module.kernels.arguments import IntsLike, ints, normalize_axis

Coefficients = Callable[[float, float], list[float]]


def _nearest(nearest_mode: str) -> Coefficients:
    def coefficients(ratio: float, scale: float) -> list[float]:
        if float(ratio).is_integer():
            return [0.0, 1.0]
        if nearest_mode == "round_prefer_floor":
            return [float(ratio <= 0.5), float(ratio > 0.5)]
        if nearest_mode == "round_prefer_ceil":
            return [float(ratio < 0.5), float(ratio >= 0.5)]
        return [1.0, 0.0] if nearest_mode == "floor" else [0.0, 1.0]

    return coefficients


def _cubic_weight(x: float, a: float) -> float:
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def _cubic(a: float, antialias: int) -> Coefficients:
    def coefficients(ratio: float, scale: float) -> list[float]:
        if not antialias:
            return [_cubic_weight(offset - ratio, a) for offset in (-1, 0, 1, 2)]
        scale = min(scale, 1.0)
        start = int(math.floor(-2 / scale) + 1)
        weights = [_cubic_weight(scale * (i - ratio), a) for i in range(start, 2 - start)]
        total = sum(weights)
        return [w / total for w in weights]

    return coefficients


def _linear(antialias: int) -> Coefficients:
    def coefficients(ratio: float, scale: float) -> list[float]:
        if not antialias:
            return [1 - ratio, ratio]
        scale = min(scale, 1.0)
        start = int(math.floor(-1 / scale) + 1)
        weights = [min(max(1 - abs((i - ratio) * scale), 0.0), 1.0) for i in range(start, 2 - start)]
        total = sum(weights)
        return [w / total for w in weights]

    return coefficients


def _source_position(mode: str, y: int, scale: float, size: int, out: int, roi: tuple[float, float]) -> float:
    """Where output index ``y`` samples the input, per coordinate_transformation_mode."""
    width = scale * size
    if mode == "align_corners":
        return 0.0 if width == 1 else y * (size - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if width == 1:
            return (end - start) * (size - 1) / 2 + start * (size - 1)
        return y * (end - start) * (size - 1) / (width - 1) + start * (size - 1)
    if mode == "pytorch_half_pixel":
        return -0.5 if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def _axis_matrix(
    size: int, out: int, scale: float, roi: tuple[float, float], coefficients: Coefficients,
    mode: str, exclude_outside: int,
) -> tuple[list[list[float]], list[bool]]:
    """The [out, size] interpolation matrix and which rows extrapolate (tf_crop_and_resize)."""
    matrix = [[0.0] * size for _ in range(out)]
    outside = [False] * out
    for y in range(out):
        x = _source_position(mode, y, scale, size, out, roi)
        if mode == "tf_crop_and_resize" and (x < 0 or x > size - 1):
            outside[y] = True
            continue
        base = math.floor(x)
        ratio = 1.0 if x == base else x - base
        weights = coefficients(ratio, scale)
        n = len(weights)
        pad = math.ceil(n / 2)
        frac = (x + pad) - math.floor(x + pad)
        if n % 2 == 0:
            first = math.floor(x + pad) + (-(n // 2) if frac == 0 else -(n // 2) + 1) - pad
        else:
            first = math.floor(x + pad) + (-((n - 1) // 2) + (0 if frac <= 0.5 else 1)) - pad
        neighbours = [first + k for k in range(n)]
        if exclude_outside:
            weights = [0.0 if not 0 <= j < size else w for j, w in zip(neighbours, weights)]
            total = sum(weights) or 1.0
            weights = [w / total for w in weights]
        for j, w in zip(neighbours, weights):
            matrix[y][min(max(j, 0), size - 1)] += w
    return matrix, outside


def _plan(
    shape: Sequence[int], scales: list[float] | None, sizes: list[int] | None, axes: list[int], policy: str
) -> tuple[list[float], list[int]]:
    if sizes is not None:
        factors = [sizes[i] / shape[axis] for i, axis in enumerate(axes)]
        if policy != "stretch":
            common = min(factors) if policy == "not_larger" else max(factors)
            return [common] * len(axes), [int(common * shape[axis] + 0.5) for axis in axes]
        return factors, list(sizes)
    assert scales is not None
    # an unscaled axis keeps its size untouched (a symbolic batch size stays symbolic)
    return scales, [shape[axis] if s == 1.0 else int(s * shape[axis]) for s, axis in zip(scales, axes)]


def _floats(value: torch.Tensor | Sequence[float] | None) -> list[float] | None:
    if value is None:
        return None
    values = value.reshape(-1).tolist() if isinstance(value, torch.Tensor) else [float(v) for v in value]
    return values or None


def _apply(x: torch.Tensor, axis: int, matrix: list[list[float]], outside: list[bool], extrapolation: float) -> torch.Tensor:
    weights = torch.tensor(matrix, dtype=torch.float64, device=x.device)
    moved = x.movedim(axis, -1) @ weights.transpose(0, 1)
    if any(outside):
        mask = torch.tensor(outside, device=x.device)
        moved = torch.where(mask, torch.full_like(moved, extrapolation), moved)
    return moved.movedim(-1, axis)


def resize(
    x: torch.Tensor,
    roi: torch.Tensor | Sequence[float] | None = None,
    scales: torch.Tensor | Sequence[float] | None = None,
    sizes: IntsLike = None,
    antialias: int = 0,
    axes: Sequence[int] | None = None,
    coordinate_transformation_mode: str = "half_pixel",
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    extrapolation_value: float = 0.0,
    keep_aspect_ratio_policy: str = "stretch",
    mode: str = "nearest",
    nearest_mode: str = "round_prefer_floor",
) -> torch.Tensor:
    chosen = [normalize_axis(a, x.dim()) for a in axes] if axes else list(range(x.dim()))
    size_list = None if sizes is None else [float(v) for v in ints(sizes)] or None
    factors, outs = _plan(
        list(x.shape), _floats(scales), None if size_list is None else [int(s) for s in size_list], chosen,
        keep_aspect_ratio_policy,
    )
    bounds = _floats(roi)
    if mode == "nearest":
        coefficients = _nearest(nearest_mode)
    elif mode == "cubic":
        coefficients = _cubic(cubic_coeff_a, antialias)
    else:
        coefficients = _linear(antialias)
    result = x.to(torch.float64)
    for i, axis in enumerate(chosen):
        span = (bounds[i], bounds[i + len(chosen)]) if bounds else (0.0, 1.0)
        if (factors[i] == 1.0 and span == (0.0, 1.0)) or (
                math.isclose(factors[i], 1.0) and outs[i] == x.shape[axis] and span == (0.0, 1.0)):
            continue
        matrix, outside = _axis_matrix(x.shape[axis], outs[i], factors[i], span, coefficients,
                                       coordinate_transformation_mode, exclude_outside)
        result = _apply(result, axis, matrix, outside, extrapolation_value)
    if x.is_floating_point():
        return result.to(x.dtype)
    info = torch.iinfo(x.dtype)
    return result.round().clamp(info.min, info.max).to(x.dtype)


def resize_10(x: torch.Tensor, scales: torch.Tensor | Sequence[float], mode: str = "nearest") -> torch.Tensor:
    """Opset 10: scales only, asymmetric coordinates, nearest rounds down."""
    return resize(x, None, scales, coordinate_transformation_mode="asymmetric", mode=mode, nearest_mode="floor")


def upsample(x: torch.Tensor, scales: torch.Tensor | Sequence[float] | None = None, mode: str = "nearest") -> torch.Tensor:
    """Upsample (opsets 7-9): ``scales`` is an attribute at 7 and an input from 9 on."""
    return resize_10(x, scales if scales is not None else [1.0] * x.dim(), mode)
