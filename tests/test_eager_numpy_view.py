"""Eager values answer numpy's array methods with numpy's results; operators stay ONNX.

The oracle is numpy itself: every method called on an EagerTensor is called with the
same arguments on the array it holds, and the two results must agree in type, dtype,
shape and values (an array result comes back as an EagerTensor holding numpy's array).
"""

from __future__ import annotations

import warnings
from typing import Any

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from dsl import FLOAT, INT64, script
from dsl import opset18 as op
from dsl.dtypes import DType
from dsl.errors import DslTypeError, UnsupportedSyntaxError
from eager import EagerTensor

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
AXIS_METHODS = ["max", "min", "sum", "mean", "prod", "all", "any", "std", "var", "argmax", "argmin",
                "cumsum", "cumprod", "argsort"]
KEEPDIMS_METHODS = {"max", "min", "sum", "mean", "prod", "all", "any", "std", "var", "argmax", "argmin"}
PLAIN_METHODS = ["tolist", "item", "flatten", "ravel", "transpose", "squeeze", "copy", "nonzero", "tobytes"]
ATTRIBUTES = ["shape", "dtype", "ndim", "size", "nbytes", "itemsize", "T", "strides", "real"]


def _elements(dtype: Any) -> st.SearchStrategy[Any]:
    if dtype is np.bool_:
        return st.booleans()
    if np.issubdtype(dtype, np.integer):
        return st.integers(-20, 20)
    return st.floats(-100, 100, width=np.dtype(dtype).itemsize * 8)


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = draw(st.sampled_from(DTYPES))
    return draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                           elements=_elements(dtype)))


@st.composite
def calls(draw: st.DrawFn, array: np.ndarray) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """A method name with arguments valid for numpy's method (or an error numpy raises too)."""
    kind = draw(st.sampled_from(["axis", "plain", "astype", "reshape", "round", "clip", "shape ops", "operand"]))
    if kind == "axis":
        name = draw(st.sampled_from(AXIS_METHODS))
        kwargs: dict[str, Any] = {}
        if array.ndim:
            kwargs["axis"] = draw(st.sampled_from([None, *range(-array.ndim, array.ndim)]))
            if name == "argsort" and kwargs["axis"] is None:
                kwargs["axis"] = -1
        if name in KEEPDIMS_METHODS and draw(st.booleans()):
            kwargs["keepdims"] = True
        return name, (), kwargs
    if kind == "plain":
        return draw(st.sampled_from(PLAIN_METHODS)), (), {}
    if kind == "astype":
        return "astype", (draw(st.sampled_from([*DTYPES, np.float16, np.uint8])),), {}
    if kind == "reshape":
        return "reshape", (-1,), {}
    if kind == "round":
        return "round", (draw(st.integers(0, 2)),), {}
    if kind == "clip":
        return "clip", (draw(st.integers(-5, 0)), draw(st.integers(0, 5))), {}
    if kind == "operand":  # methods taking another array (an EagerTensor one as often as a numpy one)
        other = draw(st.sampled_from([array.T, EagerTensor(array.T)]))
        indices = draw(st.sampled_from([[0], np.array([0, -1])]))
        return draw(st.sampled_from([("dot", (other,), {}), ("take", (indices,), {}), ("conj", (), {})]))
    if array.ndim >= 2:
        return draw(st.sampled_from([("swapaxes", (0, -1), {}), ("diagonal", (), {}), ("trace", (), {})]))
    return "repeat", (2,), {}


def assert_numpy_result(got: Any, want: Any) -> None:
    """``got`` is what numpy's ``want`` is: an EagerTensor holding an equal array, or the same scalar/list."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, EagerTensor), f"{type(got).__name__} for an array result"
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.array, want)
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for got_item, want_item in zip(got, want):
            assert_numpy_result(got_item, want_item)
    else:
        assert type(got) is type(want), f"{type(got).__name__} where numpy gives {type(want).__name__}"
        if isinstance(want, (np.generic, float)) and np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want


def _outcome(call: Any) -> tuple[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (mean of an empty array, overflowing casts: both sides warn alike)
        try:
            return "result", call()
        except Exception as error:
            return "error", type(error)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_array_method_gives_numpys_result(data: st.DataObject) -> None:
    array = data.draw(arrays())
    name, args, kwargs = data.draw(calls(array))
    tensor = EagerTensor(array.copy())
    numpy_args = tuple(arg.array if isinstance(arg, EagerTensor) else arg for arg in args)
    want = _outcome(lambda: getattr(array, name)(*numpy_args, **kwargs))
    got = _outcome(lambda: getattr(tensor, name)(*args, **kwargs))
    if want[0] == "error":
        assert got == want  # numpy refuses (item() of many values, max of an empty axis): the same error
    else:
        assert got[0] == "result", got
        assert_numpy_result(got[1], want[1])
    np.testing.assert_array_equal(tensor.array, array)  # inspecting never changes the value


@settings(max_examples=100, deadline=None)
@given(arrays(), st.sampled_from(ATTRIBUTES))
def test_every_array_attribute_gives_numpys_value(array: np.ndarray, name: str) -> None:
    if name == "dtype":  # the ONNX element type object @script gives too, equal to numpy's dtype
        got = EagerTensor(array).dtype
        assert isinstance(got, DType) and got == array.dtype and np.dtype(got) == array.dtype
        return
    assert_numpy_result(getattr(EagerTensor(array), name), getattr(array, name))


@settings(max_examples=100, deadline=None)
@given(arrays())
def test_python_protocols_follow_numpy(array: np.ndarray) -> None:
    tensor = EagerTensor(array)
    assert str(tensor) == str(array)
    assert np.asarray(tensor) is array  # no copy for a look
    assert f"{tensor}" == str(array)
    if array.ndim == 0:
        with pytest.raises(DslTypeError):
            len(tensor)
        with pytest.raises(DslTypeError):
            iter(tensor)
        assert f"{tensor:.3f}" == f"{array[()]:.3f}"
        return
    assert len(tensor) == len(array)
    rows = list(tensor)
    assert len(rows) == len(array)
    for row, want in zip(rows, array):  # rows are tensors, as tensor[i] is
        assert_numpy_result(row, np.asarray(want))
    if array.size:
        assert array.flat[0] in tensor
        # an index runs the ONNX lowering: a tensor (0-d for one element) with numpy's values
        assert_numpy_result(tensor[0], np.asarray(array[0]))


@settings(max_examples=100, deadline=None)
@given(arrays(), st.sampled_from(["exp", "isnan", "abs", "sqrt", "maximum", "isfinite", "sign"]))
def test_numpy_ufuncs_other_than_operators_give_numpys_result(array: np.ndarray, name: str) -> None:
    ufunc = getattr(np, name)
    args = (array, array) if ufunc.nin == 2 else (array,)
    want = _outcome(lambda: ufunc(*args))
    got = _outcome(lambda: ufunc(*[EagerTensor(a) for a in args]))
    if want[0] == "error":
        assert got == want
    else:
        assert_numpy_result(got[1], want[1])


def test_numpy_functions_take_eager_values() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = EagerTensor(array)
    assert_numpy_result(np.mean(tensor, axis=0), np.mean(array, axis=0))
    assert_numpy_result(np.concatenate([tensor, array]), np.concatenate([array, array]))
    assert_numpy_result(np.where(tensor > 5, tensor, 0.0), np.where(array > 5, array, 0.0))
    assert np.allclose(tensor, array) and np.array_equal(tensor, array)
    assert np.shape(tensor) == (3, 4) and np.ndim(tensor) == 2
    np.testing.assert_allclose(tensor, array)
    assert_numpy_result(np.add.reduce(tensor, axis=1), np.add.reduce(array, axis=1))  # a reduction is numpy's


def test_operators_keep_onnx_semantics_with_numpy_on_either_side() -> None:
    ints = np.array([-7, 7, 5], dtype=np.int64)
    tensor = EagerTensor(ints)
    # ONNX integer Div truncates toward zero and Mod takes the divisor's sign; numpy would
    # give floats for / and floor semantics nowhere else than here.
    for got in (tensor / np.int64(2), ints / EagerTensor(np.full(3, 2, np.int64)), np.true_divide(tensor, 2)):
        assert isinstance(got, EagerTensor) and got.dtype == np.int64
        np.testing.assert_array_equal(got.array, [-3, 3, 2])
    floats = np.array([-7.0, 7.0], dtype=np.float32)
    got = floats % EagerTensor(np.array([3.0, 3.0], dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.fmod(floats, 3.0))  # ONNX float Mod is fmod, not numpy's %
    assert (np.array([1, 2], np.int64) < EagerTensor(np.array([2, 2], np.int64))).tolist() == [True, False]
    assert (-EagerTensor(np.array([1.0], np.float32))).tolist() == [-1.0]
    with pytest.raises(UnsupportedSyntaxError):
        np.array([1.0], np.float32) // EagerTensor(np.array([1.0], np.float32))
    with pytest.raises(DslTypeError):  # ONNX Add needs one element type; numpy would promote
        np.array([1.0], np.float64) + EagerTensor(np.array([1.0], np.float32))


def test_methods_inside_a_body_are_for_inspection_and_results_stay_onnx() -> None:
    seen: dict[str, Any] = {}

    @script()
    def normalise(x: FLOAT["N"], counts: INT64["N"]) -> FLOAT["N"]:
        seen["max"] = x.max()
        seen["shape"] = x.shape
        seen["list"] = counts.tolist()
        seen["halves"] = counts.sum(keepdims=True) / 2  # an eager value: ONNX integer Div
        return op.Div(x, x.max())

    x = np.array([1.0, 4.0, 2.0], dtype=np.float32)
    counts = np.array([1, 2, 4], dtype=np.int64)
    np.testing.assert_array_equal(normalise(x, counts), x / 4.0)
    assert type(seen["max"]) is np.float32 and seen["max"] == 4.0
    assert seen["shape"] == (3,) and seen["list"] == [1, 2, 4]
    assert isinstance(seen["halves"], EagerTensor) and seen["halves"].tolist() == [3]


def test_torch_in_gives_torch_out_through_numpy_methods() -> None:
    torch = pytest.importorskip("torch", reason="torch is an optional extra")

    @script()
    def scaled(x: FLOAT["N"]) -> FLOAT["N"]:
        return x / x.max()

    got = scaled(torch.tensor([1.0, 2.0, 4.0]))
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, torch.tensor([0.25, 0.5, 1.0]))

    @script()
    def transposed(x: FLOAT["N", "M"]) -> FLOAT["M", "N"]:
        return x.T  # an array result is an eager value holding numpy's array, so torch again

    got = transposed(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (3, 2)
