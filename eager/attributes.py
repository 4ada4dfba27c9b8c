"""Attributes of an eager call: a hashable cache key, and AttributeProtos for the model.

The key is computed on every call, so it is built from the raw keyword values (lists
become tuples, arrays their bytes); the proto is only built when a session is missing
from the cache, after :meth:`dsl.opsets.Op.make_attr` has checked each value against the
schema (its errors name the op, the attribute and what was expected), by the ONNX back
end's encoder (:func:`converter.onnx_encoding.attribute_to_proto`), so an attribute
means the same in a one-op session as in an exported model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from converter.onnx_encoding import attribute_to_proto
from dsl.opsets import Op

__all__ = ["attribute_key", "attribute_protos"]


def freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value that equals only equal values."""
    cls = type(value)
    if cls is float:  # by bits: 0.0 == -0.0 (a Constant of -0.0 must not reuse 0.0's session)
        return (cls, value.hex())
    if cls in (int, str, bool, bytes):
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
        protos.append(attribute_to_proto(op.make_attr(name, value, location)))
    return protos
