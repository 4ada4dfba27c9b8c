"""converter.value_encoding: tensors written as numpy_helper.from_array writes them."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import numpy_helper

from converter.value_encoding import tensor_to_proto
from dsl import ir

# Every element type with its own raw encoding, and what numpy calls it.
_RAW_TYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT16: np.int16, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT64: np.int64, onnx.TensorProto.BOOL: np.bool_, onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.UINT64: np.uint64,
    onnx.TensorProto.COMPLEX64: np.complex64, onnx.TensorProto.COMPLEX128: np.complex128,
}


@st.composite
def raw_tensors(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    elem_type = draw(st.sampled_from(sorted(_RAW_TYPES)))
    dtype = np.dtype(_RAW_TYPES[elem_type])
    if dtype.itemsize > 1 and draw(st.booleans()):
        dtype = dtype.newbyteorder(draw(st.sampled_from(["<", ">"])))  # (big-endian arrays are converted)
    array = draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
    if array.ndim >= 2 and draw(st.booleans()):
        array = array.T  # (not contiguous)
    return array, elem_type


@settings(max_examples=300)
@given(raw_tensors(), st.sampled_from(["", "w", "wé漢"]), st.sampled_from(["", "why"]))
def test_tensors_are_written_as_from_array_writes_them(drawn: tuple[np.ndarray, int], name: str, doc: str) -> None:
    array, elem_type = drawn
    expected = numpy_helper.from_array(array.astype(array.dtype.newbyteorder("=")), name)
    if doc:
        expected.doc_string = doc
    written = tensor_to_proto(ir.Tensor(array, elem_type, name, doc))
    assert written.SerializeToString() == expected.SerializeToString()
    np.testing.assert_array_equal(numpy_helper.to_array(written), array)


def test_an_array_of_another_dtype_takes_the_tensors_element_type() -> None:
    written = tensor_to_proto(ir.Tensor(np.array([1.5, -2.0]), onnx.TensorProto.FLOAT16, "h"))
    assert written.data_type == onnx.TensorProto.FLOAT16
    np.testing.assert_array_equal(numpy_helper.to_array(written), np.array([1.5, -2.0], np.float16))


@settings(max_examples=100)
@given(st.lists(st.tuples(raw_tensors(), st.sampled_from(["", "why"])), min_size=1, max_size=6))
def test_a_graphs_initializers_are_written_as_from_array_writes_them(drawn: list) -> None:
    # A graph's small initializers are encoded as bytes in one call (emit_initializers), the
    # others (a large one, an array of another dtype) through the protobuf API between them.
    from converter.onnx_encoding import graph_to_proto

    tensors = [ir.Tensor(array, elem_type, f"w{index}", doc) for index, ((array, elem_type), doc) in enumerate(drawn)]
    tensors.insert(len(tensors) // 2, ir.Tensor(np.arange(20000, dtype=np.float32), onnx.TensorProto.FLOAT, "big"))
    tensors.append(ir.Tensor(np.array([1.5, -2.0]), onnx.TensorProto.FLOAT16, "h"))
    values = [ir.Value(tensor.name, initializer=tensor) for tensor in tensors]
    graph = ir.Graph("g", outputs=values[:1], initializers=values)
    written = graph_to_proto(graph).initializer
    assert [proto.SerializeToString() for proto in written] == [
        tensor_to_proto(tensor).SerializeToString() for tensor in tensors]
