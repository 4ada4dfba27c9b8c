"""Element-wise ONNX operators: math, comparisons, logic, bit operations, activations.

Binary operators broadcast like numpy (torch does the same).  Opsets before 7 aligned
the second input at ``axis`` when ``broadcast=1``; the binary kernels take those two
attributes too.  Integer operators stay integer (Div truncates, Mod follows ``fmod``),
and unsigned types torch has no arithmetic for are computed in int64 and cast back.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import WIDENED, is_floating, onnx_type, torch_dtype, widen

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _legacy_align(a: torch.Tensor, b: torch.Tensor, axis: int | None) -> torch.Tensor:
    """Opset < 7 broadcasting: ``b``'s dimensions start at ``axis`` of ``a``."""
    if axis is None or b.dim() >= a.dim():
        return b
    start = axis + a.dim() if axis < 0 else axis
    return b.reshape(*b.shape, *([1] * (a.dim() - start - b.dim())))


def _binary(a: torch.Tensor, b: torch.Tensor, axis: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    return widen(a), widen(_legacy_align(a, b, axis))


def add(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    if axis is None and a.dtype == b.dtype and a.dtype not in WIDENED:
        return a + b
    x, y = _binary(a, b, axis)
    return (x + y).to(a.dtype)


def sub(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    if axis is None and a.dtype == b.dtype and a.dtype not in WIDENED:
        return a - b
    x, y = _binary(a, b, axis)
    return (x - y).to(a.dtype)


def mul(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    if axis is None and a.dtype == b.dtype and a.dtype not in WIDENED:
        return a * b
    x, y = _binary(a, b, axis)
    return (x * y).to(a.dtype)


def div(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    x, y = _binary(a, b, axis)
    if is_floating(a):
        return x / y
    return torch.div(x, y, rounding_mode="trunc").to(a.dtype)


def pow(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    x, y = _binary(a, b, axis)
    if not is_floating(a) and is_floating(y):
        return torch.pow(x.to(y.dtype), y).to(a.dtype)
    return torch.pow(x, y).to(a.dtype)


def mod(a: torch.Tensor, b: torch.Tensor, fmod: int = 0) -> torch.Tensor:
    x, y = widen(a), widen(b)
    result = torch.fmod(x, y) if fmod else torch.remainder(x, y)
    return result.to(a.dtype)


def equal(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    x, y = _binary(a, b, axis)
    return torch.eq(x, y)


def greater(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    x, y = _binary(a, b, axis)
    return torch.gt(x, y)


def less(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    x, y = _binary(a, b, axis)
    return torch.lt(x, y)


def greater_or_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.ge(widen(a), widen(b))


def less_or_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.le(widen(a), widen(b))


def logical_and(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    return torch.logical_and(a, _legacy_align(a, b, axis))


def logical_or(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    return torch.logical_or(a, _legacy_align(a, b, axis))


def logical_xor(a: torch.Tensor, b: torch.Tensor, broadcast: int = 0, axis: int | None = None) -> torch.Tensor:
    return torch.logical_xor(a, _legacy_align(a, b, axis))


def logical_not(x: torch.Tensor) -> torch.Tensor:
    return torch.logical_not(x)


def bitwise_and(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_and(widen(a), widen(b)).to(a.dtype)


def bitwise_or(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_or(widen(a), widen(b)).to(a.dtype)


def bitwise_xor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_xor(widen(a), widen(b)).to(a.dtype)


def bitwise_not(x: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_not(widen(x)).to(x.dtype)


def bit_shift(x: torch.Tensor, y: torch.Tensor, direction: str = "LEFT") -> torch.Tensor:
    """ONNX shifts only unsigned types: shift in int64 (logical for values < 2**63)."""
    wide_x, wide_y = x.to(torch.int64), y.to(torch.int64)
    if direction == "LEFT":
        return torch.bitwise_left_shift(wide_x, wide_y).to(x.dtype)
    return torch.bitwise_right_shift(wide_x, wide_y).to(x.dtype)


def _variadic(inputs: tuple[torch.Tensor, ...], combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    result = widen(inputs[0])
    for other in inputs[1:]:
        result = combine(result, widen(other))
    return result


def sum(*inputs: torch.Tensor) -> torch.Tensor:
    return _variadic(inputs, torch.add).to(inputs[0].dtype)


def mean(*inputs: torch.Tensor) -> torch.Tensor:
    return _variadic(inputs, torch.add) / len(inputs)


def max(*inputs: torch.Tensor) -> torch.Tensor:
    return _variadic(inputs, torch.maximum).to(inputs[0].dtype)


def min(*inputs: torch.Tensor) -> torch.Tensor:
    return _variadic(inputs, torch.minimum).to(inputs[0].dtype)


def where(condition: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.where(condition, x, y)


def clip(
    x: torch.Tensor,
    min: torch.Tensor | float | None = None,
    max: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """Clip; ``min``/``max`` are attributes before opset 11 and inputs from 11 on."""
    wide = widen(x)
    if isinstance(min, torch.Tensor):
        min = widen(min)
    if isinstance(max, torch.Tensor):
        max = widen(max)
    if min is None and max is None:
        return x
    return torch.clamp(wide, min=min, max=max).to(x.dtype)  # type: ignore[arg-type]  # numbers too


# Float8 types: magnitude from which rounding overflows, and what overflow becomes
# without saturation (e5m2 has infinities; the others have only NaN).
_FLOAT8_OVERFLOW = {
    torch.float8_e4m3fn: (464.0, False, float("nan")),
    torch.float8_e4m3fnuz: (248.0, True, float("nan")),
    torch.float8_e5m2: (61440.0, True, float("inf")),
    torch.float8_e5m2fnuz: (61440.0, True, float("nan")),
}


def _to_float8(x: torch.Tensor, dtype: torch.dtype, saturate: int) -> torch.Tensor:
    """ONNX float8 casts: saturate clamps to the largest finite value (infinities too);
    otherwise overflow becomes inf (e5m2) or NaN."""
    wide = x.to(torch.float32)
    if saturate:
        limit = torch.finfo(dtype).max
        return torch.clamp(wide, -limit, limit).to(dtype)
    threshold, inclusive, overflow = _FLOAT8_OVERFLOW[dtype]
    size = wide.abs()
    overflows = (size >= threshold) if inclusive else (size > threshold)
    replaced = torch.where(overflows, torch.copysign(torch.full_like(wide, overflow), wide), wide)
    return replaced.to(dtype)


def cast(x: torch.Tensor, to: int, saturate: int = 1, round_mode: str = "up") -> torch.Tensor:
    dtype = torch_dtype(to)
    if x.dtype == dtype:
        return x
    if dtype in _FLOAT8_OVERFLOW and x.is_floating_point():
        return _to_float8(x, dtype, saturate)
    return x.to(dtype)


def cast_like(x: torch.Tensor, target_type: torch.Tensor, saturate: int = 1, round_mode: str = "up") -> torch.Tensor:
    return cast(x, onnx_type(target_type.dtype), saturate=saturate)


def identity(x: torch.Tensor) -> torch.Tensor:
    return x


# --- unary math ------------------------------------------------------------------


def abs(x: torch.Tensor) -> torch.Tensor:
    return torch.abs(widen(x)).to(x.dtype)


def neg(x: torch.Tensor) -> torch.Tensor:
    return torch.neg(x)


def sign(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(widen(x)).to(x.dtype)


def reciprocal(x: torch.Tensor) -> torch.Tensor:
    return torch.reciprocal(x)


def sqrt(x: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(x)


def exp(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x)


def log(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x)


def ceil(x: torch.Tensor) -> torch.Tensor:
    return torch.ceil(x)


def floor(x: torch.Tensor) -> torch.Tensor:
    return torch.floor(x)


def round(x: torch.Tensor) -> torch.Tensor:
    """Half to even, as ONNX specifies (torch.round does the same)."""
    return torch.round(x)


def erf(x: torch.Tensor) -> torch.Tensor:
    return torch.erf(x)


def sin(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


def cos(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x)


def tan(x: torch.Tensor) -> torch.Tensor:
    return torch.tan(x)


def asin(x: torch.Tensor) -> torch.Tensor:
    return torch.asin(x)


def acos(x: torch.Tensor) -> torch.Tensor:
    return torch.acos(x)


def atan(x: torch.Tensor) -> torch.Tensor:
    return torch.atan(x)


def sinh(x: torch.Tensor) -> torch.Tensor:
    return torch.sinh(x)


def cosh(x: torch.Tensor) -> torch.Tensor:
    return torch.cosh(x)


def asinh(x: torch.Tensor) -> torch.Tensor:
    return torch.asinh(x)


def acosh(x: torch.Tensor) -> torch.Tensor:
    return torch.acosh(x)


def atanh(x: torch.Tensor) -> torch.Tensor:
    return torch.atanh(x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x)


def is_nan(x: torch.Tensor) -> torch.Tensor:
    return torch.isnan(x)


def is_inf(x: torch.Tensor, detect_negative: int = 1, detect_positive: int = 1) -> torch.Tensor:
    if detect_negative and detect_positive:
        return torch.isinf(x)
    if detect_negative:
        return torch.isneginf(x)
    if detect_positive:
        return torch.isposinf(x)
    return torch.zeros_like(x, dtype=torch.bool)


# --- activations -----------------------------------------------------------------


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x)


def leaky_relu(x: torch.Tensor, alpha: float = 0.01) -> torch.Tensor:
    return F.leaky_relu(x, alpha)


def elu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return F.elu(x, alpha)


def celu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return F.celu(x, alpha)


def selu(x: torch.Tensor, alpha: float = _SELU_ALPHA, gamma: float = _SELU_GAMMA) -> torch.Tensor:
    return gamma * torch.where(x > 0, x, alpha * torch.expm1(x))


def thresholded_relu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return torch.where(x > alpha, x, torch.zeros_like(x))


def hard_sigmoid(x: torch.Tensor, alpha: float = 0.2, beta: float = 0.5) -> torch.Tensor:
    return torch.clamp(alpha * x + beta, 0.0, 1.0)


def hard_swish(x: torch.Tensor) -> torch.Tensor:
    return F.hardswish(x)


def softplus(x: torch.Tensor) -> torch.Tensor:
    return F.softplus(x)


def softsign(x: torch.Tensor) -> torch.Tensor:
    return F.softsign(x)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return F.gelu(x, approximate=approximate)


def mish(x: torch.Tensor) -> torch.Tensor:
    return F.mish(x)


def swish(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return x * torch.sigmoid(alpha * x)


def shrink(x: torch.Tensor, bias: float = 0.0, lambd: float = 0.5) -> torch.Tensor:
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero)).to(x.dtype)


def prelu(x: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
    return torch.where(x < 0, x * slope, x)
