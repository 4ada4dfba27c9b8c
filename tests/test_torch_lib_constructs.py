"""Constructs that onnxscript's torch_lib functions use, written here in our own words.

``bench/torch_lib_sample.py`` measures how much of torch_lib compiles; each construct it
found failing is reproduced here, run eagerly and exported (onnxruntime, full checker)
against numpy, or refused with a located DslError both ways.
"""

from __future__ import annotations

import numpy as np
import pytest

from dsl import FLOAT, INT64, ConversionError, OpAttributeError, script
from dsl import opset18 as op
from tests.helpers import check_script

RNG = np.random.default_rng(26)
X = RNG.integers(0, 4, size=(3, 4)).astype(np.float32)


# ------------------------------------------------ an attribute given None is left out

def unique_values(x, axis=None):  # a helper: axis=None means "not given", as eagerly
    values, _, _, _ = op.Unique(x, axis=axis, sorted=1)
    return values


@script()
def unique_flat(x: FLOAT[3, 4]) -> FLOAT["K"]:
    return unique_values(x)


@script()
def unique_rows(x: FLOAT[3, 4]) -> FLOAT["K", 4]:
    return unique_values(x, 0)


def test_attribute_none_is_left_out_eager_and_exported():
    check_script(unique_flat, [X], np.unique(X))
    check_script(unique_rows, [X], np.unique(X, axis=0))
    node = unique_flat.to_model_proto().graph.node[0]
    assert node.op_type == "Unique" and [a.name for a in node.attribute] == ["sorted"]


def test_attribute_none_directly_in_the_op_call():
    assert np.array_equal(unique_values(X), np.unique(X))  # eager, the helper called on numpy

    @script()
    def softmax_default(x: FLOAT[3, 4]) -> FLOAT[3, 4]:
        return op.Softmax(x, axis=None)

    expected = np.exp(X) / np.exp(X).sum(axis=-1, keepdims=True)
    check_script(softmax_default, [X], expected)


def test_required_attribute_given_none_is_refused_both_ways():
    @script()
    def cast_to_none(x: FLOAT[3, 4]) -> FLOAT[3, 4]:
        flat = op.Flatten(x, axis=None)  # optional: left out, axis 1
        return op.Cast(flat, to=None)

    with pytest.raises(OpAttributeError, match="Cast requires attribute to") as compiled:
        cast_to_none.to_model_proto()
    assert compiled.value.location is not None and "to=None" in compiled.value.location.source_line
    with pytest.raises(OpAttributeError, match="Cast requires attribute to"):
        op.Cast(X, to=None)


# ------------------------------------------------ a parameter named self, by keyword

@script()
def twice(self: FLOAT[...]) -> FLOAT[...]:
    return self * 2.0


@script()
def calls_twice_by_keyword(x: FLOAT[3, 4]) -> FLOAT[3, 4]:
    return twice(self=x) + 1.0


def test_parameter_named_self_by_keyword():
    assert np.array_equal(twice(self=X), X * 2.0)
    check_script(calls_twice_by_keyword, [X], X * 2.0 + 1.0)


# ------------------------------------------------ an output whose rank nobody can tell

@script()
def sum_over(x: FLOAT[3, 4], axes: INT64[2]):
    return op.ReduceSum(x, axes, keepdims=0)


@script()
def sum_over_annotated(x: FLOAT[3, 4], axes: INT64[2]) -> FLOAT[...]:
    return op.ReduceSum(x, axes, keepdims=0)


@script()
def sum_over_one(x: FLOAT[3, 4], axes: INT64[1]):
    return op.ReduceSum(x, axes, keepdims=0)


def test_output_of_unknown_rank_is_a_located_error_not_an_invalid_model():
    """Two run-time axes may be one axis twice (onnxruntime reduces it once): rank 0 or 1."""
    axes = np.array([1, 1], dtype=np.int64)
    assert np.allclose(sum_over(X, axes), X.sum(axis=1))  # eagerly the rank is the data's
    with pytest.raises(ConversionError, match=r"rank of output .* is known only at run time: it comes from ReduceSum over 2 axes") as error:
        sum_over.to_model_proto()
    assert error.value.location is not None and "ReduceSum" in error.value.location.source_line
    with pytest.raises(ConversionError, match=r"rank of output .* is known only at run time: it comes from ReduceSum over 2 axes"):
        sum_over_annotated.to_model_proto()


def test_output_rank_of_a_reduction_over_one_runtime_axis_is_settled():
    axes = np.array([1], dtype=np.int64)
    check_script(sum_over_one, [X, axes], X.sum(axis=1))


# ------------------------------------------------ a tensor attribute from an array-like object

class ArrayBox:
    """Any tensor type of another library that offers numpy's ``__array__``."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)


OFFSET = ArrayBox(np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32))


@script()
def add_boxed_constant(x: FLOAT[3, 4]) -> FLOAT[3, 4]:
    return x + op.Constant(value=OFFSET)


def test_array_protocol_object_as_tensor_attribute():
    check_script(add_boxed_constant, [X], X + OFFSET.array)
    assert np.array_equal(op.Constant(value=OFFSET), OFFSET.array)
    with pytest.raises(OpAttributeError, match="must be a tensor"):
        op.Constant(value=ArrayBox)  # the class itself is not an array


# ------------------------------------------------ an onnx_ir attribute object as the value

def test_onnx_ir_attribute_object_gives_its_value():
    onnx_ir = pytest.importorskip("onnx_ir", reason="onnx_ir (onnxscript's IR) is not installed")
    minus_one = onnx_ir.AttrInt64s("value_ints", [-1])

    @script()
    def flatten_with_ir_attr(x: FLOAT[3, 4]) -> FLOAT[12]:
        return op.Reshape(x, op.Constant(value_ints=minus_one))

    check_script(flatten_with_ir_attr, [X], X.reshape(-1))
    assert np.array_equal(op.Constant(value_ints=minus_one), np.array([-1]))
    with pytest.raises(OpAttributeError, match="must be a list of ints"):
        op.Constant(value_ints=onnx_ir.AttrFloat32s("value_ints", [0.5]))
