"""Python values as ONNX attribute values: which kind a value is, and the converted value.

What an op call's keyword arguments, a scripted function's attribute defaults and the
markup's attributes become: ints, floats, strings, lists of them, tensors (numpy arrays,
``TensorProto``/``SparseTensorProto`` as onnxscript users write them), types and graphs,
each checked against the kind the schema wants.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import dsl.types as types
from dsl import ir
from dsl.errors import OpAttributeError

__all__ = ["attr_kind_of_python", "python_to_attr", "tensor_from_proto", "to_tensor"]

# The item kind of each list kind.
_LIST_KIND = {
    ir.AttrKind.FLOATS: ir.AttrKind.FLOAT,
    ir.AttrKind.INTS: ir.AttrKind.INT,
    ir.AttrKind.STRINGS: ir.AttrKind.STRING,
    ir.AttrKind.TENSORS: ir.AttrKind.TENSOR,
    ir.AttrKind.GRAPHS: ir.AttrKind.GRAPH,
    ir.AttrKind.TYPE_PROTOS: ir.AttrKind.TYPE_PROTO,
    ir.AttrKind.SPARSE_TENSORS: ir.AttrKind.SPARSE_TENSOR,
}


def attr_kind_of_python(value: Any) -> ir.AttrKind | None:
    """The attribute kind a Python value has when no schema says otherwise."""
    if isinstance(value, ir.Attr):
        return value.kind
    if isinstance(value, (bool, int, np.integer)):
        return ir.AttrKind.INT
    if isinstance(value, (float, np.floating)):
        return ir.AttrKind.FLOAT
    if isinstance(value, (str, bytes)):
        return ir.AttrKind.STRING
    if isinstance(value, (np.ndarray, ir.Tensor)):
        return ir.AttrKind.TENSOR
    proto_kind = _proto_attr_kind(value)
    if proto_kind is not None:
        return proto_kind
    if isinstance(value, ir.Graph):
        return ir.AttrKind.GRAPH
    if isinstance(value, types.ElementType) or isinstance(value, (ir.TensorType, ir.SequenceType, ir.OptionalType)):
        return ir.AttrKind.TYPE_PROTO
    if isinstance(value, (list, tuple)):
        if not value:
            return ir.AttrKind.INTS
        kinds = {attr_kind_of_python(v) for v in value}
        if kinds <= {ir.AttrKind.INT}:
            return ir.AttrKind.INTS
        if kinds <= {ir.AttrKind.INT, ir.AttrKind.FLOAT}:
            return ir.AttrKind.FLOATS
        if len(kinds) == 1:
            single = kinds.pop()
            for list_kind, elem_kind in _LIST_KIND.items():
                if elem_kind == single:
                    return list_kind
    return None


def python_to_attr(name: str, value: Any, kind: ir.AttrKind | None, location: Any = None) -> ir.Attr:
    """Convert ``value`` to an :class:`ir.Attr` of ``kind`` (inferred from the value if None)."""
    if kind is None:
        kind = attr_kind_of_python(value)
        if kind is None:
            raise OpAttributeError(
                f"attribute {name} cannot hold a {type(value).__name__}",
                location,
                hint="attributes are ints, floats, strings, numpy arrays, graphs, or lists of these",
            )
    converted = _convert(kind, value)
    if converted is _MISMATCH:
        raise OpAttributeError(
            f"attribute {name} must be {_KIND_WORDS[kind]}, got {_describe(value)}",
            location,
            hint=_KIND_HINTS.get(kind) or f"pass {_KIND_WORDS[kind]}",
        )
    return ir.Attr(name, kind, converted, location=location)


_MISMATCH = object()

_KIND_WORDS = {
    ir.AttrKind.FLOAT: "a float",
    ir.AttrKind.INT: "an int",
    ir.AttrKind.STRING: "a string",
    ir.AttrKind.TENSOR: "a tensor (numpy array or number)",
    ir.AttrKind.GRAPH: "a graph (a @graph() function)",
    ir.AttrKind.FLOATS: "a list of floats",
    ir.AttrKind.INTS: "a list of ints",
    ir.AttrKind.STRINGS: "a list of strings",
    ir.AttrKind.TENSORS: "a list of tensors",
    ir.AttrKind.GRAPHS: "a list of graphs",
    ir.AttrKind.TYPE_PROTO: "a type (FLOAT[...], ...)",
    ir.AttrKind.TYPE_PROTOS: "a list of types",
    ir.AttrKind.SPARSE_TENSOR: "a sparse tensor",
    ir.AttrKind.SPARSE_TENSORS: "a list of sparse tensors",
}
_KIND_HINTS = {
    ir.AttrKind.INTS: "write a list literal such as [1, 1]",
    ir.AttrKind.FLOATS: "write a list literal such as [0.5, 1.0]",
    ir.AttrKind.INT: "an element type is given as an int: use FLOAT.enum or onnx.TensorProto.FLOAT",
    ir.AttrKind.GRAPH: "decorate a nested function with @graph() and pass it by name",
}


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} {value!r}"[:80]
    return f"{type(value).__name__} {value!r}"[:80]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _convert(kind: ir.AttrKind, value: Any) -> Any:
    K = ir.AttrKind
    value = _foreign_attribute_value(value)
    if kind == K.INT:
        if isinstance(value, types.ElementType):
            return value.enum
        if isinstance(value, np.dtype):  # ``to=x.dtype``: eager tensors and @script give numpy dtypes
            try:
                return types.element_type_of_dtype(value)
            except KeyError:
                return _MISMATCH
        if _is_int(value) or isinstance(value, (bool, np.bool_)):
            return int(value)
        return _MISMATCH
    if kind == K.FLOAT:
        return float(value) if _is_number(value) else _MISMATCH
    if kind == K.STRING:
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return value
        return value if isinstance(value, str) else _MISMATCH
    if kind == K.TENSOR:
        if _proto_attr_kind(value) == K.TENSOR:
            return tensor_from_proto(value)
        if not _tensor_like(value) and _array_protocol(value):  # a torch / onnx_ir tensor, ...
            value = np.asarray(value)
        return to_tensor(value) if _tensor_like(value) else _MISMATCH
    if kind == K.GRAPH:
        return value if isinstance(value, ir.Graph) else _MISMATCH
    if kind == K.TYPE_PROTO:
        found = types.to_ir_type(value)
        return found if found is not None else _MISMATCH
    if kind == K.SPARSE_TENSOR:
        if _proto_attr_kind(value) == K.SPARSE_TENSOR:
            return ir.SparseTensor(tensor_from_proto(value.values), tensor_from_proto(value.indices),
                                   tuple(int(d) for d in value.dims))
        return value if isinstance(value, ir.SparseTensor) else _MISMATCH
    if kind in _LIST_KIND:
        if isinstance(value, np.ndarray) and value.ndim == 1:
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            return _MISMATCH
        items = [_convert(_LIST_KIND[kind], v) for v in value]
        return _MISMATCH if any(i is _MISMATCH for i in items) else items
    return _MISMATCH


def _foreign_attribute_value(value: Any) -> Any:
    """The value an ``onnx_ir`` attribute object holds (onnxscript's torch_lib writes
    ``op.Constant(value_ints=ir.AttrInt64s("value_ints", [-1]))``), else ``value``.  Like
    onnx above, onnx_ir is only looked up: such an object exists only once it is imported."""
    onnx_ir = sys.modules.get("onnx_ir")
    attribute_class = getattr(onnx_ir, "Attr", None) if onnx_ir is not None else None
    if attribute_class is not None and isinstance(value, attribute_class):
        return value.value
    return value


def _proto_attr_kind(value: Any) -> ir.AttrKind | None:
    """TENSOR for an ``onnx.TensorProto``, SPARSE_TENSOR for a ``SparseTensorProto``, else None.

    onnxscript code passes ``onnx.helper.make_tensor(...)`` as ``value=``; onnx is only
    looked up (never imported) here: a proto exists only once onnx has been imported.
    """
    onnx = sys.modules.get("onnx")
    if onnx is None:
        return None
    if isinstance(value, onnx.TensorProto):
        return ir.AttrKind.TENSOR
    if isinstance(value, onnx.SparseTensorProto):
        return ir.AttrKind.SPARSE_TENSOR
    return None


def tensor_from_proto(proto: Any) -> ir.Tensor:
    """An ``onnx.TensorProto`` written in the user's code as an :class:`ir.Tensor`."""
    from onnx import numpy_helper

    try:
        array = numpy_helper.to_array(proto)
    except (ValueError, TypeError, KeyError, OSError) as error:
        raise OpAttributeError(
            f"the TensorProto {proto.name!r} cannot be read ({error})",
            hint="its data does not match its dims and data_type; build it with onnx.helper.make_tensor",
        ) from None
    return ir.Tensor(array, int(proto.data_type), proto.name)


def _array_protocol(value: Any) -> bool:
    """Whether a value offers numpy's ``__array__`` (torch and onnx_ir tensors do): its
    array is the tensor, as ``np.asarray`` gives it eagerly.  A class is not one."""
    return hasattr(value, "__array__") and not isinstance(value, type)


def _tensor_like(value: Any) -> bool:
    if isinstance(value, (ir.Tensor, np.ndarray, np.generic, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_tensor_like(v) and not isinstance(v, (ir.Tensor, np.ndarray)) for v in value)
    return False


def to_tensor(value: Any, elem_type: int | None = None, name: str = "") -> ir.Tensor:
    """A numpy array, numpy scalar or Python number/list as an :class:`ir.Tensor`.

    Python ints become INT64 and floats FLOAT (the ONNX convention) unless ``elem_type``
    says otherwise; numpy values keep their dtype.
    """
    if isinstance(value, ir.Tensor):
        return value
    if elem_type is not None:
        array = np.asarray(value, dtype=types.numpy_dtype(elem_type))
        return ir.Tensor(array, elem_type, name)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        return ir.Tensor(array, types.element_type_of_dtype(array.dtype), name)
    python_elem = types.element_type_of_python(value)
    if python_elem is None:
        python_elem = types.FLOAT.enum
    array = np.asarray(value, dtype=types.numpy_dtype(python_elem))
    return ir.Tensor(array, python_elem, name)
