"""Shape and layout operators: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
Split, Slice, Expand, Tile, Pad, Shape, Size, DepthToSpace, SpaceToDepth, Trilu,
CenterCropPad.

Shape-like inputs arrive as tensors or Python tuples (``arguments.ints``).  Opsets that
moved an attribute to an input (Squeeze/Unsqueeze axes, Split's split, Slice's starts,
Pad's pads) kept the name, so one kernel serves both: the attribute arrives as a
keyword, the input as a positional argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import IntsLike, ints, normalize_axis, optional_ints, scalar


def reshape(data: torch.Tensor, shape: IntsLike = None, allowzero: int = 0) -> torch.Tensor:
    target = list(ints(shape))
    if not allowzero:
        target = [data.shape[i] if size == 0 else size for i, size in enumerate(target)]
    return data.reshape(target)


def flatten(x: torch.Tensor, axis: int = 1) -> torch.Tensor:
    split = normalize_axis(axis, x.dim())
    rows = 1
    for size in x.shape[:split]:
        rows *= size
    return x.reshape(rows, -1)


def transpose(data: torch.Tensor, perm: Sequence[int] | None = None) -> torch.Tensor:
    order = list(perm) if perm is not None else list(range(data.dim() - 1, -1, -1))
    return data.permute(order)


def squeeze(data: torch.Tensor, axes: IntsLike = None) -> torch.Tensor:
    chosen = ints(axes)
    if not chosen:
        return data.reshape([size for size in data.shape if size != 1])
    drop = {normalize_axis(axis, data.dim()) for axis in chosen}
    return data.reshape([size for i, size in enumerate(data.shape) if i not in drop])


def unsqueeze(data: torch.Tensor, axes: IntsLike = None) -> torch.Tensor:
    rank = data.dim() + len(ints(axes))
    inserted = {normalize_axis(axis, rank) for axis in ints(axes)}
    sizes = iter(data.shape)
    return data.reshape([1 if i in inserted else next(sizes) for i in range(rank)])


def concat(*inputs: torch.Tensor, axis: int = 1) -> torch.Tensor:
    return torch.cat(inputs, dim=axis)


def split(
    input: torch.Tensor,
    split: IntsLike = None,
    axis: int = 0,
    num_outputs: int | None = None,
    *,
    output_count: int | None = None,
) -> tuple[torch.Tensor, ...]:
    """``output_count`` (the node's number of outputs) is needed only without ``split``."""
    dim = normalize_axis(axis, input.dim())
    sizes = optional_ints(split)
    if not sizes:
        parts = num_outputs or output_count
        if not parts:
            raise ValueError("Split without sizes or num_outputs needs output_count (the node's output count)")
        chunk = -(-input.shape[dim] // parts)
        sizes = tuple(min(chunk, input.shape[dim] - i * chunk) for i in range(parts))
    return tuple(torch.split(input, list(sizes), dim=dim))


def slice_indices(start: int, end: int, step: int, size: int) -> tuple[int, int, int]:
    """ONNX Slice's bounds as ``range`` arguments.  They clamp like Python's slices but for
    one case: stepping backwards from a start before the first element, ONNX starts at the
    first element (clamped into ``[0, size - 1]``) where Python selects nothing."""
    if step < 0 and start < -size:
        start = 0
    return slice(start, end, step).indices(size)


def slice_sequence(items: Sequence[Any], start: int, end: int, step: int) -> tuple[Any, ...]:
    """A shape (sizes as a tuple or ``torch.Size``) sliced as ONNX Slice slices a 1-d tensor."""
    return tuple(items[index] for index in range(*slice_indices(start, end, step, len(items))))


def _slice_axis(data: torch.Tensor, axis: int, start: int, end: int, step: int) -> torch.Tensor:
    size = data.shape[axis]
    first, stop, stride = slice_indices(start, end, step, size)
    count = len(range(first, stop, stride))
    if count == 0:
        return data.narrow(axis, 0, 0)
    if stride > 0:
        return data.narrow(axis, first, (count - 1) * stride + 1)[(slice(None),) * axis + (slice(None, None, stride),)]
    flipped = data.flip(axis)
    return _slice_axis(flipped, axis, size - 1 - first, size - 1 - first + (count - 1) * -stride + 1, -stride)


def slice_(
    data: torch.Tensor,
    starts: IntsLike,
    ends: IntsLike,
    axes: IntsLike = None,
    steps: IntsLike = None,
) -> torch.Tensor:
    begin, end = ints(starts), ints(ends)
    chosen = ints(axes) or tuple(range(len(begin)))
    stride = ints(steps) or (1,) * len(begin)
    for axis, first, last, step in zip(chosen, begin, end, stride):
        data = _slice_axis(data, normalize_axis(axis, data.dim()), first, last, step)
    return data


def expand(input: torch.Tensor, shape: IntsLike) -> torch.Tensor:
    return input.expand(torch.broadcast_shapes(input.shape, tuple(ints(shape))))


def tile(input: torch.Tensor, repeats: IntsLike) -> torch.Tensor:
    return input.repeat(*ints(repeats))


def _padded_positions(size: int, begin: int, end: int, mode: str) -> list[int]:
    positions = []
    for i in range(-begin, size + end):
        if mode == "edge":
            positions.append(min(max(i, 0), size - 1))
        elif mode == "wrap":
            positions.append(i % size)
        else:  # reflect: mirror without repeating the edge
            period = 2 * (size - 1) if size > 1 else 1
            j = i % period
            positions.append(j if j < size else period - j)
    return positions


def pad(
    data: torch.Tensor,
    pads: IntsLike = None,
    constant_value: torch.Tensor | float | None = None,
    axes: IntsLike = None,
    mode: str = "constant",
    value: float = 0.0,
) -> torch.Tensor:
    """Pad; ``pads``/``value`` are attributes before opset 11, ``pads``/``constant_value`` inputs after."""
    amounts = ints(pads)
    chosen = [normalize_axis(a, data.dim()) for a in ints(axes)] or list(range(data.dim()))
    half = len(amounts) // 2
    per_axis = {axis: (amounts[i], amounts[i + half]) for i, axis in enumerate(chosen)}
    if mode == "constant":
        flat: list[int] = []
        for axis in range(data.dim() - 1, -1, -1):
            flat += list(per_axis.get(axis, (0, 0)))
        if not isinstance(constant_value, torch.Tensor):
            return F.pad(data, flat, value=constant_value if constant_value is not None else value)
        # a tensor fill goes where a mask of the padded cells is set, so the fill stays a
        # tensor (differentiable, and never read back into Python)
        padded_cells = F.pad(torch.zeros(data.shape, dtype=torch.uint8, device=data.device), flat, value=1) != 0
        return torch.where(padded_cells, constant_value.reshape(()).to(data.dtype), F.pad(data, flat))
    for axis, (begin, end) in per_axis.items():
        if begin or end:
            index = torch.tensor(_padded_positions(data.shape[axis], begin, end, mode), device=data.device)
            data = data.index_select(axis, index)
    return data


def shape(data: torch.Tensor, start: int = 0, end: int | None = None) -> torch.Tensor:
    return torch.tensor(data.shape[start:end], dtype=torch.int64, device=data.device)


def shape_tensor(sizes: Sequence[int] | int, like: torch.Tensor, scalar: bool) -> torch.Tensor:
    """The int64 tensor of sizes the builder followed as Python ints (on ``like``'s device):
    one size when ``scalar``, else a sequence of them."""
    values = sizes if scalar else list(cast(Sequence[int], sizes))
    return torch.tensor(values, dtype=torch.int64, device=like.device)


def truncated_division(a: int, b: int) -> int:
    """ONNX's integer Div (rounds toward zero) on Python ints, exact at any size (symbolic
    sizes divide as floats, exact for any size a tensor can have)."""
    if isinstance(a, torch.SymInt) or isinstance(b, torch.SymInt):
        return torch.sym_int(a / b)
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def size(data: torch.Tensor) -> torch.Tensor:
    return torch.tensor(data.numel(), dtype=torch.int64, device=data.device)


def depth_to_space(input: torch.Tensor, blocksize: int, mode: str = "DCR") -> torch.Tensor:
    n, c, h, w = input.shape
    b = blocksize
    if mode == "DCR":
        moved = input.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        moved = input.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return moved.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(input: torch.Tensor, blocksize: int, mode: str = "DCR") -> torch.Tensor:
    n, c, h, w = input.shape
    b = blocksize
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    moved = input.reshape(n, c, h // b, b, w // b, b).permute(order)
    return moved.reshape(n, c * b * b, h // b, w // b)


def trilu(input: torch.Tensor, k: torch.Tensor | int | None = None, upper: int = 1) -> torch.Tensor:
    diagonal = int(scalar(k) or 0)
    return torch.triu(input, diagonal) if upper else torch.tril(input, diagonal)


def center_crop_pad(input_data: torch.Tensor, shape: IntsLike, axes: IntsLike = None) -> torch.Tensor:
    target = ints(shape)
    chosen = [normalize_axis(a, input_data.dim()) for a in ints(axes)] or list(range(input_data.dim()))
    flat = [0] * (2 * input_data.dim())
    for axis, wanted in zip(chosen, target):
        have = input_data.shape[axis]
        if wanted < have:  # crop: negative padding, the extra element comes off the end
            begin, end = -((have - wanted) // 2), -(have - wanted - (have - wanted) // 2)
        else:
            begin, end = (wanted - have) // 2, wanted - have - (wanted - have) // 2
        position = 2 * (input_data.dim() - 1 - axis)
        flat[position], flat[position + 1] = begin, end
    return F.pad(input_data, flat)
