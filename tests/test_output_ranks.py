"""Ranks of model outputs that ONNX shape inference leaves open, settled from static
shapes (converter/output_ranks.py), and the error where only run time can tell.

Each compiled model is checked with onnx.checker (full check) and run in onnxruntime,
eagerly too, against numpy.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.output_ranks import settle_output_ranks
from dsl import BOOL, FLOAT, INT64, script
from dsl import opset18 as op
from dsl.errors import ConversionError
from tests.helpers import check_script


def test_the_checker_wants_a_rank_on_every_model_output_that_onnxruntime_does_without() -> None:
    """The premise: an output typed without a shape is refused by the installed checker
    (so such a model cannot be emitted), while onnxruntime runs it."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 3])
    axes = onnx.helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = onnx.helper.make_node("ReduceMin", ["x", "axes"], ["y"], keepdims=0)
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x, axes], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.ir_version = 8
    with pytest.raises(onnx.checker.ValidationError, match="shape"):
        onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    data = np.arange(9, dtype=np.float32).reshape(3, 3)
    (found,) = session.run(None, {"x": data, "axes": np.array([1])})
    np.testing.assert_array_equal(found, data.min(axis=1))


@script()
def min_over(x: FLOAT[3, 4], axes: INT64[1]):
    return op.ReduceMin(x, axes, keepdims=0)


@script()
def min_kept(x: FLOAT[3, 4], axes: INT64[1]):
    return op.ReduceMin(x, axes, keepdims=1)


@script()
def min_of_all(x: FLOAT[3, 4], axes: INT64[0]):
    return op.ReduceMin(x, axes, keepdims=0)


@script()
def min_or_none(x: FLOAT[3, 4], axes: INT64[0]):
    return op.ReduceMin(x, axes, keepdims=0, noop_with_empty_axes=1)


@script()
def min_attribute(self: FLOAT, dim: INT64, keepdim: int = 0):
    return op.ReduceMin(self, dim, keepdims=keepdim)


@script()
def call_min_attribute(x: FLOAT[3, 4], axes: INT64[1]):
    return min_attribute(x, axes, keepdim=0)


def _checked_rank(function: object, inputs: list[np.ndarray], expected: np.ndarray) -> None:
    """Exported and eager results equal numpy's, and the model declares numpy's rank."""
    check_script(function, inputs, expected)  # type: ignore[arg-type]
    output = function.to_model_proto().graph.output[0]  # type: ignore[attr-defined]
    assert len(output.type.tensor_type.shape.dim) == np.ndim(expected)


@settings(max_examples=12, deadline=None)
@given(axis=st.integers(-2, 1), seed=st.integers(0, 2**16))
def test_a_reduction_over_one_runtime_axis_has_one_axis_less(axis: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
    axes = np.array([axis], dtype=np.int64)
    _checked_rank(min_over, [x, axes], x.min(axis=axis))
    _checked_rank(min_kept, [x, axes], x.min(axis=axis, keepdims=True))
    _checked_rank(call_min_attribute, [x, axes], x.min(axis=axis))


@script()
def shift_if_vector(x: FLOAT[3, 4], axes: INT64[1]):
    y = op.ReduceMin(x, axes, keepdims=0)
    if len(y.shape) == 1:  # a Python int while compiling, as eagerly
        return y + 1.0
    return y


def test_the_compiler_knows_the_rank_of_a_reduction_over_one_runtime_axis() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for axis in (0, 1):
        _checked_rank(shift_if_vector, [x, np.array([axis])], x.min(axis=axis) + 1.0)


def test_a_reduction_over_no_runtime_axes_reduces_all_or_none() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    none = np.zeros((0,), dtype=np.int64)
    _checked_rank(min_of_all, [x, none], np.array(x.min()))
    _checked_rank(min_or_none, [x, none], x)


@script()
def min_over_two(x: FLOAT[3, 4], axes: INT64[2]):
    return op.ReduceMin(x, axes, keepdims=0)


def test_two_runtime_axes_leave_the_rank_open_because_an_axis_may_repeat() -> None:
    """onnxruntime reduces a repeated axis once, so two axes may remove one: the rank of
    the result is not 2 - 2 for every input, and the compiler must not say it is."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert min_over_two(x, np.array([1, 1])).shape == (3,)
    assert min_over_two(x, np.array([0, 1])).shape == ()
    with pytest.raises(ConversionError, match=r"known only at run time: it comes from ReduceMin over 2 axes") as caught:
        min_over_two.to_model_proto()
    assert caught.value.location is not None and "op.ReduceMin(" in caught.value.location.source_line
    assert "keepdims=1" in str(caught.value)


@script()
def scale_channels(x: FLOAT[2, 3, 4], w: FLOAT[3]):
    rank = op.Constant(value_int=3)
    one = op.Constant(value_int=1)
    axes = op.Range(op.Constant(value_int=1), op.Sub(rank, one), one)
    return x * op.Unsqueeze(w, axes)


def test_axes_computed_from_constants_are_folded_to_give_the_rank() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    w = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    _checked_rank(scale_channels, [x, w], x * w[:, None])
    model = scale_channels.to_model_proto()
    assert [node.op_type for node in model.graph.node].count("Range") == 1  # the model itself is not folded


@script()
def is_nonzero(x: FLOAT[3, 3]) -> BOOL:
    result = op.Not(op.Size(x) != 1)
    if result:
        result = op.Cast(x, to=BOOL.dtype)
    return result


@script()
def is_nonzero_untyped(x: FLOAT[3, 3]):
    result = op.Not(op.Size(x) != 1)
    if result:
        result = op.Cast(x, to=BOOL.dtype)
    return result


@script()
def is_nonzero_one(x: FLOAT[1]):
    result = op.Not(op.Size(x) != 1)
    if result:
        result = op.Cast(x, to=BOOL.dtype)
    return result


@script()
def is_nonzero_any(x: FLOAT["N", "M"]):
    result = op.Not(op.Size(x) != 1)
    if result:  # line checked below
        result = op.Cast(x, to=BOOL.dtype)
    return result


def test_an_if_whose_condition_static_sizes_decide_has_the_rank_of_the_branch_taken() -> None:
    x = np.ones((3, 3), dtype=np.float32)
    _checked_rank(is_nonzero_untyped, [x], np.array(False))
    check_script(is_nonzero, [x], np.array(False))
    _checked_rank(is_nonzero_one, [np.array([2.0], dtype=np.float32)], np.array([True]))
    check_script(is_nonzero_one, [np.array([0.0], dtype=np.float32)], np.array([False]))


def test_an_if_whose_branches_differ_in_rank_at_run_time_is_refused_at_the_if() -> None:
    with pytest.raises(ConversionError, match=r"known only at run time.*rank 2 and rank 0") as caught:
        is_nonzero_any.to_model_proto()
    assert caught.value.location is not None
    line = is_nonzero_any.python_function.__code__.co_firstlineno + 3
    assert caught.value.location.line == line
    assert "same rank" in str(caught.value)


def test_folding_leaves_a_huge_range_to_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Range of constants asking for 10**12 elements is never evaluated while compiling
    (the small Range beside it is)."""
    import onnx.reference

    evaluated: list[str] = []
    real = onnx.reference.ReferenceEvaluator

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, proto: object, *args: object, **kwargs: object) -> None:
            evaluated.append(getattr(proto, "op_type", "?"))
            super().__init__(proto, *args, **kwargs)

    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", Recording)
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    small = onnx.helper.make_tensor_value_info("small", onnx.TensorProto.INT64, None)
    nodes = [
        onnx.helper.make_node("Constant", [], ["start"], value=onnx.helper.make_tensor("s", 7, [], [0])),
        onnx.helper.make_node("Constant", [], ["limit"], value=onnx.helper.make_tensor("l", 7, [], [10**12])),
        onnx.helper.make_node("Constant", [], ["delta"], value=onnx.helper.make_tensor("d", 7, [], [1])),
        onnx.helper.make_node("Range", ["start", "limit", "delta"], ["axes"]),
        onnx.helper.make_node("Unsqueeze", ["x", "axes"], ["y"]),
        onnx.helper.make_node("Range", ["start", "delta", "delta"], ["small"]),
    ]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y, small]),
                                   opset_imports=[onnx.helper.make_opsetid("", 18)])
    found = settle_output_ranks(model, ["y", "small"])
    assert list(found) == ["small"]
    assert [dim.dim_value for dim in found["small"].tensor_type.shape.dim] == [1]
    assert evaluated.count("Range") == 1
