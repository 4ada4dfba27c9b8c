"""Every project in tests/data/markup exported, run in onnxruntime, compared with numpy.

Each test copies its project to a temporary directory (export writes weights.npz into
the project), exports it, then computes the expected outputs in numpy from the weights
the export wrote, so the oracle and the model share parameters but nothing else.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from dsl.markup import compile_project, export
from tests.helpers import run_model

DATA = Path(__file__).parent / "data" / "markup"
RNG = np.random.default_rng(1234)


def _project(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target)
    return target


def _export(tmp_path: Path, name: str, bindings: dict[str, Any] | None = None, **options: Any):
    project = _project(tmp_path, name)
    model = export(project, tmp_path / f"{name}.onnx", bindings=bindings, seed=7, suppress=True, **options)
    saved = onnx.load(str(tmp_path / f"{name}.onnx"))
    assert saved.SerializeToString() == model.SerializeToString()
    onnx.checker.check_model(saved, full_check=True)
    with np.load(project / "weights.npz", allow_pickle=False) as archive:
        weights = {key: archive[key] for key in archive.files}
    assert str(weights.pop("__dtypes__")) == "{}"  # no ml_dtypes arrays in these projects
    return model, weights, project


def _close(got: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _leaky(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, alpha * x).astype(x.dtype)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: np.ndarray) -> np.ndarray:
    centered = x - x.mean(-1, keepdims=True)
    variance = (centered * centered).mean(-1, keepdims=True)
    return centered / np.sqrt(variance + eps) * gamma + beta


def test_mlp(tmp_path: Path) -> None:
    bindings = {"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2}
    model, w, _ = _export(tmp_path, "mlp", bindings)
    assert sorted(w) == ["W1$1", "W2$1", "b1$1", "b2$1"]
    assert w["b2$1"].min() >= -0.5 and w["b2$1"].max() <= 0.5
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    expected = _relu(x @ w["W1$1"] + w["b1$1"]) @ w["W2$1"] + w["b2$1"]
    _close(run_model(model, [x])[0], expected)


@pytest.mark.parametrize("layers", [1, 4])
def test_repeated_ffn(tmp_path: Path, layers: int) -> None:
    model, w, _ = _export(tmp_path, "ffn_rep", {"n": 3, "layers": layers})
    assert sorted(w) == sorted([f"W${k}" for k in range(1, layers + 1)] + [f"B${k}" for k in range(1, layers + 1)])
    x = np.abs(RNG.normal(size=(3, 1))).astype(np.float32)
    h = x
    for k in range(1, layers + 1):
        h = _relu(w[f"W${k}"] @ h + w[f"B${k}"])
    expected = h / np.abs(h).sum(axis=0, keepdims=True)
    _close(run_model(model, [x])[0], expected)
    # The copies are named as Agrippa names them: relu, relu$1, relu$2, ...
    names = [node.output[0] for node in model.graph.node if node.op_type == "Relu"]
    assert names == ["relu"] + [f"relu${k}" for k in range(1, layers)]
    assert [node.name for node in model.graph.node][:3] == ["Linear$1", "Bias$1", "ReLu$1"]


def test_transformer_with_bindings(tmp_path: Path) -> None:
    seq, d_model, layers = 4, 8, 2
    model, w, _ = _export(tmp_path, "transformer", {"seq": seq, "d_model": d_model, "layers": layers})
    assert w["scale$constant"].shape == ()
    assert np.isclose(w["scale$constant"], np.sqrt(d_model))
    assert "ln1$eps$constant" in w and "ln2$eps$constant" in w
    x = RNG.normal(size=(seq, d_model)).astype(np.float32)
    h = x
    for k in range(1, layers + 1):
        q, kk, v = h @ w[f"Wq${k}"], h @ w[f"Wk${k}"], h @ w[f"Wv${k}"]
        attn = _softmax((q @ kk.T) / w["scale$constant"], -1)
        res1 = h + (attn @ v) @ w[f"Wo${k}"]
        ln1 = _layer_norm(res1, w[f"ln1$gamma${k}"], w[f"ln1$beta${k}"], w["ln1$eps$constant"])
        ff = _relu(ln1 @ w[f"Wf1${k}"]) @ w[f"Wf2${k}"]
        h = _layer_norm(ln1 + ff, w[f"ln2$gamma${k}"], w[f"ln2$beta${k}"], w["ln2$eps$constant"])
    _close(run_model(model, [x])[0], h.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_imported_files(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "imported", {"n": 3})
    assert sorted(w) == ["first$W$1", "second$W$1"]
    x = RNG.normal(size=(1, 3)).astype(np.float32)
    h = _leaky(x @ w["first$W$1"], 0.1)
    expected = _leaky(h @ w["second$W$1"], 0.1)
    _close(run_model(model, [x])[0], expected)
    assert model.graph.output[0].name == "second$act$out"


def _conv2d(image: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    padded = np.pad(image, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, kernel.shape[0], 8, 8), dtype=np.float32)
    for c in range(kernel.shape[0]):
        for i in range(8):
            for j in range(8):
                out[0, c, i, j] = np.sum(padded[0, :, i : i + 3, j : j + 3] * kernel[c]) + bias[c]
    return out


def test_conv_net(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "convnet", {"channels": 4, "classes": 10})
    image = RNG.normal(size=(1, 1, 8, 8)).astype(np.float32)
    act = _relu(_conv2d(image, w["kernel$1"], w["conv_bias$1"]))
    pooled = act.reshape(1, 4, 4, 2, 4, 2).max(axis=(3, 5))
    expected = pooled.reshape(1, 64) @ w["dense$1"].T + w["dense_bias$1"]
    _close(run_model(model, [image])[0], expected, rtol=1e-4, atol=1e-4)


def test_frozen_and_shared(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "frozen_shared", {"n": 3})
    assert sorted(w) == ["W", "b$1", "b$2", "b$3", "s$constant$1", "s$constant$2", "s$constant$3"]
    assert [i.name for i in model.graph.initializer].count("W") == 1
    # The model output is named as written; the copy that held the name takes the last mangled one.
    assert model.graph.output[0].name == "next"
    assert [n.output[0] for n in model.graph.node if n.op_type == "Mul"] == ["next$2", "next$1", "next"]
    compiled = compile_project(tmp_path / "frozen_shared", bindings={"n": 3})
    assert compiled.frozen == {"s$constant$1", "s$constant$2", "s$constant$3"}
    h = RNG.normal(size=(2, 3)).astype(np.float32)
    expected = h
    for k in range(1, 4):
        expected = np.tanh(expected @ w["W"] + w[f"b${k}"]) * w[f"s$constant${k}"]
    _close(run_model(model, [h])[0], expected)


def test_every_init_kind(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "init_kinds")
    outputs = dict(zip([o.name for o in model.graph.output], run_model(model, [])))
    for name in ("xavier", "normal", "uniform", "zeros", "ones", "constant", "vector"):
        _close(outputs[name], w[f"p_{name}$1"])
    assert np.all(outputs["zeros"] == 0)
    assert outputs["ones"].dtype == np.int64 and np.all(outputs["ones"] == 1)
    assert outputs["constant"].dtype == np.float64 and np.all(outputs["constant"] == 2.5)
    assert outputs["uniform"].min() >= -0.2 and outputs["uniform"].max() < 0.3
    assert abs(outputs["uniform"].mean() - 0.05) < 0.01
    assert abs(outputs["normal"].mean() - 3.0) < 0.02 and abs(outputs["normal"].std() - 0.5) < 0.02
    assert abs(outputs["xavier"].std() - np.sqrt(2 / 400)) < 0.005
    assert abs(outputs["vector"].std() - np.sqrt(1 / 400)) < 0.01


def test_stretch(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "stretch", {"n": 3, "h": 2})
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    expected = np.concatenate([_relu(x @ w[f"W${k}"]) for k in (1, 2, 3)], axis=-1)
    _close(run_model(model, [x])[0], expected)
    concat = [n for n in model.graph.node if n.op_type == "Concat"]
    assert len(concat) == 1 and concat[0].attribute[0].i == -1


def test_expressions(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "expressions", {"n": 3, "m": 4})
    assert w["W$1"].shape == (7, 3)  # n*2+1, (m-1)^2//3
    assert w["c$constant$1"].tolist() == [2.0]  # -2^2 + 10 % 4 * 3
    leak = next(n for n in model.graph.node if n.op_type == "LeakyRelu")
    assert np.isclose(leak.attribute[0].f, 0.1)
    x = RNG.normal(size=(1, 7)).astype(np.float32)
    _close(run_model(model, [x])[0], _leaky(x @ w["W$1"], 0.1) + 2.0)


def test_element_types(tmp_path: Path) -> None:
    model, _w, _ = _export(tmp_path, "dtypes")
    a = np.array([1, 2, 3], dtype=np.int64)
    b = np.array([0.5, 1.5, -4.0], dtype=np.float64)
    flag = np.array([True, True, False])
    chosen, incremented, mask, half = run_model(model, [a, b, flag])
    total = a.astype(np.float64) + b
    expected_mask = (total > 2.5) & flag
    _close(mask, expected_mask)
    _close(chosen, np.where(expected_mask, total, b))
    _close(incremented, a + 1)
    _close(half, np.where(expected_mask, total, b).astype(np.float16))


def test_agrippa_weights_pickle(tmp_path: Path) -> None:
    project = _project(tmp_path, "agrippa_pickle")
    stored = {"W$1": RNG.normal(size=(3, 3)), "B$1": RNG.normal(size=(3, 1))}  # float64, as Agrippa wrote them
    with open(project / "weights.pkl", "wb") as handle:
        pickle.dump(stored, handle)
    model = export(project, tmp_path / "m.onnx", suppress=True)
    x = RNG.normal(size=(3, 1)).astype(np.float32)
    expected = stored["W$1"].astype(np.float32) @ x + stored["B$1"].astype(np.float32)
    _close(run_model(model, [x])[0], expected)
    with np.load(project / "weights.npz") as archive:  # the safe format is written next to it
        np.testing.assert_array_equal(archive["W$1"], stored["W$1"].astype(np.float32))


def test_stretch_inside_repetition(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "stretch_in_rep", {"batch": 2, "n": 4})
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    h = x
    for first in (1, 3):
        h = h + np.concatenate([h @ w[f"W${first}"], h @ w[f"W${first + 1}"]], axis=-1)
    _close(run_model(model, [x])[0], h)


def test_multi_head_attention_by_stretch(tmp_path: Path) -> None:
    seq, d_model, heads = 5, 8, 2
    model, w, _ = _export(tmp_path, "mha_stretch", {"seq": seq, "d_model": d_model, "heads": heads})
    x = RNG.normal(size=(seq, d_model)).astype(np.float32)
    contexts = []
    for k in range(1, heads + 1):
        q, kk, v = x @ w[f"Wq${k}"], x @ w[f"Wk${k}"], x @ w[f"Wv${k}"]
        contexts.append(_softmax(q @ kk.T * w["inv_sqrt$constant"], -1) @ v)
    assert np.isclose(w["inv_sqrt$constant"], (d_model // heads) ** -0.5)
    expected = np.concatenate(contexts, axis=-1) @ w["Wo$1"]
    _close(run_model(model, [x])[0], expected, rtol=1e-4, atol=1e-5)


def test_op_attributes(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "op_attributes")
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    capped, stacked = run_model(model, [x])
    g = 0.5 * (x @ w["B$1"]) + 2.0 * w["C$1"]
    _close(capped, np.minimum(_softmax(g, 0), w["cap$constant$1"]))
    expected = np.concatenate([x[:, :2] * np.array([[1.0, 2.0]], np.float32), _leaky(x[:, 2:], 0.2)], axis=0)
    _close(stacked, expected)
    clip = next(n for n in model.graph.node if n.op_type == "Clip")
    assert list(clip.input)[1] == ""


def test_opset18_and_int_params(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "opset18_params")
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 18)}
    assert w["axes$constant$1"].dtype == np.int64
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    mean, diff = run_model(model, [x])
    _close(mean, x.mean(-1))
    _close(diff, x[:, :2] - x[:, 2:])


def test_meta_json(tmp_path: Path) -> None:
    model, _, _ = _export(tmp_path, "meta")
    assert model.producer_name == "markup-tests"
    assert model.graph.name == "negation"
    x = np.array([1.0, -2.0], np.float32)
    _close(run_model(model, [x])[0], -x)
    explicit = export(tmp_path / "meta", tmp_path / "x.onnx", producer="me", graph_name="g", suppress=True)
    assert (explicit.producer_name, explicit.graph.name) == ("me", "g")


@pytest.mark.parametrize("batch", [1, 5])
def test_symbolic_batch(tmp_path: Path, batch: int) -> None:
    model, w, _ = _export(tmp_path, "symbolic")
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x = RNG.normal(size=(batch, 4)).astype(np.float32)
    _close(run_model(model, [x])[0], (x * w["w$1"]).sum(1))


def test_export_is_reproducible_from_written_weights(tmp_path: Path) -> None:
    first, _w, project = _export(tmp_path, "mlp", {"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2})
    again = export(project, tmp_path / "again.onnx", bindings={"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2},
                   seed=99, suppress=True)
    assert {i.name: i.raw_data for i in again.graph.initializer} == {i.name: i.raw_data for i in first.graph.initializer}
    fresh = export(project, tmp_path / "fresh.onnx", bindings={"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2},
                   seed=99, suppress=True, reinit=True)
    assert {i.name: i.raw_data for i in fresh.graph.initializer} != {i.name: i.raw_data for i in first.graph.initializer}


def test_default_outfile_and_no_weights(tmp_path: Path) -> None:
    project = _project(tmp_path, "meta")
    export(project, write_weights=False, suppress=True)
    assert (tmp_path / "meta.onnx").is_file()
    assert not (project / "weights.npz").exists()
    export(project / "model.agr", write_weights=False, suppress=True)
    assert (project / "model.onnx").is_file()


def test_every_ir_object_has_a_location(tmp_path: Path) -> None:
    compiled = compile_project(DATA / "transformer", bindings={"seq": 4, "d_model": 8, "layers": 2}, seed=0)
    graph = compiled.model.graph
    for node in graph.nodes:
        assert node.location is not None and node.location.file.endswith(".agr")
        assert node.location.source_line.strip().startswith("<node")
        for value in node.outputs:
            assert value.location is not None
    assert all(v.location is not None for v in graph.initializers + graph.inputs)
    norm = next(n for n in graph.nodes if n.name == "ln2$Mean$2")
    assert norm.location.file.endswith("layer_norm.agr") and norm.location.line == 6


def test_repeated_import(tmp_path: Path) -> None:
    model, w, _ = _export(tmp_path, "rep_import", {"n": 3})
    assert sorted(w) == ["res$W$1", "res$W$2", "res$W$3"]
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    h = x
    for k in (1, 2, 3):
        h = h + 1 / (1 + np.exp(-(h @ w[f"res$W${k}"])))
    _close(run_model(model, [x])[0], h)


def test_ml_domain(tmp_path: Path) -> None:
    model, _, _ = _export(tmp_path, "ml_domain")
    assert {o.domain for o in model.opset_import} == {"", "ai.onnx.ml"}
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    _close(run_model(model, [x])[0], x / np.abs(x).sum(axis=1, keepdims=True))


def test_custom_domain_takes_any_attribute(tmp_path: Path) -> None:
    (tmp_path / "m.agr").write_text(
        '<model script-version="0.0.1">\n'
        '  <import dim="[2, 3]" from="x" type="float32" />\n'
        '  <block title="B"><import from="x" />\n'
        '    <node title="C" op="FancyOp" domain="com.example" gain="2.5" mode="fast" sizes="[1, 2]">\n'
        '      <input src="x" /><output name="y" />\n'
        "    </node>\n"
        "  </block>\n"
        '  <export dim="[2, 3]" from="y" />\n'
        "</model>\n"
    )
    model = export(tmp_path, tmp_path / "out.onnx", suppress=True)
    node = model.graph.node[0]
    assert (node.domain, node.op_type) == ("com.example", "FancyOp")
    values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert values == {"gain": 2.5, "mode": b"fast", "sizes": [1, 2]}
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_frozen_constant_follows_the_markup_not_the_weights_file(tmp_path: Path) -> None:
    _, w, project = _export(tmp_path, "frozen_shared", {"n": 3})
    architecture = project / "model.agr"
    architecture.write_text(architecture.read_text().replace('init_args="[0.5]"', 'init_args="[0.25]"'))
    again = export(project, tmp_path / "again.onnx", bindings={"n": 3}, suppress=True)
    values = {i.name: onnx.numpy_helper.to_array(i) for i in again.graph.initializer}
    assert values["s$constant$1"].tolist() == [0.25]
    np.testing.assert_array_equal(values["W"], w["W"])  # trained-style weights still come from the file
    np.testing.assert_array_equal(values["b$2"], w["b$2"])


def test_ml_dtypes_weights_round_trip(tmp_path: Path) -> None:
    (tmp_path / "m.agr").write_text(
        '<model script-version="0.0.1">\n'
        '  <block title="B">\n'
        '    <node title="P" op="Identity"><params name="p" dim="[3]" type="bfloat16" /><output name="y" /></node>\n'
        '    <node title="Q" op="Identity"><params name="q" dim="[2]" type="bfloat16" init="constant" init_args="[1.5]" />\n'
        '      <output name="z" /></node>\n'
        "  </block>\n"
        '  <export dim="[3]" from="y" type="bfloat16" />\n'
        '  <export dim="[2]" from="z" type="bfloat16" />\n'
        "</model>\n"
    )
    first = export(tmp_path, tmp_path / "a.onnx", seed=1, suppress=True)
    with np.load(tmp_path / "weights.npz", allow_pickle=False) as archive:
        assert archive["p$1"].dtype == np.uint16  # raw bits, with the type recorded beside them
        assert "bfloat16" in str(archive["__dtypes__"])
    second = export(tmp_path, tmp_path / "b.onnx", seed=2, suppress=True)
    assert [i.raw_data for i in first.graph.initializer] == [i.raw_data for i in second.graph.initializer]
    q = onnx.numpy_helper.to_array(next(i for i in second.graph.initializer if i.name == "q$1"))
    assert q.astype(np.float32).tolist() == [1.5, 1.5]


def test_weights_named_like_savez_parameters(tmp_path: Path) -> None:
    # np.savez(file, *args, allow_pickle=..., **arrays) would take these two names for its own
    # parameters: a TypeError for "file", and "allow_pickle" silently dropped from the archive.
    (tmp_path / "m.agr").write_text(
        '<model script-version="0.0.1">\n'
        '  <block title="B">\n'
        '    <node title="P" op="Add"><params name="file" dim="[3]" shared="yes" />'
        '<params name="allow_pickle" dim="[3]" shared="yes" /><output name="y" /></node>\n'
        "  </block>\n"
        '  <export dim="[3]" from="y" />\n'
        "</model>\n"
    )
    first = export(tmp_path, tmp_path / "a.onnx", seed=1, suppress=True)
    with np.load(tmp_path / "weights.npz", allow_pickle=False) as archive:
        stored = {key: archive[key] for key in archive.files}
    written = {i.name: onnx.numpy_helper.to_array(i) for i in first.graph.initializer}
    assert set(written) == {"file", "allow_pickle"}
    for name, array in written.items():
        np.testing.assert_array_equal(stored[name], array)
    again = export(tmp_path, tmp_path / "b.onnx", seed=2, suppress=True)  # read back, not drawn anew
    assert [i.raw_data for i in again.graph.initializer] == [i.raw_data for i in first.graph.initializer]
