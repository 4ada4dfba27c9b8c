"""Which IR values are weights, their torch names, and writing trained values back.

A weight is an initializer of any graph, or a ``Constant`` whose ``value`` tensor is
floating point with more than one element (models exported with weights folded into
Constants), in the main graph, its bodies or a model-local function's body (named
``domain::function/value`` there: one weight however often the function is called).  Floating-point weights are ``nn.Parameter``s, except frozen markup params
(``$constant`` in the name), BatchNormalization's running mean and variance, and
weights used only in roles that do not train (exponents, bounds, scales, epsilons: see
:mod:`.weight_roles`; ``trainable`` names those that train all the same), which are
buffers like every other tensor.  Names come from :mod:`.names`, so two conversions
of one model give the same ``state_dict`` keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

import numpy as np
import onnx
import torch

from converter.torch_module.graph_values import to_tensor
from converter.torch_module.names import onnx_name, torch_name
from converter.torch_module.weight_roles import fixed_weights
from dsl import ir, types
from dsl.errors import ConversionError

__all__ = ["WeightTable", "Weight", "proto_with_weights", "RESERVED", "constant_array", "fold_integers",
           "running_statistics", "function_weight_name"]

FLOAT_TYPES = frozenset({1, 10, 11, 16})  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
_SHARED_BYTES = 1 << 16  # weights from this size on may share their array (see WeightTable.share_weights)
RESERVED = frozenset(dir(torch.fx.GraphModule)) | {"training", "graph", "code", "meta", "to_onnx", "onnx_names"}


class Weight(NamedTuple):
    """One weight: its torch name, ONNX name, data, and whether it trains."""

    torch_name: str
    onnx_name: str
    tensor: ir.Tensor
    is_parameter: bool


class WeightTable:
    """The weights and constants of one model, shared by every graph builder."""

    def __init__(self, model: ir.Model, share_weights: bool = False, trainable: Collection[str] = ()) -> None:
        self.model = model
        # the model's weight arrays become the tensors' memory (the caller made the model for
        # this module alone); each array serves one tensor, so two weights never alias
        self.share_weights = share_weights
        self._shared: set[int] = set()
        self.weights: dict[ir.Value, Weight] = {}
        self.constants: dict[ir.Value, np.ndarray] = {}
        self.graph_inputs = set(model.graph.inputs)
        self.uses = ir.use_counts(model.graph)
        main = ir.Function("main", model.graph)
        called = main.callees()  # (their calls are built in place: their values are read too)
        for function in called:
            for value, count in ir.use_counts(function.graph).items():
                self.uses[value] = self.uses.get(value, 0) + count
        self.registered: dict[str, str] = {}  # torch name -> ONNX name, in registration order
        self.statistics = running_statistics(main, called)
        for node, _ in ir.walk(model.graph):
            self._add_constant(node)
        for function in called:  # (a body's weight Constant: one weight however often it is called)
            for node, _ in ir.walk(function.graph):
                self._add_function_weight(function, node)
        for graph in [model.graph, *(sub for node, _ in ir.walk(model.graph) for sub in ir.subgraphs(node))]:
            for value in graph.initializers:
                if value.initializer is not None:
                    frozen = value in self.statistics or "$constant" in value.name
                    self._add_weight(value, value.initializer, not frozen)
        # exponents, bounds, scales, epsilons: buffers unless the caller asks (see weight_roles)
        candidates = {value for value, weight in self.weights.items()
                      if weight.is_parameter and value.name not in trainable}
        for value in fixed_weights(model.graph, candidates):
            self.weights[value] = self.weights[value]._replace(is_parameter=False)

    def _add_constant(self, node: ir.Node) -> None:
        if node.domain not in ("", "ai.onnx") or node.op_type != "Constant" or len(node.attributes) != 1:
            return
        (attr,) = node.attributes.values()
        array = constant_array(attr)
        if array is None or not node.outputs:
            return
        value = node.outputs[0]
        self.constants[value] = array
        if attr.name == "value" and attr.value.elem_type in FLOAT_TYPES and array.size > 1:
            self._add_weight(value, attr.value, "$constant" not in value.name and value not in self.statistics)

    def _add_function_weight(self, function: ir.Function, node: ir.Node) -> None:
        """A float ``Constant`` of more than one element in a model-local function's body,
        named :func:`function_weight_name` (values of different functions may share a name)."""
        if node.domain not in ("", "ai.onnx") or node.op_type != "Constant" or len(node.attributes) != 1:
            return
        (attr,) = node.attributes.values()
        if (attr.name != "value" or attr.ref_attr_name is not None or attr.kind != ir.AttrKind.TENSOR
                or attr.value.elem_type not in FLOAT_TYPES or attr.value.array.size <= 1 or not node.outputs):
            return
        value = node.outputs[0]
        self._add_weight(value, attr.value, value not in self.statistics,
                         function_weight_name(function.domain, function.name, value.name))

    def _add_weight(self, value: ir.Value, tensor: ir.Tensor, trains: bool, onnx_name: str | None = None) -> None:
        onnx_name = value.name if onnx_name is None else onnx_name
        name = torch_name(onnx_name, RESERVED)
        self.weights[value] = Weight(name, onnx_name, tensor, trains and tensor.elem_type in FLOAT_TYPES)
        self.constants.setdefault(value, tensor.array)

    def handles_constant(self, node: ir.Node) -> bool:
        return bool(node.outputs) and node.outputs[0] in self.constants

    def is_used(self, value: ir.Value) -> bool:
        return value in self.uses

    def constant(self, value: ir.Value) -> np.ndarray | None:
        return self.constants.get(value)

    def folded(self, value: ir.Value, limit: int) -> int | tuple[int, ...] | None:
        """An integer constant of at most ``limit`` elements as a Python int (0-d) or tuple (1-d)."""
        array = self.constants.get(value)
        return None if array is None or value in self.graph_inputs else fold_integers(array, limit)

    def register(self, value: ir.Value, root: torch.nn.Module) -> str:
        """Put the weight on ``root`` (once) and return its attribute name."""
        weight = self.weights[value]
        if weight.torch_name in self.registered:
            if self.registered[weight.torch_name] != weight.onnx_name:
                raise ConversionError(f"two weights are named {weight.onnx_name!r}", value.location)
            return weight.torch_name
        tensor = to_tensor(weight.tensor.array, share=self._may_share(weight.tensor.array))
        if not isinstance(tensor, torch.Tensor):
            # strings, 4-bit types: a plain attribute, not part of the state_dict
            setattr(root, weight.torch_name, tensor)
        elif weight.is_parameter:
            root.register_parameter(weight.torch_name, torch.nn.Parameter(tensor))
        else:
            root.register_buffer(weight.torch_name, tensor)
        self.registered[weight.torch_name] = weight.onnx_name
        return weight.torch_name

    def _may_share(self, array: np.ndarray) -> bool:
        """Whether a weight's tensor may take ``array``'s memory: a large array holding its
        own data (the reader shares only tiny arrays between tensors), not taken yet.  The
        reader marks its arrays read-only; this model being the module's alone, the array
        becomes writable for the optimizer."""
        if (not self.share_weights or not isinstance(array, np.ndarray) or array.base is not None
                or not array.flags.owndata or array.nbytes < _SHARED_BYTES or array.dtype.kind not in "biufc"):
            return False
        address = array.__array_interface__["data"][0]
        if address in self._shared:
            return False
        self._shared.add(address)
        array.flags.writeable = True
        return True


def function_weight_name(domain: str, function: str, value: str) -> str:
    """The ONNX-side name of a weight Constant in a model-local function's body, as the
    ``state_dict`` key carries it: ``domain::function/value`` (``my.nn::dense/w``)."""
    return f"{domain}::{function}/{value}"


def fold_integers(array: np.ndarray, limit: int) -> int | tuple[int, ...] | None:
    """An integer array of at most ``limit`` elements as a Python int (0-d) or tuple (1-d)."""
    if array.dtype.kind not in "iu" or array.ndim > 1 or array.size > limit:
        return None
    return int(array) if array.ndim == 0 else tuple(int(item) for item in array)


def running_statistics(main: ir.Function, called: list[ir.Function]) -> set[ir.Value]:
    """The values BatchNormalization nodes read as running mean and variance, in any graph,
    or through the inputs of the functions that hold such nodes (a call passes its own).
    ``called``: ``main.callees()``, callees first, so a callee's positions are known before
    its callers are read."""
    found: set[ir.Value] = set()
    positions: dict[int, set[int]] = {}  # id(function) -> its inputs read as statistics
    for function in [*called, main]:
        read: set[ir.Value] = set()
        for node, _ in ir.walk(function.graph):
            if node.callee is not None:
                chosen = [node.inputs[i] for i in positions.get(id(node.callee), ()) if i < len(node.inputs)]
            elif node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx"):
                chosen = node.inputs[3:5]
            else:
                continue
            read.update(value for value in chosen if value is not None)
        positions[id(function)] = {i for i, value in enumerate(function.inputs) if value in read}
        found |= read
    return found


def constant_array(attr: ir.Attr) -> np.ndarray | None:
    """The array a Constant node's one attribute holds (None for a reference or a sparse value)."""
    if attr.ref_attr_name is not None:
        return None
    if attr.kind == ir.AttrKind.TENSOR:
        return np.asarray(attr.value.array)
    simple = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
              "value_ints": np.int64}
    if attr.name in simple:
        return np.asarray(attr.value, dtype=simple[attr.name])
    if attr.name in ("value_string", "value_strings"):
        return np.asarray(attr.value, dtype=object)
    return None


def proto_with_weights(proto: onnx.ModelProto, state: Mapping[str, Any]) -> onnx.ModelProto:
    """``proto`` with the initializers and weight Constants named in ``state`` (torch
    names -> tensors or arrays) replaced by those values, each in its original type."""
    from eager.values import torch_to_numpy

    arrays = {onnx_name(key.removeprefix("module.")): value for key, value in state.items()}
    places = _weight_tensors(proto)
    for name, tensors in places.items():
        if name in arrays:
            for tensor in tensors:
                _replace(tensor, arrays[name], torch_to_numpy)
    unknown = sorted(set(arrays) - places.keys())
    if unknown:
        raise ConversionError(
            f"the model has no weight named {', '.join(map(repr, unknown[:5]))}",
            hint=_unknown_hint(unknown, sorted(places), arrays, set(arrays) & places.keys()),
        )
    return proto


def _weight_tensors(proto: onnx.ModelProto) -> dict[str, list[onnx.TensorProto]]:
    """The tensors a ``state_dict`` key can replace, by the ONNX name it carries: the
    initializers and ``Constant`` values of every graph (one name may lie in several), and
    the ``Constant`` values of model-local function bodies (:func:`function_weight_name`)."""
    places: dict[str, list[onnx.TensorProto]] = {}
    for graph in _graphs(proto.graph):
        for initializer in graph.initializer:
            places.setdefault(initializer.name, []).append(initializer)
        for node in graph.node:
            for tensor in _constant_values(node):
                places.setdefault(node.output[0], []).append(tensor)
    for function in proto.functions:
        for nodes in _graphs_of(function.node):
            for node in nodes:
                for tensor in _constant_values(node):
                    places.setdefault(function_weight_name(function.domain, function.name, node.output[0]),
                                      []).append(tensor)
    return places


def _constant_values(node: onnx.NodeProto) -> list[onnx.TensorProto]:
    """The ``value`` tensor of an ai.onnx ``Constant`` node with an output (none otherwise)."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
        return []
    return [attribute.t for attribute in node.attribute if attribute.name == "value"]


def _unknown_hint(unknown: list[str], known: list[str], arrays: Mapping[str, Any], placed: set[str]) -> str:
    """Why the keys fit nowhere: a tied copy of a weight that is placed (one tensor under
    two names, as a language model's output layer and its embedding), close spellings of
    the model's weight names, or a checkpoint of another model."""
    lines = []
    for name in unknown[:5]:
        twin = next((other for other in sorted(placed) if _same_tensor(arrays[name], arrays[other])), None)
        if twin is not None:
            lines.append(f"{name!r} holds the same tensor as {twin!r}: a tied copy of that weight, which the "
                         f"model holds once; drop the key from the state_dict")
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if close:
            lines.append(f"{name!r}: did you mean {' or '.join(repr(torch_name(c)) for c in close)} "
                         f"(ONNX {', '.join(map(repr, close))})?")
    if len(lines) < len(unknown[:5]):
        lines.append("pass the state_dict of a module converted from this same model (state_dict keys are "
                     "the ONNX names, '.' written '%2E')")
    return "\n".join(lines)


def _same_tensor(first: Any, second: Any) -> bool:
    """The same memory (torch tensors tied by the module), or equal arrays of one shape."""
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):
        if first.shape != second.shape or first.dtype != second.dtype:
            return False
        if first.numel() and first.data_ptr() == second.data_ptr():
            return True
        return first.numel() > 1 and bool(torch.equal(first.detach().cpu(), second.detach().cpu()))
    first_array, second_array = np.asarray(first), np.asarray(second)
    return first_array.size > 1 and first_array.shape == second_array.shape and np.array_equal(first_array, second_array)


def _replace(tensor: onnx.TensorProto, value: Any, torch_to_numpy: Any) -> None:
    array = torch_to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value)
    expected = types.numpy_dtype(tensor.data_type)
    if tuple(array.shape) != tuple(tensor.dims):
        raise ConversionError(
            f"weight {tensor.name or '(Constant)'!r} has shape {list(tensor.dims)}, the state_dict gives "
            f"{list(array.shape)}",
            hint="pass the state_dict of a module converted from this same model",
        )
    name = tensor.name
    tensor.CopyFrom(onnx.numpy_helper.from_array(np.array(array, dtype=expected, order="C"), name))


def _graphs_of(nodes: Any) -> list[Any]:
    """A function body's nodes, then the nodes of every graph its nodes hold."""
    found = [list(nodes)]
    for node in nodes:
        for attribute in node.attribute:
            held = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
            found += [list(graph.node) for sub in held for graph in _graphs(sub)]
    return found


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    found = [graph]
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                found += _graphs(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    found += _graphs(sub)
    return found
