"""dsl.held_tensor: initializers read for composition kept as their protos' bytes.

The oracle for what is written is ``onnx.numpy_helper`` (decoding the written protos) and
the same model read without holding (each initializer decoded into an array, as every
other reader does), whose written bytes must be the very same.
"""

from __future__ import annotations

import copy
import os
import pickle

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import converter
from converter.external_data import ExternalDataWriter
from converter.from_onnx import model_from_proto
from converter.onnx_encoding import graph_to_proto
from converter.proto_values import ProtoValueReader
from converter.to_onnx import model_to_proto
from dsl import ir
from dsl.errors import ModelLoadError
from dsl.held_tensor import HeldTensor

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = ("light_squeezenet.onnx", "light_resnet50.onnx", "light_inception_v2.onnx", "light_densenet121.onnx")


def _light(file_name: str) -> onnx.ModelProto:
    path = os.path.join(LIGHT, file_name)
    if not os.path.exists(path):
        pytest.skip(f"this onnx release does not ship {file_name}")
    return onnx.load(path)


def _model(*tensors: onnx.TensorProto) -> onnx.ModelProto:
    """A model whose graph holds ``tensors`` as initializers and returns the first."""
    first = tensors[0]
    output = helper.make_tensor_value_info(first.name, first.data_type, list(first.dims))
    model = helper.make_model(helper.make_graph([], "g", [], [output], list(tensors)),
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _initializers(model: onnx.ModelProto, hold: bool) -> list[ir.Tensor]:
    tensors = [v.initializer for v in model_from_proto(model, hold_attributes=hold).graph.initializers]
    assert all(t is not None for t in tensors)
    return tensors  # type: ignore[return-value]


def _written(model: onnx.ModelProto, hold: bool, change: object = None) -> list[bytes]:
    """The initializers written back after reading ``model`` (held or not), ``change``
    called on the IR graph first."""
    graph = model_from_proto(model, hold_attributes=hold).graph
    if callable(change):
        change(graph)
    return [t.SerializeToString() for t in graph_to_proto(graph).initializer]


def _tensor(array: np.ndarray, name: str = "w", doc: str = "") -> onnx.TensorProto:
    proto = numpy_helper.from_array(array, name)
    if doc:
        proto.doc_string = doc
    return proto


# ----------------------------------------------------------------------------- protobuf


def test_protobuf_keeps_the_last_name_written_in_a_message() -> None:
    # What renaming a held tensor relies on: a singular field given twice on the wire
    # takes the last value, in a message on its own and inside a graph's initializer list.
    held = _tensor(np.arange(3, dtype=np.float32), "old").SerializeToString()
    renamed = held + b"\x42\x03new"  # TensorProto.name (field 8, length-delimited)
    assert onnx.TensorProto.FromString(renamed).name == "new"
    graph = onnx.GraphProto()
    graph.MergeFromString(b"\x2a" + bytes([len(renamed)]) + renamed)  # GraphProto.initializer (field 5)
    assert [t.name for t in graph.initializer] == ["new"]
    np.testing.assert_array_equal(numpy_helper.to_array(graph.initializer[0]), np.arange(3, dtype=np.float32))


# ------------------------------------------------------------------------------ reading


@pytest.mark.parametrize("file_name", LIGHT_MODELS)
def test_initializers_of_real_models_are_held_and_decode_as_numpy_helper_reads_them(file_name: str) -> None:
    model = _light(file_name)
    tensors = _initializers(model, hold=True)
    plain = _initializers(model, hold=False)
    assert tensors and all(type(t) is HeldTensor for t in tensors)  # (all small, in raw_data)
    for proto, tensor, read in zip(model.graph.initializer, tensors, plain):
        expected = numpy_helper.to_array(proto)
        assert tensor.shape == expected.shape and tensor.name == proto.name and tensor.elem_type == proto.data_type
        array = tensor.array
        assert type(tensor) is ir.Tensor and tensor.array is array  # (decoded once, a plain Tensor now)
        assert array.dtype == expected.dtype == read.array.dtype and array.shape == expected.shape
        np.testing.assert_array_equal(array, expected)
        assert not array.flags.writeable and array.flags.aligned and array.flags.c_contiguous


def test_a_reader_that_does_not_hold_reads_arrays() -> None:
    model = _model(_tensor(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert not any(type(t) is HeldTensor for t in _initializers(model, hold=False))
    assert all(type(t) is HeldTensor for t in ProtoValueReader("m").initializers(model.graph.initializer, True))


def _with(proto: onnx.TensorProto, edit: object) -> onnx.TensorProto:
    edited = onnx.TensorProto()
    edited.CopyFrom(proto)
    edit(edited)  # type: ignore[operator]
    return edited


_PLAIN = _tensor(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
# TensorProtos the writer would not write as they are: each must be read, not held
_NOT_THE_WRITERS = {
    "typed field": helper.make_tensor("w", onnx.TensorProto.FLOAT, [2, 3], list(range(6))),
    "data_location DEFAULT given": _with(_PLAIN, lambda t: setattr(t, "data_location", onnx.TensorProto.DEFAULT)),
    "empty name given": _with(_PLAIN, lambda t: setattr(t, "name", "")),
    "empty doc string given": _with(_PLAIN, lambda t: setattr(t, "doc_string", "")),
    "metadata_props": _with(_PLAIN, lambda t: t.metadata_props.add(key="k", value="v")),
    "a segment": _with(_PLAIN, lambda t: (setattr(t.segment, "begin", 0), setattr(t.segment, "end", 6))),
    "an unknown field": onnx.TensorProto.FromString(_PLAIN.SerializeToString() + b"\xf8\x07\x01"),  # field 127
    "a string tensor": numpy_helper.from_array(np.array([b"a", b"b"], dtype=object), "w"),
    "more than 64 KiB": _tensor(np.zeros(16385, np.float32), "w"),
    "no elements": _tensor(np.zeros((0, 3), np.float32), "w"),
    "float_data besides raw_data": _with(_PLAIN, lambda t: t.float_data.append(1.0)),
}


@pytest.mark.parametrize("case", sorted(_NOT_THE_WRITERS))
def test_tensors_the_writer_would_write_otherwise_are_read_and_written_as_before(case: str) -> None:
    proto = _NOT_THE_WRITERS[case]
    model = _model(proto)
    (tensor,) = _initializers(model, hold=True)
    assert type(tensor) is ir.Tensor
    assert _written(model, hold=True) == _written(model, hold=False)


@pytest.mark.parametrize("name, doc", [("w", ""), ("w" * 200, ""), ("w", "why " * 40), ("wé漢", ""), ("w", "é"),
                                       ("", "")])
def test_names_and_doc_strings_of_any_length_and_text(name: str, doc: str) -> None:
    proto = _tensor(np.arange(300, dtype=np.int64).reshape(1, 300), name, doc)  # (a dim over 127: two bytes)
    tensors = _initializers(_model(proto, _tensor(np.ones(2, np.float32), "other")), hold=True)
    assert (type(tensors[0]) is HeldTensor) == (name.isascii() and doc.isascii())  # (counted by characters)
    assert tensors[0].name == name and tensors[0].doc_string == doc
    np.testing.assert_array_equal(tensors[0].array, numpy_helper.to_array(proto))


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.dims.__setitem__(0, -2), "negative dim"),
    (lambda t: setattr(t, "raw_data", t.raw_data[:-4]), "cannot be read"),
    (lambda t: (t.ClearField("dims"), t.dims.extend([1] * 65), setattr(t, "raw_data", b"\0" * 4)), "65 dims"),
])
def test_malformed_tensors_fail_while_reading_as_unheld(edit: object, problem: str) -> None:
    model = _model(_with(_tensor(np.arange(4, dtype=np.float32).reshape(2, 2)), edit))
    for hold in (False, True):
        with pytest.raises(ModelLoadError, match=problem):
            model_from_proto(model, hold_attributes=hold)


_DTYPES = [np.float32, np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64, np.bool_, np.float16,
           np.float64, np.uint32, np.uint64, np.complex64, np.complex128]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_DTYPES), st.lists(st.sampled_from([1, 2, 3, 127, 128, 200]), max_size=3),
       st.sampled_from(["w", "", "x" * 130, "wé"]), st.sampled_from(["", "doc", "d" * 140]))
def test_any_plain_tensor_reads_and_writes_as_unheld(dtype: type, dims: list[int], name: str, doc: str) -> None:
    size = int(np.prod(dims))
    if size * np.dtype(dtype).itemsize > 1 << 16:
        dims = dims[:1]
    array = (np.arange(int(np.prod(dims))) % 7).astype(dtype).reshape(dims)
    model = _model(_tensor(array, name or "", doc), _tensor(np.ones(1, np.float32), "out"))
    if not name:
        model.graph.output[0].name = "out"
    held, plain = _initializers(model, hold=True), _initializers(model, hold=False)
    for tensor, read in zip(held, plain):
        assert tensor.shape == read.shape and tensor.elem_type == read.elem_type and tensor.name == read.name
    assert _written(model, hold=True) == _written(model, hold=False)
    for tensor, read in zip(held, plain):
        assert tensor.array.dtype == read.array.dtype
        np.testing.assert_array_equal(tensor.array, read.array)


# ------------------------------------------------------------------------------ writing


def _decoded(written: list[bytes]) -> dict[str, tuple[np.ndarray, str]]:
    protos = [onnx.TensorProto.FromString(t) for t in written]
    return {t.name: (numpy_helper.to_array(t), t.doc_string) for t in protos}


_TWO = _model(_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), "w", "weights"),
              _tensor(np.arange(4, dtype=np.int64), "k"))


def test_a_renamed_tensor_is_written_under_its_new_name() -> None:
    def rename(graph: ir.Graph) -> None:
        graph.initializers[0].name = graph.initializers[0].initializer.name = "renamed"  # type: ignore[union-attr]

    written = _decoded(_written(_TWO, hold=True, change=rename))
    assert sorted(written) == ["k", "renamed"]
    np.testing.assert_array_equal(written["renamed"][0], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert _written(_TWO, hold=True, change=rename) == _written(_TWO, hold=False, change=rename)


def test_a_replaced_array_is_written() -> None:
    new = np.full((3,), 7.5, np.float32)

    def replace(graph: ir.Graph) -> None:
        graph.initializers[0].initializer.array = new  # type: ignore[union-attr]

    written = _decoded(_written(_TWO, hold=True, change=replace))
    np.testing.assert_array_equal(written["w"][0], new)
    assert _written(_TWO, hold=True, change=replace) == _written(_TWO, hold=False, change=replace)


def test_a_tensor_whose_array_was_read_is_written_from_it() -> None:
    def read(graph: ir.Graph) -> None:
        tensor = graph.initializers[0].initializer
        assert tensor is not None and tensor.array.sum() == 15
        assert type(tensor) is ir.Tensor

    assert _written(_TWO, hold=True, change=read) == _written(_TWO, hold=False)
    np.testing.assert_array_equal(_decoded(_written(_TWO, hold=True, change=read))["w"][0],
                                  np.arange(6, dtype=np.float32).reshape(2, 3))


def test_a_changed_element_type_or_doc_string_is_written() -> None:
    def half(graph: ir.Graph) -> None:
        graph.initializers[0].initializer.elem_type = onnx.TensorProto.FLOAT16  # type: ignore[union-attr]

    def document(graph: ir.Graph) -> None:
        graph.initializers[0].initializer.doc_string = ""  # type: ignore[union-attr]
        graph.initializers[1].initializer.doc_string = "counts"  # type: ignore[union-attr]

    halved = _decoded(_written(_TWO, hold=True, change=half))
    assert halved["w"][0].dtype == np.float16
    np.testing.assert_array_equal(halved["w"][0], np.arange(6, dtype=np.float16).reshape(2, 3))
    assert _written(_TWO, hold=True, change=half) == _written(_TWO, hold=False, change=half)
    documented = _decoded(_written(_TWO, hold=True, change=document))
    assert (documented["w"][1], documented["k"][1]) == ("", "counts")
    assert _written(_TWO, hold=True, change=document) == _written(_TWO, hold=False, change=document)


def test_external_data_takes_held_tensors_from_their_arrays(tmp_path: os.PathLike[str]) -> None:
    model = _model(*(_tensor(np.arange(size, dtype=np.float32), f"w{size}") for size in (4, 40, 400)))
    written = {}
    for hold in (False, True):
        path = os.path.join(tmp_path, f"{hold}.data")
        with open(path, "wb") as stream:
            proto = model_to_proto(model_from_proto(model, hold_attributes=hold),
                                   external_data=ExternalDataWriter(stream, "weights.data", threshold=64))
        with open(path, "rb") as stream:
            written[hold] = (proto.SerializeToString(), stream.read())
    assert written[True] == written[False]
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in onnx.ModelProto.FromString(written[True][0])
               .graph.initializer)


def test_copies_and_pickles_of_a_held_tensor_hold_its_array() -> None:
    expected = np.arange(6, dtype=np.float32).reshape(2, 3)
    for make in (copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))):
        tensor = _initializers(_TWO, hold=True)[0]
        made = make(tensor)
        np.testing.assert_array_equal(made.array, expected)
        np.testing.assert_array_equal(tensor.array, expected)
        assert type(made) is ir.Tensor and made.name == "w" and made.doc_string == "weights"


# ---------------------------------------------------------------------------- composition


@pytest.mark.parametrize("file_name", LIGHT_MODELS)
def test_merged_and_cut_real_models_are_written_as_without_holding(file_name: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    model = _light(file_name)
    middle = model.graph.node[len(model.graph.node) // 2].output[0]

    def composed() -> list[bytes]:
        return [converter.merge(model, model, prefix2="b_").SerializeToString(),
                converter.cut(model, outputs=[middle]).SerializeToString()]

    held = composed()
    read_all = ProtoValueReader.initializers
    monkeypatch.setattr(ProtoValueReader, "initializers", lambda self, protos, hold: read_all(self, protos, False))
    assert held == composed()
    merged = onnx.ModelProto.FromString(held[0])
    sources = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for tensor in merged.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(tensor), sources[tensor.name.removeprefix("b_")])
    assert len(merged.graph.initializer) == 2 * len(model.graph.initializer)
