"""One ONNX node torch has no kernel for, run by the eager back end inside a torch module.

The node becomes a one-node ModelProto (its subgraphs' outer-scope reads become extra
inputs, the model-local functions come along) that :func:`eager.run` executes on
onnxruntime, or ``onnx.reference`` where onnxruntime lacks the op.  Tensors cross as
numpy arrays, detached: the outputs carry no gradient (strings, ``ai.onnx.ml``,
uint16 arithmetic and any op the kernel table does not cover yet).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from dsl import ir

__all__ = ["EagerNode", "one_node_model"]


def one_node_model(node: ir.Node, outer: list[ir.Value], model: ir.Model, opsets: dict[str, int]) -> bytes:
    """The serialised one-node ModelProto computing ``node`` from its present inputs then
    ``outer``, under ``opsets`` (the graph's, or a function body's own where it differs)."""
    import onnx.helper

    from converter.onnx_encoding import graph_to_proto
    from converter.to_onnx import function_to_proto

    inputs: list[ir.Value | None] = []
    graph_inputs: list[ir.Value] = []
    for index, value in enumerate(node.inputs):
        if value is None:
            inputs.append(None)
            continue
        fresh = ir.Value(f"input_{index}", value.type)
        inputs.append(fresh)
        graph_inputs.append(fresh)
    outputs = [ir.Value(f"output_{index}" if value.name else "", value.type) for index, value in enumerate(node.outputs)]
    copy = dataclasses.replace(node, inputs=inputs, outputs=outputs)
    for output in outputs:
        output.producer = copy
    graph = ir.Graph(node.op_type, [*graph_inputs, *outer], [v for v in outputs if v.name], [copy])
    # Inputs stay untyped: eager.run types each kernel from the arrays it is given.
    proto = onnx.helper.make_model(
        graph_to_proto(graph),
        opset_imports=[onnx.helper.make_opsetid(domain, version) for domain, version in _imports(node, model, opsets).items()],
    )
    proto.functions.extend(function_to_proto(function) for function in model.functions)
    return proto.SerializeToString()


def _imports(node: ir.Node, model: ir.Model, opsets: dict[str, int]) -> dict[str, int]:
    imports = {("" if domain == "ai.onnx" else domain): version for domain, version in model.opset_imports.items()}
    imports.update(opsets)
    for function in model.functions:
        imports.setdefault(function.domain, 1)
    imports.setdefault("" if node.domain == "ai.onnx" else node.domain, 1)
    return imports


class EagerNode(torch.nn.Module):
    """Runs one ONNX node eagerly; ``forward(*present_inputs, *outer_values)`` returns its
    output (or a tuple with one entry per output of the node, None where it is omitted)."""

    def __init__(self, label: str, model_bytes: bytes, named_outputs: list[bool]) -> None:
        super().__init__()
        self.label = label
        self.model_bytes = model_bytes
        self.n_outputs = len(named_outputs)
        self.named_outputs = named_outputs
        self._model: Any = None

    def extra_repr(self) -> str:
        return self.label

    def forward(self, *inputs: Any) -> Any:
        import onnx

        import eager

        if self._model is None:
            self._model = onnx.load_model_from_string(self.model_bytes)
        results = iter(eager.run(self._model, [_to_numpy(value) for value in inputs]))
        device = next((value.device for value in inputs if isinstance(value, torch.Tensor)), None)
        if self.n_outputs == 1:
            return _to_torch(next(results), device)
        return tuple(_to_torch(next(results), device) if named else None for named in self.named_outputs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_model"] = None
        return state


def _to_numpy(value: Any) -> Any:
    """torch tensors, folded Python ints/tuples and sequences as the arrays eager takes."""
    if isinstance(value, torch.Tensor):
        from eager.values import torch_to_numpy

        return torch_to_numpy(value)
    if isinstance(value, list):
        return [_to_numpy(item) for item in value]
    if isinstance(value, (int, tuple)) and not isinstance(value, bool):
        return np.asarray(value, dtype=np.int64)
    return value


def _to_torch(value: Any, device: torch.device | None) -> Any:
    """An eager result as a tensor on the device the node's inputs were on."""
    if isinstance(value, np.ndarray):
        from eager.values import numpy_to_torch

        tensor = numpy_to_torch(value if value.flags.c_contiguous else value.copy(order="C"))
        if device is not None and isinstance(tensor, torch.Tensor) and tensor.device != device:
            tensor = tensor.to(device)
        return tensor
    if isinstance(value, np.generic):
        return _to_torch(np.asarray(value), device)
    if isinstance(value, list):
        return [_to_torch(item, device) for item in value]
    return value
