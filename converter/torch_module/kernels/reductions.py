"""Reductions: every ReduceX, ArgMax/ArgMin, CumSum, CumProd.

``axes`` is an attribute before opset 13 (ReduceSum) or 18 (the others) and an input
after; both arrive under the name ``axes``.  An empty or missing ``axes`` reduces
everything unless ``noop_with_empty_axes=1``.  Reducing over an empty dimension gives
the reduction's identity (0, 1, -inf, +inf), as ONNX defines.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from converter.torch_module.kernels.arguments import IntsLike, is_floating, normalize_axis, optional_ints, scalar, widen


def _axes(data: torch.Tensor, axes: IntsLike, noop_with_empty_axes: int) -> tuple[int, ...] | None:
    chosen = optional_ints(axes)
    if not chosen:
        return None if noop_with_empty_axes else tuple(range(data.dim()))
    return tuple(sorted({normalize_axis(axis, data.dim()) for axis in chosen}))


def _reduce(
    data: torch.Tensor,
    axes: IntsLike,
    keepdims: int,
    noop_with_empty_axes: int,
    reduce: Callable[[torch.Tensor, tuple[int, ...], bool], torch.Tensor],
    empty: float,
) -> torch.Tensor:
    dims = _axes(data, axes, noop_with_empty_axes)
    if dims is None:
        return data
    if any(data.shape[d] == 0 for d in dims):
        shape = [1 if d in dims else size for d, size in enumerate(data.shape)]
        if not keepdims:
            shape = [size for d, size in enumerate(data.shape) if d not in dims]
        return torch.full(shape, empty, dtype=data.dtype, device=data.device)
    if not dims:
        return data
    return reduce(data, dims, bool(keepdims))


def reduce_sum(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    return _reduce(data, axes, keepdims, noop_with_empty_axes, lambda x, d, k: widen(x).sum(d, k).to(x.dtype), 0.0)


def reduce_mean(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    def mean(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        if is_floating(x):
            return x.mean(dims, keep)
        count = 1
        for d in dims:
            count *= x.shape[d]
        return torch.div(widen(x).sum(dims, keep), count, rounding_mode="trunc").to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, mean, float("nan"))


def reduce_prod(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    def prod(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        result = widen(x)
        for d in reversed(dims):
            result = result.prod(d, keepdim=keep)
        return result.to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, prod, 1.0)


def _extreme(data: torch.Tensor, largest: bool) -> float:
    if data.dtype == torch.bool:
        return 0.0 if largest else 1.0
    if is_floating(data):
        return float("-inf") if largest else float("inf")
    info = torch.iinfo(data.dtype)
    return float(info.min if largest else info.max)


def reduce_max(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    def amax(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        return widen(x).amax(dims, keep).to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, amax, _extreme(data, True))


def reduce_min(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    def amin(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        return widen(x).amin(dims, keep).to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, amin, _extreme(data, False))


def reduce_l1(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    return _reduce(data, axes, keepdims, noop_with_empty_axes, lambda x, d, k: widen(x).abs().sum(d, k).to(x.dtype), 0.0)


def reduce_l2(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    def l2(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        if is_floating(x):
            return x.pow(2).sum(dims, keep).sqrt()
        return widen(x).pow(2).sum(dims, keep).double().sqrt().to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, l2, 0.0)


def reduce_sum_square(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    return _reduce(data, axes, keepdims, noop_with_empty_axes, lambda x, d, k: widen(x).pow(2).sum(d, k).to(x.dtype), 0.0)


def reduce_log_sum(data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> torch.Tensor:
    return _reduce(data, axes, keepdims, noop_with_empty_axes, lambda x, d, k: x.sum(d, k).log(), float("-inf"))


def reduce_log_sum_exp(
    data: torch.Tensor, axes: IntsLike = None, keepdims: int = 1, noop_with_empty_axes: int = 0
) -> torch.Tensor:
    def logsumexp(x: torch.Tensor, dims: tuple[int, ...], keep: bool) -> torch.Tensor:
        if is_floating(x):
            return torch.logsumexp(x, dims, keep)
        return torch.logsumexp(x.double(), dims, keep).to(x.dtype)

    return _reduce(data, axes, keepdims, noop_with_empty_axes, logsumexp, float("-inf"))


def _arg(data: torch.Tensor, axis: int, keepdims: int, select_last_index: int, largest: bool) -> torch.Tensor:
    dim = normalize_axis(axis, data.dim())
    pick = torch.argmax if largest else torch.argmin
    wide = widen(data) if data.dtype != torch.bool else data.to(torch.uint8)
    if not select_last_index:
        return pick(wide, dim=dim, keepdim=bool(keepdims))
    return data.shape[dim] - 1 - pick(wide.flip(dim), dim=dim, keepdim=bool(keepdims))


def arg_max(data: torch.Tensor, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> torch.Tensor:
    return _arg(data, axis, keepdims, select_last_index, True)


def arg_min(data: torch.Tensor, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> torch.Tensor:
    return _arg(data, axis, keepdims, select_last_index, False)


def _cumulative(
    x: torch.Tensor, axis: torch.Tensor | int, exclusive: int, reverse: int, product: bool
) -> torch.Tensor:
    dim = normalize_axis(int(scalar(axis)), x.dim())  # type: ignore[arg-type]
    wide = widen(x)
    if reverse:
        wide = wide.flip(dim)
    if exclusive:
        identity = torch.ones_like if product else torch.zeros_like
        wide = torch.cat([identity(wide.narrow(dim, 0, 1)), wide.narrow(dim, 0, wide.shape[dim] - 1)], dim=dim)
    result = torch.cumprod(wide, dim) if product else torch.cumsum(wide, dim)
    if reverse:
        result = result.flip(dim)
    return result.to(x.dtype)


def cum_sum(x: torch.Tensor, axis: torch.Tensor | int, exclusive: int = 0, reverse: int = 0) -> torch.Tensor:
    return _cumulative(x, axis, exclusive, reverse, product=False)


def cum_prod(x: torch.Tensor, axis: torch.Tensor | int, exclusive: int = 0, reverse: int = 0) -> torch.Tensor:
    return _cumulative(x, axis, exclusive, reverse, product=True)
