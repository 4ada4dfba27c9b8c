"""dsl.load (dsl.loaded_model.LoadedModel): a whole ONNX model called inside @script is
inlined per call site with its weights stored once as initializers, its local functions
kept and its opset converted to the caller's; called on arrays it runs in onnxruntime."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import dsl
from dsl import FLOAT, INT64, DslError, DslTypeError, OpCallError, script
from dsl import opset18 as op
from tests.roundtrip import runnable

RNG = np.random.default_rng(0)
WEIGHT = RNG.standard_normal((4, 4)).astype(np.float32)
BIAS = RNG.standard_normal(4).astype(np.float32)
SQUEEZENET = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")


def dense_model(opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(WEIGHT, "W"), numpy_helper.from_array(BIAS, "B")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def ort_run(model: onnx.ModelProto, *arrays: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(runnable(model).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


def every_node(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    found = []
    for node in graph.node:
        found.append(node)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                found.extend(every_node(attribute.g))
    return found


net = dsl.load(dense_model(), name="net")


@script()
def twice(x: FLOAT[2, 4]) -> FLOAT[2, 4]:
    return net(net(x))


def test_called_twice_inlines_with_weights_stored_once() -> None:
    model = twice.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert sorted(i.name for i in model.graph.initializer) == ["net_B", "net_W"]
    assert [i.name for i in model.graph.input] == ["x"]
    assert not [n for n in every_node(model.graph) if n.op_type == "Constant"]
    assert [n.op_type for n in model.graph.node] == ["Gemm", "Relu", "Gemm", "Relu"]
    names = [o for n in model.graph.node for o in n.output]
    assert len(set(names)) == len(names)
    assert any(name.startswith("net_0_") for name in names) and any(name.startswith("net_1_") for name in names)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    expected = ort_run(dense_model(), ort_run(dense_model(), x)[0])[0]
    np.testing.assert_allclose(ort_run(model, x)[0], expected, rtol=1e-6)


def test_eager_call_runs_the_model_in_one_session() -> None:
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(net(x), ort_run(dense_model(), x)[0], rtol=1e-6)
    assert net.session() is net.session()
    with pytest.raises(DslTypeError, match="FLOAT"):
        net(x.astype(np.int64))


def test_model_local_functions_come_along() -> None:
    body = helper.make_function(
        "local", "double_relu", ["a"], ["b"],
        [helper.make_node("Add", ["a", "a"], ["s"]), helper.make_node("Relu", ["s"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [helper.make_node("double_relu", ["x"], ["y"], domain="local")], "uses_function",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    original = helper.make_model(graph, functions=[body],
                                 opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    local_net = dsl.load(original, name="local_net")

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return local_net(local_net(x) - 1.0)

    model = caller.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert [f.name for f in model.functions] == ["double_relu"]
    assert [n.op_type for n in model.graph.node].count("double_relu") == 2
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    expected = ort_run(original, ort_run(original, x)[0] - np.float32(1.0))[0]
    np.testing.assert_allclose(ort_run(model, x)[0], expected)


def reduce_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
         helper.make_node("Sub", ["x", "m"], ["y"])],
        "centre",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_older_opset_is_converted_to_the_callers() -> None:
    centre = dsl.load(reduce_model(), name="centre")

    @script()
    def scaled(x: FLOAT[2, 3]) -> FLOAT[2, 3]:
        return op.Mul(centre(x), 2.0)

    model = scaled.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    reduce = next(n for n in model.graph.node if n.op_type == "ReduceMean")
    assert len(reduce.input) == 2  # axes became an input at opset 18
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(ort_run(model, x)[0], ort_run(reduce_model(), x)[0] * 2, rtol=1e-6)


def test_wrong_element_type_points_at_the_call() -> None:
    @script()
    def wrong_type(x: INT64[2, 4]) -> FLOAT[2, 4]:
        return net(x)

    with pytest.raises(DslTypeError) as caught:
        wrong_type.to_model_proto()
    assert "INT64" in str(caught.value) and "FLOAT" in str(caught.value)
    assert caught.value.location is not None
    assert os.path.basename(caught.value.location.file) == "test_load.py"
    assert "net(x)" in caught.value.location.source_line


def test_wrong_argument_count_points_at_the_call() -> None:
    @script()
    def wrong_count(x: FLOAT[2, 4]) -> FLOAT[2, 4]:
        return net(x, x)

    with pytest.raises(OpCallError, match="takes 1 input") as caught:
        wrong_count.to_model_proto()
    assert caught.value.location is not None
    assert "net(x, x)" in caught.value.location.source_line
    assert f"test_load.py:{caught.value.location.line}" in str(caught.value)


def test_wrong_bound_output_count() -> None:
    @script()
    def wrong_outputs(x: FLOAT[2, 4]) -> FLOAT[2, 4]:
        a, _b = net(x)
        return a

    with pytest.raises(DslError, match="returns 1 value"):
        wrong_outputs.to_model_proto()


def test_squeezenet_after_preprocessing() -> None:
    squeezenet = dsl.load(SQUEEZENET, name="squeezenet")
    scale = np.float32(0.5)
    mean = RNG.standard_normal((1, 3, 1, 1)).astype(np.float32)

    @script()
    def classify(img: FLOAT[1, 3, 224, 224]) -> FLOAT[1, 1000, 1, 1]:
        return squeezenet(op.Sub(op.Mul(img, scale), mean))

    model = classify.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    original = onnx.load(SQUEEZENET)
    assert len(model.graph.initializer) == len(original.graph.initializer)
    assert [i.name for i in model.graph.input] == ["img"]
    img = RNG.random((1, 3, 224, 224)).astype(np.float32)
    expected = ort_run(original, img * scale - mean)[0]
    np.testing.assert_allclose(ort_run(model, img)[0], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(squeezenet(img * scale - mean), expected, rtol=1e-5, atol=1e-6)


def test_local_function_of_an_older_opset_is_converted_too() -> None:
    body = helper.make_function(
        "local", "centre", ["a"], ["b"],
        [helper.make_node("ReduceMean", ["a"], ["m"], axes=[0], keepdims=1), helper.make_node("Sub", ["a", "m"], ["b"])],
        [helper.make_opsetid("", 13)],
    )
    graph = helper.make_graph(
        [helper.make_node("centre", ["x"], ["y"], domain="local")], "uses_centre",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    original = helper.make_model(graph, functions=[body],
                                 opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    centre = dsl.load(original, name="centre")

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return op.Relu(centre(x))

    model = caller.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    (function,) = model.functions
    assert {o.domain: o.version for o in function.opset_import}[""] == 18
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_allclose(ort_run(model, x)[0], np.maximum(ort_run(original, x)[0], 0), rtol=1e-6)


def test_unconvertible_op_is_named() -> None:
    graph = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"])], "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    gelu = dsl.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), name="gelu")

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return op.Relu(gelu(x))

    with pytest.raises(DslError, match="the op Gelu") as caught:
        caller.to_model_proto()
    assert caught.value.location is not None and "gelu(x)" in caught.value.location.source_line


def test_load_from_a_path_and_bad_arguments(tmp_path) -> None:
    path = tmp_path / "dense.onnx"
    onnx.save(dense_model(), str(path))
    loaded = dsl.load(path)
    assert loaded.name == "dense" and [v.name for v in loaded.inputs] == ["x"]
    with pytest.raises(DslTypeError, match=r"path or an onnx\.ModelProto"):
        dsl.load(42)  # type: ignore[arg-type]
    with pytest.raises(DslError, match="no such file"):
        dsl.load(tmp_path / "missing.onnx")


def test_a_body_without_ops_takes_the_models_opset() -> None:
    model = twice.to_model_proto()
    assert {o.domain: o.version for o in model.opset_import}[""] == 18
    centre = dsl.load(reduce_model(), name="centre")

    @script()
    def only_calls(x: FLOAT[2, 3]) -> FLOAT[2, 3]:
        return centre(x)

    assert {o.domain: o.version for o in only_calls.to_model_proto().opset_import}[""] == 13


def test_eager_script_call_runs_the_model() -> None:
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    expected = ort_run(dense_model(), ort_run(dense_model(), x)[0])[0]
    np.testing.assert_allclose(np.asarray(twice(x)), expected, rtol=1e-6)


def _function_model(domain: str, name: str) -> onnx.ModelProto:
    """A model calling its local function ``domain.name``: b = relu(a + a)."""
    body = helper.make_function(
        domain, name, ["a"], ["b"],
        [helper.make_node("Add", ["a", "a"], ["s"]), helper.make_node("Relu", ["s"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [helper.make_node(name, ["x"], ["y"], domain=domain)], "uses_function",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, functions=[body],
                             opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(domain, 1)])


@script()
def helper_fn(a: FLOAT[3]) -> FLOAT[3]:
    return op.Neg(a)


def test_loaded_function_clashing_with_the_callers_function_is_renamed() -> None:
    # The loaded model's local function has the same domain and name as a scripted
    # function the caller calls, but another body: both must survive, distinctly named.
    caller_domain = helper_fn.to_function_proto().domain
    original = _function_model(caller_domain, "helper_fn")
    loaded = dsl.load(original, name="loaded")

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return helper_fn(loaded(x))

    model = caller.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    keys = [(f.domain, f.name) for f in model.functions]
    assert len(keys) == 2 and len(set(keys)) == 2
    bodies = {f.name: [n.op_type for n in f.node] for f in model.functions}
    assert sorted(bodies.values()) == [["Add", "Relu"], ["Neg"]]
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_allclose(ort_run(model, x)[0], -ort_run(original, x)[0])


def test_loaded_model_called_inside_if_and_loop() -> None:
    # The inlined nodes land inside the If branch and the Loop body; the weights stay
    # initializers of the outermost graph, read from the subgraphs by outer scope.
    @script()
    def branch(x: FLOAT[2, 4], flag: dsl.BOOL) -> FLOAT[2, 4]:
        if flag:
            y = net(x)
        else:
            y = op.Neg(x)
        return y

    @script()
    def repeat(x: FLOAT[2, 4]) -> FLOAT[2, 4]:
        for _ in range(3):
            x = net(x) * 0.5
        return x

    x = RNG.standard_normal((2, 4)).astype(np.float32)
    once = ort_run(dense_model(), x)[0]
    for function in (branch, repeat):
        model = function.to_model_proto()
        onnx.checker.check_model(model, full_check=True)
        assert sorted(i.name for i in model.graph.initializer) == ["net_B", "net_W"]
        assert not [n for n in every_node(model.graph) if n.op_type == "Constant" and n.output[0].startswith("net")]
        assert "Gemm" not in [n.op_type for n in model.graph.node]  # inside the subgraph, not hoisted
        assert "Gemm" in [n.op_type for n in every_node(model.graph)]
    model = branch.to_model_proto()
    np.testing.assert_allclose(ort_run(model, x, np.array(True))[0], once, rtol=1e-6)
    np.testing.assert_allclose(ort_run(model, x, np.array(False))[0], -x)
    expected = x
    for _ in range(3):
        expected = ort_run(dense_model(), expected)[0] * np.float32(0.5)
    np.testing.assert_allclose(ort_run(repeat.to_model_proto(), x)[0], expected, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(branch(x, np.array(True))), once, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(repeat(x)), expected, rtol=1e-5)
