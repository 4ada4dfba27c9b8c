"""Convolutions: Conv, ConvTranspose, ConvInteger (1-, 2- and 3-d, any auto_pad).

Asymmetric padding is applied with ``F.pad`` before a padding-free torch convolution;
ConvTranspose runs without padding and crops (or extends) the full result, which
covers ``pads``, ``output_padding`` and ``output_shape`` with one rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.windows import pad_spatial, spatial_pads

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _geometry(
    x: torch.Tensor, w: torch.Tensor, kernel_shape: Sequence[int] | None, strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
) -> tuple[int, list[int], list[int], list[int]]:
    rank = x.dim() - 2
    kernel = list(kernel_shape) if kernel_shape else list(w.shape[2:])
    return rank, kernel, list(strides) if strides else [1] * rank, list(dilations) if dilations else [1] * rank


def conv(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None = None,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    rank, kernel, stride, dilation = _geometry(x, w, kernel_shape, strides, dilations)
    spatial = spatial_pads(list(x.shape[2:]), kernel, stride, dilation, auto_pad, pads)
    if rank not in _CONV:  # 4-d and more: not in torch; fold nothing, refuse clearly
        raise NotImplementedError(f"Conv over {rank} spatial dimensions")
    if all(begin == end for begin, end in spatial):
        return _CONV[rank](x, w, b, stride, [begin for begin, _ in spatial], dilation, group)
    return _CONV[rank](pad_spatial(x, spatial), w, b, stride, 0, dilation, group)


def conv_integer(
    x: torch.Tensor,
    w: torch.Tensor,
    x_zero_point: torch.Tensor | None = None,
    w_zero_point: torch.Tensor | None = None,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    """Integer convolution, exact in float64 for 8-bit operands (sums stay below 2**53)."""
    shifted_x = x.to(torch.float64) - (0 if x_zero_point is None else x_zero_point.to(torch.float64))
    shift_w = 0 if w_zero_point is None else w_zero_point.to(torch.float64)
    if isinstance(shift_w, torch.Tensor) and shift_w.numel() > 1:
        shift_w = shift_w.reshape(-1, *([1] * (w.dim() - 1)))
    shifted_w = w.to(torch.float64) - shift_w
    rank, kernel, stride, dilation = _geometry(x, w, kernel_shape, strides, dilations)
    spatial = spatial_pads(list(x.shape[2:]), kernel, stride, dilation, auto_pad, pads)
    result = _CONV[rank](pad_spatial(shifted_x, spatial), shifted_w, None, stride, 0, dilation, group)
    return result.round().to(torch.int32)


def _transpose_pads(
    in_sizes: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    output_padding: Sequence[int],
    auto_pad: str,
    pads: Sequence[int] | None,
    output_shape: Sequence[int] | None,
) -> list[tuple[int, int]]:
    rank = len(in_sizes)
    if pads and not output_shape and auto_pad in ("NOTSET", ""):
        return [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]
    if not output_shape and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return [(0, 0)] * rank
    result = []
    for axis in range(rank):
        full = stride[axis] * (in_sizes[axis] - 1) + output_padding[axis] + (kernel[axis] - 1) * dilation[axis] + 1
        wanted = output_shape[-rank + axis] if output_shape else in_sizes[axis] * stride[axis]
        total = full - wanted
        small, large = total // 2, total - total // 2
        result.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return result


def conv_transpose(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None = None,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    rank, kernel, stride, dilation = _geometry(x, w, kernel_shape, strides, dilations)
    extra = list(output_padding) if output_padding else [0] * rank
    spatial = _transpose_pads(list(x.shape[2:]), kernel, stride, dilation, extra, auto_pad, pads, output_shape)
    full = _CONV_TRANSPOSE[rank](x, w, None, stride, 0, 0, group, dilation)
    cropped = pad_spatial(full, [(-begin, -end + more) for (begin, end), more in zip(spatial, extra)])
    if b is not None:
        cropped = cropped + b.reshape(-1, *([1] * rank))
    return cropped
