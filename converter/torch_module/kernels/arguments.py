"""How kernels read their arguments: shape-like values and ONNX element types.

A shape-like input (Reshape's shape, Slice's starts, a ReduceX's axes, ...) reaches a
kernel either as a tensor (a value computed by the graph) or as a Python ``int`` /
``tuple`` (a value the builder knew when converting, which keeps ``torch.export`` free
of data-dependent reads).  ``ints`` reads both the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

IntsLike = torch.Tensor | int | Sequence[int] | None

# ONNX TensorProto element type -> torch dtype, for every type torch can hold.
_ONNX_TO_TORCH: dict[int, torch.dtype] = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 4: torch.uint16, 5: torch.int16,
    6: torch.int32, 7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64,
    12: torch.uint32, 13: torch.uint64, 14: torch.complex64, 15: torch.complex128,
    16: torch.bfloat16, 17: torch.float8_e4m3fn, 18: torch.float8_e4m3fnuz,
    19: torch.float8_e5m2, 20: torch.float8_e5m2fnuz,
}
_TORCH_TO_ONNX = {dtype: code for code, dtype in _ONNX_TO_TORCH.items()}

# Unsigned types wider than uint8 that torch stores but has little arithmetic for:
# kernels compute on them in int64 and cast back (bit-exact for +, -, *, &, |, ^).
WIDENED = {torch.uint16: torch.int64, torch.uint32: torch.int64, torch.uint64: torch.int64}


def ints(value: IntsLike) -> tuple[int, ...]:
    """A shape-like argument as a tuple of Python ints (``None`` -> empty)."""
    if value is None:
        return ()
    if isinstance(value, torch.Tensor):
        return tuple(int(v) for v in value.reshape(-1).tolist())
    if isinstance(value, (int, torch.SymInt)):
        return (value,)
    # a symbolic size (torch.export, torch.compile) stays symbolic: int() would fix its value
    return tuple(v if isinstance(v, torch.SymInt) else int(v) for v in value)


def optional_ints(value: IntsLike) -> tuple[int, ...] | None:
    """Like ``ints`` but keeps "not given" (``None``) apart from "given, empty"."""
    return None if value is None else ints(value)


def scalar(value: torch.Tensor | float | int | None) -> float | int | None:
    """A one-element argument as a Python number (``None`` stays ``None``)."""
    if isinstance(value, torch.Tensor):
        return value.reshape(-1)[0].item()
    return value


def torch_dtype(onnx_type: int) -> torch.dtype:
    """The torch dtype of an ONNX element type; ValueError for one torch cannot hold."""
    try:
        return _ONNX_TO_TORCH[int(onnx_type)]
    except KeyError:
        raise ValueError(f"torch has no dtype for ONNX element type {onnx_type}") from None


def onnx_type(dtype: torch.dtype) -> int:
    """The ONNX element type of a torch dtype."""
    return _TORCH_TO_ONNX[dtype]


def normalize_axis(axis: int, rank: int) -> int:
    """A possibly negative axis as its index in ``range(rank)``."""
    return axis + rank if axis < 0 else axis


def widen(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor in a dtype torch computes on (uint16/32/64 -> int64)."""
    wide = WIDENED.get(tensor.dtype)
    return tensor if wide is None else tensor.to(wide)


def is_floating(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()
