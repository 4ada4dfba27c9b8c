"""The converted model: a ``torch.fx.GraphModule`` that can write its weights back to ONNX."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import onnx
import torch
import torch.fx

from converter.torch_module.graph_builder import GraphBuilder
from converter.torch_module.weights import WeightTable, proto_with_weights
from dsl import ir
from dsl.errors import ConversionError

__all__ = ["OnnxModule", "build_module"]


class OnnxModule(torch.fx.GraphModule):
    """An ONNX model as a trainable module; ``module.code`` shows the forward it runs.

    ``onnx_names`` maps each parameter and buffer name to the ONNX value it came from;
    ``onnx_model`` is the IR the module was built from (what :meth:`to_onnx` writes).
    """

    onnx_model: ir.Model
    onnx_names: dict[str, str]

    def to_onnx(self) -> onnx.ModelProto:
        """The original model with this module's current parameters and buffers as its
        initializers (and weight Constants), under their original names.

        >>> trained = module.to_onnx()          # doctest: +SKIP
        >>> onnx.save(trained, "trained.onnx")  # doctest: +SKIP
        """
        from converter.to_onnx import model_to_proto

        proto = model_to_proto(self.onnx_model, infer_output_types=False)
        state = {name: tensor for name, tensor in self.state_dict().items() if name in self.onnx_names}
        return proto_with_weights(proto, state)

    def __deepcopy__(self, memo: dict[int, Any]) -> OnnxModule:
        plain = torch.fx.GraphModule.__deepcopy__(self, memo)
        result = OnnxModule(plain, plain.graph, class_name="OnnxModule")
        result.onnx_model = self.onnx_model
        result.onnx_names = dict(self.onnx_names)
        result.train(self.training)
        return result


def build_module(model: ir.Model, outputs: Sequence[str] | None = None, *, share_weights: bool = False,
                 trainable: Collection[str] = ()) -> OnnxModule:
    """``model`` as an :class:`OnnxModule` computing ``outputs`` (value names; default the
    model's outputs).  ``share_weights``: ``model`` is the module's alone, so its weight
    arrays become the parameters' memory (no second copy; training writes into them).
    ``trainable``: ONNX names of float weights that train though their role says not
    (see :mod:`.weight_roles`)."""
    table = WeightTable(model, share_weights, trainable)
    root = torch.nn.Module()
    builder = GraphBuilder(table, root, is_root=True)
    results = model.graph.outputs if outputs is None else _values_named(model.graph, outputs)
    initialized = {value for value in model.graph.initializers}
    for value in model.graph.inputs:
        if value not in initialized:
            builder.placeholder(value)
    builder.build(model.graph, _opsets(model), set(ir.needed_nodes(model.graph, list(results))))
    builder.finish(list(results), as_tuple=False)
    module = OnnxModule(root, builder.graph, class_name="OnnxModule")
    module.onnx_model = model
    module.onnx_names = dict(table.registered)
    _constants_unsaved(module, set(table.registered))
    return module


def _constants_unsaved(module: torch.nn.Module, weights: set[str]) -> None:
    """Leave the model's constants (attribute tensors, small Constants, a body's own) out
    of the ``state_dict``: fx's GraphModule re-registers the builder's non-persistent
    buffers as persistent ones, and a checkpoint should hold the weights alone, the keys
    :meth:`OnnxModule.to_onnx` and ``converter.with_weights`` write back."""
    for owner_name, owner in module.named_modules():
        for name, _ in owner.named_buffers(recurse=False):
            if owner_name or name not in weights:
                owner._non_persistent_buffers_set.add(name)


def _opsets(model: ir.Model) -> dict[str, int]:
    return {("" if domain == "ai.onnx" else domain): version for domain, version in model.opset_imports.items()}


def _values_named(graph: ir.Graph, names: Sequence[str]) -> list[ir.Value]:
    if isinstance(names, str):
        names = [names]
    found = {value.name: value for value in graph.inputs}
    for node in graph.nodes:
        found.update((value.name, value) for value in node.outputs if value.name)
    missing = [name for name in names if name not in found]
    if missing:
        raise ConversionError(
            f"the model has no value named {', '.join(map(repr, missing))}",
            graph.location, hint="outputs= takes names of node outputs or inputs of the main graph",
        )
    return [found[name] for name in names]
