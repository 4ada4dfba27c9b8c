"""dsl.file_writing and converter.write_python: files rewritten over their old versions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import converter
from converter.script_module import load_script_function
from dsl.file_writing import overwritten, write_text


def test_shorter_content_over_a_longer_file_leaves_only_the_new_bytes(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"x" * 1000)
    with overwritten(path) as stream:
        stream.write(b"short")
    assert path.read_bytes() == b"short"
    with overwritten(path) as stream:
        stream.write(b"longer than before")
    assert path.read_bytes() == b"longer than before"


def test_missing_files_are_created_and_text_keeps_its_newlines(tmp_path: Path) -> None:
    path = tmp_path / "new.py"
    write_text(path, "a = 1\nb = 'µ'\n")
    assert path.read_bytes() == "a = 1\nb = 'µ'\n".encode()


def _model_with_a_weight() -> onnx.ModelProto:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 8], np.arange(32, dtype=np.float32))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        initializer=[weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_write_python_puts_weights_beside_the_source_and_compiles_back(tmp_path: Path) -> None:
    model = _model_with_a_weight()
    source_path = tmp_path / "affine.py"
    source_path.write_text("# an older, longer file\n" * 500)
    (tmp_path / "affine.npz").write_bytes(b"stale" * 5000)
    source = converter.write_python(model, source_path)
    assert source_path.read_text() == source
    with np.load(tmp_path / "affine.npz") as weights:
        np.testing.assert_array_equal(next(iter(weights.values())), np.arange(32, dtype=np.float32).reshape(4, 8))
    rebuilt = load_script_function(str(source_path)).to_model_proto()
    converter.assert_isomorphic(model, rebuilt)
