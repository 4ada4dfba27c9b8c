"""eager.run: whole models and functions, with every value captured.

Oracles: the same model run whole in onnxruntime, numpy, and the expected outputs
stored with the ONNX backend test models (onnx/backend/test/data).
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import onnxruntime
import pytest

import eager
from dsl import FLOAT, EagerError, ModelLoadError, script
from dsl import opset18 as op
from dsl.errors import DslTypeError
from tests.runtime_probes import onnxruntime_refusals, onnxruntime_verdict

F32 = np.float32
TF = onnx.TensorProto.FLOAT


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def make_model(nodes, inputs, outputs, initializers=(), opset=18, functions=()):
    graph = oh.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset), oh.make_opsetid("local", 1)],
                         functions=list(functions), ir_version=10)


def test_capture_every_intermediate_value() -> None:
    model = make_model(
        [
            oh.make_node("MatMul", ["x", "w"], ["xw"]),
            oh.make_node("Add", ["xw", "b"], ["pre"]),
            oh.make_node("Relu", ["pre"], ["y"]),
        ],
        [oh.make_tensor_value_info("x", TF, ["N", 3])],
        [oh.make_tensor_value_info("y", TF, ["N", 2])],
        [
            onnx.numpy_helper.from_array(np.arange(6, dtype=F32).reshape(3, 2) - 2, "w"),
            onnx.numpy_helper.from_array(np.array([0.5, -30.0], F32), "b"),
        ],
    )
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]], F32)
    result = eager.run(model, [x], capture=True)
    assert list(result.values) == ["w", "b", "x", "xw", "pre", "y"]
    w = np.arange(6, dtype=F32).reshape(3, 2) - 2
    np.testing.assert_allclose(result.values["xw"], x @ w)
    np.testing.assert_allclose(result.values["pre"], x @ w + [0.5, -30.0])
    np.testing.assert_allclose(result.outputs[0], ort_run(model, {"x": x})[0])
    plain = eager.run(model, {"x": x})
    np.testing.assert_allclose(plain[0], result.outputs[0])


def _if_model() -> onnx.ModelProto:
    then_graph = oh.make_graph([oh.make_node("Add", ["x", "x"], ["t"])], "then", [],
                               [oh.make_tensor_value_info("t", TF, None)])
    else_graph = oh.make_graph([oh.make_node("Neg", ["x"], ["e"])], "else", [],
                               [oh.make_tensor_value_info("e", TF, None)])
    return make_model(
        [
            oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            oh.make_node("Greater", ["s", "zero"], ["c"]),
            oh.make_node("If", ["c"], ["out"], then_branch=then_graph, else_branch=else_graph),
            oh.make_node("Mul", ["out", "out"], ["squared"]),
        ],
        [oh.make_tensor_value_info("x", TF, [2])],
        [oh.make_tensor_value_info("squared", TF, [2])],
        [onnx.numpy_helper.from_array(np.array(0, F32), "zero")],
    )


@pytest.mark.parametrize("constants_at", [(0,), (1,), (0, 2), (1, 3), (0, 1, 2, 3)])
def test_captured_constants_keep_their_place_in_execution_order(constants_at) -> None:
    """Constant nodes' values are read from the nodes, the others fetched from the
    session: the captured values still come in node order, each equal to what
    onnxruntime fetches for it and to the node-by-node run."""
    nodes, previous = [], "x"
    for index in range(4):
        if index in constants_at:
            value = onnx.numpy_helper.from_array(np.full((2,), index + 0.5, F32))
            nodes.append(oh.make_node("Constant", [], [f"c{index}"], value=value))
            nodes.append(oh.make_node("Add", [previous, f"c{index}"], [f"v{index}"]))
        else:
            nodes.append(oh.make_node("Relu" if index % 2 else "Neg", [previous], [f"v{index}"]))
        previous = f"v{index}"
    model = make_model(nodes, [oh.make_tensor_value_info("x", TF, [2])], [oh.make_tensor_value_info(previous, TF, [2])])
    x = np.array([1.5, -2.0], F32)
    result = eager.run(model, [x], capture=True)
    assert list(result.values) == ["x", *(name for node in nodes for name in node.output)]
    slow = eager.run(model, [x], capture=True, node_by_node=True)
    assert list(slow.values) == list(result.values)
    names = [name for node in nodes for name in node.output]
    fetched = ort_run(_with_outputs(model, names), {"x": x})
    for name, value in zip(names, fetched, strict=True):
        np.testing.assert_array_equal(result.values[name], value, err_msg=name)
        np.testing.assert_array_equal(slow.values[name], value, err_msg=name)


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """``model`` with every value in ``names`` as a graph output (float, shape [2])."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.extend(oh.make_tensor_value_info(name, TF, [2]) for name in names)
    return copy


@pytest.mark.parametrize("x", [[1.0, 2.0], [-1.0, -2.0]])
def test_if_with_outer_scope_values(x) -> None:
    model = _if_model()
    x = np.array(x, F32)
    result = eager.run(model, [x], capture=True)
    expected_branch = x + x if x.sum() > 0 else -x
    np.testing.assert_allclose(result.values["out"], expected_branch)
    np.testing.assert_allclose(result.outputs[0], ort_run(model, {"x": x})[0])
    # the branch ran node by node: its values are captured under the If node
    if x.sum() > 0:
        np.testing.assert_allclose(result.values["If2/then_branch/t"], x + x)
        assert not any("else_branch" in name for name in result.values)
    else:
        np.testing.assert_allclose(result.values["If2/else_branch/e"], -x)


def test_loop_with_carried_value_scan_output_and_outer_scope() -> None:
    body = oh.make_graph(
        [
            oh.make_node("Add", ["acc_in", "step"], ["acc_out"]),
            oh.make_node("Identity", ["cond_in"], ["cond_out"]),
            oh.make_node("Mul", ["acc_out", "two"], ["doubled"]),
        ],
        "body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_in", TF, [2])],
        [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_out", TF, [2]),
         oh.make_tensor_value_info("doubled", TF, [2])],
    )
    model = make_model(
        [oh.make_node("Loop", ["M", "", "start"], ["final", "history"], body=body)],
        [oh.make_tensor_value_info("M", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("start", TF, [2]),
         oh.make_tensor_value_info("step", TF, [2])],
        [oh.make_tensor_value_info("final", TF, [2]), oh.make_tensor_value_info("history", TF, [None, 2])],
        [onnx.numpy_helper.from_array(np.array(2, F32), "two")],
    )
    feeds = {"M": np.array(3, np.int64), "start": np.zeros(2, F32), "step": np.array([1.0, 10.0], F32)}
    result = eager.run(model, feeds, capture=True)
    final, history = result.outputs
    np.testing.assert_allclose(result.values["Loop0/1/acc_out"], [2.0, 20.0])  # iteration 1, inside the body
    np.testing.assert_array_equal(result.values["Loop0/2/i"], 2)
    np.testing.assert_allclose(final, [3.0, 30.0])
    np.testing.assert_allclose(history, [[2.0, 20.0], [4.0, 40.0], [6.0, 60.0]])
    for got, want in zip((final, history), ort_run(model, feeds)):
        np.testing.assert_allclose(got, want)


def test_loop_ends_on_condition_and_zero_trips() -> None:
    body = oh.make_graph(
        [oh.make_node("Mul", ["v_in", "two"], ["v_out"]), oh.make_node("Less", ["v_out", "limit"], ["cond_out"])],
        "body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("v_in", TF, [])],
        [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("v_out", TF, [])],
    )
    model = make_model(
        [oh.make_node("Loop", ["", "go", "v"], ["final"], body=body)],
        [oh.make_tensor_value_info("go", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("v", TF, []),
         oh.make_tensor_value_info("limit", TF, [])],
        [oh.make_tensor_value_info("final", TF, [])],
        [onnx.numpy_helper.from_array(np.array(2, F32), "two")],
    )
    for go, start in ((True, 1.0), (False, 1.0), (True, 100.0)):
        feeds = {"go": np.array(go), "v": np.array(start, F32), "limit": np.array(50, F32)}
        np.testing.assert_allclose(eager.run(model, feeds)[0], ort_run(model, feeds)[0])


def test_loop_inside_an_if_branch_is_captured() -> None:
    body = oh.make_graph(
        [oh.make_node("Add", ["acc", "x"], ["acc_next"]), oh.make_node("Identity", ["c"], ["c_next"])],
        "body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc", TF, [2])],
        [oh.make_tensor_value_info("c_next", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_next", TF, [2])],
    )
    then_graph = oh.make_graph([oh.make_node("Loop", ["n", "", "x"], ["looped"], body=body, name="inner")],
                               "then", [], [oh.make_tensor_value_info("looped", TF, [2])])
    else_graph = oh.make_graph([oh.make_node("Neg", ["x"], ["negated"])], "else", [],
                               [oh.make_tensor_value_info("negated", TF, [2])])
    model = make_model(
        [oh.make_node("If", ["flag"], ["y"], then_branch=then_graph, else_branch=else_graph, name="choose")],
        [oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("x", TF, [2]),
         oh.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
        [oh.make_tensor_value_info("y", TF, [2])],
    )
    feeds = {"flag": np.array(True), "x": np.array([1.0, 2.0], F32), "n": np.array(2, np.int64)}
    result = eager.run(model, feeds, capture=True)
    np.testing.assert_allclose(result.outputs[0], ort_run(model, feeds)[0])
    np.testing.assert_allclose(result.values["choose/then_branch/inner/1/acc_next"], [3.0, 6.0])


def test_failing_node_inside_a_loop_body_is_named() -> None:
    body = oh.make_graph(
        [oh.make_node("Add", ["acc", "bad"], ["acc_next"], name="inside"), oh.make_node("Identity", ["c"], ["c2"])],
        "body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc", TF, None)],
        [oh.make_tensor_value_info("c2", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("acc_next", TF, None)],
    )
    model = make_model(
        [oh.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [oh.make_tensor_value_info("n", onnx.TensorProto.INT64, []), oh.make_tensor_value_info("x", TF, None),
         oh.make_tensor_value_info("bad", TF, None)],
        [oh.make_tensor_value_info("y", TF, None)],
    )
    with pytest.raises(EagerError, match="inside"):
        eager.run(model, [np.array(2, np.int64), np.ones(2, F32), np.ones(3, F32)])


def test_scan_cumulative_sum() -> None:
    body = oh.make_graph(
        [oh.make_node("Add", ["sum_in", "row"], ["sum_out"]), oh.make_node("Identity", ["sum_out"], ["seen"])],
        "body",
        [oh.make_tensor_value_info("sum_in", TF, [2]), oh.make_tensor_value_info("row", TF, [2])],
        [oh.make_tensor_value_info("sum_out", TF, [2]), oh.make_tensor_value_info("seen", TF, [2])],
    )
    model = make_model(
        [oh.make_node("Scan", ["init", "rows"], ["total", "partial"], body=body, num_scan_inputs=1)],
        [oh.make_tensor_value_info("init", TF, [2]), oh.make_tensor_value_info("rows", TF, [3, 2])],
        [oh.make_tensor_value_info("total", TF, [2]), oh.make_tensor_value_info("partial", TF, [3, 2])],
    )
    rows = np.arange(6, dtype=F32).reshape(3, 2)
    total, partial = eager.run(model, [np.zeros(2, F32), rows])
    np.testing.assert_allclose(partial, np.cumsum(rows, axis=0))
    np.testing.assert_allclose(total, rows.sum(axis=0))


def _function_with_attribute() -> onnx.FunctionProto:
    constant = oh.make_node("Constant", [], ["alpha_tensor"])
    reference = onnx.AttributeProto(name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    constant.attribute.append(reference)
    function = oh.make_function(
        "local", "Scale", ["x"], ["y"],
        [constant, oh.make_node("Mul", ["x", "alpha_tensor"], ["y"])],
        [oh.make_opsetid("", 18)],
    )
    function.attribute_proto.append(oh.make_attribute("alpha", 2.0))
    return function


def test_model_local_function_runs_node_by_node_with_attributes() -> None:
    function = _function_with_attribute()
    model = make_model(
        [oh.make_node("Scale", ["x"], ["doubled"], domain="local", name="call_default"),
         oh.make_node("Scale", ["doubled"], ["y"], domain="local", name="call_three", alpha=3.0)],
        [oh.make_tensor_value_info("x", TF, [2])],
        [oh.make_tensor_value_info("y", TF, [2])],
        functions=[function],
    )
    x = np.array([1.0, -1.0], F32)
    result = eager.run(model, [x], capture=True)
    np.testing.assert_allclose(result.outputs[0], x * 6)
    np.testing.assert_allclose(result.values["call_default/alpha_tensor"], 2.0)
    np.testing.assert_allclose(result.values["call_three/alpha_tensor"], 3.0)
    np.testing.assert_allclose(result.values["doubled"], x * 2)
    np.testing.assert_allclose(result.outputs[0], ort_run(model, {"x": x})[0])


def test_function_proto_runs_with_its_default_attributes() -> None:
    x = np.array([1.5, 2.0], F32)
    np.testing.assert_allclose(eager.run(_function_with_attribute(), [x])[0], x * 2)


def test_reference_to_an_unset_attribute_keeps_the_callee_default() -> None:
    # Outer passes alpha=@alpha to Scale; the model sets no alpha on Outer, so Scale's own
    # default (2.0) applies, as onnxruntime computes, not "no attribute at all".
    call = oh.make_node("Scale", ["x"], ["y"], domain="local")
    call.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT))
    outer = oh.make_function("local", "Outer", ["x"], ["y"], [call],
                             [oh.make_opsetid("", 18), oh.make_opsetid("local", 1)], attributes=["alpha"])
    model = make_model(
        [oh.make_node("Outer", ["x"], ["y"], domain="local")],
        [oh.make_tensor_value_info("x", TF, [2])],
        [oh.make_tensor_value_info("y", TF, [2])],
        functions=[_function_with_attribute(), outer],
    )
    x = np.array([1.5, -2.0], F32)
    expected = ort_run(model, {"x": x})[0]
    np.testing.assert_allclose(expected, x * 2)
    np.testing.assert_allclose(eager.run(model, [x])[0], expected)


def test_sequence_values() -> None:
    model = make_model(
        [oh.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
         oh.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=0)],
        [oh.make_tensor_value_info("a", TF, [2]), oh.make_tensor_value_info("b", TF, [3])],
        [oh.make_tensor_value_info("joined", TF, [5])],
    )
    a, b = np.ones(2, F32), np.arange(3, dtype=F32)
    result = eager.run(model, [a, b], capture=True)
    assert isinstance(result.values["seq"], list) and len(result.values["seq"]) == 2
    np.testing.assert_allclose(result.outputs[0], np.concatenate([a, b]))


def test_path_and_bytes(tmp_path) -> None:
    model = _if_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    x = np.array([1.0, 2.0], F32)
    np.testing.assert_allclose(eager.run(str(path), [x])[0], (2 * x) ** 2)
    np.testing.assert_allclose(eager.run(path, [x])[0], (2 * x) ** 2)
    np.testing.assert_allclose(eager.run(model.SerializeToString(), [x])[0], (2 * x) ** 2)


def test_corrupt_file(tmp_path) -> None:
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07garbage")
    with pytest.raises(ModelLoadError):
        eager.run(path, [])


@script()
def _gelu_like(x: FLOAT["N"]) -> FLOAT["N"]:
    return 0.5 * x * (1.0 + op.Tanh(x * 0.8))


def test_script_function_and_ir_function() -> None:
    x = np.array([-1.0, 0.0, 2.0], F32)
    expected = 0.5 * x * (1 + np.tanh(x * 0.8))
    result = eager.run(_gelu_like, [x], capture=True)
    np.testing.assert_allclose(result.outputs[0], expected, rtol=1e-6)
    assert len(result.values) > 3  # every intermediate of the compiled body
    np.testing.assert_allclose(eager.run(_gelu_like.function, [x])[0], expected, rtol=1e-6)
    np.testing.assert_allclose(_gelu_like(x), expected, rtol=1e-6)  # the eager body agrees


# -------------------------------------------------------------------------- errors


def test_input_errors() -> None:
    model = _if_model()
    with pytest.raises(EagerError, match="'x' of the model is missing"):
        eager.run(model, [])
    with pytest.raises(EagerError, match="no input named 'y'"):
        eager.run(model, {"y": np.ones(2, F32)})
    with pytest.raises(EagerError, match="takes 1 input"):
        eager.run(model, [np.ones(2, F32), np.ones(2, F32)])
    with pytest.raises(DslTypeError, match="is FLOAT, got INT64"):
        eager.run(model, [np.ones(2, np.int64)])
    with pytest.raises(DslTypeError, match="rank 1"):
        eager.run(model, [np.ones((2, 2), F32)])
    with pytest.raises(DslTypeError, match="size 2 on axis 0"):
        eager.run(model, [np.ones(3, F32)])
    with pytest.raises(DslTypeError, match="cannot run a dict"):
        eager.run({}, [])


def test_failing_node_is_named() -> None:
    model = make_model(
        [oh.make_node("Add", ["x", "y"], ["s"], name="the_sum")],
        [oh.make_tensor_value_info("x", TF, None), oh.make_tensor_value_info("y", TF, None)],
        [oh.make_tensor_value_info("s", TF, None)],
    )
    with pytest.raises(EagerError) as caught:
        eager.run(model, [np.ones(2, F32), np.ones(3, F32)])
    text = str(caught.value)
    assert "node 0" in text and "the_sum" in text and "x: FLOAT[2]" in text and "onnxruntime:" in text


def test_unknown_name_is_reported() -> None:
    model = make_model(
        [oh.make_node("Relu", ["nowhere"], ["y"])],
        [oh.make_tensor_value_info("x", TF, [1])],
        [oh.make_tensor_value_info("y", TF, [1])],
    )
    with pytest.raises(EagerError, match="reads 'nowhere'"):
        eager.run(model, [np.ones(1, F32)])


# ------------------------------------------------------- ONNX backend test models

_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
_MODEL_DIRS = sorted(
    path
    for kind in ("simple", "pytorch-operator", "pytorch-converted")
    for path in glob.glob(os.path.join(_DATA, kind, "*"))
    if os.path.exists(os.path.join(path, "model.onnx"))
)
_TRAINING_DOMAIN = "ai.onnx.preview.training"


def _why_no_backend_runs(path: str) -> str:
    """For a model using training ops (Gradient needs the whole training graph): why
    neither onnxruntime nor onnx.reference loads it, or "" when one of them does."""
    model = onnx.load(path)
    if not any(node.domain == _TRAINING_DOMAIN for node in model.graph.node):
        return ""
    try:
        onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return ""
    except onnxruntime_refusals() as ort_error:  # the probe's question: does this onnxruntime load it at all
        ort_message = str(ort_error).splitlines()[0][:120]
    from onnx.reference import ReferenceEvaluator

    try:
        ReferenceEvaluator(model)
        return ""
    except Exception as reference_error:  # likewise for this onnx's reference evaluator
        return f"no backend runs {_TRAINING_DOMAIN} ops: onnxruntime: {ort_message}; onnx.reference: {reference_error}"


def onnxruntime_refuses(path: str, inputs: list) -> str:
    """onnxruntime's message where it has every op of the model and refuses to run it on
    ``inputs`` (StringNormalizer without the locale it asks for, say), else "": there eager
    mode must raise too, since that is what the model meets in onnxruntime."""
    model = onnx.load(path)
    names = [v.name for v in model.graph.input if v.name not in {t.name for t in model.graph.initializer}]
    verdict, message = onnxruntime_verdict(model, dict(zip(names, inputs)))
    return message if verdict == "refuses" else ""


def _load_pb(path: str):
    with open(path, "rb") as handle:
        raw = handle.read()
    tensor = onnx.TensorProto()
    tensor.ParseFromString(raw)
    if tensor.data_type:
        return onnx.numpy_helper.to_array(tensor)
    sequence = onnx.SequenceProto()
    sequence.ParseFromString(raw)
    return onnx.numpy_helper.to_list(sequence)


@pytest.mark.slow
@pytest.mark.parametrize("model_dir", _MODEL_DIRS, ids=[os.path.basename(p) for p in _MODEL_DIRS])
def test_backend_data_model(model_dir: str) -> None:
    name = os.path.basename(model_dir)
    reason = _why_no_backend_runs(os.path.join(model_dir, "model.onnx"))
    if reason:
        pytest.skip(reason)
    data = os.path.join(model_dir, "test_data_set_0")
    inputs = [_load_pb(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    expected = [_load_pb(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    refusal = onnxruntime_refuses(os.path.join(model_dir, "model.onnx"), inputs)
    if refusal:
        with pytest.raises(EagerError, match="onnxruntime"):
            eager.run(os.path.join(model_dir, "model.onnx"), inputs, node_by_node=True)
        return
    # Node by node: tests/test_eager_model_session.py checks the one-session run against this one.
    got = eager.run(os.path.join(model_dir, "model.onnx"), inputs, node_by_node=True)
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        want = np.asarray(want)
        if want.dtype.kind in "OUS":
            assert np.asarray(value).tolist() == want.astype(object).tolist()
        else:
            np.testing.assert_allclose(np.asarray(value, dtype=np.float64), want.astype(np.float64),
                                       rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------------ choosing what to capture


def _encoder_like() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((4, 4)).astype(F32), "w")
    model = make_model(
        [oh.make_node("MatMul", ["x", "w"], ["mm"]), oh.make_node("Relu", ["mm"], ["act"]),
         oh.make_node("Add", ["act", "x"], ["res"]), oh.make_node("Neg", ["res"], ["y"])],
        [oh.make_tensor_value_info("x", TF, [2, 4])], [oh.make_tensor_value_info("y", TF, [2, 4])], [w])
    return model, {"x": rng.standard_normal((2, 4)).astype(F32)}


def test_capture_named_values_only() -> None:
    model, feeds = _encoder_like()
    x, w = feeds["x"], onnx.numpy_helper.to_array(model.graph.initializer[0])
    result = eager.run(model, feeds, capture=["act", "x"])
    assert set(result.values) == {"act", "x"}
    np.testing.assert_allclose(result.values["act"], np.maximum(x @ w, 0), rtol=1e-5)
    np.testing.assert_allclose(result.outputs[0], ort_run(model, feeds)[0])
    # the same selection node by node gives the same values
    slow = eager.run(model, feeds, capture=("act", "x"), node_by_node=True)
    assert set(slow.values) == {"act", "x"}
    np.testing.assert_allclose(slow.values["act"], result.values["act"])


def test_capture_filter_and_everything() -> None:
    model, feeds = _encoder_like()
    everything = eager.run(model, feeds, capture=True)
    assert list(everything.values) == ["w", "x", "mm", "act", "res", "y"]
    filtered = eager.run(model, feeds, capture=lambda name: name.startswith("r"))
    assert list(filtered.values) == ["res"]
    np.testing.assert_allclose(filtered.values["res"], everything.values["res"])


def test_capture_of_an_unknown_name_is_an_error() -> None:
    model, feeds = _encoder_like()
    with pytest.raises(EagerError, match="'mmm'"):
        eager.run(model, feeds, capture=["mmm"])
    with pytest.raises(DslTypeError, match="capture="):
        eager.run(model, feeds, capture="act")


def _weights_in_branches() -> onnx.ModelProto:
    """silero-vad's shape in small: the If's branches hold the weights in Constant nodes."""
    rng = np.random.default_rng(1)

    def branch(scale: float, nested: bool) -> onnx.GraphProto:
        weight = onnx.numpy_helper.from_array((rng.standard_normal((3, 3)) * scale).astype(F32), "w")
        nodes = [oh.make_node("Constant", [], ["w"], value=weight), oh.make_node("MatMul", ["x", "w"], ["h"]),
                 oh.make_node("Tanh", ["h"], ["t"])]
        if nested:  # an If inside the branch, reading a value of the main graph
            inner_then = oh.make_graph([oh.make_node("Mul", ["t", "t"], ["sq"])], "it", [],
                                       [oh.make_tensor_value_info("sq", TF, None)])
            inner_else = oh.make_graph([oh.make_node("Neg", ["t"], ["ng"])], "ie", [],
                                       [oh.make_tensor_value_info("ng", TF, None)])
            nodes.append(oh.make_node("If", ["flag"], ["out"], then_branch=inner_then, else_branch=inner_else,
                                      name="inner"))
        else:
            nodes.append(oh.make_node("Identity", ["t"], ["out"]))
        return oh.make_graph(nodes, "b", [], [oh.make_tensor_value_info("out", TF, None)])

    return make_model(
        [oh.make_node("Equal", ["rate", "r16k"], ["is16k"]),
         oh.make_node("If", ["is16k"], ["y"], then_branch=branch(1.0, True), else_branch=branch(2.0, False),
                      name="by_rate")],
        [oh.make_tensor_value_info("x", TF, [1, 3]), oh.make_tensor_value_info("rate", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("flag", onnx.TensorProto.BOOL, [])],
        [oh.make_tensor_value_info("y", TF, [1, 3])],
        [onnx.numpy_helper.from_array(np.array(16000, np.int64), "r16k")])


@pytest.mark.parametrize(("rate", "flag"), [(16000, True), (16000, False), (8000, True)])
def test_if_branches_captured_in_sessions_of_their_own(rate, flag) -> None:
    model = _weights_in_branches()
    feeds = {"x": np.array([[0.5, -1.0, 2.0]], F32), "rate": np.array(rate, np.int64), "flag": np.array(flag)}
    eager.clear_cache()
    result = eager.run(model, feeds, capture=True)
    # no one-op kernel was built: the branch taken ran as a session, like the model
    assert eager.cache_info().currsize == 0
    slow = eager.run(model, feeds, capture=True, node_by_node=True)
    assert list(result.values) == list(slow.values)
    for name, value in slow.values.items():
        np.testing.assert_allclose(result.values[name], value, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(result.outputs[0], ort_run(model, feeds)[0], rtol=1e-6)
    chosen = "then_branch" if rate == 16000 else "else_branch"
    t = result.values[f"by_rate/{chosen}/t"]
    np.testing.assert_allclose(t, np.tanh(feeds["x"] @ result.values[f"by_rate/{chosen}/w"]), rtol=1e-5)
    if rate == 16000:
        inner = "by_rate/then_branch/inner/" + ("then_branch/sq" if flag else "else_branch/ng")
        np.testing.assert_allclose(result.values[inner], t * t if flag else -t, rtol=1e-6)


def test_capture_inside_a_branch_by_name() -> None:
    model = _weights_in_branches()
    feeds = {"x": np.array([[0.5, -1.0, 2.0]], F32), "rate": np.array(16000, np.int64), "flag": np.array(True)}
    result = eager.run(model, feeds, capture=["by_rate/then_branch/t", "by_rate/else_branch/t", "is16k"])
    assert set(result.values) == {"by_rate/then_branch/t", "is16k"}  # (the else branch did not run)
    everything = eager.run(model, feeds, capture=True)
    np.testing.assert_allclose(result.values["by_rate/then_branch/t"], everything.values["by_rate/then_branch/t"])


def test_repeated_captured_runs_follow_the_branch_each_call_takes() -> None:
    """From the second captured call the If's branch runs inlined in the model (one
    session); a call taking the other branch is done again with that branch."""
    rng = np.random.default_rng(2)

    def branch(scale: float) -> onnx.GraphProto:
        weight = onnx.numpy_helper.from_array((rng.standard_normal((3, 3)) * scale).astype(F32), "w")
        return oh.make_graph([oh.make_node("Constant", [], ["w"], value=weight),
                              oh.make_node("MatMul", ["x", "w"], ["h"]), oh.make_node("Tanh", ["h"], ["y"])],
                             "b", [], [oh.make_tensor_value_info("y", TF, None)])

    model = make_model(
        [oh.make_node("Equal", ["rate", "r16k"], ["is16k"]),
         oh.make_node("If", ["is16k"], ["out"], then_branch=branch(1.0), else_branch=branch(2.0), name="by_rate"),
         oh.make_node("Neg", ["out"], ["y"])],
        [oh.make_tensor_value_info("x", TF, [1, 3]), oh.make_tensor_value_info("rate", onnx.TensorProto.INT64, [])],
        [oh.make_tensor_value_info("y", TF, [1, 3])],
        [onnx.numpy_helper.from_array(np.array(16000, np.int64), "r16k")])
    x = np.array([[0.5, -1.0, 2.0]], F32)
    for rate in (16000, 16000, 16000, 8000, 8000, 16000):
        feeds = {"x": x, "rate": np.array(rate, np.int64)}
        result = eager.run(model, feeds, capture=True)
        slow = eager.run(model, feeds, capture=True, node_by_node=True)
        assert list(result.values) == list(slow.values), rate
        for name, value in slow.values.items():
            np.testing.assert_allclose(result.values[name], value, rtol=1e-6, err_msg=f"{rate}: {name}")
        np.testing.assert_allclose(result.outputs[0], ort_run(model, feeds)[0], rtol=1e-6)
        chosen = "then_branch" if rate == 16000 else "else_branch"
        np.testing.assert_allclose(result.values[f"by_rate/{chosen}/y"],
                                   np.tanh(x @ result.values[f"by_rate/{chosen}/w"]), rtol=1e-5)
