"""Quantization: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
DynamicQuantizeLinear, QLinearMatMul, QLinearConv.

Rounding is half to even and results saturate to the output type, as ONNX specifies.
The quantized values are integers, so these kernels are differentiable only in their
float inputs (Dequantize's scale; Quantize passes no gradient through rounding).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from converter.torch_module.kernels.arguments import normalize_axis, onnx_type, torch_dtype
from converter.torch_module.kernels.convolution import conv
from converter.torch_module.kernels.elementwise import cast


def _broadcast_parameter(parameter: torch.Tensor, x: torch.Tensor, axis: int, block_size: int) -> torch.Tensor:
    """A scale or zero point shaped to broadcast against ``x`` (scalar, per axis, or blocked)."""
    if parameter.dim() == 0 or (parameter.numel() == 1 and parameter.dim() <= 1):
        return parameter.reshape(())
    dim = normalize_axis(axis, x.dim())
    if block_size:
        return parameter.repeat_interleave(block_size, dim=dim).narrow(dim, 0, x.shape[dim])
    shape = [1] * x.dim()
    shape[dim] = -1
    return parameter.reshape(shape)


def _saturate(values: torch.Tensor, dtype: torch.dtype, saturate: int = 1) -> torch.Tensor:
    if dtype.is_floating_point:
        return cast(values, onnx_type(dtype), saturate=saturate)
    info = torch.iinfo(dtype)
    return values.clamp(info.min, info.max).to(dtype)


def quantize_linear(
    x: torch.Tensor,
    y_scale: torch.Tensor,
    y_zero_point: torch.Tensor | None = None,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: int = 0,
    saturate: int = 1,
    precision: int = 0,
) -> torch.Tensor:
    if y_zero_point is not None:
        dtype = y_zero_point.dtype
    else:
        dtype = torch_dtype(output_dtype) if output_dtype else torch.uint8
    scale = _broadcast_parameter(y_scale, x, axis, block_size)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    scaled = x.to(wide) / scale.to(wide)
    if dtype.is_floating_point:
        return _saturate(scaled, dtype, saturate)
    rounded = torch.round(scaled)
    if y_zero_point is not None:
        rounded = rounded + _broadcast_parameter(y_zero_point, x, axis, block_size).to(wide)
    return _saturate(rounded, dtype)


def dequantize_linear(
    x: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero_point: torch.Tensor | None = None,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: int = 0,
) -> torch.Tensor:
    dtype = torch_dtype(output_dtype) if output_dtype else x_scale.dtype
    wide = torch.float32 if x_scale.dtype in (torch.float16, torch.bfloat16) else x_scale.dtype
    values = x.to(wide)
    if x_zero_point is not None and not x_zero_point.dtype.is_floating_point:
        values = values - _broadcast_parameter(x_zero_point, x, axis, block_size).to(wide)
    return (values * _broadcast_parameter(x_scale, x, axis, block_size).to(wide)).to(dtype)


def dynamic_quantize_linear(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    low = torch.clamp(x.min(), max=0.0)
    high = torch.clamp(x.max(), min=0.0)
    scale = (high - low) / 255
    zero_point = torch.clamp(torch.round(-low / scale), 0, 255).to(torch.uint8)
    quantized = torch.clamp(torch.round(x / scale) + zero_point.to(x.dtype), 0, 255).to(torch.uint8)
    return quantized, scale, zero_point


def qlinear_matmul(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    a_zero_point: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    b_zero_point: torch.Tensor,
    y_scale: torch.Tensor,
    y_zero_point: torch.Tensor,
) -> torch.Tensor:
    left = (a.to(torch.float64) - a_zero_point.to(torch.float64).reshape(-1, 1) if a_zero_point.numel() > 1
            else a.to(torch.float64) - a_zero_point.to(torch.float64))
    right = b.to(torch.float64) - b_zero_point.to(torch.float64)
    a_factor = a_scale.to(torch.float64).reshape(-1, 1) if a_scale.numel() > 1 else a_scale.to(torch.float64)
    product = (left @ right) * a_factor * b_scale.to(torch.float64)
    rounded = torch.round(product / y_scale.to(torch.float64)) + y_zero_point.to(torch.float64)
    return _saturate(rounded, y_zero_point.dtype)


def qlinear_conv(
    x: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero_point: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    w_zero_point: torch.Tensor,
    y_scale: torch.Tensor,
    y_zero_point: torch.Tensor,
    b: torch.Tensor | None = None,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    per_channel = (-1, *([1] * (w.dim() - 1)))
    real_x = (x.to(torch.float64) - x_zero_point.to(torch.float64)) * x_scale.to(torch.float64)
    w_shift = w_zero_point.to(torch.float64).reshape(per_channel) if w_zero_point.numel() > 1 else w_zero_point.to(torch.float64)
    w_factor = w_scale.to(torch.float64).reshape(per_channel) if w_scale.numel() > 1 else w_scale.to(torch.float64)
    real_w = (w.to(torch.float64) - w_shift) * w_factor
    bias = None
    if b is not None:
        bias = b.to(torch.float64) * (x_scale.to(torch.float64) * w_scale.to(torch.float64)).reshape(-1)
    y = conv(real_x, real_w, bias, auto_pad, dilations, group, kernel_shape, pads, strides)
    rounded = torch.round(y / y_scale.to(torch.float64)) + y_zero_point.to(torch.float64)
    return _saturate(rounded, y_zero_point.dtype)
