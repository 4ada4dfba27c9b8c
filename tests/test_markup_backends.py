"""Markup goes into the same IR as @script, so every back end reads it: ONNX, eager, Python source.

For a few projects the same inputs go through onnxruntime (the exported file), the
eager evaluator (the IR run node by node) and the Python source written by
``converter.to_python`` compiled again with ``@script``; all three must agree.  The
``onnxquill export`` command is tested here too.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import eager
from converter.cli import main
from dsl import ScriptFunction
from dsl.markup import compile_project, export, to_model
from tests.helpers import run_model

DATA = Path(__file__).parent / "data" / "markup"
RNG = np.random.default_rng(99)

CASES = [
    ("mlp", {"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2}, lambda: [RNG.normal(size=(2, 3)).astype(np.float32)]),
    ("transformer", {"seq": 4, "d_model": 8, "layers": 2}, lambda: [RNG.normal(size=(4, 8)).astype(np.float32)]),
    ("convnet", {"channels": 2, "classes": 3}, lambda: [RNG.normal(size=(1, 1, 8, 8)).astype(np.float32)]),
    ("op_attributes", {}, lambda: [RNG.normal(size=(2, 4)).astype(np.float32)]),
    (
        "dtypes",
        {},
        lambda: [np.array([1, 2, 3], np.int64), np.array([0.5, 1.5, -4.0]), np.array([True, False, True])],
    ),
    ("stretch_in_rep", {"batch": 3, "n": 4}, lambda: [RNG.normal(size=(3, 4)).astype(np.float32)]),
]


def _load_script(path: Path) -> ScriptFunction:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = [v for v in vars(module).values() if isinstance(v, ScriptFunction)]
    assert found, "the generated source defines no @script function"
    return found[-1]


@pytest.mark.parametrize(("name", "bindings", "make_inputs"), CASES, ids=[c[0] for c in CASES])
def test_onnx_eager_and_python_source_agree(tmp_path: Path, name: str, bindings: dict[str, Any], make_inputs) -> None:
    import converter

    project = tmp_path / name
    shutil.copytree(DATA / name, project)
    exported = export(project, tmp_path / "m.onnx", bindings=bindings, seed=3, suppress=True)
    inputs = make_inputs()
    expected = run_model(exported, inputs)

    model_ir = to_model(project, bindings=bindings)  # reads the weights the export wrote
    for got, want in zip(eager.run(model_ir, inputs), expected):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)

    source_path = tmp_path / f"{name}_model.py"
    source_path.write_text(converter.to_python(model_ir, tmp_path / f"{name}_weights.npz", source_path=source_path))
    rebuilt = _load_script(source_path).to_model_proto()
    onnx.checker.check_model(rebuilt, full_check=True)
    for got, want in zip(run_model(rebuilt, inputs), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ir_is_what_the_onnx_file_holds(tmp_path: Path) -> None:
    project = tmp_path / "transformer"
    shutil.copytree(DATA / "transformer", project)
    bindings = {"seq": 4, "d_model": 8, "layers": 2}
    exported = export(project, tmp_path / "m.onnx", bindings=bindings, seed=3, suppress=True)
    compiled = compile_project(project, bindings=bindings)
    graph = compiled.model.graph
    assert [n.op_type for n in graph.nodes] == [n.op_type for n in exported.graph.node]
    assert [n.name for n in graph.nodes] == [n.name for n in exported.graph.node]
    assert {v.name for v in graph.initializers} == {i.name for i in exported.graph.initializer}
    assert compiled.fresh_weights == []  # everything came from weights.npz


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "mlp"
    shutil.copytree(DATA / "mlp", project)
    out = tmp_path / "cli.onnx"
    status = main(
        ["export", str(project), "-o", str(out), "--bind", "batch=2", "--bind", "n_in=3",
         "--bind", "hidden=4", "--bind", "n_out=1", "--seed", "5", "--producer", "cli-test"]
    )
    assert status == 0
    model = onnx.load(str(out))
    assert model.producer_name == "cli-test"
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [2, 1]
    assert "initialised 4 weights afresh" in capsys.readouterr().err
    with np.load(project / "weights.npz") as archive:
        w = {k: archive[k] for k in archive.files if k != "__dtypes__"}
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    expected = np.maximum(x @ w["W1$1"] + w["b1$1"], 0) @ w["W2$1"] + w["b2$1"]
    np.testing.assert_allclose(run_model(model, [x])[0], expected, rtol=1e-5, atol=1e-6)


def test_cli_export_reports_markup_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "mlp"
    shutil.copytree(DATA / "mlp", project)
    status = main(["export", str(project), "-o", str(tmp_path / "x.onnx"), "--bind", "batch=2"])
    assert status == 2
    err = capsys.readouterr().err
    assert "mlp.agr:3:" in err and "undefined variable 'n_in'" in err and "^^^^" in err
    assert main(["export", str(project), "--bind", "oops"]) == 2
    assert "is not NAME=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "x.onnx").exists()


def test_cli_to_python_reads_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "mlp"
    shutil.copytree(DATA / "mlp", project)
    binds = ["--bind", "batch=2", "--bind", "n_in=3", "--bind", "hidden=4", "--bind", "n_out=2"]
    assert main(["export", str(project), "-o", str(tmp_path / "m.onnx"), "--seed", "1", "--quiet", *binds]) == 0
    source = tmp_path / "mlp_model.py"
    assert main(["to-python", str(project / "mlp.agr"), "-o", str(source), *binds]) == 0
    rebuilt = _load_script(source).to_model_proto()
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    expected = run_model(onnx.load(str(tmp_path / "m.onnx")), [x])
    np.testing.assert_allclose(run_model(rebuilt, [x])[0], expected[0], rtol=1e-5, atol=1e-6)
    capsys.readouterr()
    # A project directory works too, and printing to stdout.
    assert main(["to-python", str(project), *binds]) == 0
    assert "@script" in capsys.readouterr().out
    assert main(["to-python", str(project), "--bind", "batch=2"]) == 2
    assert "undefined variable 'n_in'" in capsys.readouterr().err
