"""dsl.indexing.lower_subscript against numpy: random subscripts are lowered through an
emit callback that runs each op in onnx.reference, and must select what numpy selects."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

from dsl import FLOAT, DslTypeError, script
from dsl.indexing import lower_subscript
from tests.roundtrip import runnable


def run_op(op_type: str, inputs: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """One ONNX op executed by onnx's reference evaluator (the oracle of ONNX semantics)."""
    if op_type == "Constant":
        return [np.asarray(attributes["value"])]
    names = [f"i{k}" for k in range(len(inputs))]
    node = oh.make_node(op_type, names, ["out"], **attributes)
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, inputs)],
        [oh.make_tensor_value_info("out", 0, None)],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))]


SHAPE = (4, 5, 3)
DATA = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)


def _axis_items(size: int) -> st.SearchStrategy:
    # an ellipsis may shift an item to another axis: integers stay valid for the smallest
    smallest = min(SHAPE)
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    step = st.one_of(st.none(), st.sampled_from([1, 2, -1, -2, 3]))
    return st.one_of(
        st.integers(-smallest, smallest - 1),
        st.builds(slice, bound, bound, step),
    )


@st.composite
def subscripts(draw: st.DrawFn) -> tuple:
    count = draw(st.integers(1, 3))
    items: list = [draw(_axis_items(SHAPE[k])) for k in range(count)]
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()) and count < 3:
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return tuple(items)


@settings(max_examples=150, deadline=None)
@given(subscripts())
def test_random_subscripts_match_numpy(index: tuple) -> None:
    got = lower_subscript(DATA, index, run_op)
    np.testing.assert_array_equal(got, DATA[index])


def run_op_in_onnxruntime(op_type: str, inputs: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """One ONNX op executed by onnxruntime, which follows the Slice text where
    onnx.reference does not (a backward slice from before the first element)."""
    import onnxruntime

    if op_type == "Constant":
        return [np.asarray(attributes["value"])]
    names = [f"i{k}" for k in range(len(inputs))]
    graph = oh.make_graph(
        [oh.make_node(op_type, names, ["out"], **attributes)], "g",
        [oh.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, inputs)],
        [onnx.ValueInfoProto(name="out")],  # (onnxruntime infers the type)
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    session = onnxruntime.InferenceSession(runnable(model).SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(r) for r in session.run(None, dict(zip(names, inputs)))]


@settings(max_examples=100, deadline=None)
@given(subscripts())
def test_random_subscripts_match_numpy_on_onnxruntime(index: tuple) -> None:
    got = lower_subscript(DATA, index, run_op_in_onnxruntime)
    np.testing.assert_array_equal(got, DATA[index])


@pytest.mark.parametrize("index", [
    (slice(-9, None, -1),), (slice(-6, -9, -1), slice(None, None, -2)), (Ellipsis, slice(-4, None, -2)),
    (slice(-5, None, -1),), (slice(-4, None, -1),),
])
def test_a_backward_slice_from_before_the_first_element_selects_nothing(index: tuple) -> None:
    # Python's meaning; ONNX's Slice (onnxruntime) would start at the first element
    got = lower_subscript(DATA, index, run_op_in_onnxruntime)
    np.testing.assert_array_equal(got, DATA[index])
    assert got.shape == DATA[index].shape


@pytest.mark.parametrize("index", [
    (np.int64(2),), (slice(None, None, -1), Ellipsis, 0), (None, Ellipsis, None),
    (Ellipsis, slice(1, None)), ([3, 0, 1],), (slice(None), [2, 2]),
])
def test_tensor_and_list_indices(index: tuple) -> None:
    got = lower_subscript(DATA, index, run_op)
    np.testing.assert_array_equal(got, DATA[index])


def test_tensor_index_and_tensor_slice_bounds() -> None:
    i = np.array(-1, np.int64)
    np.testing.assert_array_equal(lower_subscript(DATA, (slice(None), i), run_op), DATA[:, -1])
    start = np.array([1], np.int32)
    np.testing.assert_array_equal(lower_subscript(DATA, slice(start, 3), run_op), DATA[1:3])


@pytest.mark.parametrize("index", [(Ellipsis, Ellipsis), (True,), slice(None, None, 0),
                                   (np.array([0]), np.array([1]))])
def test_unsupported_subscripts_raise_dsl_errors(index: object) -> None:
    with pytest.raises(DslTypeError):
        lower_subscript(DATA, index, run_op)


def test_constant_tensors_are_int64() -> None:
    seen: list = []

    def emit(op_type: str, inputs: list, attributes: dict) -> list:
        if op_type == "Constant":
            seen.append(attributes["value"].dtype)
        return run_op(op_type, inputs, attributes)

    lower_subscript(DATA, (slice(1, 3), None, 0), emit)
    assert seen and all(dtype == np.int64 for dtype in seen)


def test_a_backward_slice_compiled_and_eager_on_sizes_known_at_run_time() -> None:
    """``x[-9::-1]`` on an axis of unknown size: the exported model (onnxruntime) and eager
    mode select what numpy selects, for sizes below, at and above 9."""
    import onnxruntime

    @script()
    def backward(x: FLOAT["N", "M"]) -> FLOAT["A", "B"]:
        return x[-9::-1, -3:-9:-2]

    session = onnxruntime.InferenceSession(runnable(backward.to_model_proto()).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    for rows, columns in [(3, 2), (9, 3), (12, 10), (0, 4)]:
        x = np.arange(rows * columns, dtype=np.float32).reshape(rows, columns)
        expected = x[-9::-1, -3:-9:-2]
        for got in (session.run(None, {"x": x})[0], np.asarray(backward(x))):
            assert got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)
