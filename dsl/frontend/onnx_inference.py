"""ONNX's own shape inference for one node, for the ops :mod:`dsl.shape_rules` has no rule for.

Run only where every input's rank is known (otherwise there is nothing to infer), so a
function annotated with ``FLOAT[...]`` pays nothing; a node costs a few tens of
microseconds here (its protos are built for onnx), against a microsecond for a rule.
ONNX's refusal of a node (``InferenceError``) is the user's mistake, at the node's line
(:func:`dsl.node_inference.infer_node`, which eager mode asks too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import ir
from dsl.node_inference import infer_node
from dsl.shape_rules import Shape

__all__ = ["infer_with_onnx"]

_SIMPLE_KINDS = frozenset({ir.AttrKind.INT, ir.AttrKind.FLOAT, ir.AttrKind.STRING, ir.AttrKind.INTS,
                           ir.AttrKind.FLOATS, ir.AttrKind.STRINGS, ir.AttrKind.TENSOR})


def infer_with_onnx(
    schema: Any,
    inputs: list[tuple[int, Shape] | None],
    attributes: dict[str, ir.Attr],
    output_count: int,
    location: Any,
) -> list[Shape] | None:
    """The output shapes ONNX infers for a node of ``schema`` whose inputs have these
    (element type, shape) pairs (None: omitted), or None when it cannot say (an attribute
    that refers to a function parameter, a graph attribute)."""
    import onnx.helper
    import onnx.numpy_helper

    protos = []
    for attribute in attributes.values():
        if attribute.ref_attr_name or attribute.kind not in _SIMPLE_KINDS or attribute.value is None:
            return None
        value = attribute.value
        if isinstance(value, ir.Tensor):
            if value.array.dtype == object:
                return None
            value = onnx.numpy_helper.from_array(np.asarray(value.array))
        protos.append(onnx.helper.make_attribute(attribute.name, value))
    names = [f"i{index}" if item is not None else "" for index, item in enumerate(inputs)]
    types = {}
    for name, item in zip(names, inputs):
        if item is not None:
            elem, shape = item
            types[name] = onnx.helper.make_tensor_type_proto(elem, list(shape) if shape is not None else None)
    outputs = [f"o{index}" for index in range(output_count)]
    node = onnx.helper.make_node(schema.name, names, outputs)
    node.attribute.extend(protos)
    found = infer_node(schema, node, types, location)  # (its refusal: the words eager mode uses too)
    return [_shape(found.get(name)) for name in outputs]


def _shape(type_proto: Any) -> Shape:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: list[Any] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tuple(dims)
