"""The ops whose result depends on ``module.train()``: BatchNormalization and Dropout.

Each node becomes a small submodule that reads ``self.training``.  Parameters and
running statistics stay on the root module (named after their ONNX values) and arrive
as arguments, so ``state_dict`` keys do not depend on the node layout; BatchNorm
updates the running buffers in place, exactly as ``torch.nn.BatchNorm2d`` does.  In
``eval()`` both compute what onnxruntime computes for the node.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["BatchNormalization", "Dropout"]


class BatchNormalization(torch.nn.Module):
    """ONNX BatchNormalization (inference form) that uses batch statistics in training.

    ONNX's ``momentum`` m keeps m of the old running value; torch's keeps 1 - m of it.
    """

    def __init__(self, epsilon: float, momentum: float) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.momentum = momentum

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}, momentum={self.momentum}"

    def forward(self, x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
                var: torch.Tensor) -> torch.Tensor:
        if self.training:
            if mean.requires_grad or var.requires_grad:
                # Statistics computed in the graph (an exporter tied them to another weight by an
                # Identity): nothing to update, so batch statistics only.
                mean, var = mean.detach().clone(), var.detach().clone()
            return F.batch_norm(x, mean, var, scale, bias, True, 1.0 - self.momentum, self.epsilon)
        if mean.requires_grad or var.requires_grad:  # torch's kernel refuses gradients for the statistics
            shape = [1, -1] + [1] * (x.dim() - 2)
            factor = scale * torch.rsqrt(var + self.epsilon)  # per channel first: two passes over x, not four
            return x * factor.reshape(shape) + (bias - mean * factor).reshape(shape)
        return F.batch_norm(x, mean, var, scale, bias, False, 0.0, self.epsilon)


class Dropout(torch.nn.Module):
    """ONNX Dropout: identity in ``eval()`` (unless the node's ``training_mode`` input is
    true), ``torch.nn.functional.dropout`` in training; returns ``(output, mask)``."""

    def __init__(self, ratio: float) -> None:
        super().__init__()
        self.ratio = ratio

    def extra_repr(self) -> str:
        return f"ratio={self.ratio}"

    def forward(self, x: torch.Tensor, ratio: Any = None, training_mode: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        p = self.ratio if ratio is None else float(ratio)
        drop = self.training or (training_mode is not None and bool(training_mode))
        if not drop or p == 0.0:
            return x, torch.ones_like(x, dtype=torch.bool)
        if p == 1.0:
            return torch.zeros_like(x), torch.zeros_like(x, dtype=torch.bool)
        mask = torch.rand_like(x, dtype=torch.float32) >= p
        return x * mask / (1.0 - p), mask
