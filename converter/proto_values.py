"""Tensors and types of ONNX protos as IR objects, cached per conversion.

The proto reader (:mod:`converter.from_onnx`) meets the same few types and tiny
attribute tensors over and over in an exported model; reading each once, keyed by its
serialized bytes, and sharing the immutable result is what keeps reading linear and
cheap.  Numeric tensors become read-only views of ``raw_data`` where they can; strings,
external data (only from the model's own folder) and the new element types go through
:mod:`dsl.tensor_protos`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir
from dsl.errors import ModelLoadError, ModelWarning
from dsl.held_tensor import hold as held_tensor
from dsl.tensor_protos import MAX_RANK, check_dims, tensor_array

if TYPE_CHECKING:
    import onnx

__all__ = ["ProtoValueReader", "text", "field_size"]

_STRING = 8  # TensorProto.STRING
# Element types whose raw_data is plain little-endian numpy data.
_RAW_DTYPES = {
    enum: np.dtype(name).newbyteorder("<")
    for enum, name in ((1, "float32"), (2, "uint8"), (3, "int8"), (4, "uint16"), (5, "int16"), (6, "int32"),
                       (7, "int64"), (9, "bool"), (10, "float16"), (11, "float64"), (12, "uint32"),
                       (13, "uint64"), (14, "complex64"), (15, "complex128"))
}
# Element types stored one value per entry of a typed field (when not in raw_data).
_TYPED_FIELDS = {1: "float_data", 6: "int32_data", 7: "int64_data", 11: "double_data"}
_UNSEEN: Any = object()
_TINY_BYTES = 64  # attribute tensors serialized in at most this many bytes share their array
_HELD_BYTES = 1 << 16  # tensors with at most this much data may be held (larger ones are copied alike either way)
_RAW_DATA_TAG = 0x4A  # TensorProto.raw_data (field 9, length-delimited)


class ProtoValueReader:
    """The tensors and types of one conversion; ``source`` names the file in errors,
    ``folder`` is where external data may be read from (None: nowhere)."""

    def __init__(self, source: str, folder: str | None = None, after: ProtoValueReader | None = None) -> None:
        self.source = source
        self.folder = folder
        # whether a type read here declared a negative size (and warned, naming this source)
        self.negative_sizes = False
        self.tensor_types: dict[tuple[int, Any], ir.TensorType]
        self.types: dict[bytes, ir.IRType | None]
        # serialized tiny TensorProto -> Tensor fields, the array read-only and shared (see attribute_tensor())
        self.tiny_tensors: dict[bytes, tuple[np.ndarray, int, str, str]]
        if after is not None:
            # Models read one after the other to become one (``after``: the reader of the one
            # before, of the same folder; see from_onnx.models_and_values_from_protos) share what it
            # learnt: the IR objects are immutable and equal protos read alike, except that a
            # type declaring a negative size warns once a reader, naming its model.
            self.tensor_types, self.tiny_tensors = after.tensor_types, after.tiny_tensors
            self.types = {} if after.negative_sizes else after.types
        else:
            self.tensor_types, self.types, self.tiny_tensors = {}, {}, {}

    def tensor(self, proto: onnx.TensorProto) -> ir.Tensor:
        data_type = proto.data_type
        fast_dtype = _RAW_DTYPES.get(data_type)
        if fast_dtype is not None and proto.data_location != 1:
            # The common cases, several times cheaper than numpy_helper.to_array.
            shape = proto.dims[:]  # (a list: cheaper than a tuple, and reshape takes it)
            if shape and (len(shape) > MAX_RANK or min(shape) < 0):  # (an overflowing count fails the size tests)
                check_dims(shape, proto.name, self.source)
            raw = proto.raw_data
            if raw or proto.HasField("raw_data"):
                if len(raw) == fast_dtype.itemsize * math.prod(shape):
                    # A read-only view of the bytes, no copy (frombuffer is quicker for 1-D).
                    array = np.frombuffer(raw, fast_dtype) if len(shape) == 1 else np.ndarray(shape, fast_dtype, raw)
                    return ir.Tensor(array, data_type, proto.name, proto.doc_string)
            else:
                field_name = _TYPED_FIELDS.get(data_type)
                if field_name is not None:
                    typed = getattr(proto, field_name)
                    size = math.prod(shape)
                    if len(typed) == size:
                        array = np.fromiter(typed, fast_dtype, size)
                        if len(shape) != 1:
                            array = array.reshape(shape)
                        return ir.Tensor(array, data_type, proto.name, proto.doc_string)
        return self._slow_tensor(proto)

    def initializers(self, protos: Iterable[onnx.TensorProto], hold: bool) -> list[ir.Tensor]:
        """:meth:`tensor` of each; with ``hold``, a :class:`dsl.held_tensor.HeldTensor`
        keeping the proto's bytes where they are exactly what the ONNX writer writes for
        its array (dims, a plain element type, up to 64 KiB of data in ``raw_data``, a name
        and a doc string, nothing else): for a reader whose result is written back."""
        read = self.tensor
        if not hold:
            return list(map(read, protos))
        found: list[ir.Tensor] = []
        add, raw_dtypes, prod = found.append, _RAW_DTYPES, math.prod
        for proto in protos:
            data_type = proto.data_type
            dtype = raw_dtypes.get(data_type)
            if dtype is not None:
                dims = proto.dims[:]
                size = len(proto.raw_data)
                count = prod(dims)
                # (a negative dim is ten bytes long, counted two below: read, it is refused)
                if 0 < size <= _HELD_BYTES and size == dtype.itemsize * count and len(dims) <= MAX_RANK:
                    serialized = proto.SerializeToString()
                    name, doc_string = proto.name, proto.doc_string
                    header = 2 + (size >= 0x80) + (size >= 0x4000)  # (raw_data's tag and size)
                    if name and len(name) < 0x80 and (count < 0x80 or max(dims) < 0x80):  # (_data_start, inline)
                        data_start = 2 * len(dims) + len(name) + 4 + header
                    else:
                        data_start = _data_start(dims, name, size)
                    if (len(serialized) == data_start + size + (field_size(len(doc_string)) if doc_string else 0)
                            and serialized[data_start - header] == _RAW_DATA_TAG):
                        add(held_tensor((serialized, data_start, dims, dtype, data_type, name, doc_string)))
                        continue
            add(read(proto))  # (which reads it, or names what is wrong with it)
        return found

    def attribute_tensor(self, proto: onnx.TensorProto, key: bytes | None = None) -> ir.Tensor:
        """:meth:`tensor`, sharing one read-only array among equal tiny tensors.

        Exporters repeat tiny constants (ConstantOfShape's value, axes) hundreds of times;
        the serialized proto (``key``, if the caller has it) is a cheaper key than reading
        its repeated fields.  Arrays from ``raw_data`` are read-only views already, so no
        consumer may write into IR arrays.
        """
        if key is None:
            key = proto.SerializeToString()
        if len(key) > _TINY_BYTES:
            return self.tensor(proto)
        seen = self.tiny_tensors.get(key)
        if seen is not None:
            return ir.Tensor(*seen)
        tensor = self.tensor(proto)
        if proto.data_type in _RAW_DTYPES:
            tensor.array.flags.writeable = False
            self.tiny_tensors[key] = (tensor.array, tensor.elem_type, tensor.name, tensor.doc_string)
        return tensor

    def _slow_tensor(self, proto: onnx.TensorProto) -> ir.Tensor:
        """Strings, external data, packed and new element types: what numpy_helper knows."""
        check_dims(proto.dims, proto.name, self.source)
        if proto.data_type == _STRING and proto.data_location != 1:
            # Text where it is UTF-8, bytes where it is not (numpy_helper would fail on those).
            strings = np.empty(len(proto.string_data), dtype=object)
            strings[:] = [text(s) for s in proto.string_data]
            shape = tuple(int(d) for d in proto.dims)
            if strings.size != int(np.prod(shape)):
                raise ModelLoadError(
                    f"{self.source}: string tensor {proto.name!r} has {strings.size} strings for shape {list(shape)}",
                    hint="the model is malformed or truncated",
                )
            return ir.Tensor(strings.reshape(shape), _STRING, proto.name, proto.doc_string)
        array = tensor_array(proto, self.folder, self.source)
        return ir.Tensor(array, int(proto.data_type), proto.name, proto.doc_string)

    def sparse_tensor(self, proto: onnx.SparseTensorProto) -> ir.SparseTensor:
        check_dims(proto.dims, proto.values.name, self.source)
        return ir.SparseTensor(self.tensor(proto.values), self.tensor(proto.indices), tuple(int(d) for d in proto.dims))

    def tensor_type(self, elem_type: int, shape: tuple[int | str | None, ...] | None) -> ir.TensorType:
        """One shared (immutable) TensorType per distinct type: models repeat a few types many times."""
        key = (elem_type, shape)
        found = self.tensor_types.get(key)
        if found is None:
            found = self.tensor_types[key] = ir.TensorType(elem_type, shape)
        return found

    def type(self, proto: onnx.TypeProto) -> ir.IRType | None:
        # IR types are immutable, and a model spells the same few types over and over:
        # one lookup by the serialized proto is cheaper than walking its dimensions.
        key = proto.SerializeToString()
        found = self.types.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self.types[key] = self._new_type(proto)
        return found

    def _new_type(self, proto: onnx.TypeProto) -> ir.IRType | None:
        which = proto.WhichOneof("value")
        if which == "tensor_type":
            tensor = proto.tensor_type
            return self.tensor_type(tensor.elem_type, self._shape(tensor))
        if which == "sparse_tensor_type":
            sparse = proto.sparse_tensor_type
            return ir.SparseTensorType(int(sparse.elem_type), self._shape(sparse))
        if which == "sequence_type":
            return ir.SequenceType(self.type(proto.sequence_type.elem_type))
        if which == "optional_type":
            return ir.OptionalType(self.type(proto.optional_type.elem_type))
        if which == "map_type":
            return ir.MapType(int(proto.map_type.key_type), self.type(proto.map_type.value_type))
        return None


    def _shape(self, tensor_type: Any) -> tuple[int | str | None, ...] | None:
        """The declared dimensions; a negative size (exporters write ``-1`` for a batch)
        is read as an unknown one, as onnxruntime reads it, with a :class:`ModelWarning`."""
        if not tensor_type.HasField("shape"):
            return None
        dims: list[int | str | None] = []
        for dim in tensor_type.shape.dim:
            which = dim.WhichOneof("value")
            if which == "dim_value":
                dims.append(int(dim.dim_value))
            elif which == "dim_param":
                dims.append(dim.dim_param)
            else:
                dims.append(None)
        negative = [axis for axis, dim in enumerate(dims) if isinstance(dim, int) and dim < 0]
        if negative:
            self.negative_sizes = True
            warnings.warn(
                f"{self.source}: a type declares the size {dims[negative[0]]} on axis {negative[0]} "
                f"({len(negative)} negative size(s) in all): read as an unknown size, as onnxruntime does; "
                "ONNX sizes are >= 0, so the model written back declares it unknown", ModelWarning, stacklevel=2)
            dims = [None if axis in negative else dim for axis, dim in enumerate(dims)]
        return tuple(dims)


def _data_start(dims: list[int], name: str, size: int) -> int:
    """Where the data of a TensorProto holding only dims, data_type, a name, ``size``
    bytes of ``raw_data`` and a doc string starts in its serialized bytes, protobuf
    writing fields in the order of their numbers (dims 1, data_type 2, name 8, raw_data 9,
    doc_string 12).  Any other field, or a name or doc string present but empty, makes the
    bytes longer than that and the doc string; so does a name that is not ASCII, counted
    here by its characters: then the bytes are not the writer's.  (One byte a tag,
    data_type < 128; dims unpacked, the common sizes counted inline.)"""
    if name:
        length = len(name)
        start = (length + 4 if length < 0x80 else field_size(length) + 2) + 2 * len(dims)
    else:
        start = 2 + 2 * len(dims)
    if dims and max(dims) >= 0x80:
        start += sum(_varint_size(d) - 1 for d in dims)
    return start + 2 + (size >= 0x80) + (size >= 0x4000)  # (raw_data's tag and size, size < 2**21)


def _varint_size(number: int) -> int:
    return 1 if number < 0x80 else 2 if number < 0x4000 else 3 if number < 0x200000 else (number.bit_length() + 6) // 7


def field_size(size: int) -> int:
    """Bytes of a length-delimited field of ``size`` bytes whose tag is one byte."""
    return 1 + _varint_size(size) + size


def text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
