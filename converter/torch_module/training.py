"""The ops whose result depends on ``module.train()``: BatchNormalization and Dropout.

Each node becomes a small submodule that reads ``self.training``.  Parameters and
running statistics stay on the root module (named after their ONNX values) and arrive
as arguments, so ``state_dict`` keys do not depend on the node layout; BatchNorm
updates the running buffers in place, exactly as ``torch.nn.BatchNorm2d`` does (statistics
the graph computes are no buffers: nothing is updated, see :class:`BatchNormalization`).  In
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
    ``stored`` says the mean and variance inputs are weights of the model (buffers on the
    root, passed in as they are): ``train()`` updates them in place.  When the graph
    computes them instead (an exporter tied them to another weight by an Identity, or
    derives them from other values), there is no running statistic to update: ``train()``
    normalises with the batch statistics alone, exactly
    ``F.batch_norm(x, None, None, scale, bias, training=True)``, and leaves the computed
    values untouched; ``eval()`` normalises with them as onnxruntime does.
    """

    def __init__(self, epsilon: float, momentum: float, stored: bool = True) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.momentum = momentum
        self.stored = stored

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}, momentum={self.momentum}, stored={self.stored}"

    def forward(self, x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
                var: torch.Tensor) -> torch.Tensor:
        if self.training:
            if self.stored and not (mean.requires_grad or var.requires_grad):
                return F.batch_norm(x, mean, var, scale, bias, True, 1.0 - self.momentum, self.epsilon)
            return F.batch_norm(x, None, None, scale, bias, True, 0.0, self.epsilon)
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
