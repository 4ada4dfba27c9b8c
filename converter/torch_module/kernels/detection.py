"""Detection post-processing: NonMaxSuppression.

Greedy selection per batch entry and class, in descending score order (ties keep the
lower box index first), dropping a box whose IoU with a kept one exceeds the threshold.
The result's length depends on the values, so this kernel reads them into Python; it
has no gradient (its output is indices).
"""

from __future__ import annotations

import torch

from converter.torch_module.kernels.arguments import scalar


def _corners(boxes: torch.Tensor, center_point_box: int) -> torch.Tensor:
    """[..., 4] boxes as (y_min, x_min, y_max, x_max)."""
    if center_point_box:
        x, y, width, height = boxes.unbind(-1)
        return torch.stack([y - height / 2, x - width / 2, y + height / 2, x + width / 2], dim=-1)
    y1, x1, y2, x2 = boxes.unbind(-1)
    return torch.stack([torch.minimum(y1, y2), torch.minimum(x1, x2), torch.maximum(y1, y2), torch.maximum(x1, x2)], dim=-1)


def _iou(box: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    top = torch.maximum(box[0], others[:, 0])
    left = torch.maximum(box[1], others[:, 1])
    bottom = torch.minimum(box[2], others[:, 2])
    right = torch.minimum(box[3], others[:, 3])
    overlap = (bottom - top).clamp(min=0) * (right - left).clamp(min=0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - overlap
    return torch.where(union > 0, overlap / union, torch.zeros_like(union))


def non_max_suppression(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    max_output_boxes_per_class: torch.Tensor | int | None = None,
    iou_threshold: torch.Tensor | float | None = None,
    score_threshold: torch.Tensor | float | None = None,
    center_point_box: int = 0,
) -> torch.Tensor:
    limit = int(scalar(max_output_boxes_per_class) or 0)
    overlap_limit = float(scalar(iou_threshold) or 0.0)
    floor = scalar(score_threshold)
    corners = _corners(boxes, center_point_box)
    selected: list[list[int]] = []
    for batch in range(scores.shape[0]):
        for klass in range(scores.shape[1]):
            class_scores = scores[batch, klass]
            order = torch.sort(class_scores, descending=True, stable=True).indices.tolist()
            kept: list[int] = []
            for index in order:
                if len(kept) >= limit or (floor is not None and float(class_scores[index]) <= floor):
                    break
                if kept and bool((_iou(corners[batch, index], corners[batch, kept]) > overlap_limit).any()):
                    continue
                kept.append(index)
            selected += [[batch, klass, index] for index in kept]
    return torch.tensor(selected, dtype=torch.int64, device=boxes.device).reshape(-1, 3)
