"""The onnxquill command: argument mistakes are DslErrors reported with exit status 2."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

from converter.cli import main


def _relu_model(path: Path) -> str:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


def test_bindings_on_an_onnx_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _relu_model(tmp_path / "relu.onnx")
    assert main(["to-python", model, "--bind", "n=3"]) == 2
    error = capsys.readouterr().err
    assert "--bind sets var(...) in markup" in error and "hint:" in error


def test_to_python_prints_source_that_names_the_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _relu_model(tmp_path / "relu.onnx")
    assert main(["to-python", model]) == 0
    source = capsys.readouterr().out
    assert "op.Relu(" in source and "@script" in source
    compile(source, "relu.py", "exec")


def test_missing_file_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["to-python", str(tmp_path / "absent.onnx")]) == 2
    assert "absent.onnx" in capsys.readouterr().err
