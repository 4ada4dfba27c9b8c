"""ONNX external data read straight into arrays, and written straight from them.

A model's weights are its bulk: a 2 GB model read through ``onnx.load`` is 2 GB of
``raw_data`` in protos, and every numpy view of it is another copy (protobuf hands out
``bytes``); writing goes through ``tobytes()`` and protobuf again.  Here each external
tensor of a plain numeric type is read with one ``readinto`` into the array the IR
keeps, and :class:`ExternalDataWriter` writes an array's own buffer to the data file
while the proto records only where it lies, so the weights exist once in memory.  A
model under protobuf's 2 GB is written in one file the same way
(:class:`StreamedWeights`, :func:`write_streamed`).

Opening follows onnx's rules for where external data may lie (the file must be inside
the model's folder, no symlink out of it: ``onnx.external_data_helper``), and a tensor
may not claim more bytes than its file holds.  Element types whose raw layout is not
plain little-endian numpy (strings, packed 4-bit, ...) are left to
``numpy_helper.to_array``.
"""

from __future__ import annotations

import math
import os
from typing import IO, Any, Protocol

import numpy as np

__all__ = ["read_external_array", "WeightsSink", "ExternalDataWriter", "StreamedWeights", "HandedOverWeights",
           "write_streamed", "PLAIN_DTYPES"]

# Element types whose bytes are plain little-endian numpy data (those read and written here).
PLAIN_DTYPES = {
    enum: np.dtype(name).newbyteorder("<")
    for enum, name in ((1, "float32"), (2, "uint8"), (3, "int8"), (4, "uint16"), (5, "int16"), (6, "int32"),
                       (7, "int64"), (9, "bool"), (10, "float16"), (11, "float64"), (12, "uint32"),
                       (13, "uint64"), (14, "complex64"), (15, "complex128"))
}
_EXTERNAL = 1  # TensorProto.EXTERNAL
_CHUNK = 64 << 20  # bytes per read call: large enough to be fast, small enough for any platform


def read_external_array(proto: Any, folder: str) -> np.ndarray:
    """The data of an external-data ``TensorProto`` as a read-only array, read once.

    Raises ``ValueError`` or ``OSError`` (with onnx's wording where onnx checks) for a
    location outside ``folder``, a missing file, or data the file does not hold.

    >>> array = read_external_array(model.graph.initializer[0], "models/")   # doctest: +SKIP
    """
    from onnx import numpy_helper
    from onnx.external_data_helper import ExternalDataInfo

    dtype = PLAIN_DTYPES.get(proto.data_type)
    opener = _onnx_opener()
    if dtype is None or opener is None:
        return numpy_helper.to_array(proto, folder)
    info = ExternalDataInfo(proto)
    shape = [int(d) for d in proto.dims]
    size = math.prod(shape) * dtype.itemsize
    if info.length is not None and info.length != size:
        raise ValueError(f"tensor {proto.name!r} declares {info.length} bytes of external data but its shape "
                         f"{shape} needs {size}")
    descriptor = opener(folder, info.location, proto.name, True)
    with os.fdopen(descriptor, "rb") as data_file:
        offset = info.offset or 0
        available = os.fstat(data_file.fileno()).st_size - offset
        if available < size:
            raise ValueError(f"tensor {proto.name!r} needs {size} bytes of {info.location!r} from offset {offset}, "
                             f"which holds {max(available, 0)}")
        data_file.seek(offset)
        array = np.empty(shape, dtype)
        _read_into(data_file, array, proto.name)
    array.flags.writeable = False  # (as the views of raw_data are: no consumer writes into IR arrays)
    return array


def _onnx_opener() -> Any:
    """onnx's checked opening of an external data file (onnx >= 1.20), or None."""
    from onnx import external_data_helper

    return getattr(external_data_helper, "_open_external_data_fd", None)


def _read_into(stream: IO[bytes], array: np.ndarray, name: str) -> None:
    view = array.reshape(-1).view(np.uint8).data
    done = 0
    while done < len(view):
        count = stream.readinto(view[done: done + _CHUNK])  # type: ignore[attr-defined]
        if not count:
            raise ValueError(f"the external data of tensor {name!r} ends after {done} of {len(view)} bytes")
        done += count


class WeightsSink(Protocol):
    """Where ``model_to_proto(..., external_data=...)`` puts the initializers it takes."""

    def takes(self, array: np.ndarray, elem_type: int) -> bool: ...

    def fill(self, proto: Any, array: np.ndarray, elem_type: int) -> None: ...


def _large_and_plain(array: np.ndarray, elem_type: int, threshold: int) -> bool:
    dtype = PLAIN_DTYPES.get(elem_type)
    return dtype is not None and array.nbytes >= threshold and array.dtype == dtype


class ExternalDataWriter:
    """Writes large tensors to one data file beside a model as its protos are built.

    ``fill(proto, array)`` appends the array's buffer to the file (no copy) and makes
    ``proto`` refer to it; tensors under ``threshold`` bytes stay inside the model.

    >>> with open("model.onnx.data", "wb") as stream:                        # doctest: +SKIP
    ...     proto = converter.model_to_proto(model, external_data=ExternalDataWriter(stream, "model.onnx.data"))
    """

    def __init__(self, stream: IO[bytes], location: str, threshold: int = 1024) -> None:
        self.stream = stream
        self.location = location
        self.threshold = threshold
        self.offset = 0

    def takes(self, array: np.ndarray, elem_type: int) -> bool:
        """True when ``array`` goes to the data file (large, of a plain numeric type)."""
        return _large_and_plain(array, elem_type, self.threshold)

    def fill(self, proto: Any, array: np.ndarray, elem_type: int) -> None:
        """Write ``array`` to the data file and describe it in ``proto`` (dims, type, location)."""
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        proto.dims.extend(array.shape)
        proto.data_type = elem_type
        proto.data_location = _EXTERNAL
        padding = -self.offset % 4096  # (page-aligned, so that a reader may memory-map each tensor)
        if padding:
            self.stream.write(b"\0" * padding)
            self.offset += padding
        self.stream.write(array.reshape(-1).view(np.uint8).data)
        for key, value in (("location", self.location), ("offset", str(self.offset)), ("length", str(array.nbytes))):
            proto.external_data.add(key=key, value=value)
        self.offset += array.nbytes


class StreamedWeights:
    """Takes large main-graph initializers out of a proto being built, for
    :func:`write_streamed` to write into the model file from the arrays themselves.

    Used as ``model_to_proto(..., external_data=StreamedWeights())``: a model under
    protobuf's 2 GB is saved in one file without a copy of its weights in the proto and
    another in the serialized bytes.
    """

    def __init__(self, threshold: int = 1 << 16) -> None:
        self.threshold = threshold
        self.arrays: dict[str, np.ndarray] = {}

    def takes(self, array: np.ndarray, elem_type: int) -> bool:
        """True when ``array`` is written by :func:`write_streamed` (large, plain numeric)."""
        return _large_and_plain(array, elem_type, self.threshold)

    def fill(self, proto: Any, array: np.ndarray, elem_type: int) -> None:
        """Record ``array``; ``proto`` gets its dims and type, its data comes at writing."""
        proto.dims.extend(array.shape)
        proto.data_type = elem_type
        self.arrays[proto.name] = array


class HandedOverWeights(StreamedWeights):
    """Takes large main-graph initializers for ``SessionOptions.add_external_initializers``:
    the proto marks them external, onnxruntime gets the arrays themselves (no copy).
    Call :meth:`finish` on the built proto: tensors taken from subgraphs get their data back.
    """

    def fill(self, proto: Any, array: np.ndarray, elem_type: int) -> None:
        super().fill(proto, array, elem_type)
        proto.data_location = _EXTERNAL
        proto.external_data.add(key="location", value="handed-over")

    def finish(self, model: Any) -> dict[str, np.ndarray]:
        """The arrays of the main graph's initializers taken, by name."""
        main = {t.name for t in model.graph.initializer if t.name in self.arrays}
        _fill_subgraph_weights(model.graph, self.arrays, main)
        return {name: np.ascontiguousarray(self.arrays[name]) for name in main}


def write_streamed(model: Any, stream: IO[bytes], weights: StreamedWeights) -> None:
    """Write ``model`` with the data of the tensors ``weights`` took, each from its array.

    The proto (without those tensors) is serialized first; each tensor follows as one
    more ``graph`` field holding one initializer, which protobuf merges into the graph
    when the file is read (an embedded message given twice is merged; a repeated field
    is appended to), so the file is an ordinary ONNX model.
    """
    graph = model.graph
    held = [t for t in graph.initializer if t.name in weights.arrays]
    if held:
        kept = [t for t in graph.initializer if t.name not in weights.arrays]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    _fill_subgraph_weights(graph, weights.arrays, {t.name for t in held})
    stream.write(model.SerializeToString())
    for tensor in held:
        array = weights.arrays[tensor.name]
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        header = tensor.SerializeToString() + _key(9) + _varint(array.nbytes)  # 9: raw_data
        tensor_size = len(header) + array.nbytes
        initializer = _key(5) + _varint(tensor_size)  # 5: GraphProto.initializer
        stream.write(_key(7) + _varint(len(initializer) + tensor_size) + initializer + header)  # 7: graph
        stream.write(array.reshape(-1).view(np.uint8).data)
    graph.initializer.extend(held)  # (the proto lists them again, without data, as the file does)


def _fill_subgraph_weights(graph: Any, arrays: dict[str, np.ndarray], written: set[str]) -> None:
    """Tensors taken from subgraph initializers get their data in the proto (rare and small)."""
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                for tensor in subgraph.initializer:
                    if tensor.name in arrays and tensor.name not in written and not tensor.raw_data:
                        tensor.raw_data = np.ascontiguousarray(arrays[tensor.name]).tobytes()
                        tensor.data_location = 0  # (DEFAULT: the data is in raw_data)
                        del tensor.external_data[:]
                _fill_subgraph_weights(subgraph, arrays, written)


def _key(field: int) -> bytes:
    return _varint(field << 3 | 2)  # (wire type 2: length-delimited)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)
