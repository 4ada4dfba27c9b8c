"""What every graph builder needs about values: the outer reads of bodies, arrays as tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dsl import ir

__all__ = ["outer_values", "to_tensor"]


def outer_values(graphs: list[ir.Graph]) -> list[ir.Value]:
    """Values the graphs (and their own subgraphs) read but do not define, in first-read
    order; a body's initializers count as read from outside (they are root weights)."""
    found: dict[ir.Value, None] = {}
    for graph in graphs:
        inner = [graph, *(sub for node, _ in ir.walk(graph) for sub in ir.subgraphs(node))]
        defined = {value for each in inner for value in each.inputs}
        defined.update(value for node, _ in ir.walk(graph) for value in node.outputs)
        for node, _ in ir.walk(graph):
            found.update((value, None) for value in node.inputs if value is not None and value not in defined)
        for each in inner:
            found.update((value, None) for value in each.outputs if value not in defined)
    return list(found)


def to_tensor(array: np.ndarray) -> Any:
    """A torch tensor owning a copy of ``array`` (strings and dtypes torch lacks stay numpy)."""
    from eager.values import numpy_to_torch

    converted = numpy_to_torch(np.array(array, copy=True))
    return converted.clone() if isinstance(converted, torch.Tensor) else converted
