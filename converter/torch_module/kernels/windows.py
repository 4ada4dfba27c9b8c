"""Sliding-window geometry shared by convolution and pooling: pads, auto_pad, ceil_mode.

ONNX gives explicit ``pads`` as ``[begin_1, ..., begin_n, end_1, ..., end_n]`` or
derives them from ``auto_pad``; torch takes symmetric padding only.  These helpers turn
the attributes into per-dimension ``(begin, end)`` pairs, pad explicitly with
``F.pad`` (negative amounts crop), and cut the input into windows with
``Tensor.unfold`` so every pooling variant (dilation, ceil_mode, count_include_pad)
is one reduction over the window dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

Pads = list[tuple[int, int]]


def spatial_pads(
    in_sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    auto_pad: str,
    pads: Sequence[int] | None,
) -> Pads:
    """Per spatial dimension (begin, end) padding as ONNX defines it for Conv and pools."""
    rank = len(in_sizes)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        result = []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            result.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return result
    if auto_pad == "VALID" or not pads:
        return [(0, 0)] * rank
    return [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]


def pad_spatial(x: torch.Tensor, pads: Pads, value: float = 0.0) -> torch.Tensor:
    """Pad (or crop, for negative amounts) the trailing ``len(pads)`` dimensions."""
    if all(p == (0, 0) for p in pads):
        return x
    flat: list[int] = []
    for begin, end in reversed(pads):
        flat += [begin, end]
    return F.pad(x, flat, value=value)


def pooled_sizes(
    in_sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Pads,
    ceil_mode: int,
) -> list[int]:
    """Output sizes; with ceil_mode the last window must start inside the input or left pad."""
    sizes = []
    for size, k, s, d, (begin, end) in zip(in_sizes, kernel, strides, dilations, pads):
        span = size + begin + end - ((k - 1) * d + 1)
        out = (math.ceil(span / s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + begin:
            out -= 1
        sizes.append(out)
    return sizes


def windows(
    x: torch.Tensor,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Pads,
    out_sizes: Sequence[int],
    value: float = 0.0,
) -> torch.Tensor:
    """``x`` [N, C, *spatial] -> [N, C, *out_sizes, k_1 * ... * k_n], windows of the padded input."""
    rank = len(kernel)
    grown = []
    for size, k, s, d, (begin, _), out in zip(x.shape[2:], kernel, strides, dilations, pads, out_sizes):
        needed = (out - 1) * s + (k - 1) * d + 1
        grown.append((begin, needed - size - begin))
    padded = pad_spatial(x, grown, value)
    for axis, (k, s, d) in enumerate(zip(kernel, strides, dilations)):
        padded = padded.unfold(2 + axis, (k - 1) * d + 1, s)
        if d > 1:
            padded = padded[..., ::d]
    return padded.reshape(*padded.shape[: 2 + rank], -1)
