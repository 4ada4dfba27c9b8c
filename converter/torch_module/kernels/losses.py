"""Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Written out rather than through ``F.nll_loss`` because ONNX has no default
``ignore_index`` (torch's is -100, a valid ONNX class index after wrapping) and
weights the mean by the weights of the targets that count.
"""

from __future__ import annotations

import torch


def negative_log_likelihood_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    ignore_index: int | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    counted = torch.ones_like(target, dtype=torch.bool) if ignore_index is None else target != ignore_index
    safe = torch.where(counted, target, torch.zeros_like(target)).to(torch.int64)
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    weights = weight.index_select(0, safe.reshape(-1)).reshape(safe.shape) if weight is not None else torch.ones_like(picked)
    weights = weights * counted.to(weights.dtype)
    loss = -picked * weights
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / weights.sum()


def softmax_cross_entropy_loss(
    scores: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor | None = None,
    ignore_index: int | None = None,
    reduction: str = "mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss and the log-probabilities (the op's optional second output)."""
    log_prob = torch.log_softmax(scores, dim=1)
    return negative_log_likelihood_loss(log_prob, labels, weights, ignore_index, reduction), log_prob
