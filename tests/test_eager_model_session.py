"""eager.run in one whole-model session: the same values as node by node, cached sessions.

Oracle: the node-by-node runner (``node_by_node=True``), itself checked against
onnxruntime and the ONNX backend test data in ``tests/test_eager_run.py``.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import eager
from dsl import DslError, EagerError, ir
from tests.test_eager_run import _MODEL_DIRS, _load_pb, _why_no_backend_runs, make_model, onnxruntime_refuses

F32 = np.float32
TF = onnx.TensorProto.FLOAT


def assert_same_values(fast: eager.RunResult, slow: eager.RunResult) -> None:
    """Same names in the same order, same values up to float rounding (the whole model's
    MatMul may sum in another order than the one-op session's)."""
    assert list(fast.values) == list(slow.values)
    for name, want in slow.values.items():
        got = fast.values[name]
        if isinstance(want, list):
            assert isinstance(got, list) and len(got) == len(want), name
            for item, expected in zip(got, want):
                np.testing.assert_allclose(item, expected, rtol=1e-4, atol=1e-5, err_msg=name)
        elif want is None:
            assert got is None, name
        elif np.asarray(want).dtype.kind in "OUS":
            assert np.asarray(got).tolist() == np.asarray(want).tolist(), name
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)
    for got, want in zip(fast.outputs, slow.outputs):
        if want is not None and not isinstance(want, list) and np.asarray(want).dtype.kind not in "OUS":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _chain_model() -> onnx.ModelProto:
    return make_model(
        [oh.make_node("MatMul", ["x", "w"], ["xw"]), oh.make_node("Relu", ["xw"], ["r"]),
         oh.make_node("Neg", ["r"], ["y"], name="negate")],
        [oh.make_tensor_value_info("x", TF, ["N", 3])],
        [oh.make_tensor_value_info("y", TF, ["N", 2])],
        [onnx.numpy_helper.from_array(np.arange(6, dtype=F32).reshape(3, 2) - 2, "w")],
    )


def test_one_session_builds_no_one_op_kernel_and_is_cached() -> None:
    eager.clear_cache()
    model = _chain_model()
    x = np.array([[1.0, 2.0, 3.0]], F32)
    first = eager.run(model, [x], capture=True)
    assert eager.cache_info().misses == 0  # no node ran in a one-op session
    assert eager.model_cache_info().misses == 1
    second = eager.run(model, [x], capture=True)
    assert eager.model_cache_info().hits == 1
    assert_same_values(second, first)
    assert_same_values(first, eager.run(model, [x], capture=True, node_by_node=True))
    assert eager.cache_info().misses == 3  # node by node: one kernel per op
    eager.clear_cache()
    assert eager.model_cache_info().currsize == 0


def test_model_cache_size_bounds_the_sessions() -> None:
    eager.clear_cache()
    eager.set_model_cache_size(1)
    try:
        x = np.ones((1, 3), F32)
        for _ in range(3):
            eager.run(_chain_model(), [x])  # a new proto each time: a new key
        info = eager.model_cache_info()
        assert (info.currsize, info.evictions) == (1, 2)
    finally:
        eager.set_model_cache_size(8)
        eager.clear_cache()
    with pytest.raises(EagerError, match="positive int"):
        eager.set_model_cache_size(0)


def test_an_ir_model_changed_in_place_gets_a_new_session() -> None:
    from converter.from_onnx import model_from_proto

    model = model_from_proto(_chain_model())
    x = np.array([[1.0, 2.0, 3.0]], F32)
    before = eager.run(model, [x])[0]
    weight = model.graph.initializers[0]
    weight.initializer = ir.Tensor(weight.initializer.array * 2, weight.initializer.elem_type, weight.name)
    after = eager.run(model, [x])[0]
    np.testing.assert_allclose(after, 2 * before)


def test_stop_after_a_node_returns_its_outputs() -> None:
    model = _chain_model()
    x = np.array([[1.0, -2.0, 3.0]], F32)
    result = eager.run(model, [x], capture=True, stop_after="r")
    np.testing.assert_allclose(result.outputs[0], np.maximum(x @ (np.arange(6, dtype=F32).reshape(3, 2) - 2), 0))
    assert "y" not in result.values and "r" in result.values
    assert len(eager.run(model, [x], stop_after="negate")) == 1
    with pytest.raises(EagerError, match="names no node"):
        eager.run(model, [x], stop_after="nowhere")


def test_a_node_onnxruntime_rejects_is_named() -> None:
    model = make_model(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("NoSuchOp", ["r"], ["y"], domain="local", name="odd")],
        [oh.make_tensor_value_info("x", TF, [2])],
        [oh.make_tensor_value_info("y", TF, [2])],
    )
    with pytest.raises(EagerError, match=r"node 1 \(local::NoSuchOp 'odd'"):
        eager.run(model, [np.ones(2, F32)], capture=True)


def test_path_with_external_data(tmp_path) -> None:
    model = _chain_model()
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="model.data", size_threshold=0)
    x = np.array([[1.0, 2.0, 3.0]], F32)
    fast = eager.run(path, [x], capture=True)
    assert_same_values(fast, eager.run(path, [x], capture=True, node_by_node=True))
    np.testing.assert_allclose(eager.run(str(path), [x])[0], fast.outputs[0])


def _control_flow_model() -> onnx.ModelProto:
    body = oh.make_graph(
        [oh.make_node("Add", ["acc_in", "step"], ["acc_out"]), oh.make_node("Identity", ["cond_in"], ["cond_out"]),
         oh.make_node("Mul", ["acc_out", "two"], ["doubled"])],
        "body",
        [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         oh.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_in", TF, [2])],
        [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_out", TF, [2]), oh.make_tensor_value_info("doubled", TF, [2])],
    )
    then_graph = oh.make_graph([oh.make_node("Sqrt", ["final"], ["t"])], "then", [],
                               [oh.make_tensor_value_info("t", TF, [2])])
    else_graph = oh.make_graph([oh.make_node("Neg", ["final"], ["e"])], "else", [],
                               [oh.make_tensor_value_info("e", TF, [2])])
    return make_model(
        [oh.make_node("Relu", ["start"], ["begin"]),
         oh.make_node("Loop", ["M", "", "begin"], ["final", "history"], body=body, name="steps"),
         oh.make_node("ReduceSum", ["final"], ["total"], keepdims=0),
         oh.make_node("Greater", ["total", "zero"], ["positive"]),
         oh.make_node("If", ["positive"], ["chosen"], then_branch=then_graph, else_branch=else_graph),
         oh.make_node("Add", ["chosen", "total"], ["y"])],
        [oh.make_tensor_value_info("M", onnx.TensorProto.INT64, []), oh.make_tensor_value_info("start", TF, [2]),
         oh.make_tensor_value_info("step", TF, [2])],
        [oh.make_tensor_value_info("y", TF, [2]), oh.make_tensor_value_info("history", TF, [None, 2])],
        [onnx.numpy_helper.from_array(np.array(2, F32), "two"), onnx.numpy_helper.from_array(np.array(0, F32), "zero")],
    )


@pytest.mark.parametrize("step", [[1.0, 10.0], [-5.0, -1.0]])
def test_if_and_loop_values_inside_bodies_are_still_captured(step) -> None:
    model = _control_flow_model()
    feeds = {"M": np.array(3, np.int64), "start": np.array([0.5, -1.0], F32), "step": np.array(step, F32)}
    eager.clear_cache()
    fast = eager.run(model, feeds, capture=True)
    assert eager.model_cache_info().currsize == 1  # the main graph ran in one session
    slow = eager.run(model, feeds, capture=True, node_by_node=True)
    assert_same_values(fast, slow)
    assert "steps/2/doubled" in fast.values
    assert ("If4/then_branch/t" if sum(step) > 0 else "If4/else_branch/e") in fast.values


def test_model_local_function_values_are_captured() -> None:
    from tests.test_eager_run import _function_with_attribute

    model = make_model(
        [oh.make_node("Scale", ["x"], ["doubled"], domain="local", name="call_default"),
         oh.make_node("Relu", ["doubled"], ["y"])],
        [oh.make_tensor_value_info("x", TF, [2])],
        [oh.make_tensor_value_info("y", TF, [2])],
        functions=[_function_with_attribute()],
    )
    x = np.array([1.0, -1.0], F32)
    fast = eager.run(model, [x], capture=True)
    assert_same_values(fast, eager.run(model, [x], capture=True, node_by_node=True))
    np.testing.assert_allclose(fast.values["call_default/alpha_tensor"], 2.0)


@pytest.mark.slow
@pytest.mark.parametrize("model_dir", _MODEL_DIRS, ids=[os.path.basename(p) for p in _MODEL_DIRS])
def test_backend_model_captures_the_node_by_node_values(model_dir: str) -> None:
    path = os.path.join(model_dir, "model.onnx")
    reason = _why_no_backend_runs(path)
    if reason:
        pytest.skip(reason)
    inputs = [_load_pb(p) for p in sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")))]
    if onnxruntime_refuses(path, inputs):  # both ways refuse it, naming the node
        for node_by_node in (True, False):
            with pytest.raises(EagerError, match="node 0"):
                eager.run(path, inputs, capture=True, node_by_node=node_by_node)
        return
    slow = eager.run(path, inputs, capture=True, node_by_node=True)
    fast = eager.run(path, inputs, capture=True)
    assert_same_values(fast, slow)


def test_ir_model_weights_are_handed_to_onnxruntime_as_they_are() -> None:
    from converter.from_onnx import model_from_proto
    from tests.test_external_data import _if_model_with_branch_weight

    rng = np.random.default_rng(5)
    big = rng.standard_normal((128, 128)).astype(F32)  # 64 KiB: taken out of the proto
    proto = make_model(
        [oh.make_node("MatMul", ["x", "big"], ["h"]), oh.make_node("Relu", ["h"], ["y"])],
        [oh.make_tensor_value_info("x", TF, [1, 128])], [oh.make_tensor_value_info("y", TF, [1, 128])],
        [onnx.numpy_helper.from_array(big, "big")])
    model = model_from_proto(proto)
    x = rng.standard_normal((1, 128)).astype(F32)
    eager.clear_cache()
    fast = eager.run(model, [x], capture=True)
    assert eager.cache_info().misses == 0 and eager.model_cache_info().currsize == 1
    np.testing.assert_allclose(fast.outputs[0], np.maximum(x @ big, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(fast.values["big"], big)
    assert not fast.values["big"].flags.writeable  # the array onnxruntime runs on cannot be written
    assert_same_values(fast, eager.run(model, [x], capture=True, node_by_node=True))
    branch_model = model_from_proto(_if_model_with_branch_weight())
    for flag in (True, False):  # the then branch reads its own weight, given back to the subgraph
        feeds = {"flag": np.array(flag), "x": np.ones(64, F32)}
        with_arrays = eager.run(branch_model, feeds, capture=True)
        assert_same_values(with_arrays, eager.run(branch_model, feeds, capture=True, node_by_node=True))


def test_a_loop_whose_trip_count_is_fed_runs_in_one_session_within_the_bound() -> None:
    import dsl

    model = _control_flow_model()
    feeds = {"M": np.array(3, np.int64), "start": np.array([0.5, -1.0], F32), "step": np.array([1.0, 2.0], F32)}
    eager.clear_cache()
    fast = eager.run(model, feeds)
    assert eager.cache_info().misses == 0  # Loop and If ran inside the whole-model session
    np.testing.assert_allclose(fast[0], eager.run(model, feeds, node_by_node=True)[0], rtol=1e-6)
    # Over the bound, onnxruntime never gets the Loop: the node-by-node run refuses it first.
    with dsl.raised_limits(loop_iterations=2), pytest.raises(dsl.LimitExceededError, match="Loop 'steps'"):
        eager.run(model, feeds)


def test_a_loop_whose_trip_count_is_computed_runs_node_by_node() -> None:
    model = _control_flow_model()
    computed = oh.make_node("Identity", ["M"], ["M_copy"])
    loop = model.graph.node[1]
    loop.input[0] = "M_copy"
    model.graph.node.insert(1, computed)
    feeds = {"M": np.array(3, np.int64), "start": np.array([0.5, -1.0], F32), "step": np.array([1.0, 2.0], F32)}
    eager.clear_cache()
    eager.run(model, feeds)
    assert eager.cache_info().misses > 0  # node by node: its trip count is known only while running


def _scaled_model(factor: float) -> onnx.ModelProto:
    return make_model(
        [oh.make_node("Mul", ["x", "k"], ["y"])],
        [oh.make_tensor_value_info("x", TF, ["N", 3])],
        [oh.make_tensor_value_info("y", TF, ["N", 3])],
        [onnx.numpy_helper.from_array(np.array(factor, F32), "k")],
    )


def test_a_path_names_the_file_it_reaches_now(tmp_path, monkeypatch) -> None:
    """The session cache knows a path by the file it reaches: a link pointed elsewhere, or
    the same relative path read from another working directory, runs the other model."""
    eager.clear_cache()
    x = np.array([[1.0, 2.0, 3.0]], F32)
    for index, factor in enumerate((2.0, 3.0)):
        (tmp_path / f"d{index}").mkdir()
        onnx.save_model(_scaled_model(factor), str(tmp_path / f"d{index}" / "m.onnx"))
        os.utime(tmp_path / f"d{index}" / "m.onnx", ns=(10**18, 10**18))  # (same size and time: only the file differs)
    link = tmp_path / "link.onnx"
    link.symlink_to(tmp_path / "d0" / "m.onnx")
    np.testing.assert_array_equal(eager.run(str(link), [x])[0], x * 2)
    link.unlink()
    link.symlink_to(tmp_path / "d1" / "m.onnx")
    np.testing.assert_array_equal(eager.run(str(link), [x])[0], x * 3)
    for index, factor in enumerate((2.0, 3.0)):
        monkeypatch.chdir(tmp_path / f"d{index}")
        np.testing.assert_array_equal(eager.run("m.onnx", [x], capture=True).values["y"], x * factor)
    assert eager.model_cache_info().misses == 4  # (link twice, the relative path twice)


@pytest.mark.parametrize("given, message", [
    (np.zeros((1, 3), np.float64), "is FLOAT, got DOUBLE"),
    (np.zeros((1, 3, 1), F32), "rank 2"),
    (np.zeros((1, 4), F32), "size 3 on axis 1"),
])
def test_a_warm_session_still_checks_each_input(given, message, caplog) -> None:
    """The declared type read once per session still refuses a mistyped input on a warm
    call, before onnxruntime sees it (no failed whole-model run, no node-by-node rerun)."""
    model = _scaled_model(2.0)
    x = np.ones((5, 3), F32)
    np.testing.assert_array_equal(eager.run(model, [x])[0], x * 2)  # (warm: the session is built)
    np.testing.assert_array_equal(eager.run(model, {"x": np.ones((2, 3), F32)})[0], 2)
    with caplog.at_level("INFO", logger="eager"), pytest.raises(DslError, match=message):
        eager.run(model, [given])
    assert not [r for r in caplog.records if "node by node" in r.getMessage()]


_CONSTANT_DTYPES = [np.float32, np.float64, np.float16, np.bool_, np.int8, np.int16, np.int32, np.int64,
                    np.uint8, np.uint16, np.uint32, np.uint64]


def _constants_model(then_constant: bool) -> onnx.ModelProto:
    """Constants of every plain type in the main graph and in the branches of an If."""
    nodes = []
    for index, dtype in enumerate(_CONSTANT_DTYPES):
        value = (np.arange(6).reshape(2, 3) % 3 - 1).astype(dtype)
        tensor = (onnx.numpy_helper.from_array(value) if index else  # (c0 in float_data, not raw bytes)
                  oh.make_tensor("c0", TF, value.shape, value.flatten().tolist()))
        nodes.append(oh.make_node("Constant", [], [f"c{index}"], value=tensor))
    nodes.append(oh.make_node("Add", ["x", "c0"], ["s"]))
    branch = [oh.make_node("Constant", [], ["k"], value=onnx.numpy_helper.from_array(np.full((2, 3), 5, F32))),
              oh.make_node("Mul", ["s", "k"], ["m"])]
    other = [oh.make_node("Neg", ["s"], ["m"])]
    out = [oh.make_tensor_value_info("m", TF, [2, 3])]
    nodes.append(oh.make_node("Constant", [], ["cond"], value=onnx.numpy_helper.from_array(np.array(then_constant))))
    nodes.append(oh.make_node("If", ["cond"], ["y"], then_branch=oh.make_graph(branch, "then", [], out),
                              else_branch=oh.make_graph(other, "else", [], out)))
    nodes.append(oh.make_node("Sub", ["y", "c0"], ["z"]))
    return make_model(nodes, [oh.make_tensor_value_info("x", TF, [2, 3])],
                      [oh.make_tensor_value_info("z", TF, [2, 3]), oh.make_tensor_value_info("c7", onnx.TensorProto.INT64,
                                                                                             [2, 3])])


@pytest.mark.parametrize("then_constant", [True, False])
def test_constant_values_are_captured_as_onnxruntime_returns_them(then_constant) -> None:
    """Constant nodes' values (read once from the node, not fetched from onnxruntime) are
    bit-identical to the values onnxruntime returns, same dtype, in execution order, on
    every call (read-only: shared between runs), If branches included."""
    import onnxruntime

    eager.clear_cache()
    model = _constants_model(then_constant)
    x = np.arange(6, dtype=F32).reshape(2, 3)
    names = [name for node in model.graph.node for name in node.output]
    whole = onnx.ModelProto()
    whole.CopyFrom(model)
    for name in names:
        if name not in ("z", "c7"):
            whole.graph.output.add(name=name)
    oracle = onnxruntime.InferenceSession(whole.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in whole.graph.output], oracle.run(None, {"x": x})))
    slow = eager.run(model, [x], capture=True, node_by_node=True)
    for _ in range(3):  # (the third call runs the If inlined)
        fast = eager.run(model, [x], capture=True)
        assert list(fast.values) == list(slow.values)
        for name in names:
            assert fast.values[name].dtype == expected[name].dtype, name
            np.testing.assert_array_equal(fast.values[name], expected[name], err_msg=name)
        np.testing.assert_array_equal(fast.outputs[1], expected["c7"])
        branch = "then_branch" if then_constant else "else_branch"
        inside = [name for name in fast.values if name.startswith("If")]
        assert inside == [name for name in slow.values if name.startswith("If")] and inside
        assert all(name.startswith("If") and branch in name for name in inside if "/" in name)
        with pytest.raises(ValueError):
            fast.values["c0"][0, 0] = 7  # (read-only: the next run returns the same array)
