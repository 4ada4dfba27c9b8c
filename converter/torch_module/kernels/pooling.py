"""Pooling: MaxPool (with Indices), AveragePool, LpPool, the global pools, MaxUnpool, LRN.

Every windowed pool cuts the padded input into windows (``windows.windows``) and
reduces over them, so dilation, ceil_mode, asymmetric pads and count_include_pad need
no special case.  MaxPool's Indices count over the whole input tensor (batch and
channel included), row-major, or column-major over the spatial dimensions when
``storage_order=1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import ints
from converter.torch_module.kernels.windows import pad_spatial, pooled_sizes, spatial_pads, windows


def _geometry(
    x: torch.Tensor,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    auto_pad: str,
    pads: Sequence[int] | None,
    ceil_mode: int,
) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[int]]:
    rank = x.dim() - 2
    kernel = list(kernel_shape)
    stride = list(strides) if strides else [1] * rank
    dilation = list(dilations) if dilations else [1] * rank
    in_sizes = list(x.shape[2:])
    spatial = spatial_pads(in_sizes, kernel, stride, dilation, auto_pad, pads)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-size // s) for size, s in zip(in_sizes, stride)]
    else:
        out = pooled_sizes(in_sizes, kernel, stride, dilation, spatial, ceil_mode)
    return kernel, stride, dilation, spatial, out


def _flat_indices(x: torch.Tensor, storage_order: int) -> torch.Tensor:
    if storage_order and x.dim() == 4:
        n, c, h, w = x.shape
        return torch.arange(n * c * h * w, device=x.device).reshape(n, c, w, h).transpose(2, 3)
    return torch.arange(x.numel(), device=x.device).reshape(x.shape)


def max_pool(
    x: torch.Tensor,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int] = (),
    pads: Sequence[int] | None = None,
    storage_order: int = 0,
    strides: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    kernel, stride, dilation, spatial, out = _geometry(x, kernel_shape, strides, dilations, auto_pad, pads, ceil_mode)
    low = torch.finfo(x.dtype).min if x.is_floating_point() else torch.iinfo(x.dtype).min
    wide = x if x.is_floating_point() else x.to(torch.int64)
    values, where = windows(wide, kernel, stride, dilation, spatial, out, float("-inf") if x.is_floating_point() else low).max(-1)
    positions = windows(_flat_indices(x, storage_order), kernel, stride, dilation, spatial, out, -1)
    return values.to(x.dtype), positions.gather(-1, where.unsqueeze(-1)).squeeze(-1)


def average_pool(
    x: torch.Tensor,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int] = (),
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    kernel, stride, dilation, spatial, out = _geometry(x, kernel_shape, strides, dilations, auto_pad, pads, ceil_mode)
    total = windows(x, kernel, stride, dilation, spatial, out).sum(-1)
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype, device=x.device)
    if count_include_pad:
        ones = pad_spatial(ones, spatial, 1.0)
        no_pads = [(0, 0)] * len(spatial)
        counted = windows(ones, kernel, stride, dilation, no_pads, out).sum(-1)
    else:
        counted = windows(ones, kernel, stride, dilation, spatial, out).sum(-1)
    return total / counted


def lp_pool(
    x: torch.Tensor,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int] = (),
    p: int = 2,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    kernel, stride, dilation, spatial, out = _geometry(x, kernel_shape, strides, dilations, auto_pad, pads, ceil_mode)
    return windows(x.abs().pow(p), kernel, stride, dilation, spatial, out).sum(-1).pow(1.0 / p)


def global_average_pool(x: torch.Tensor) -> torch.Tensor:
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


def global_max_pool(x: torch.Tensor) -> torch.Tensor:
    return x.amax(dim=tuple(range(2, x.dim())), keepdim=True)


def global_lp_pool(x: torch.Tensor, p: int = 2) -> torch.Tensor:
    return x.abs().pow(p).sum(dim=tuple(range(2, x.dim())), keepdim=True).pow(1.0 / p)


def max_unpool(
    x: torch.Tensor,
    indices: torch.Tensor,
    output_shape: torch.Tensor | Sequence[int] | None = None,
    kernel_shape: Sequence[int] = (),
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    rank = x.dim() - 2
    stride = list(strides) if strides else [1] * rank
    pad = list(pads) if pads else [0] * (2 * rank)
    spatial = [(size - 1) * s + k - pad[i] - pad[i + rank] for i, (size, s, k) in enumerate(zip(x.shape[2:], stride, kernel_shape))]
    shape = [*x.shape[:2], *spatial]
    count = 1
    for size in shape:
        count *= size
    flat = torch.zeros(count, dtype=x.dtype, device=x.device)
    unpooled = flat.scatter(0, indices.reshape(-1), x.reshape(-1)).reshape(shape)
    if output_shape is None:
        return unpooled
    # indices address the default shape; a larger output_shape extends it at the end
    wanted = ints(output_shape)[2:]
    return pad_spatial(unpooled, [(0, want - have) for want, have in zip(wanted, spatial)])


def lrn(x: torch.Tensor, size: int, alpha: float = 0.0001, beta: float = 0.75, bias: float = 1.0) -> torch.Tensor:
    squares = (x * x).transpose(1, -1)
    padded = F.pad(squares, [(size - 1) // 2, size - 1 - (size - 1) // 2])
    summed = padded.unfold(-1, size, 1).sum(-1).transpose(1, -1)
    return x / (bias + alpha / size * summed).pow(beta)
