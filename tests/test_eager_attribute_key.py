"""The eager kernel cache never serves one call's session to a call with other attributes.

Two calls in a row differ in one attribute only (its value, an array's shape or dtype,
the sign of a zero); the second must compute with its own attribute, checked against
numpy.  A cache key that forgot any part of an attribute would hand the second call the
first call's session, and these tests would see the first call's result.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import eager
from dsl import FLOAT, script
from dsl import opset18 as op
from tests.helpers import export_and_run

F32 = np.float32


@pytest.fixture(autouse=True)
def _empty_cache():
    eager.clear_cache()
    yield


def test_an_array_attribute_of_another_shape_gets_its_own_session() -> None:
    flat = op.Constant(value=np.arange(4))
    square = op.Constant(value=np.arange(4).reshape(2, 2))
    np.testing.assert_array_equal(flat, np.arange(4))
    assert square.shape == (2, 2)
    np.testing.assert_array_equal(square, np.arange(4).reshape(2, 2))


def test_an_array_attribute_of_another_dtype_gets_its_own_session() -> None:
    wide = op.Constant(value=np.arange(4, dtype=np.int64))
    narrow = op.Constant(value=np.arange(4, dtype=np.int32))
    assert (wide.dtype, narrow.dtype) == (np.int64, np.int32)


@pytest.mark.parametrize("dtypes", [(np.int32, np.float32), (np.float64, np.int64), (np.uint8, np.bool_)])
def test_array_attributes_with_the_same_bytes_and_other_dtypes_get_their_own_sessions(dtypes) -> None:
    """Zeros of int32 and float32 are the same bytes: only the dtype tells them apart."""
    for dtype in (*dtypes, dtypes[0]):
        got = op.Constant(value=np.zeros(3, dtype))
        assert got.dtype == dtype, (dtype, got.dtype)
        np.testing.assert_array_equal(got, np.zeros(3, dtype))


def test_an_array_attribute_with_other_values_gets_its_own_session() -> None:
    first = op.Constant(value=np.array([1.0, 2.0], F32))
    second = op.Constant(value=np.array([1.0, 2.5], F32))
    np.testing.assert_array_equal(first, [1.0, 2.0])
    np.testing.assert_array_equal(second, [1.0, 2.5])


@pytest.mark.parametrize("second", [0.02, 0.0100001, 0.010000001, -0.01])
def test_float_attributes_are_keyed_exactly(second: float) -> None:
    x = np.array([-1000.0, 3.0], F32)
    first = op.LeakyRelu(x, alpha=0.01)
    got = op.LeakyRelu(x, alpha=second)
    np.testing.assert_array_equal(first, np.where(x < 0, x * F32(0.01), x))
    np.testing.assert_array_equal(got, np.where(x < 0, x * F32(second), x))


@pytest.mark.parametrize(("first", "second"), [(0.0, -0.0), (-0.0, 0.0)])
def test_the_sign_of_a_zero_attribute_is_part_of_the_key(first: float, second: float) -> None:
    for value in (first, second):
        got = op.Constant(value_float=value)
        assert np.signbit(got) == (math.copysign(1.0, value) < 0), (value, got)
        got_list = op.Constant(value_floats=[value])
        assert np.signbit(got_list[0]) == (math.copysign(1.0, value) < 0), (value, got_list)


def test_nan_attributes_still_compute_nan() -> None:
    for _ in range(2):  # the second call may take the cached session: it still means NaN
        assert np.isnan(op.Constant(value_float=float("nan")))


@pytest.mark.parametrize(("first", "second"), [([1, 0], [0, 1]), ([0, 1], [1, 0])])
def test_int_list_attributes_are_keyed_by_order(first: list[int], second: list[int]) -> None:
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(op.Transpose(x, perm=first), np.transpose(x, first))
    np.testing.assert_array_equal(op.Transpose(x, perm=second), np.transpose(x, second))


def test_string_attributes_are_keyed_by_value() -> None:
    x = np.arange(4, dtype=F32).reshape(2, 2)
    pads = np.array([0, 1, 0, 1], np.int64)
    np.testing.assert_array_equal(op.Pad(x, pads, mode="constant"), np.pad(x, [(0, 0), (1, 1)], mode="constant"))
    np.testing.assert_array_equal(op.Pad(x, pads, mode="reflect"), np.pad(x, [(0, 0), (1, 1)], mode="reflect"))


def test_int_attributes_are_keyed_by_value() -> None:
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(op.Flatten(x, axis=0), x.reshape(1, 6))
    np.testing.assert_array_equal(op.Flatten(x, axis=1), x.reshape(2, 3))
    np.testing.assert_array_equal(op.Flatten(x, axis=2), x.reshape(6, 1))


@script()
def _times_negative_zero(x: FLOAT["N"]) -> FLOAT["N"]:
    return x * -0.0


@script()
def _times_zero(x: FLOAT["N"]) -> FLOAT["N"]:
    return x * 0.0


def test_literals_zero_and_negative_zero_stay_apart_eager_and_exported() -> None:
    x = np.array([1.0, 2.0], F32)
    for function, negative in ((_times_zero, False), (_times_negative_zero, True), (_times_zero, False)):
        assert np.all(np.signbit(function(x)) == negative)
        assert np.all(np.signbit(export_and_run(function, [x])[0]) == negative)
