"""Normalizations and softmax family: BatchNormalization (inference and training_mode),
InstanceNormalization, LayerNormalization, GroupNormalization, RMSNormalization,
LpNormalization, MeanVarianceNormalization, Softmax, LogSoftmax, Hardmax.

Softmax, LogSoftmax and Hardmax before opset 13 flatten the input to 2-d at ``axis``
(default 1); from 13 on they work along ``axis`` (default -1): two kernels each.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import normalize_axis, torch_dtype


def _per_channel(parameter: torch.Tensor, rank: int) -> torch.Tensor:
    """[C] (or [C, D1, ...] with spatial=0) shaped to broadcast against [N, C, D1, ...]."""
    if parameter.dim() == 1:
        return parameter.reshape(-1, *([1] * (rank - 2)))
    return parameter


def batch_normalization(
    x: torch.Tensor,
    scale: torch.Tensor,
    b: torch.Tensor,
    input_mean: torch.Tensor,
    input_var: torch.Tensor,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    training_mode: int = 0,
    spatial: int = 1,
    is_test: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Y and, with ``training_mode=1``, the updated running mean and variance."""
    rank = x.dim()
    if not training_mode:
        mean, var = input_mean, input_var
        running_mean, running_var = input_mean, input_var
    else:
        axes = [0, *range(2, rank)]
        mean = x.mean(dim=axes)
        var = x.var(dim=axes, unbiased=False)
        running_mean = input_mean * momentum + mean * (1 - momentum)
        running_var = input_var * momentum + var * (1 - momentum)
    normalized = (x - _per_channel(mean, rank)) / torch.sqrt(_per_channel(var, rank) + epsilon)
    y = normalized * _per_channel(scale, rank) + _per_channel(b, rank)
    return y, running_mean, running_var


def batch_normalization_6(
    x: torch.Tensor,
    scale: torch.Tensor,
    b: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    spatial: int = 1,
    is_test: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Opsets 6-9: five outputs (Y, running mean and variance, saved mean and variance);
    in inference the last four are the given statistics."""
    y, running_mean, running_var = batch_normalization(x, scale, b, mean, var, epsilon, momentum, 0, spatial)
    return y, running_mean, running_var, running_mean, running_var


def instance_normalization(x: torch.Tensor, scale: torch.Tensor, b: torch.Tensor, epsilon: float = 1e-5) -> torch.Tensor:
    return F.instance_norm(x, weight=scale, bias=b, eps=epsilon)


def _stashed(x: torch.Tensor, stash_type: int) -> torch.Tensor:
    return x.to(torch_dtype(stash_type)) if x.dtype != torch.float64 else x


def layer_normalization(
    x: torch.Tensor,
    scale: torch.Tensor,
    b: torch.Tensor | None = None,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
    *,
    output_count: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Y, Mean and InvStdDev (the last two keep the normalised axes as size 1).

    A node binding only Y (``output_count=1``) whose scale and bias have the normalised
    shape runs torch's fused layer norm when it computes in the stash type anyway (its
    Mean and InvStdDev carry no gradient, so it serves only nodes that never read them)."""
    first = normalize_axis(axis, x.dim())
    if output_count == 1 and _fused_layer_norm_fits(x, scale, b, first, stash_type):
        return torch.native_layer_norm(x, x.shape[first:], scale, b, epsilon)
    dims = tuple(range(first, x.dim()))
    wide = _stashed(x, stash_type)
    mean = wide.mean(dim=dims, keepdim=True)
    inv_std = torch.rsqrt((wide - mean).pow(2).mean(dim=dims, keepdim=True) + epsilon)
    y = ((wide - mean) * inv_std).to(x.dtype) * scale
    if b is not None:
        y = y + b
    return y, mean, inv_std


def _fused_layer_norm_fits(x: torch.Tensor, scale: torch.Tensor, b: torch.Tensor | None, first: int,
                           stash_type: int) -> bool:
    computes_in_stash_type = x.dtype == torch.float64 or (x.dtype == torch.float32 and stash_type == 1)
    normalised = x.shape[first:]
    return (computes_in_stash_type and scale.shape == normalised and scale.dtype == x.dtype
            and (b is None or (b.shape == normalised and b.dtype == x.dtype)))


def _group_statistics(x: torch.Tensor, num_groups: int, epsilon: float, stash_type: int) -> torch.Tensor:
    wide = _stashed(x, stash_type)
    grouped = wide.reshape(x.shape[0], num_groups, -1)
    mean = grouped.mean(-1, keepdim=True)
    var = (grouped - mean).pow(2).mean(-1, keepdim=True)
    return ((grouped - mean) / torch.sqrt(var + epsilon)).reshape(x.shape).to(x.dtype)


def group_normalization_18(
    x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, num_groups: int, epsilon: float = 1e-5
) -> torch.Tensor:
    """Opset 18: ``scale`` and ``bias`` have one entry per group."""
    normalized = _group_statistics(x, num_groups, epsilon, 1)
    per_channel = x.shape[1] // num_groups
    shape = (-1, *([1] * (x.dim() - 2)))
    return normalized * scale.repeat_interleave(per_channel).reshape(shape) + bias.repeat_interleave(per_channel).reshape(shape)


def group_normalization(
    x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, num_groups: int, epsilon: float = 1e-5, stash_type: int = 1
) -> torch.Tensor:
    """Opset 21: ``scale`` and ``bias`` have one entry per channel."""
    normalized = _group_statistics(x, num_groups, epsilon, stash_type)
    shape = (-1, *([1] * (x.dim() - 2)))
    return normalized * scale.reshape(shape) + bias.reshape(shape)


def rms_normalization(
    x: torch.Tensor, scale: torch.Tensor, axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1
) -> torch.Tensor:
    dims = tuple(range(normalize_axis(axis, x.dim()), x.dim()))
    wide = _stashed(x, stash_type)
    normalized = wide * torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return normalized.to(x.dtype) * scale


def lp_normalization(x: torch.Tensor, axis: int = -1, p: int = 2) -> torch.Tensor:
    norm = x.abs().sum(axis, keepdim=True) if p == 1 else x.pow(2).sum(axis, keepdim=True).sqrt()
    return x / torch.where(norm == 0, torch.ones_like(norm), norm)  # an all-zero slice stays zero


def mean_variance_normalization(x: torch.Tensor, axes: Sequence[int] = (0, 2, 3)) -> torch.Tensor:
    dims = tuple(axes)
    mean = x.mean(dim=dims, keepdim=True)
    std = torch.sqrt((x * x).mean(dim=dims, keepdim=True) - mean * mean)
    return (x - mean) / (std + 1e-9)


def _as_2d(x: torch.Tensor, axis: int) -> torch.Tensor:
    split = normalize_axis(axis, x.dim())
    rows = 1
    for size in x.shape[:split]:
        rows *= size
    return x.reshape(rows, -1)


def softmax_1(x: torch.Tensor, axis: int = 1) -> torch.Tensor:
    return torch.softmax(_as_2d(x, axis), dim=1).reshape(x.shape)


def softmax(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    return torch.softmax(x, dim=axis)


def log_softmax_1(x: torch.Tensor, axis: int = 1) -> torch.Tensor:
    return torch.log_softmax(_as_2d(x, axis), dim=1).reshape(x.shape)


def log_softmax(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    return torch.log_softmax(x, dim=axis)


def _one_hot_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    first = torch.argmax(x, dim=dim, keepdim=True)
    return torch.zeros_like(x).scatter(dim, first, 1.0)


def hardmax_1(x: torch.Tensor, axis: int = 1) -> torch.Tensor:
    return _one_hot_max(_as_2d(x, axis), 1).reshape(x.shape)


def hardmax(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    return _one_hot_max(x, axis)
