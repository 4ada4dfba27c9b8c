"""External data read straight into arrays and written straight from them.

Oracles: onnx's own external-data loader (``onnx.load``) and onnxruntime running the
written file; numpy for the arrays.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import onnxruntime
import pytest

import converter
from converter.external_data import ExternalDataWriter, read_external_array
from converter.from_onnx import model_from_proto
from converter.to_onnx import model_to_proto
from dsl import ModelLoadError

F32 = np.float32


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = [onnx.numpy_helper.from_array(rng.standard_normal((64, 32)).astype(F32), "w"),
               onnx.numpy_helper.from_array(np.arange(32, dtype=np.int64), "offsets"),
               onnx.numpy_helper.from_array(np.array([0.5], F32), "small")]
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "w"], ["xw"]), oh.make_node("Cast", ["offsets"], ["off"], to=1),
         oh.make_node("Add", ["xw", "off"], ["shifted"]), oh.make_node("Mul", ["shifted", "small"], ["y"])],
        "g", [oh.make_tensor_value_info("x", 1, [2, 64])], [oh.make_tensor_value_info("y", 1, [2, 32])], weights)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)


def _saved(tmp_path, model: onnx.ModelProto) -> str:
    path = os.fspath(tmp_path / "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, location="model.data", size_threshold=64)
    return path


def test_load_model_reads_external_data_into_read_only_arrays(tmp_path) -> None:
    path = _saved(tmp_path, _model())  # (saving moves the model's own tensors to external data)
    loaded = converter.load_model(path)
    expected = {t.name: onnx.numpy_helper.to_array(t) for t in _model().graph.initializer}
    got = {v.name: v.initializer.array for v in loaded.graph.initializers}
    assert got.keys() == expected.keys()
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array)
        assert got[name].dtype == array.dtype
    assert not got["w"].flags.writeable


def _external_tensor(tmp_path, location: str, data: bytes, dims: list[int], length: int | None = None):
    (tmp_path / "data.bin").write_bytes(data)
    tensor = onnx.TensorProto(name="t", data_type=1, dims=dims, data_location=onnx.TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value=location)
    if length is not None:
        tensor.external_data.add(key="length", value=str(length))
    return tensor


def test_external_data_outside_the_folder_or_short_is_refused(tmp_path) -> None:
    data = np.arange(4, dtype=F32).tobytes()
    np.testing.assert_array_equal(read_external_array(_external_tensor(tmp_path, "data.bin", data, [4]),
                                                      os.fspath(tmp_path)),
                                  np.arange(4, dtype=F32))
    inner = tmp_path / "inner"
    inner.mkdir()
    with pytest.raises((ValueError, OSError, onnx.checker.ValidationError)):
        read_external_array(_external_tensor(tmp_path, "../data.bin", data, [4]), os.fspath(inner))
    with pytest.raises(ValueError, match="holds 16"):
        read_external_array(_external_tensor(tmp_path, "data.bin", data, [8]), os.fspath(tmp_path))
    with pytest.raises(ValueError, match="declares 12 bytes"):
        read_external_array(_external_tensor(tmp_path, "data.bin", data, [4], length=12), os.fspath(tmp_path))


def test_a_truncated_data_file_is_a_model_load_error(tmp_path) -> None:
    path = _saved(tmp_path, _model())
    data = tmp_path / "model.data"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(ModelLoadError, match="cannot be read"):
        converter.load_model(path)


def test_writer_puts_large_initializers_in_the_data_file(tmp_path) -> None:
    ir_model = model_from_proto(_model())
    location = "written.data"
    with open(tmp_path / location, "wb") as stream:
        proto = model_to_proto(ir_model, external_data=ExternalDataWriter(stream, location, threshold=200))
    by_name = {t.name: t for t in proto.graph.initializer}
    assert by_name["w"].data_location == onnx.TensorProto.EXTERNAL and not by_name["w"].raw_data
    assert by_name["offsets"].data_location == onnx.TensorProto.EXTERNAL
    assert by_name["small"].data_location != onnx.TensorProto.EXTERNAL  # under the threshold: inside
    path = os.fspath(tmp_path / "written.onnx")
    onnx.save_model(proto, path)
    reread = onnx.load(path)  # onnx's own loader is the oracle for the file's layout
    for tensor in _model().graph.initializer:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array({t.name: t for t in reread.graph.initializer}[
            tensor.name]), onnx.numpy_helper.to_array(tensor))
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(F32)
    want = onnxruntime.InferenceSession(_model().SerializeToString()).run(None, {"x": x})[0]
    got = onnxruntime.InferenceSession(path).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_compile_writes_large_weights_beside_the_model(tmp_path, monkeypatch) -> None:
    from converter import cli

    source = tmp_path / "model.py"
    converter.write_python(_model(), source, tmp_path / "model.npz", inline_limit=4)
    monkeypatch.setattr(cli, "_PROTO_LIMIT", 100)  # as if the weights were over protobuf's 2 GB
    output = tmp_path / "out" / "compiled.onnx"
    output.parent.mkdir()
    assert cli.main(["compile", os.fspath(source), "-o", os.fspath(output)]) == 0
    assert (output.parent / "compiled.onnx.data").stat().st_size >= 64 * 32 * 4
    x = np.random.default_rng(2).standard_normal((2, 64)).astype(F32)
    want = onnxruntime.InferenceSession(_model().SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(onnxruntime.InferenceSession(os.fspath(output)).run(None, {"x": x})[0], want,
                               rtol=1e-6)


def test_npz_members_are_read_in_chunks(tmp_path, monkeypatch) -> None:
    from dsl import weights_file

    arrays = {"a": np.arange(1000, dtype=np.float64).reshape(10, 100), "b": np.array([True, False]),
              "empty": np.zeros((0, 3), F32), "f": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))}
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    monkeypatch.setattr(weights_file, "_CHUNK", 7)  # many reads per member, one short at the end
    got = weights_file.read_weights_file(path)
    for name, array in arrays.items():
        np.testing.assert_array_equal(got[name], array)
        assert got[name].dtype == array.dtype


def _if_model_with_branch_weight() -> onnx.ModelProto:
    branch_weight = onnx.numpy_helper.from_array(np.arange(64, dtype=F32), "branch_w")
    then_graph = oh.make_graph([oh.make_node("Add", ["x", "branch_w"], ["t"])], "then", [],
                               [oh.make_tensor_value_info("t", 1, [64])], [branch_weight])
    else_graph = oh.make_graph([oh.make_node("Mul", ["x", "main_w"], ["e"])], "else", [],
                               [oh.make_tensor_value_info("e", 1, [64])])
    graph = oh.make_graph(
        [oh.make_node("If", ["flag"], ["y"], then_branch=then_graph, else_branch=else_graph)], "g",
        [oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("x", 1, [64])],
        [oh.make_tensor_value_info("y", 1, [64])],
        [onnx.numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=F32), "main_w")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("make", [_model, _if_model_with_branch_weight])
def test_streamed_weights_give_an_ordinary_model_file(tmp_path, make) -> None:
    from converter.external_data import StreamedWeights, write_streamed

    streamed = StreamedWeights(threshold=200)
    proto = model_to_proto(model_from_proto(make()), external_data=streamed)
    assert streamed.arrays  # something was taken out of the proto
    path = tmp_path / "streamed.onnx"
    with open(path, "wb") as stream:
        write_streamed(proto, stream, streamed)
    reread = onnx.load(path)  # protobuf itself merges the appended graph fields
    onnx.checker.check_model(reread)
    original = make()
    if make is _model:
        feeds = [{"x": np.random.default_rng(3).standard_normal((2, 64)).astype(F32)}]
    else:  # both branches: the then branch reads the subgraph's own weight
        feeds = [{"flag": np.array(flag), "x": np.ones(64, F32)} for flag in (True, False)]
    for feed in feeds:
        want = onnxruntime.InferenceSession(original.SerializeToString()).run(None, feed)[0]
        got = onnxruntime.InferenceSession(os.fspath(path)).run(None, feed)[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_compile_of_a_model_under_2_gb_writes_one_file(tmp_path) -> None:
    from converter import cli

    source = tmp_path / "model.py"
    converter.write_python(_model(), source, tmp_path / "model.npz", inline_limit=4)
    output = tmp_path / "compiled.onnx"
    assert cli.main(["compile", os.fspath(source), "-o", os.fspath(output)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("compiled")) == ["compiled.onnx"]
    x = np.random.default_rng(4).standard_normal((2, 64)).astype(F32)
    want = onnxruntime.InferenceSession(_model().SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(onnxruntime.InferenceSession(os.fspath(output)).run(None, {"x": x})[0], want,
                               rtol=1e-6)


def test_handed_over_weights_run_in_onnxruntime_without_their_bytes_in_the_proto() -> None:
    from converter.external_data import HandedOverWeights

    handed = HandedOverWeights(threshold=200)  # takes main_w and the then branch's branch_w
    proto = model_to_proto(model_from_proto(_if_model_with_branch_weight()), external_data=handed)
    arrays = handed.finish(proto)
    assert list(arrays) == ["main_w"]  # a subgraph's weight goes back into its proto
    assert not proto.graph.initializer[0].raw_data
    options = onnxruntime.SessionOptions()
    options.add_external_initializers(list(arrays), [onnxruntime.OrtValue.ortvalue_from_numpy(a)
                                                     for a in arrays.values()])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options)
    reference = onnxruntime.InferenceSession(_if_model_with_branch_weight().SerializeToString())
    for flag in (True, False):
        feeds = {"flag": np.array(flag), "x": np.ones(64, F32)}
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-6)
