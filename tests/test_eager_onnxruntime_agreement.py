"""What runs eagerly computes what its exported model computes in onnxruntime, and what
onnxruntime refuses, eager mode refuses at the call.

The oracle is onnxruntime itself, asked about the exported one-node model of each call:
the call's node built with ``onnx.helper``, its inputs declared with the call's own
element types and shapes (as a model exported from the call declares them), run on the
call's values.  For every call, eager mode must

- give onnxruntime's outputs where onnxruntime runs that model, having run the op in
  onnxruntime itself — except the few ops eager mode runs in onnx.reference by policy
  (:mod:`eager.backend_policy`, reported by :func:`eager.last_backend`; their values are
  checked against numpy in ``tests/test_eager_second_oracles.py``);
- raise a located ``DslError`` (an ``EagerError`` where a backend is asked) at the
  user's line where onnxruntime refuses the model or its run: a call that runs eagerly
  never meets a refusal later;
- run where onnxruntime lacks the op for the call's element types or opset (status
  NOT_IMPLEMENTED, an op it has no schema for): there eager mode runs onnx.reference.

The calls: every single-node ONNX backend case (spec-valid calls, on the case's own
model), and generated mis-calls (hypothesis, seeded by the suite's profile): axes out of
range, repeat and size lists of the wrong length, ranks that do not fit, indices outside
the data, integer division by zero.  A few mis-calls are also compiled from ``@script``
functions with static shapes: the compiler's message is eager mode's, or the exported
model is refused by onnxruntime as eager mode said.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import eager
from dsl import FLOAT, INT64, DslError, script
from dsl import opset18 as op
from dsl.errors import EagerError
from dsl.opsets import get_opset
from tests.runtime_probes import onnxruntime_outputs
from tests.test_backend_node_eager import RANDOM_CASES, call_case, selected_cases, sequence_cases, to_array

OPSET = 18
_BACKEND_FILE = call_case.__code__.co_filename


def _assert_close(got: Any, want: Any, name: str) -> None:
    """Eager's output against onnxruntime's for the same kernel: integers, strings and bools
    exactly, floats to a few units in the last place (sessions differ in optimizations)."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{name}: {got!r} vs {want!r}"
        for index, (got_item, want_item) in enumerate(zip(got, want)):
            _assert_close(got_item, want_item, f"{name}[{index}]")
        return
    if want is None:  # (onnxruntime's binding cannot hand it to numpy: not compared)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape}, onnxruntime {want.shape}"
    if want.dtype.kind in "OUS":
        assert got.tolist() == want.tolist(), name
        return
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, onnxruntime {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    rtol = 1e-3 if want.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=name)


# Calls that eager mode runs in onnx.reference because onnxruntime cannot be asked about the
# call as written (the one-node model would declare another type than the exported one).
CANNOT_ASK_ONNXRUNTIME = {
    "test_loop16_seq_none": "a list given as a Loop's carried value cannot say that it is the optional sequence "
                            "its body declares",
}


def check_agreement(call: Callable[[], list[Any]], model: onnx.ModelProto, feeds: dict[str, Any],
                    call_file: str, compare: bool = True) -> str:
    """The principle for one call; returns onnxruntime's verdict ("runs", "refuses", "lacks").

    ``call`` runs it eagerly and returns its outputs in the order of the model's outputs;
    ``call_file`` is the file of the line that calls the op (where an error must point).
    """
    verdict, message, expected = onnxruntime_outputs(model, feeds)
    if verdict == "refuses":
        with pytest.raises(DslError) as raised:
            call()
        error = raised.value
        assert error.location is not None and error.location.file == call_file, (str(error), message)
        if isinstance(error, EagerError) and error.backend_messages:
            assert "onnxruntime" in error.backend_messages, (error.backend_messages, message)
        return verdict
    outputs = call()  # runs, lacks: eager mode must run it (raising here fails the test)
    report = eager.last_backend()
    assert report is not None
    if verdict == "runs":
        if report.backend != "onnxruntime":
            assert report.reason.startswith("onnx.reference preferred"), (
                f"eager ran {report.op} in onnx.reference although onnxruntime runs the exported model: "
                f"{report.reason}")
        elif compare:
            assert len(outputs) == len(expected)
            for index, (got, want) in enumerate(zip(outputs, expected)):
                _assert_close(got, want, f"{report.op} output {index}")
    return verdict


# ---------------------------------------------------------------- the ONNX backend node cases

_CASES = selected_cases() + sequence_cases()


@pytest.mark.slow
@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_backend_case_agrees_with_onnxruntime(case: Any) -> None:
    model = case.model
    feeds = {i.name: to_array(v) for i, v in zip(model.graph.input, case.data_sets[0][0])}

    def call() -> list[Any]:
        by_name, _ = call_case(case)
        return [by_name[output.name] for output in model.graph.output]

    if case.name in CANNOT_ASK_ONNXRUNTIME:
        call()
        report = eager.last_backend()
        assert report is not None and "onnxruntime cannot be asked" in report.reason, report
        return
    check_agreement(call, model, feeds, _BACKEND_FILE, compare=case.name not in RANDOM_CASES)


# ---------------------------------------------------------------- generated mis-calls


def one_node_model(op_type: str, inputs: list[Any], attributes: dict[str, Any], n_outputs: int) -> onnx.ModelProto:
    """The model exported from one call: its inputs declared with the call's shapes."""
    names = ["" if value is None else f"x{index}" for index, value in enumerate(inputs)]
    node = oh.make_node(op_type, names, [f"y{index}" for index in range(n_outputs)], **attributes)
    declared = [oh.make_tensor_value_info(name, oh.np_dtype_to_tensor_dtype(value.dtype), value.shape)
                for name, value in zip(names, inputs) if value is not None]
    graph = oh.make_graph([node], op_type, declared, [onnx.ValueInfoProto(name=o) for o in node.output])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=10)


def call_eagerly(op_type: str, inputs: list[Any], attributes: dict[str, Any], n_outputs: int) -> list[Any]:
    eager_op = get_opset("", OPSET).get_op(op_type)
    if n_outputs == eager_op.default_output_count():
        result = eager_op(*inputs, **attributes)
    else:
        result = eager.call_op(eager_op, inputs, attributes, num_outputs=n_outputs)
    return list(result) if isinstance(result, tuple) else [result]


Call = tuple[str, list[Any], dict[str, Any], int]  # op type, inputs, attributes, number of outputs

_SHAPES = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


def _floats(shape: tuple[int, ...]) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float32) - 2.0).reshape(shape)


def _ints(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


_AXIS_OPS = ["Flatten", "Softmax", "LogSoftmax", "Hardmax", "Concat", "Gather", "ArgMax", "ArgMin", "Split",
             "Compress", "GatherElements", "ScatterElements", "TopK", "LpNormalization", "CumSum", "Squeeze",
             "Unsqueeze", "ReduceSum", "OneHot"]


@st.composite
def axis_calls(draw: Any) -> Call:
    """An op with an axis (attribute or input) anywhere in [-rank - 2, rank + 1]."""
    op_type = draw(st.sampled_from(_AXIS_OPS))
    shape = draw(_SHAPES)
    axis = draw(st.integers(-len(shape) - 2, len(shape) + 1))
    x = _floats(shape)
    indices = st.lists(st.integers(-4, 4), min_size=1, max_size=3)
    if op_type == "Concat":
        return op_type, [x, _floats(draw(_SHAPES))], {"axis": axis}, 1
    if op_type == "Gather":
        return op_type, [x, _ints(draw(indices))], {"axis": axis}, 1
    if op_type == "Split":
        sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
        return op_type, [x, _ints(sizes)], {"axis": axis}, len(sizes)
    if op_type == "Compress":
        condition = np.array(draw(st.lists(st.booleans(), min_size=1, max_size=4)))
        return op_type, [x, condition], {"axis": axis}, 1
    if op_type in ("GatherElements", "ScatterElements"):
        index_shape = draw(_SHAPES)
        index = draw(st.lists(st.integers(-3, 3), min_size=int(np.prod(index_shape)),
                              max_size=int(np.prod(index_shape))))
        index_array = _ints(index).reshape(index_shape)
        inputs = [x, index_array] + ([_floats(index_shape)] if op_type == "ScatterElements" else [])
        return op_type, inputs, {"axis": axis}, 1
    if op_type == "TopK":
        return op_type, [x, _ints([draw(st.integers(0, 4))])], {"axis": axis}, 2
    if op_type == "CumSum":
        return op_type, [x, np.array(axis, dtype=np.int64)], {}, 1
    if op_type in ("Squeeze", "Unsqueeze", "ReduceSum"):
        return op_type, [x, _ints([axis])], {}, 1
    if op_type == "OneHot":
        depth = np.array(draw(st.integers(1, 3)), dtype=np.int64)
        return op_type, [_ints(draw(indices)), depth, np.array([0.0, 1.0], np.float32)], {"axis": axis}, 1
    return op_type, [x], {"axis": axis}, 1


@st.composite
def count_calls(draw: Any) -> Call:
    """An op given a list of sizes, repeats, pads or bounds whose length may not fit the rank."""
    op_type = draw(st.sampled_from(["Tile", "Expand", "Reshape", "Pad", "Transpose", "Slice", "DepthToSpace",
                                    "SpaceToDepth"]))
    shape = draw(_SHAPES)
    x = _floats(shape)
    counts = st.lists(st.integers(-1, 3), min_size=0, max_size=4)
    if op_type == "Transpose":
        return op_type, [x], {"perm": draw(st.lists(st.integers(-1, 3), min_size=1, max_size=4))}, 1
    if op_type == "Slice":
        starts, ends = draw(st.lists(st.integers(-2, 2), min_size=1, max_size=3)), draw(counts.filter(bool))
        axes = draw(st.none() | st.lists(st.integers(-4, 3), min_size=1, max_size=3))
        return op_type, [x, _ints(starts), _ints(ends)] + ([] if axes is None else [_ints(axes)]), {}, 1
    if op_type in ("DepthToSpace", "SpaceToDepth"):
        image = _floats(draw(st.lists(st.integers(1, 4), min_size=3, max_size=5).map(tuple)))
        return op_type, [image], {"blocksize": draw(st.integers(1, 3))}, 1
    return op_type, [x, _ints(draw(counts))], {}, 1


@st.composite
def rank_calls(draw: Any) -> Call:
    """Ops whose operands' ranks and sizes must fit together."""
    op_type = draw(st.sampled_from(["MatMul", "Gemm", "Add", "Where", "Conv", "Trilu", "EyeLike", "Det", "Einsum",
                                    "MaxPool", "AveragePool", "LayerNormalization", "InstanceNormalization"]))
    first, second = _floats(draw(_SHAPES)), _floats(draw(_SHAPES))
    if op_type in ("MaxPool", "AveragePool"):
        image = _floats(draw(st.lists(st.integers(1, 3), min_size=2, max_size=4).map(tuple)))
        return op_type, [image], {"kernel_shape": draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))}, 1
    if op_type == "LayerNormalization":
        return op_type, [first, second], {"axis": draw(st.integers(-3, 2))}, 1
    if op_type == "InstanceNormalization":
        image = _floats(draw(st.lists(st.integers(1, 3), min_size=2, max_size=4).map(tuple)))
        return op_type, [image, second, _floats(draw(_SHAPES))], {}, 1
    if op_type == "Where":
        return op_type, [np.ones(draw(_SHAPES), dtype=bool), first, second], {}, 1
    if op_type == "Conv":
        image = _floats(draw(st.lists(st.integers(1, 3), min_size=2, max_size=4).map(tuple)))
        weight = _floats(draw(st.lists(st.integers(1, 2), min_size=2, max_size=4).map(tuple)))
        return op_type, [image, weight], {}, 1
    if op_type in ("Trilu", "EyeLike", "Det"):
        return op_type, [first], {}, 1
    if op_type == "Einsum":
        return op_type, [first, second], {"equation": draw(st.sampled_from(["ij,jk->ik", "i,i->", "ij->ji"]))}, 1
    return op_type, [first, second], {}, 1


@st.composite
def value_calls(draw: Any) -> Call:
    """Calls whose values, not shapes, decide: a zero divisor, a zero step, an index outside."""
    op_type = draw(st.sampled_from(["Div", "Mod", "Range", "GatherND", "ConstantOfShape"]))
    small = st.lists(st.integers(-2, 2), min_size=1, max_size=3)
    if op_type in ("Div", "Mod"):
        values = draw(small)
        return op_type, [_ints(values), _ints(draw(small.filter(lambda v: len(v) == len(values))))], {}, 1
    if op_type == "Range":
        start, limit, delta = (np.array(draw(st.integers(-2, 2)), np.int64) for _ in range(3))
        return op_type, [start, limit, delta], {}, 1
    if op_type == "GatherND":
        return op_type, [_floats((2, 3)), _ints(draw(small)).reshape(1, -1)], {}, 1
    return op_type, [_ints(draw(small))], {}, 1


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # (onnx.reference's numpy, never eager's)
@settings(max_examples=300, deadline=None)
@given(st.one_of(axis_calls(), count_calls(), rank_calls(), value_calls()))
def test_generated_call_agrees_with_onnxruntime(call: Call) -> None:
    op_type, inputs, attributes, n_outputs = call
    model = one_node_model(op_type, inputs, attributes, n_outputs)
    feeds = {f"x{index}": value for index, value in enumerate(inputs) if value is not None}
    verdict = check_agreement(lambda: call_eagerly(op_type, inputs, attributes, n_outputs), model, feeds, __file__)
    event(f"onnxruntime {verdict}")  # (--hypothesis-show-statistics: how the calls split)


# The calls onnx.reference ran eagerly while onnxruntime refuses them (each one, by name).
_REFUSED_BY_ONNXRUNTIME_ALONE: list[Call] = [
    ("Tile", [_floats((2, 3)), _ints([2])], {}, 1),
    ("Slice", [_floats((2, 3)), _ints([0]), _ints([1, 1])], {}, 1),
    ("OneHot", [_ints([1, 2]), np.array(3, np.int64), np.array([0.0, 1.0], np.float32)], {"axis": 3}, 1),
    ("Trilu", [_floats((3,))], {}, 1),
    ("GatherElements", [_floats((2, 3)), _ints([7, 0, 0, 0, 0, 0]).reshape(2, 3)], {"axis": 1}, 1),
    ("Div", [_ints([1, 2]), _ints([0, 1])], {}, 1),
    ("Mod", [_ints([1, 2]), _ints([0, 1])], {}, 1),
]


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # (onnx.reference's numpy dividing by 0)
@pytest.mark.parametrize("call", _REFUSED_BY_ONNXRUNTIME_ALONE, ids=[c[0] for c in _REFUSED_BY_ONNXRUNTIME_ALONE])
def test_a_call_onnx_reference_accepts_and_onnxruntime_refuses_is_an_error(call: Call) -> None:
    op_type, inputs, attributes, n_outputs = call
    model = one_node_model(op_type, inputs, attributes, n_outputs)
    feeds = {f"x{index}": value for index, value in enumerate(inputs)}
    from onnx.reference import ReferenceEvaluator

    ReferenceEvaluator(model).run(None, feeds)  # (onnx.reference runs it: the hole this closes)
    verdict = check_agreement(lambda: call_eagerly(op_type, inputs, attributes, n_outputs), model, feeds, __file__)
    assert verdict == "refuses"


# ---------------------------------------------------------------- compiled from @script


@script()
def tile_by_one_count(x: FLOAT[2, 3]) -> FLOAT[4, 3]:
    return op.Tile(x, op.Constant(value_ints=[2]))


@script()
def one_hot_past_the_rank(indices: INT64[2]) -> FLOAT[2, 3]:
    return op.OneHot(indices, op.Constant(value_int=3), op.Constant(value_floats=[0.0, 1.0]), axis=3)


@script()
def lower_triangle_of_a_vector(x: FLOAT[3]) -> FLOAT[3]:
    return op.Trilu(x)


@script()
def flatten_past_the_rank(x: FLOAT[2, 3]) -> FLOAT[6, 1]:
    return op.Flatten(x, axis=5)


@script()
def concat_past_the_rank(x: FLOAT[2, 3]) -> FLOAT[4, 3]:
    return op.Concat(x, x, axis=2)


_SCRIPTED: list[Any] = [
    pytest.param(tile_by_one_count, _floats((2, 3)), marks=pytest.mark.invalid_export(
        "the compiler has no rule for Tile's repeat count: the model it writes is one onnx.checker refuses too")),
    (one_hot_past_the_rank, _ints([1, 2])),
    pytest.param(lower_triangle_of_a_vector, _floats((3,)), marks=pytest.mark.invalid_export(
        "the compiler's rule for Trilu keeps the input's shape without asking for rank 2: the model it writes is "
        "one onnx.checker refuses too")),
    (flatten_past_the_rank, _floats((2, 3))),
    (concat_past_the_rank, _floats((2, 3))),
]


@pytest.mark.parametrize(("function", "x"), _SCRIPTED, ids=lambda v: getattr(v, "name", ""))
def test_a_scripted_mis_call_fails_eagerly_as_its_export_fails(function: Any, x: np.ndarray) -> None:
    """Eagerly: an EagerError at the op's line.  Compiled: the compiler's own message where its
    shape rules can tell, else a model that onnxruntime refuses (the refusal eager mode said)."""
    with pytest.raises(EagerError) as eagerly:
        function(x)
    assert eagerly.value.location is not None and eagerly.value.location.file == __file__
    try:
        model = function.to_model_proto()
    except DslError as compiled:
        assert compiled.message == eagerly.value.message
        assert compiled.location is not None and compiled.location.line == eagerly.value.location.line
        return
    verdict, message, _ = onnxruntime_outputs(model, {model.graph.input[0].name: x})
    assert verdict == "refuses", message
    assert eagerly.value.backend_messages.get("onnxruntime"), eagerly.value.backend_messages


# ---------------------------------------------------------------- ops run in onnx.reference by policy

# Calls of ops eager mode runs in onnx.reference by policy (eager.backend_policy) that
# onnxruntime refuses while onnx.reference alone would run them: onnxruntime's verdict holds.
_POLICY_CALLS: list[Call] = [
    ("Resize", [_floats((1, 1, 4, 4)), None, np.array([1, 1, 0, 2], np.float32)],
     {"coordinate_transformation_mode": "align_corners", "mode": "linear"}, 1),
    ("Dropout", [_floats((2, 2)), np.array(1.5, np.float32), np.array(True)], {}, 1),
]


@pytest.mark.parametrize("call", _POLICY_CALLS, ids=[c[0] for c in _POLICY_CALLS])
def test_an_op_run_in_onnx_reference_by_policy_is_refused_as_onnxruntime_refuses(call: Call) -> None:
    op_type, inputs, attributes, n_outputs = call
    model = one_node_model(op_type, inputs, attributes, n_outputs)
    feeds = {f"x{index}": value for index, value in enumerate(inputs) if value is not None}
    from onnx.reference import ReferenceEvaluator

    ReferenceEvaluator(model).run(None, feeds)  # (onnx.reference alone runs it)
    verdict = check_agreement(lambda: call_eagerly(op_type, inputs, attributes, n_outputs), model, feeds, __file__)
    assert verdict == "refuses"


# ---------------------------------------------------------------- eager.run, node by node


def _tile_model() -> onnx.ModelProto:
    """y = Tile(x, repeats), repeats of any length: onnxruntime loads it, and refuses a run
    whose repeats do not match x's rank."""
    graph = oh.make_graph([oh.make_node("Tile", ["x", "repeats"], ["y"])], "tile",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
                           oh.make_tensor_value_info("repeats", onnx.TensorProto.INT64, ["k"])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=10)


def _trilu_model() -> onnx.ModelProto:
    """Trilu of a vector: onnxruntime refuses to load it (its rank must be at least 2)."""
    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["h"]), oh.make_node("Trilu", ["h"], ["y"])], "trilu",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=10)


_MODELS = [(_tile_model, {"x": _floats((2, 3)), "repeats": _ints([2])}, "node 0"),
           (_trilu_model, {"x": _floats((3,))}, "node 1")]


@pytest.mark.parametrize(("make", "feeds", "node"), _MODELS, ids=["refused-run", "refused-load"])
def test_eager_run_refuses_a_model_onnxruntime_refuses(make: Callable[[], onnx.ModelProto],
                                                       feeds: dict[str, np.ndarray], node: str) -> None:
    """Whole or node by node, eager.run raises where onnxruntime refuses the model, naming
    the node (onnx.reference, which runs both, is not asked)."""
    model = make()
    verdict, message, _ = onnxruntime_outputs(model, feeds)
    assert verdict == "refuses", message
    for node_by_node in (False, True):
        with pytest.raises(EagerError, match=node) as raised:
            eager.run(model, feeds, node_by_node=node_by_node)
        assert "onnxruntime" in str(raised.value)

def test_eager_run_runs_the_tile_model_where_its_repeats_fit() -> None:
    x = _floats((2, 3))
    (tiled,) = eager.run(_tile_model(), {"x": x, "repeats": _ints([2, 1])}, node_by_node=True)
    np.testing.assert_array_equal(tiled, np.tile(x, (2, 1)))
