"""The ONNX nodes the builder emits itself rather than through a kernel or eagerly.

If, Loop and Scan hold bodies (built by a nested :class:`GraphBuilder` into a
GraphModule); BatchNormalization and Dropout behave differently in ``train()``.  Each
form returns the fx node of the call and whether it yields a tuple of outputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx.defs
import torch

from converter.torch_module import control_flow, training
from converter.torch_module.graph_values import to_tensor
from dsl import ir, types
from dsl.errors import ConversionError

if TYPE_CHECKING:
    from converter.torch_module.graph_builder import GraphBuilder

__all__ = ["special_form", "kernel_can_take", "uses_types_torch_lacks", "torch_has_type", "returns_tuple"]

Form = Callable[["GraphBuilder", ir.Node, dict[str, int]], tuple[Any, bool]]
_KERNEL_KINDS = frozenset({ir.AttrKind.FLOAT, ir.AttrKind.INT, ir.AttrKind.STRING, ir.AttrKind.TENSOR,
                           ir.AttrKind.FLOATS, ir.AttrKind.INTS, ir.AttrKind.STRINGS, ir.AttrKind.TENSORS})


def kernel_can_take(node: ir.Node) -> bool:
    """Kernels take plain attribute values: no graphs, sparse tensors, types or references."""
    return all(attr.kind in _KERNEL_KINDS and attr.ref_attr_name is None for attr in node.attributes.values())


def uses_types_torch_lacks(node: ir.Node) -> bool:
    """torch has no string, 4-bit, 2-bit or float8e8m0 tensors: a node reading or making
    one (Cast's ``to`` counts) runs eagerly."""
    elem_types = [value.type.elem_type for value in [*node.inputs, *node.outputs]
                  if value is not None and isinstance(value.type, ir.TensorType)]
    target = node.attributes.get("to")
    if target is not None and target.kind == ir.AttrKind.INT and isinstance(target.value, int):
        elem_types.append(target.value)
    return any(elem_type not in _TORCH_ELEMENT_TYPES for elem_type in elem_types)


def torch_has_type(value: ir.Value, unknown: bool = False) -> bool:
    """Whether ``value`` is a tensor torch has a dtype for (``unknown`` when its type is not
    recorded, or not a tensor: a sequence passes through as a list)."""
    if not isinstance(value.type, ir.TensorType) or not value.type.elem_type:
        return unknown
    return value.type.elem_type in _TORCH_ELEMENT_TYPES


def _torch_element_types() -> frozenset[int]:
    from converter.torch_module.kernels.arguments import torch_dtype

    found = set()
    for elem_type in onnx.TensorProto.DataType.values():
        try:
            torch_dtype(elem_type)
        except ValueError:  # (the type torch has no dtype for)
            continue
        found.add(int(elem_type))
    return frozenset(found)


_TORCH_ELEMENT_TYPES = _torch_element_types()


@functools.cache
def returns_tuple(domain: str, op_type: str) -> bool:
    """A kernel returns a tuple when its op can have more than one output (in any version)."""
    try:
        schema = onnx.defs.get_schema(op_type, domain)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.max_output > 1)


def special_form(node: ir.Node, version: int) -> Form | None:
    if node.op_type == "If" and "then_branch" in node.attributes and "else_branch" in node.attributes:
        return _if
    if node.op_type == "Loop" and "body" in node.attributes:
        return _loop
    if node.op_type == "Scan" and "body" in node.attributes:
        return _scan if version >= 9 else _batched_scan
    if node.op_type == "BatchNormalization" and _plain_batch_norm(node, version):
        return _batch_norm
    if node.op_type == "Dropout" and version >= 7:
        return _dropout
    return None


def _plain_batch_norm(node: ir.Node, version: int) -> bool:
    """The inference form: five inputs, one output, no legacy ``spatial=0``/``is_test`` switches."""
    named_outputs = [value for value in node.outputs if value.name]
    attributes = set(node.attributes) - {"epsilon", "momentum"}
    training_mode = node.attributes.get("training_mode")
    return (
        version >= 7 and len(node.inputs) == 5 and all(v is not None for v in node.inputs) and len(named_outputs) == 1
        and node.outputs[0].name != "" and (not attributes or attributes == {"training_mode"})
        and (training_mode is None or training_mode.value == 0)
    )


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    found = node.attributes.get(name)
    return default if found is None else found.value


def _batch_norm(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    stored = all(value is not None and builder.stored_buffer(value) for value in node.inputs[3:5])
    module = training.BatchNormalization(float(_attr(node, "epsilon", 1e-5)), float(_attr(node, "momentum", 0.9)),
                                         stored)
    args = tuple(builder.read(value) for value in node.inputs if value is not None)
    return builder.call_module(module, "BatchNormalization", args, builder.result_name(node)), False


def _dropout(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    module = training.Dropout(float(_attr(node, "ratio", 0.5)))
    args = tuple(None if value is None else builder.read(value) for value in node.inputs)
    return builder.call_module(module, "Dropout", args, builder.result_name(node)), True


def _body(builder: GraphBuilder, graph: ir.Graph, outer: list[ir.Value], opsets: dict[str, int]) -> Any:
    """The GraphModule of a body taking its own inputs then ``outer``, returning a tuple."""
    owner = torch.nn.Module()
    nested = builder.nested(owner)
    for value in [*graph.inputs, *outer]:
        nested.placeholder(value)
    nested.build(graph, opsets)
    nested.finish(graph.outputs, as_tuple=True)
    return torch.fx.GraphModule(owner, nested.graph, class_name=graph.name.replace(".", "_") or "Body")


def _outer(builder: GraphBuilder, bodies: list[ir.Graph]) -> list[ir.Value]:
    """What the bodies read from enclosing graphs, then the weight Constants they hold:
    those stay on the root (parameters like the main graph's, under their ONNX names) and
    come in as arguments, as outer values do."""
    held = [node.outputs[0] for body in bodies for node, _ in ir.walk(body)
            if node.outputs and node.outputs[0] in builder.table.weights]
    return [*ir.outer_values(bodies), *held]


def _if(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    branches = [node.attributes["then_branch"].value, node.attributes["else_branch"].value]
    outer = _outer(builder, branches)
    module = control_flow.If(*(_body(builder, branch, outer, opsets) for branch in branches))
    condition = node.inputs[0] if node.inputs else None
    if condition is None:
        raise ConversionError("an If node needs its condition input", node.location)
    args = (builder.read(condition), *(builder.read(value) for value in outer))
    return builder.call_module(module, "If", args, builder.result_name(node)), True


def _loop(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    body: ir.Graph = node.attributes["body"].value
    outer = _outer(builder, [body])
    inputs = [*node.inputs, None, None][: max(len(node.inputs), 2)]
    n_carried = len(inputs) - 2
    scan_dtypes = [_torch_dtype(value.type) for value in body.outputs[1 + n_carried:]]
    module = control_flow.Loop(_body(builder, body, outer, opsets), n_carried, scan_dtypes)
    # a trip count known when converting is a Python int: torch.export unrolls the loop
    args = tuple(None if value is None else builder.read(value, fold=index == 0) for index, value in enumerate(inputs))
    args += tuple(builder.read(value) for value in outer)
    return builder.call_module(module, "Loop", args, builder.result_name(node)), True


def _scan(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    body: ir.Graph = node.attributes["body"].value
    outer = _outer(builder, [body])
    n_scan = int(_attr(node, "num_scan_inputs", 0))
    n_state = len(node.inputs) - n_scan
    n_scan_outputs = len(body.outputs) - n_state
    module = control_flow.Scan(
        _body(builder, body, outer, opsets), n_state, n_scan,
        list(_attr(node, "scan_input_axes", [0] * n_scan)),
        [bool(d) for d in _attr(node, "scan_input_directions", [0] * n_scan)],
        list(_attr(node, "scan_output_axes", [0] * n_scan_outputs)),
        [bool(d) for d in _attr(node, "scan_output_directions", [0] * n_scan_outputs)],
    )
    args = tuple(builder.read(value) for value in node.inputs if value is not None)
    args += tuple(builder.read(value) for value in outer)
    return builder.call_module(module, "Scan", args, builder.result_name(node)), True


def _batched_scan(builder: GraphBuilder, node: ir.Node, opsets: dict[str, int]) -> tuple[Any, bool]:
    """Opset 8: ``(sequence_lens, *state, *scan_inputs)``, every input batched on axis 0."""
    body: ir.Graph = node.attributes["body"].value
    outer = _outer(builder, [body])
    n_scan = int(_attr(node, "num_scan_inputs", 0))
    sequence_lens, *rest = node.inputs or [None]
    if not rest or any(value is None for value in rest) or n_scan > len(rest):
        raise ConversionError(
            f"an opset-8 Scan needs its states and {n_scan} scan inputs after sequence_lens", node.location,
            hint="the model is damaged: onnx.checker.check_model names the node",
        )
    module = control_flow.BatchedScan(
        _body(builder, body, outer, opsets), len(rest) - n_scan, n_scan,
        [bool(d) for d in _attr(node, "directions", [0] * n_scan)],
    )
    args = (None if sequence_lens is None else builder.read(sequence_lens),
            *(builder.read(value) for value in rest if value is not None))
    args += tuple(builder.read(value) for value in outer)
    return builder.call_module(module, "Scan", args, builder.result_name(node)), True


def _torch_dtype(ir_type: ir.IRType | None) -> torch.dtype:
    elem = ir_type.elem_type if isinstance(ir_type, ir.TensorType) else types.FLOAT.enum
    sample = to_tensor(np.zeros(0, types.numpy_dtype(elem)))
    return sample.dtype if isinstance(sample, torch.Tensor) else torch.float32
