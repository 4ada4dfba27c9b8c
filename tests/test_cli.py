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


def test_to_python_output_writes_source_and_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weight = helper.make_tensor("w", onnx.TensorProto.FLOAT, [32], list(range(32)))
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "shift",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [32])],
        initializer=[weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "shift.onnx")
    output = tmp_path / "shift.py"
    for _ in range(2):  # the second run rewrites both files in place
        assert main(["to-python", str(tmp_path / "shift.onnx"), "-o", str(output)]) == 0
        assert capsys.readouterr().out == f"wrote {output} (weights: {tmp_path / 'shift.npz'})\n"
    assert "load_weights(__file__, 'shift.npz')" in output.read_text()
    relu = _relu_model(tmp_path / "relu.onnx")
    assert main(["to-python", relu, "-o", str(output)]) == 0
    assert capsys.readouterr().out == f"wrote {output}\n"  # nothing large: no weights file named
    assert "load_weights" not in output.read_text()


def test_cut_writes_the_part_and_reports_mistakes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
        "chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    part = tmp_path / "part.onnx"
    assert main(["cut", str(model), "--output", "h", "-o", str(part)]) == 0
    assert capsys.readouterr().out == f"wrote {part}: 1 nodes; inputs: x; outputs: h\n"
    onnx.checker.check_model(onnx.load(part), full_check=True)
    assert main(["cut", str(model), "--input", "h", "-o", str(part)]) == 0
    assert [n.op_type for n in onnx.load(part).graph.node] == ["Neg"]
    assert main(["cut", str(model), "--last-layers", "-2", "-o", str(part)]) == 0
    assert [o.name for o in onnx.load(part).graph.output] == ["h"]
    capsys.readouterr()
    assert main(["cut", str(model), "--output", "hh", "-o", str(part)]) == 2
    error = capsys.readouterr().err
    assert "'hh' (did you mean 'h'" in error and "hint:" in error
    assert main(["cut", str(model), "--last-layers", "-3", "-o", str(part)]) == 2
    assert "last_layers=-3 is out of range" in capsys.readouterr().err
