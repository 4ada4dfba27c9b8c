"""IR tensors and types -> ONNX protos, and the record of what an export needs.

The leaves every writer of protos shares (:mod:`converter.onnx_encoding` writes
attributes, nodes and graphs from them; :mod:`converter.recorded_metadata` and eager
mode use them alone).  While writing, an :class:`Export` records the features that
raise the IR version a model needs (element types, optional types, overloads,
metadata) and keeps what one export writes over and over.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import numpy_helper

from converter import node_wire
from dsl import ir, types
from dsl.errors import ConversionError
from dsl.held_tensor import HeldTensor

if TYPE_CHECKING:
    from converter.external_data import WeightsSink
    from converter.onnx_encoding import BodyContext

__all__ = ["Export", "tensor_to_proto", "type_to_proto", "fill_type", "fill_type_shared", "fill_sparse",
           "fill_metadata_props", "annotation_type", "is_complete", "has_elem_type", "fill_recorded_tensor",
           "fill_tensor", "emit_initializer", "emit_initializers",
           "IR_FUNCTION_OVERLOAD", "IR_METADATA_PROPS"]

# Element types -> the IR version that introduced them (onnx.proto's IR version history).
_ELEM_TYPE_IR_VERSION = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13, 27: 14, 28: 14}
IR_FUNCTION_OVERLOAD = 10  # FunctionProto.overload, NodeProto.overload, FunctionProto.value_info
IR_METADATA_PROPS = 10  # NodeProto.metadata_props, GraphProto.metadata_props


class Export:
    """What one export learns while writing protos: features that raise the IR version.

    ``external``, when set, takes the large initializers as they are written, to an
    external data file or to be streamed into the model file (:mod:`converter.external_data`)."""

    __slots__ = ("elem_types", "external", "min_ir_version", "type_protos", "wire")

    def __init__(self, external: WeightsSink | None = None) -> None:
        self.min_ir_version = 3
        self.elem_types: set[int] = set()
        self.external = external
        # id(IR type) -> (the type, kept alive so the id stays its own; its TypeProto): a
        # model spells a few shared type objects over and over, and copying a finished
        # TypeProto costs a third of writing one field by field (see fill_type_shared).
        self.type_protos: dict[int, tuple[ir.IRType, onnx.TypeProto]] = {}
        self.wire = node_wire.WireCache()

    def need(self, ir_version: int) -> None:
        if ir_version > self.min_ir_version:
            self.min_ir_version = ir_version

    def required_ir_version(self) -> int:
        found = self.min_ir_version
        for elem in self.elem_types:
            found = max(found, _ELEM_TYPE_IR_VERSION.get(elem, 3))
        return found


def tensor_to_proto(tensor: ir.Tensor, name: str | None = None) -> onnx.TensorProto:
    """An :class:`ir.Tensor` as a ``TensorProto`` (every element type, strings included).

    >>> import numpy as np
    >>> from dsl import ir
    >>> tensor_to_proto(ir.Tensor(np.array([1.5], np.float32), 1), "w").data_type
    1
    """
    proto = onnx.TensorProto()
    fill_tensor(proto, tensor, name)
    return proto


def fill_tensor(proto: onnx.TensorProto, tensor: ir.Tensor, name: str | None = None) -> None:
    """Write ``tensor`` into the empty ``proto`` (named ``name``, else the tensor's name).

    Written in place, a graph's initializer or an attribute's tensor holds the one copy of
    the data the proto needs (a finished TensorProto would be copied into it)."""
    array = tensor.array
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    expected = types.numpy_dtype(tensor.elem_type) if tensor.elem_type in _KNOWN_ELEM_TYPES else None
    if tensor.elem_type == types.STRING.enum:
        if array.dtype.kind != "O":
            array = array.astype(object)
    elif expected is not None and array.dtype != expected:
        array = array.astype(expected)
    tensor_name = tensor.name if name is None else name
    if expected is not None and tensor.elem_type in _RAW_ELEM_TYPES:
        # What numpy_helper.from_array writes for these types (the same bytes, a test holds
        # them equal), without its dtype probing: a third of the time for a small tensor.
        # (The array has the element type's own dtype now, in the machine's byte order.)
        proto.dims.extend(array.shape)
        if tensor_name:
            proto.name = tensor_name
        proto.raw_data = array.tobytes()
        proto.data_type = tensor.elem_type
    else:
        proto.CopyFrom(numpy_helper.from_array(array, tensor_name))
    if tensor.doc_string:
        proto.doc_string = tensor.doc_string


_KNOWN_ELEM_TYPES = frozenset(t.enum for t in types.ELEMENT_TYPES.values())
# Element types whose raw_data is the numpy array's own bytes, as numpy_helper.from_array
# writes them: no packing (4-bit, 2-bit), no strings; on a little-endian machine only
# (raw_data is little-endian).
_RAW_ELEM_TYPES = frozenset(
    getattr(onnx.TensorProto, name)
    for name in ("FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "BOOL", "FLOAT16", "DOUBLE",
                 "UINT32", "UINT64", "COMPLEX64", "COMPLEX128")
) if sys.byteorder == "little" else frozenset()


def fill_type(proto: onnx.TypeProto, ir_type: ir.IRType, export: Export) -> None:
    """Write ``ir_type`` into ``proto`` (tensor, sequence, optional, map or sparse tensor type)."""
    if isinstance(ir_type, ir.TensorType):
        tensor_type = proto.tensor_type
        tensor_type.elem_type = ir_type.elem_type
        export.elem_types.add(ir_type.elem_type)
        if ir_type.shape is not None:
            _fill_shape(tensor_type.shape, ir_type.shape)
    elif isinstance(ir_type, ir.SequenceType):
        proto.sequence_type.SetInParent()
        if ir_type.elem is not None:
            fill_type(proto.sequence_type.elem_type, ir_type.elem, export)
    elif isinstance(ir_type, ir.OptionalType):
        export.need(8)
        proto.optional_type.SetInParent()
        if ir_type.elem is not None:
            fill_type(proto.optional_type.elem_type, ir_type.elem, export)
    elif isinstance(ir_type, ir.MapType):
        proto.map_type.key_type = ir_type.key_type
        if ir_type.value is not None:
            fill_type(proto.map_type.value_type, ir_type.value, export)
    elif isinstance(ir_type, ir.SparseTensorType):
        export.need(8)
        sparse = proto.sparse_tensor_type
        sparse.elem_type = ir_type.elem_type
        export.elem_types.add(ir_type.elem_type)
        if ir_type.shape is not None:
            _fill_shape(sparse.shape, ir_type.shape)
    else:
        raise ConversionError(f"{ir_type!r} is not an ONNX type", hint="use FLOAT[...], Sequence[...] or Optional[...]")


def fill_type_shared(proto: onnx.TypeProto, ir_type: ir.IRType, export: Export) -> None:
    """:func:`fill_type`, written once per type object of an export and copied after that."""
    found = export.type_protos.get(id(ir_type))
    if found is None:
        made = onnx.TypeProto()
        fill_type(made, ir_type, export)  # (records the type's element types and IR needs in ``export`` once)
        found = export.type_protos[id(ir_type)] = (ir_type, made)
    proto.CopyFrom(found[1])


def _fill_shape(proto: onnx.TensorShapeProto, shape: tuple[int | str | None, ...]) -> None:
    proto.SetInParent()  # a present, empty shape means rank 0
    for dim in shape:
        entry = proto.dim.add()
        if isinstance(dim, int):
            entry.dim_value = dim
        elif isinstance(dim, str):
            entry.dim_param = dim


def type_to_proto(ir_type: ir.IRType | types.ElementType) -> onnx.TypeProto:
    """An IR type or annotation (``FLOAT``, ``FLOAT[2, "N"]``, ``Sequence[...]``) as an ``onnx.TypeProto``.

    >>> from dsl import FLOAT
    >>> type_to_proto(FLOAT[2, "N"]).tensor_type.shape.dim[1].dim_param
    'N'
    """
    proto = onnx.TypeProto()
    if isinstance(ir_type, types.ElementType):
        ir_type = ir_type.tensor_type
    fill_type(proto, ir_type, Export())
    return proto


def is_complete(ir_type: ir.IRType | None) -> bool:
    """Whether a model input/output of this type satisfies the checker (element type and rank known)."""
    if ir_type is None:
        return False
    if isinstance(ir_type, (ir.TensorType, ir.SparseTensorType)):
        return ir_type.elem_type != 0 and ir_type.shape is not None
    # The checker wants a rank only for tensors at the top; a container needs its element type.
    return has_elem_type(ir_type)


def has_elem_type(ir_type: ir.IRType | None) -> bool:
    """Whether the type says its element type (of the tensors inside, for a container)."""
    if isinstance(ir_type, (ir.TensorType, ir.SparseTensorType)):
        return ir_type.elem_type != 0
    if isinstance(ir_type, (ir.SequenceType, ir.OptionalType)):
        return ir_type.elem is not None and has_elem_type(ir_type.elem)
    if isinstance(ir_type, ir.MapType):
        return ir_type.value is not None and has_elem_type(ir_type.value)
    return False


def fill_recorded_tensor(proto: onnx.TensorProto, tensor: ir.Tensor, export: Export, name: str | None = None) -> None:
    """:func:`fill_tensor`, the element type recorded in ``export``."""
    export.elem_types.add(tensor.elem_type)
    fill_tensor(proto, tensor, name)


def emit_initializer(tensor: ir.Tensor, name: str, context: BodyContext, nodes: Any, initializers: Any) -> None:
    """An initializer named ``name`` appended to ``initializers`` (a GraphProto's); in a
    FunctionProto (``initializers`` None) a Constant node appended to ``nodes``."""
    external = context.export.external
    if external is not None and initializers is not None and external.takes(tensor.array, tensor.elem_type):
        # Written from the array's own buffer: the weights are never copied into the proto.
        context.export.elem_types.add(tensor.elem_type)
        written = initializers.add(name=name, doc_string=tensor.doc_string)
        external.fill(written, tensor.array, tensor.elem_type)
        return
    if initializers is None:  # FunctionProtos have no initializers: a Constant node holds the data
        node = nodes.add(op_type="Constant", output=[name])
        attribute = node.attribute.add(name="value", type=int(ir.AttrKind.TENSOR))
        fill_recorded_tensor(attribute.t, tensor, context.export)
        attribute.t.name = ""
    else:
        fill_recorded_tensor(initializers.add(), tensor, context.export, name)


def emit_initializers(values: list[ir.Value], context: BodyContext, parent: onnx.GraphProto) -> None:
    """The initializers of ``values`` (named on first sight) appended to ``parent``: small
    plain ones encoded as wire-format bytes and merged in one call (an IR-3 model lists
    hundreds of small weights), those still held as the bytes they were read from
    (:mod:`dsl.held_tensor`) copied, renamed where their name changed, the others through
    :func:`emit_initializer`."""
    export, define = context.export, context.define
    shapes, elem_types, recorded = export.wire.shapes, _RAW_TYPE_FIELDS, export.elem_types
    tag, length_prefix = _GRAPH_INITIALIZER, node_wire.length_prefix
    entries: list[bytes] = []
    for value in values:
        tensor = value.initializer
        if tensor is None:
            raise ConversionError(f"initializer {value.name!r} has no data", value.location)
        name = define(value)
        if type(tensor) is HeldTensor and export.external is None:
            held = tensor.unchanged_proto()  # (None where it changed since read: written from its array)
            if held is not None and (name or not held[1]):
                serialized, held_name = held
                if name != held_name:  # (protobuf keeps the last name given)
                    serialized += node_wire.string_field(_TENSOR_NAME, name)
                recorded.add(tensor.elem_type)
                entries.append(tag + length_prefix(len(serialized)) + serialized)
                continue
        array = tensor.array
        elem_type = tensor.elem_type
        data_type = elem_types.get(elem_type)
        if (data_type is None or type(array) is not np.ndarray or array.dtype != data_type[0]
                or array.nbytes > _WIRE_TENSOR_BYTES or export.external is not None):
            if entries:
                parent.MergeFromString(b"".join(entries))
                entries.clear()
            emit_initializer(tensor, name, context, parent.node, parent.initializer)
            continue
        recorded.add(elem_type)
        dims = shapes.get(array.shape)
        if dims is None:  # (a size is a varint, as a length is)
            dims = shapes[array.shape] = b"".join(_TENSOR_DIM + node_wire.length_prefix(size) for size in array.shape)
        # (what fill_tensor writes: dims, name if any, raw_data, data_type, doc string if any)
        body = dims + data_type[1] + node_wire.string_field(_TENSOR_RAW_DATA, array.tobytes())
        if name:
            body += node_wire.string_field(_TENSOR_NAME, name)
        if tensor.doc_string:
            body += node_wire.string_field(_TENSOR_DOC_STRING, tensor.doc_string)
        entries.append(tag + length_prefix(len(body)) + body)
    if entries:
        parent.MergeFromString(b"".join(entries))


_WIRE_TENSOR_BYTES = 1 << 16  # (larger weights are copied once less through the protobuf API)
_GRAPH_INITIALIZER = node_wire.tag_of(onnx.GraphProto, "initializer")
_TENSOR_DIM = node_wire.tag_of(onnx.TensorProto, "dims", 0)
_TENSOR_NAME = node_wire.tag_of(onnx.TensorProto, "name")
_TENSOR_RAW_DATA = node_wire.tag_of(onnx.TensorProto, "raw_data")
_TENSOR_DOC_STRING = node_wire.tag_of(onnx.TensorProto, "doc_string")


# element type -> (its numpy dtype, the encoded TensorProto.data_type), for the types whose
# raw_data is the array's own bytes
_RAW_TYPE_FIELDS = {
    elem: (types.numpy_dtype(elem), node_wire.tag_of(onnx.TensorProto, "data_type", 0) + node_wire.length_prefix(elem))
    for elem in _RAW_ELEM_TYPES
}


def fill_sparse(proto: onnx.SparseTensorProto, sparse: ir.SparseTensor, export: Export) -> None:
    """Write a COO sparse tensor (values, indices, dims) into ``proto``."""
    fill_recorded_tensor(proto.values, sparse.values, export)
    fill_recorded_tensor(proto.indices, sparse.indices, export)
    proto.dims.extend(sparse.dims)


def fill_metadata_props(proto: Any, props: dict[str, str], export: Export) -> None:
    """Write ``props`` into the ``metadata_props`` of a NodeProto or GraphProto (IR 10 and up)."""
    export.need(IR_METADATA_PROPS)
    for key, text in props.items():
        proto.metadata_props.add(key=key, value=text)


def annotation_type(annotation: Any, what: str) -> ir.IRType:
    """The IR type an annotation object (``FLOAT[2, 'N']``, ``Map[...]``...) stands for;
    ``what`` names where it was given (``"io_types['x']"``) in the error for anything else."""
    found = types.to_ir_type(annotation)
    if found is None and isinstance(annotation, (ir.MapType, ir.SparseTensorType)):
        found = annotation
    if found is None:
        raise ConversionError(
            f"{what} is {annotation!r}, not a type",
            hint="write a type such as FLOAT[2, 'N'], INT64 or Sequence[FLOAT[...]]",
        )
    return found
