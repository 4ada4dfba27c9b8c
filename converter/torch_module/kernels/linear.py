"""Matrix products: Gemm, MatMul, MatMulInteger, Einsum, Det."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from converter.torch_module.kernels.arguments import WIDENED, widen


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    transA: int = 0,
    transB: int = 0,
    broadcast: int = 0,
) -> torch.Tensor:
    left = a.transpose(0, 1) if transA else a
    right = b.transpose(0, 1) if transB else b
    product = widen(left) @ widen(right)
    if alpha != 1.0:
        product = product * alpha
    if c is not None:
        product = product + (widen(c) * beta if beta != 1.0 else widen(c))
    return product.to(a.dtype)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype not in WIDENED and b.dtype not in WIDENED:
        return torch.matmul(a, b)
    return torch.matmul(widen(a), widen(b)).to(a.dtype)


def matmul_add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``Add(MatMul(a, b), c)`` (either Add operand order: the sum is the same), as one
    ``addmm`` when ``b`` is a float matrix and ``c`` a vector along its columns."""
    if (b.dim() == 2 and a.dim() >= 1 and c.dim() == 1 and c.shape[0] == b.shape[1]
            and a.dtype == b.dtype == c.dtype and a.is_floating_point()):
        return F.linear(a, b.t(), c)
    product = matmul(a, b)
    return (widen(product) + widen(c)).to(product.dtype)


def _shifted(x: torch.Tensor, zero_point: torch.Tensor | None, row_wise: bool) -> torch.Tensor:
    wide = x.to(torch.int64)
    if zero_point is None:
        return wide
    shift = zero_point.to(torch.int64)
    if row_wise and shift.dim() == 1 and shift.numel() > 1:
        shift = shift.reshape(-1, 1)
    return wide - shift


def matmul_integer(
    a: torch.Tensor,
    b: torch.Tensor,
    a_zero_point: torch.Tensor | None = None,
    b_zero_point: torch.Tensor | None = None,
) -> torch.Tensor:
    left = _shifted(a, a_zero_point, row_wise=True)
    right = _shifted(b, b_zero_point, row_wise=False)
    # int64 products are exact; torch has no integer matmul on every device, so sum explicitly
    return (left.unsqueeze(-1) * right.unsqueeze(-3)).sum(-2).to(torch.int32)


def einsum(*inputs: torch.Tensor, equation: str) -> torch.Tensor:
    return torch.einsum(equation.replace(" ", ""), *inputs)


def det(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.det(x)
