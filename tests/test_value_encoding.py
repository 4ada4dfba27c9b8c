"""converter.value_encoding: tensors written as numpy_helper.from_array writes them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import numpy_helper

from converter.onnx_encoding import BodyContext, emit_initializers
from converter.value_encoding import Export, tensor_to_proto, tensor_wire_body
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


@settings(max_examples=300)
@given(raw_tensors(), st.sampled_from(["", "w", "wé漢"]), st.sampled_from(["", "why"]))
def test_initializers_encoded_as_bytes_parse_to_what_from_array_writes(
    drawn: tuple[np.ndarray, int], name: str, doc: str
) -> None:
    # The writer merges a graph's initializers as wire bytes: parsed back, each must be
    # the TensorProto numpy_helper writes (or the encoder must decline, leaving protobuf).
    array, elem_type = drawn
    expected = numpy_helper.from_array(array.astype(array.dtype.newbyteorder("=")), name)
    if doc:
        expected.doc_string = doc
    body = tensor_wire_body(ir.Tensor(array, elem_type, "other", doc), name)
    if body is None:
        assert array.dtype != array.dtype.newbyteorder("=")  # (declined only for another byte order)
        return
    parsed = onnx.TensorProto()
    parsed.ParseFromString(body)
    assert parsed.SerializeToString() == expected.SerializeToString()


def test_initializers_the_encoder_declines_are_written_by_protobuf_in_order() -> None:
    # Strings and a non-UTF-8 name are left to protobuf; the graph keeps the IR's order.
    words = ir.Value("words", None, None, ir.Tensor(np.array(["a", "b"], dtype=object), onnx.TensorProto.STRING, "words"))
    floats = ir.Value("f", None, None, ir.Tensor(np.array([1.0, 2.0], np.float32), onnx.TensorProto.FLOAT, "f"))
    ints = ir.Value("i", None, None, ir.Tensor(np.array([[3]], np.int64), onnx.TensorProto.INT64, "i"))
    graph = onnx.GraphProto()
    context = BodyContext(Export(), attr_values=None, function_names={})
    emit_initializers([floats, words, ints], context, graph)
    assert [t.name for t in graph.initializer] == ["f", "words", "i"]
    np.testing.assert_array_equal(numpy_helper.to_array(graph.initializer[0]), [1.0, 2.0])
    assert list(graph.initializer[1].string_data) == [b"a", b"b"]
    np.testing.assert_array_equal(numpy_helper.to_array(graph.initializer[2]), [[3]])
    assert list(graph.initializer[2].dims) == [1, 1]
    assert tensor_wire_body(ir.Tensor(np.array([1.0], np.float32), onnx.TensorProto.FLOAT), "\ud800") is None


def test_large_initializers_and_many_small_ones_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past WIRE_TENSOR_BYTES a tensor goes through protobuf (one parse takes at most 2 GB)
    # and the pending bytes are merged in parts: lowered here so small arrays show both.
    from converter import onnx_encoding, value_encoding

    monkeypatch.setattr(value_encoding, "WIRE_TENSOR_BYTES", 16)
    monkeypatch.setattr(onnx_encoding, "WIRE_TENSOR_BYTES", 16)
    arrays = [np.arange(size, dtype=np.float32) for size in (1, 8, 2, 3, 2, 9, 1)]
    values = [ir.Value(f"w{i}", None, None, ir.Tensor(a, onnx.TensorProto.FLOAT, f"w{i}")) for i, a in enumerate(arrays)]
    assert tensor_wire_body(values[1].initializer, "w1") is None  # (32 bytes of data)
    graph = onnx.GraphProto()
    emit_initializers(values, BodyContext(Export(), attr_values=None, function_names={}), graph)
    assert [t.name for t in graph.initializer] == [f"w{i}" for i in range(len(arrays))]
    for written, array in zip(graph.initializer, arrays):
        np.testing.assert_array_equal(numpy_helper.to_array(written), array)


@pytest.mark.parametrize("shape", [(200,), (1, 128, 2), (127, 3), (0, 300)])
def test_initializers_of_sizes_past_one_varint_byte(shape: tuple[int, ...]) -> None:
    array = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    body = tensor_wire_body(ir.Tensor(array, onnx.TensorProto.INT64), "big")
    parsed = onnx.TensorProto()
    parsed.ParseFromString(body)
    assert parsed.SerializeToString() == numpy_helper.from_array(array, "big").SerializeToString()
