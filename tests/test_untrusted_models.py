"""Hostile ONNX models: no outside file read or written, no Opset method called, no
global state changed, no unbounded loop, and every damage a DslError with a hint.

Each test builds the model in a temporary folder and runs ``load_model``, ``to_python``,
the compiler, ``eager.run`` or the command line on it in a child process under memory
and time limits (:mod:`tests.untrusted_run`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.untrusted_run import assert_refused, run_limited

SECRET = b"SECRET-5c1e-do-not-show"


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def _relu_model(initializer: TensorProto | None = None, op_type: str = "Relu") -> onnx.ModelProto:
    """y = op(x) [+ w]: a one- or two-node model over float[2]."""
    nodes = [helper.make_node(op_type, ["x"], ["r"])]
    if initializer is not None:
        nodes.append(helper.make_node("Add", ["r", initializer.name], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[initializer] if initializer is not None else [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _external(location: str, length: int) -> TensorProto:
    tensor = TensorProto(name="w", data_type=TensorProto.UINT8, dims=[length])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        tensor.external_data.add(key=key, value=value)
    return tensor


def _external_model(location: str, length: int) -> onnx.ModelProto:
    """out = Cast(w) where w is uint8 data in an external file."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["out"])], "g", [],
        [helper.make_tensor_value_info("out", TensorProto.UINT8, [length])], initializer=[_external(location, length)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


X = "np.array([1.0, -2.0], np.float32)"
_IMPORTS = "import numpy as np, onnx, converter, eager\nfrom converter.script_module import load_script_function\n"


# ----------------------------------------------------------------- op_type -> Opset method


def test_an_op_type_naming_an_opset_method_changes_no_global_state(tmp_path: Path) -> None:
    init = helper.make_node("__init__", [], ["r"])
    init.attribute.extend([helper.make_attribute("domain", "evil.domain"), helper.make_attribute("version", 1)])
    graph = helper.make_graph([init], "g", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    standard = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8),
                     tmp_path / "init.onnx")
    describe = helper.make_node("describe", ["x"], ["r"], domain="com.example")
    graph = helper.make_graph([describe], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    custom = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                           helper.make_opsetid("com.example", 1)], ir_version=8),
                   tmp_path / "describe.onnx")
    source = tmp_path / "init.py"  # what to_python wrote for such a model before it refused it
    source.write_text(
        "from dsl import FLOAT, script\nfrom dsl import opset18 as op\n\n\n@script()\ndef main() -> FLOAT[...]:\n"
        "    r = op.__init__(domain='evil.domain', version=1)\n    return r\n", encoding="utf-8")
    code = _IMPORTS + f"""
import dsl
attempt("to_python", lambda: converter.to_python({str(standard)!r}))
attempt("compile", lambda: load_script_function({str(source)!r}).to_model_proto())
attempt("custom domain", lambda: converter.to_python({str(custom)!r}))
attempt("state", lambda: (dsl.opset18.domain, dsl.opset18.version, dsl.Opset("", 18) == dsl.opset18))
"""
    results = run_limited(code, tmp_path)
    assert_refused(results["to_python"], "ConversionError")
    assert_refused(results["compile"], "UnknownOpError")
    assert_refused(results["custom domain"], "ConversionError")
    assert results["state"]["value"] == "('', 18, True)"


# ----------------------------------------------------------------- external data


def test_external_data_is_read_only_from_the_models_folder(tmp_path: Path) -> None:
    working = tmp_path / "working"
    working.mkdir()
    (working / "notes.txt").write_bytes(SECRET)  # what the working directory holds
    (tmp_path / "secret.bin").write_bytes(SECRET)
    model = _save(_external_model("notes.txt", len(SECRET)), tmp_path / "model" / "model.onnx")
    escaping = _save(_external_model("../secret.bin", len(SECRET)), tmp_path / "escaping" / "model.onnx")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "data.bin").symlink_to(tmp_path / "secret.bin")
    linked = _save(_external_model("data.bin", len(SECRET)), tmp_path / "linked" / "model.onnx")
    code = _IMPORTS + f"""
bare = onnx.load({str(model)!r}, load_external_data=False)
attempt("load_model", lambda: converter.load_model({str(model)!r}, load_external_data=False))
attempt("to_python", lambda: converter.to_python(bare))
attempt("eager", lambda: eager.run(bare))
attempt("escaping", lambda: converter.load_model({str(escaping)!r}, load_external_data=False))
attempt("escaping loaded", lambda: converter.load_model({str(escaping)!r}))
attempt("escaping eager", lambda: eager.run({str(escaping)!r}))
attempt("symlink", lambda: converter.load_model({str(linked)!r}, load_external_data=False))
"""
    results = run_limited(code, working)
    secret = SECRET.decode()
    assert_refused(results["load_model"], "ModelLoadError", not_shown=(secret,))
    assert_refused(results["to_python"], "ModelLoadError", not_shown=(secret,))
    assert_refused(results["eager"], "ModelLoadError", not_shown=(secret,))
    assert_refused(results["escaping"], "UnsafePathError", not_shown=(secret,))
    assert_refused(results["escaping loaded"], "UnsafePathError", not_shown=(secret,))
    assert_refused(results["escaping eager"], "ModelLoadError", not_shown=(secret,))
    assert_refused(results["symlink"], "UnsafePathError", not_shown=(secret,))


def test_external_data_beside_the_model_is_read_from_there(tmp_path: Path) -> None:
    model = _save(_external_model("weights.bin", 4), tmp_path / "model" / "model.onnx")
    (tmp_path / "model" / "weights.bin").write_bytes(bytes([1, 2, 3, 4]))
    (tmp_path / "weights.bin").write_bytes(bytes([9, 9, 9, 9]))  # the working directory's must not be used
    code = _IMPORTS + f"""
model = converter.load_model({str(model)!r}, load_external_data=False)
attempt("values", lambda: model.graph.initializers[0].initializer.array.tolist())
"""
    assert run_limited(code, tmp_path)["values"]["value"] == "[1, 2, 3, 4]"


# ----------------------------------------------------------------- writes


def test_to_python_does_not_write_through_planted_links(tmp_path: Path) -> None:
    weights = numpy_helper.from_array(np.arange(2000, dtype=np.float32)[:2].copy(), "w")
    big = helper.make_tensor("big", TensorProto.FLOAT, [500], np.ones(500, np.float32))
    model = _relu_model(weights)
    model.graph.initializer.append(big)
    model.graph.node.append(helper.make_node("ReduceSum", ["big"], ["s"]))
    model.graph.output.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    path = _save(model, tmp_path / "model.onnx")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("untouched")
    (tmp_path / "source.py").symlink_to(victim)
    (tmp_path / "other.npz").symlink_to(outside / "created.npz")  # dangling: would create it
    code = _IMPORTS + f"""
from converter.cli import main
attempt("source", lambda: converter.write_python({str(path)!r}, {str(tmp_path / "source.py")!r}))
attempt("weights", lambda: converter.write_python({str(path)!r}, {str(tmp_path / "other.py")!r}, inline_limit=0))
attempt("cli", lambda: main(["to-python", {str(path)!r}, "-o", {str(tmp_path / "source.py")!r}]))
"""
    results = run_limited(code, tmp_path)
    assert_refused(results["source"], "UnsafePathError")
    assert_refused(results["weights"], "UnsafePathError")
    assert results["cli"]["value"] == "2"
    assert victim.read_text() == "untouched"
    assert not (outside / "created.npz").exists()


# ----------------------------------------------------------------- damaged tensors and names


def _bad_tensor(kind: str) -> TensorProto:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT)
    if kind == "negative dim":
        tensor.dims.extend([-2])
    elif kind == "65 dims":
        tensor.dims.extend([1] * 65)
        tensor.raw_data = b"\0\0\0\0"
        return tensor
    elif kind == "overflowing count":
        tensor.dims.extend([2**40, 2**40, 2**40])
    elif kind == "data too short":
        tensor.dims.extend([2])
    tensor.raw_data = b"\0\0\0\0"
    return tensor


def test_damaged_initializers_are_model_load_errors_everywhere(tmp_path: Path) -> None:
    kinds = ["negative dim", "65 dims", "overflowing count", "data too short"]
    lines = [_IMPORTS]
    for index, kind in enumerate(kinds):
        path = _save(_relu_model(_bad_tensor(kind)), tmp_path / f"{index}.onnx")
        lines.append(f"attempt({kind + ' load'!r}, lambda: converter.to_python(converter.load_model({str(path)!r})))")
        lines.append(f"attempt({kind + ' proto'!r}, lambda: converter.to_python(onnx.load({str(path)!r})))")
        lines.append(f"attempt({kind + ' eager'!r}, lambda: eager.run({str(path)!r}, [{X}]))")
    results = run_limited("\n".join(lines), tmp_path)
    for kind in kinds:
        for how in ("load", "proto", "eager"):
            assert_refused(results[f"{kind} {how}"], "ModelLoadError")


def test_names_that_are_not_utf8_are_a_model_load_error_in_eager_run(tmp_path: Path) -> None:
    payload = _relu_model(op_type="Relu").SerializeToString()
    damaged = tmp_path / "damaged.onnx"
    damaged.write_bytes(payload.replace(b"Relu", b"\xff\xfe\xfd\xfc", 1))
    code = _IMPORTS + f"attempt('eager', lambda: eager.run({str(damaged)!r}, [{X}]))\n"
    code += f"attempt('to_python', lambda: converter.to_python({str(damaged)!r}))\n"
    results = run_limited(code, tmp_path)
    assert_refused(results["eager"], "ModelLoadError")
    assert_refused(results["to_python"], "ModelLoadError")


# ----------------------------------------------------------------- eager Loop


def _loop_model(trip_count: int | None) -> onnx.ModelProto:
    """v counts the iterations of a Loop that runs while true (and ``trip_count`` times if given)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.INT64, [])],
    )
    initializers = [numpy_helper.from_array(np.array(True), "true"), numpy_helper.from_array(np.array(0, np.int64), "zero"),
                    numpy_helper.from_array(np.array(1, np.int64), "one")]
    if trip_count is not None:
        initializers.append(numpy_helper.from_array(np.array(trip_count, np.int64), "trip"))
    loop = helper.make_node("Loop", ["trip" if trip_count is not None else "", "true", "zero"], ["v"], body=body)
    graph = helper.make_graph([loop], "g", [], [helper.make_tensor_value_info("v", TensorProto.INT64, [])],
                              initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def test_eager_loops_are_bounded(tmp_path: Path) -> None:
    huge = _save(_loop_model(2**62), tmp_path / "huge.onnx")
    endless = _save(_loop_model(None), tmp_path / "endless.onnx")
    fifty = _save(_loop_model(50), tmp_path / "fifty.onnx")
    code = _IMPORTS + f"""
import dsl
attempt("huge", lambda: eager.run({str(huge)!r}))
attempt("endless", lambda: eager.run({str(endless)!r}))
attempt("fifty", lambda: eager.run({str(fifty)!r}))
with dsl.raised_limits(loop_iterations=50):
    attempt("raised", lambda: int(eager.run({str(fifty)!r})[0]))
"""
    results = run_limited(code, tmp_path, {"ONNXQUILL_LOOP_ITERATIONS": "40"}, timeout=60)
    assert_refused(results["huge"], "LimitExceededError")
    assert "ONNXQUILL_LOOP_ITERATIONS" in results["huge"]["hint"]
    assert_refused(results["endless"], "LimitExceededError")
    assert_refused(results["fifty"], "LimitExceededError")
    assert results["raised"]["value"] == "50"
