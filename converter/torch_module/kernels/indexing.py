"""Indexing operators: Gather, GatherElements, GatherND, Scatter, ScatterElements,
ScatterND, OneHot, Compress, NonZero, TopK, Unique, ReverseSequence.

ONNX indices may be negative (counted from the end): every kernel wraps them first.
Scatters are written without in-place updates so autograd sees them.
"""

from __future__ import annotations

import torch

from converter.torch_module.kernels.arguments import IntsLike, ints, normalize_axis, scalar

_REDUCTIONS = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _wrapped(indices: torch.Tensor, size: int) -> torch.Tensor:
    wide = indices.to(torch.int64)
    return torch.where(wide < 0, wide + size, wide)


def gather(data: torch.Tensor, indices: torch.Tensor, axis: int = 0) -> torch.Tensor:
    dim = normalize_axis(axis, data.dim())
    flat = _wrapped(indices, data.shape[dim]).reshape(-1)
    picked = data.index_select(dim, flat)
    return picked.reshape([*data.shape[:dim], *indices.shape, *data.shape[dim + 1 :]])


def gather_elements(data: torch.Tensor, indices: torch.Tensor, axis: int = 0) -> torch.Tensor:
    dim = normalize_axis(axis, data.dim())
    return torch.gather(data, dim, _wrapped(indices, data.shape[dim]))


def gather_nd(data: torch.Tensor, indices: torch.Tensor, batch_dims: int = 0) -> torch.Tensor:
    depth = indices.shape[-1]
    batch_shape = data.shape[:batch_dims]
    batches = 1
    for size in batch_shape:
        batches *= size
    flat_data = data.reshape(batches, *data.shape[batch_dims:])
    flat_indices = indices.reshape(batches, -1, depth).to(torch.int64)
    columns = [_wrapped(flat_indices[..., i], flat_data.shape[1 + i]) for i in range(depth)]
    rows = torch.arange(batches, device=data.device).reshape(-1, 1).expand_as(columns[0]) if columns else None
    picked = flat_data[tuple([rows, *columns])] if rows is not None else flat_data
    return picked.reshape([*batch_shape, *indices.shape[batch_dims:-1], *data.shape[batch_dims + depth :]])


def scatter_elements(
    data: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, axis: int = 0, reduction: str = "none"
) -> torch.Tensor:
    dim = normalize_axis(axis, data.dim())
    index = _wrapped(indices, data.shape[dim])
    if reduction == "none":
        return torch.scatter(data, dim, index, updates)
    return torch.scatter_reduce(data, dim, index, updates, _REDUCTIONS[reduction], include_self=True)


def scatter(data: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, axis: int = 0) -> torch.Tensor:
    return scatter_elements(data, indices, updates, axis)


def scatter_nd(data: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, reduction: str = "none") -> torch.Tensor:
    depth = indices.shape[-1]
    leading = data.shape[:depth]
    flat_data = data.reshape(-1, *data.shape[depth:])
    offsets = torch.zeros(indices.shape[:-1], dtype=torch.int64, device=data.device)
    for i in range(depth):
        offsets = offsets * leading[i] + _wrapped(indices[..., i], leading[i])
    offsets = offsets.reshape(-1)
    flat_updates = updates.reshape(-1, *data.shape[depth:])
    if reduction == "none":
        result = torch.index_put(flat_data, (offsets,), flat_updates)
    elif reduction == "add":
        result = torch.index_put(flat_data, (offsets,), flat_updates, accumulate=True)
    else:
        index = offsets.reshape(-1, *([1] * (flat_data.dim() - 1))).expand_as(flat_updates)
        result = torch.scatter_reduce(flat_data, 0, index, flat_updates, _REDUCTIONS[reduction], include_self=True)
    return result.reshape(data.shape)


def one_hot(indices: torch.Tensor, depth: torch.Tensor | int, values: torch.Tensor, axis: int = -1) -> torch.Tensor:
    count = int(scalar(depth))  # type: ignore[arg-type]
    dim = normalize_axis(axis, indices.dim() + 1)
    wide = indices.to(torch.int64) if not indices.is_floating_point() else indices.floor().to(torch.int64)
    wide = torch.where(wide < 0, wide + count, wide)
    shape = [1] * (indices.dim() + 1)
    shape[dim] = count
    classes = torch.arange(count, device=indices.device).reshape(shape)
    hot = classes == wide.unsqueeze(dim)
    return torch.where(hot, values[1], values[0])


def compress(input: torch.Tensor, condition: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    flat = input.reshape(-1) if axis is None else input
    dim = 0 if axis is None else normalize_axis(axis, input.dim())
    kept = torch.nonzero(condition.reshape(-1)).reshape(-1)
    return flat.index_select(dim, kept)


def non_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(x).transpose(0, 1)


def top_k(
    x: torch.Tensor,
    K: IntsLike = None,
    axis: int = -1,
    largest: int = 1,
    sorted: int = 1,
    k: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Values and int64 indices; equal values keep the lower index first, as ONNX asks.
    ``k`` is the opset-1 attribute, ``K`` the input from opset 10 on."""
    count = k if k is not None else ints(K)[0]
    order = torch.sort(x, dim=axis, descending=bool(largest), stable=True)
    return order.values.narrow(axis, 0, count), order.indices.narrow(axis, 0, count)


def unique(
    x: torch.Tensor, axis: int | None = None, sorted: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Y, first-occurrence indices, inverse indices and counts (int64)."""
    dim = None if axis is None else normalize_axis(axis, x.dim())
    source = x.reshape(-1) if dim is None else x
    values, inverse, counts = torch.unique(source, sorted=True, return_inverse=True, return_counts=True, dim=dim)
    positions = torch.arange(inverse.numel(), device=x.device)
    first = torch.full((counts.numel(),), inverse.numel(), dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inverse, positions, "amin", include_self=True)
    if not sorted:
        order = torch.argsort(first)
        rank = torch.argsort(order)
        values = values.index_select(0 if dim is None else dim, order)
        return values, first[order], rank[inverse], counts[order]
    return values, first, inverse, counts


def reverse_sequence(
    input: torch.Tensor, sequence_lens: torch.Tensor, batch_axis: int = 1, time_axis: int = 0
) -> torch.Tensor:
    steps = input.shape[time_axis]
    time = torch.arange(steps, device=input.device).reshape(-1, 1)
    lengths = sequence_lens.to(torch.int64).reshape(1, -1)
    source = torch.where(time < lengths, lengths - 1 - time, time)  # [time, batch]
    if batch_axis < time_axis:
        source = source.transpose(0, 1)
    shape = [1] * input.dim()
    shape[time_axis], shape[batch_axis] = steps, input.shape[batch_axis]
    index = source.reshape(shape).expand(input.shape)
    return torch.gather(input, time_axis, index)


