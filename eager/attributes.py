"""Attributes of an eager call: a hashable cache key, and AttributeProtos for the model.

The key is computed on every call, so it is built from the raw keyword values (lists
become tuples, arrays their bytes); the proto is only built when a session is missing
from the cache, after :meth:`dsl.opsets.Op.make_attr` has checked each value against the
schema (its errors name the op, the attribute and what was expected).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper

from dsl import ir, types
from dsl.opsets import Op

__all__ = ["attribute_key", "attribute_protos", "attr_to_proto"]


def freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value that equals only equal values."""
    cls = type(value)
    if cls in (int, float, str, bool, bytes):
        return (cls, value)
    if cls in (list, tuple):
        return (list, tuple(freeze(v) for v in value))
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes() if value.dtype != object else str(value))
    if isinstance(value, np.generic):
        return (np.generic, value.dtype.str, value.tobytes())
    if isinstance(value, (onnx.GraphProto, onnx.TensorProto, onnx.AttributeProto, onnx.TypeProto)):
        return (cls, value.SerializeToString())
    try:
        hash(value)
    except TypeError:
        # Never equal to another key: the call is checked (and rejected) by Op.make_attr.
        return (cls, id(value), object())
    return (cls, value)  # graphs, types, ElementType: hashed by identity or their own __hash__


def attribute_key(kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The cache-key part of the keyword arguments (empty tuple when there are none)."""
    if not kwargs:
        return ()
    return tuple(sorted((name, freeze(value)) for name, value in kwargs.items()))


def attribute_protos(op: Op, kwargs: dict[str, Any], location: Any) -> list[onnx.AttributeProto]:
    """Check each keyword against the schema and build its AttributeProto."""
    protos = []
    for name, value in kwargs.items():
        if isinstance(value, onnx.AttributeProto):
            op.check_attribute_name(name, location)
            proto = onnx.AttributeProto()
            proto.CopyFrom(value)
            proto.name = name
            protos.append(proto)
            continue
        if isinstance(value, onnx.GraphProto):
            op.check_attribute_name(name, location)
            protos.append(oh.make_attribute(name, value))
            continue
        protos.append(attr_to_proto(op.make_attr(name, value, location)))
    return protos


def tensor_to_proto(tensor: ir.Tensor) -> onnx.TensorProto:
    array = tensor.array
    if array.dtype.kind in "US":
        array = array.astype(object)
    proto = onnx.numpy_helper.from_array(array, tensor.name)
    if proto.data_type != tensor.elem_type:
        proto = onnx.numpy_helper.from_array(array.astype(types.numpy_dtype(tensor.elem_type)), tensor.name)
    return proto


def type_to_proto(ir_type: Any) -> onnx.TypeProto:
    if isinstance(ir_type, ir.TensorType):
        return oh.make_tensor_type_proto(ir_type.elem_type, None if ir_type.shape is None else list(ir_type.shape))
    if isinstance(ir_type, ir.SequenceType):
        return oh.make_sequence_type_proto(type_to_proto(ir_type.elem))
    if isinstance(ir_type, ir.OptionalType):
        return oh.make_optional_type_proto(type_to_proto(ir_type.elem))
    raise TypeError(f"no TypeProto for {ir_type!r}")


def graph_to_proto(graph: ir.Graph) -> onnx.GraphProto:
    # Subgraphs come from the compiler; converter.to_onnx owns their serialisation.
    from converter import to_onnx

    return to_onnx.graph_to_proto(graph)


def attr_to_proto(attr: ir.Attr) -> onnx.AttributeProto:
    """An :class:`ir.Attr` (with a concrete value) as an AttributeProto."""
    kind = attr.kind
    value = attr.value
    K = ir.AttrKind
    if kind == K.TENSOR:
        return oh.make_attribute(attr.name, tensor_to_proto(value))
    if kind == K.TENSORS:
        return oh.make_attribute(attr.name, [tensor_to_proto(v) for v in value], attr_type=onnx.AttributeProto.TENSORS)
    if kind == K.GRAPH:
        return oh.make_attribute(attr.name, graph_to_proto(value))
    if kind == K.GRAPHS:
        return oh.make_attribute(attr.name, [graph_to_proto(v) for v in value], attr_type=onnx.AttributeProto.GRAPHS)
    if kind == K.TYPE_PROTO:
        return oh.make_attribute(attr.name, type_to_proto(value))
    if kind == K.TYPE_PROTOS:
        return oh.make_attribute(attr.name, [type_to_proto(v) for v in value], attr_type=onnx.AttributeProto.TYPE_PROTOS)
    if kind in (K.INTS, K.FLOATS, K.STRINGS):
        return oh.make_attribute(attr.name, list(value), attr_type=int(kind))
    if kind == K.STRING:
        return oh.make_attribute(attr.name, value, attr_type=onnx.AttributeProto.STRING)
    if kind == K.FLOAT:
        return oh.make_attribute(attr.name, float(value), attr_type=onnx.AttributeProto.FLOAT)
    if kind == K.INT:
        return oh.make_attribute(attr.name, int(value), attr_type=onnx.AttributeProto.INT)
    return oh.make_attribute(attr.name, value)
