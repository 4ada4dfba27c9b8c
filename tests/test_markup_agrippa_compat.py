"""Agrippa projects as Agrippa's users have them: editor layout, several files, its weights.

Each test builds a small project the way Agrippa's documentation and editor lay one out
(a ``weights.pkl`` named as Agrippa names parameters, torch tensors from its
``save_torch_model``, ``x``/``y`` layout from its editor, imported files beside the
model) and checks the exported model (full ``onnx.checker``) against numpy.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from dsl.errors import DslError, MarkupError
from dsl.markup import compile_project, export, to_model_proto
from dsl.markup.state import MarkupWarning
from dsl.markup.torch_pickle import TorchPickleError, _rebuild_tensor
from dsl.markup.weights import load_pickled_weights
from tests.helpers import run_model

RNG = np.random.default_rng(15)
F32 = np.float32

HALF = """<model script-version="0.0.1">
    <import dim="[1, var(n)]" from="inp" type="float32" />
    <block title="Half">
        <import from="inp" />
        <node title="Linear" op="MatMul">
            <input src="inp" />
            <params name="W" dim="[var(n), var(n)]" />
            <output name="y" dim="[1, var(n)]" />
        </node>
        <export from="y" />
    </block>
    <export dim="[1, var(n)]" from="y" type="float32" />
</model>
"""

MAIN = """<model script-version="0.0.1">
    <import dim="[1, var(n)]" from="x" type="float32" />
    <block src="half.agr" name="half1">
        <import from="x" />
    </block>
    <block src="half.agr" name="half2">
        <import from="half1$y" />
    </block>
    <block title="Head">
        <import from="half2$y" />
        <node title="Head" op="MatMul">
            <input src="half2$y" />
            <params name="W" dim="[var(n), var(n)]" />
            <output name="out" dim="[1, var(n)]" />
        </node>
        <export from="out" />
    </block>
    <export dim="[1, var(n)]" from="out" type="float32" />
</model>
"""

SINGLE = """<model script-version="0.0.1">
    <import dim="[2, 3]" from="x" type="float32" />
    <block title="B"{block_extra}>
        <import from="x" />
        <node title="Lin" op="MatMul"{node_extra}>
            <input src="x" />
            <params name="W" dim="[3, 4]"{param_extra} />
            <output name="h" dim="{h_dim}" />
        </node>
        <export from="h" />
    </block>
    <export from="h" type="float32" />
</model>
"""


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def _single(tmp_path: Path, block_extra: str = "", node_extra: str = "", param_extra: str = "",
            h_dim: str = "[2, 4]") -> Path:
    text = SINGLE.format(block_extra=block_extra, node_extra=node_extra, param_extra=param_extra, h_dim=h_dim)
    return _write(tmp_path / "single", {"model.agr": text})


# ------------------------------------------------------------- several files, Agrippa's names


def test_the_file_no_other_imports_is_the_model(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN})
    model = to_model_proto(project, bindings={"n": 3}, seed=0)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["x"] and [o.name for o in model.graph.output] == ["out"]


def test_two_files_that_nothing_imports_still_need_an_index(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN, "other.agr": HALF})
    with pytest.raises(MarkupError, match=r"holds 2 architecture files that no other file imports \(main.agr, "):
        to_model_proto(project, bindings={"n": 3})


def test_agrippa_weights_of_imported_files_load_under_agrippas_names(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN})
    # Agrippa numbered W over the whole model without the import prefix: half1, half2, head.
    stored = {f"W${i}": RNG.normal(size=(3, 3)).astype(F32) for i in (1, 2, 3)}
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump(stored, handle)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MarkupWarning)
        model = export(project, tmp_path / "m.onnx", bindings={"n": 3})
    onnx.checker.check_model(model, full_check=True)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sorted(weights) == ["W$1", "half1$W$1", "half2$W$1"]
    np.testing.assert_array_equal(weights["half1$W$1"], stored["W$1"])
    np.testing.assert_array_equal(weights["half2$W$1"], stored["W$2"])
    np.testing.assert_array_equal(weights["W$1"], stored["W$3"])
    x = RNG.normal(size=(1, 3)).astype(F32)
    np.testing.assert_allclose(run_model(model, [x])[0], x @ stored["W$1"] @ stored["W$2"] @ stored["W$3"],
                               rtol=1e-5)


def test_a_missing_weight_is_a_warning_naming_it(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN})
    stored = {f"W${i}": np.eye(3, dtype=F32) for i in (1, 2)}
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump(stored, handle)
    with pytest.warns(MarkupWarning, match=r"1 weight\(s\) are not in weights.pkl .*: W\$1$"):
        compiled = compile_project(project, bindings={"n": 3}, seed=0)
    assert compiled.fresh_weights == ["W$1"]


def test_no_warning_without_a_weights_file(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN})
    with warnings.catch_warnings():
        warnings.simplefilter("error", MarkupWarning)
        compiled = compile_project(project, bindings={"n": 3}, seed=0)
    assert len(compiled.fresh_weights) == 3


# ------------------------------------------------------------- editor layout, lenient


def test_editor_layout_is_ignored_with_a_warning(tmp_path: Path) -> None:
    plain = to_model_proto(_single(tmp_path / "a"), seed=0)
    with pytest.warns(MarkupWarning, match="layout written by Agrippa's editor") as record:
        laid_out = to_model_proto(_single(tmp_path / "b", block_extra=' x="120" y="40"', node_extra=' x="5"'), seed=0)
    assert len(record) == 3
    assert all(str(r.message).startswith(str(tmp_path / "b")) or "model.agr:" in str(r.message) for r in record)
    onnx.checker.check_model(laid_out, full_check=True)
    assert laid_out.graph == plain.graph


def test_unknown_attribute_is_a_warning_unless_strict(tmp_path: Path) -> None:
    project = _single(tmp_path, param_extra=' dims="[3, 4]"')
    with pytest.raises(MarkupError, match="<params> has no attribute 'dims'") as caught:
        to_model_proto(project, seed=0, strict=True)
    assert "did you mean 'dim'" in caught.value.hint and "without strict=True" in caught.value.hint
    for options in ({}, {"lenient": True}):
        with pytest.warns(MarkupWarning, match="has no attribute 'dims'; ignored"):
            model = to_model_proto(project, seed=0, **options)
        onnx.checker.check_model(model, full_check=True)


def test_unknown_node_attribute_under_lenient(tmp_path: Path) -> None:
    project = _single(tmp_path, node_extra=' transA="1"')
    with pytest.raises(DslError, match="MatMul has no attribute 'transA'"):
        to_model_proto(project, seed=0)
    with pytest.warns(MarkupWarning, match="transA"):
        model = to_model_proto(project, seed=0, lenient=True)
    assert not model.graph.node[0].attribute


@pytest.mark.parametrize("where", ["node output", "model output"])
def test_a_contradicted_dim_is_an_error_unless_lenient(tmp_path: Path, where: str) -> None:
    project = _single(tmp_path, h_dim="[2, 7]" if where == "node output" else "[2, 4]")
    if where == "model output":
        text = (project / "model.agr").read_text()
        (project / "model.agr").write_text(text.replace('<export from="h" type="float32" />',
                                                        '<export from="h" type="float32" dim="[2, 7]" />'))
    with pytest.raises(MarkupError, match=r"declared with dim \[2, 7\], but ONNX shape inference gives \[2, 4\]"):
        to_model_proto(project, seed=0)
    with pytest.warns(MarkupWarning, match=r"declared with dim \[2, 7\]"):
        model = to_model_proto(project, seed=0, lenient=True)
    onnx.checker.check_model(model, full_check=True)
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] in ([2, 4], [])
    x = RNG.normal(size=(2, 3)).astype(F32)
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(run_model(model, [x])[0], x @ w, rtol=1e-5)


def test_a_parameter_dim_that_does_not_fit_points_at_the_params_tag(tmp_path: Path) -> None:
    project = _write(tmp_path / "p", {"model.agr": SINGLE.format(block_extra="", node_extra="", param_extra="",
                                                                 h_dim="[2, 4]").replace('dim="[3, 4]"',
                                                                                         'dim="[5, 4]"')})
    with pytest.raises(MarkupError) as caught:
        to_model_proto(project, seed=0)
    error = caught.value
    assert error.location is not None and "<params" in error.location.source_line
    assert "'W$1' has dim [5, 4]" in error.message and "'x' [2, 3]" in error.message


# ------------------------------------------------------------- weights.pkl with torch tensors


def test_rebuilt_tensors_stay_inside_their_storage() -> None:
    storage = np.arange(6, dtype=F32)
    np.testing.assert_array_equal(_rebuild_tensor(storage, 1, (2, 2), (2, 1)), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(_rebuild_tensor(storage, 0, (3, 2), (1, 3)), storage.reshape(2, 3).T)
    for offset, size, stride in ((0, (7,), (1,)), (3, (2, 2), (2, 1)), (0, (2,), (-1,)), (-1, (1,), (1,))):
        with pytest.raises(TorchPickleError):
            _rebuild_tensor(storage, offset, size, stride)


def test_a_pickle_that_names_code_is_refused(tmp_path: Path) -> None:
    class Payload:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            import os

            return (os.system, ("echo pwned",))

    path = tmp_path / "weights.pkl"
    path.write_bytes(pickle.dumps({"W$1": Payload()}))
    with pytest.raises(MarkupError, match=r"refers to (posix|nt)\.system"):
        load_pickled_weights(path)


@pytest.mark.torch
@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_torch_tensors_in_weights_pkl(tmp_path: Path, writer: str) -> None:
    torch = pytest.importorskip("torch", reason="torch is the optional extra that writes these files")
    project = _write(tmp_path / "p", {"half.agr": HALF, "main.agr": MAIN})
    tensors = {f"W${i}": torch.randn(3, 3) for i in (1, 2)}
    tensors["W$3"] = torch.randn(3, 3).t()  # a transposed view: strides that are not row-major
    path = project / "weights.pkl"
    if writer == "pickle":
        with open(path, "wb") as handle:
            pickle.dump(tensors, handle)
    else:
        torch.save({k: torch.nn.Parameter(v) for k, v in tensors.items()}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MarkupWarning)
        model = export(project, tmp_path / "m.onnx", bindings={"n": 3})
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for dsl_name, agrippa_name in (("half1$W$1", "W$1"), ("half2$W$1", "W$2"), ("W$1", "W$3")):
        np.testing.assert_array_equal(weights[dsl_name], tensors[agrippa_name].detach().numpy())


@pytest.mark.torch
def test_torch_bfloat16_and_integer_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is the optional extra that writes these files")
    tensors = {"h": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "k": torch.arange(10)[2:8:2]}
    path = tmp_path / "weights.pkl"
    torch.save(tensors, path)
    got = load_pickled_weights(path)
    assert got["h"].astype(F32).tolist() == [1.5, -2.0] and got["k"].tolist() == [2, 4, 6]


def test_command_line_lenient(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from converter.cli import main

    project = _single(tmp_path, param_extra=' dims="[3, 4]"')
    out = tmp_path / "m.onnx"
    assert main(["export", str(project), "-o", str(out), "--strict"]) != 0
    assert "has no attribute 'dims'" in capsys.readouterr().err and not out.exists()
    for flags in ([], ["--lenient"]):
        with pytest.warns(MarkupWarning, match="'dims'"):
            assert main(["export", str(project), "-o", str(out), *flags]) == 0
        onnx.checker.check_model(str(out), full_check=True)
