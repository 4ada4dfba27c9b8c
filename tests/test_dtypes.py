"""``dsl.dtypes.DType``, the object ``x.dtype`` is: its int value, equality, numpy protocol and
reading API checked against independent oracles (onnx.helper's numpy table, numpy and
ml_dtypes' own type information, onnx_ir's ``DataType`` where it is installed)."""

from __future__ import annotations

import copy
import pickle
import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import FLOAT, INT64, ir, types
from dsl.dtypes import DType, dtype_mismatch, dtype_of, element_type_of
from dsl.errors import DslTypeError


def _numpy_holds(element_type: int) -> bool:
    try:
        onnx.helper.tensor_dtype_to_np_dtype(element_type)
        types.numpy_dtype(element_type)
    except (KeyError, ValueError, AttributeError, ImportError):  # (an onnx / ml_dtypes without that type)
        return False
    return True


# Every ONNX element type numpy (with ml_dtypes) can hold here, read from onnx's own enum.
HELD = [number for name, number in onnx.TensorProto.DataType.items() if number and _numpy_holds(number)]
# numpy's own types (not ml_dtypes'), where numpy's type hierarchy is the oracle.
BUILTIN = [number for number in HELD if types.numpy_dtype(number).type.__module__ == "numpy"]
STRING = onnx.TensorProto.STRING


def _bits(dtype: np.dtype) -> int:
    """Bits per element from numpy / ml_dtypes (which store 4-bit types in a byte)."""
    if dtype.type.__module__ == "numpy":
        return dtype.itemsize * 8
    for info in (ml_dtypes.finfo, ml_dtypes.iinfo):
        try:
            return int(info(dtype).bits)
        except (ValueError, TypeError):
            continue
    return dtype.itemsize * 8


def test_the_held_types_cover_numpys_and_ml_dtypes():
    names = {ir.element_type_name(number) for number in HELD}
    assert {"FLOAT", "INT64", "BOOL", "FLOAT16", "BFLOAT16", "INT4", "COMPLEX128", "STRING"} <= names
    assert {ir.element_type_name(number) for number in BUILTIN} == {
        "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
        "UINT32", "UINT64", "COMPLEX64", "COMPLEX128"}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(HELD))
def test_the_int_value_is_onnxs_element_type_of_the_numpy_dtype(number: int):
    dtype = dtype_of(number)
    numpy_dtype = onnx.helper.tensor_dtype_to_np_dtype(number)
    assert isinstance(dtype, int) and int(dtype) == number
    assert onnx.helper.np_dtype_to_tensor_dtype(dtype.numpy()) == number
    assert dtype.numpy() == numpy_dtype and np.dtype(dtype) == numpy_dtype
    assert dtype == numpy_dtype and dtype == numpy_dtype.type and numpy_dtype == dtype
    assert dtype == str(numpy_dtype) and str(dtype) == numpy_dtype.name == dtype.name
    assert f"{dtype}" == numpy_dtype.name
    assert dtype == number and number == dtype and dtype == types.element_type(number)
    assert DType(numpy_dtype) is not None and DType(numpy_dtype) == dtype
    assert dtype.onnx_name == onnx.TensorProto.DataType.Name(number)
    assert dtype_of(number) is dtype  # one object per type


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(HELD), st.sampled_from(HELD))
def test_two_types_are_equal_only_when_they_are_one(first: int, second: int):
    a, b = dtype_of(first), dtype_of(second)
    assert (a == b) is (first == second) and (a != b) is (first != second)
    assert (a == b.numpy()) is (first == second) and (a == b.numpy().type) is (first == second)
    assert (a == ir.element_type_name(second)) is (first == second)  # ONNX names read too


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([n for n in HELD if n != STRING]))
def test_bitwidth_and_itemsize_are_numpys_and_ml_dtypes(number: int):
    dtype = dtype_of(number)
    bits = _bits(dtype.numpy())
    assert dtype.bitwidth == bits
    assert dtype.itemsize == bits / 8
    if bits % 8 == 0:  # a whole number of bytes: an int, numpy's itemsize
        assert type(dtype.itemsize) is int and dtype.itemsize == dtype.numpy().itemsize


def test_a_string_has_no_bitwidth_and_equals_numpys_string_dtypes():
    dtype = dtype_of(STRING)
    with pytest.raises(TypeError, match="STRING"):
        dtype.bitwidth
    assert dtype == np.dtype(object) and dtype == np.str_ and dtype == np.dtype("<U3") and dtype == np.bytes_
    assert dtype != np.float32 and dtype.is_string() and not dtype.is_integer()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(BUILTIN))
def test_kinds_follow_numpys_type_hierarchy(number: int):
    dtype = dtype_of(number)
    numpy_dtype = dtype.numpy()
    assert dtype.is_integer() is bool(np.issubdtype(numpy_dtype, np.integer))
    assert dtype.is_floating_point() is bool(np.issubdtype(numpy_dtype, np.floating))
    assert dtype.is_complex() is bool(np.issubdtype(numpy_dtype, np.complexfloating))
    signed = np.issubdtype(numpy_dtype, np.signedinteger) or np.issubdtype(numpy_dtype, np.inexact)
    assert dtype.is_signed() is bool(signed)
    assert (dtype.kind, dtype.char, dtype.type, dtype.str) == (
        numpy_dtype.kind, numpy_dtype.char, numpy_dtype.type, numpy_dtype.str)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([n for n in HELD if n not in BUILTIN]))
def test_ml_dtypes_kinds_follow_their_type_information(number: int):
    dtype = dtype_of(number)
    numpy_dtype = dtype.numpy()
    try:
        info: ml_dtypes.finfo | ml_dtypes.iinfo = ml_dtypes.finfo(numpy_dtype)
        floating = True
    except (ValueError, TypeError):
        info, floating = ml_dtypes.iinfo(numpy_dtype), False
    assert dtype.is_floating_point() is floating and dtype.is_integer() is not floating
    assert dtype.is_signed() is bool(info.min < 0)


def test_onnx_irs_reading_gives_the_same_answers():
    onnx_ir = pytest.importorskip("onnx_ir", reason="onnx_ir (onnxscript's IR) is the oracle here; not installed")
    for number in HELD:
        dtype, theirs = dtype_of(number), onnx_ir.DataType(number)
        assert onnx_ir.DataType(dtype) is theirs and dtype == theirs and theirs == dtype
        assert theirs.numpy() == dtype.numpy() == dtype
        assert (dtype.is_integer(), dtype.is_floating_point()) == (theirs.is_integer(), theirs.is_floating_point())
        if theirs != onnx_ir.DataType.FLOAT8E8M0:  # onnx_ir calls this sign-less scale type signed
            assert dtype.is_signed() == theirs.is_signed()
        if number != STRING:
            assert (dtype.bitwidth, dtype.itemsize) == (theirs.bitwidth, theirs.itemsize)


def test_numpy_takes_it_wherever_a_dtype_goes_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy deprecates .dtype attributes that are not dtypes
        for number in BUILTIN:
            dtype = dtype_of(number)
            want = dtype.numpy()
            assert np.zeros(3, dtype=dtype).dtype == want
            assert np.arange(3).astype(dtype).dtype == want
            assert np.asarray([1, 0], dtype=dtype).dtype == want
            assert np.array(1, dtype).dtype == want
            assert np.issubdtype(dtype, np.number) is bool(np.issubdtype(want, np.number))
            assert np.dtype(dtype) is want or np.dtype(dtype) == want


def test_onnx_helpers_take_it_as_the_element_type():
    dtype = dtype_of(onnx.TensorProto.FLOAT16)
    tensor = onnx.helper.make_tensor("t", dtype, [2], [1.0, 2.0])
    assert tensor.data_type == onnx.TensorProto.FLOAT16
    assert onnx.helper.make_tensor_type_proto(dtype, [2]).tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert onnx.helper.tensor_dtype_to_np_dtype(dtype) == np.float16
    assert onnx.helper.make_attribute("to", dtype).i == onnx.TensorProto.FLOAT16


def test_hash_is_an_ints_so_int_keyed_tables_find_it_and_numpy_keyed_ones_do_not():
    dtype = dtype_of(FLOAT.enum)
    assert hash(dtype) == hash(1)
    assert {FLOAT.dtype: "f"}[dtype] == "f" and dtype in {1, 7}
    # the documented trade-off: == holds, but a set/dict of numpy dtypes hashes them apart
    assert dtype == np.dtype(np.float32) and dtype not in {np.dtype(np.float32)}
    assert dtype in (np.float32, np.float64) and dtype.numpy() in {np.dtype(np.float32)}


def test_it_is_no_bool_none_or_number_other_than_its_own():
    dtype = dtype_of(FLOAT.enum)
    assert dtype != True and dtype is not None and dtype != None  # noqa: E711, E712
    assert dtype != 1.5 and dtype != "no such type" and dtype != np.zeros(2, np.float32)
    assert dtype == 1 and dtype != 7 and dtype != 0


def test_copies_and_pickles_are_the_same_object():
    dtype = dtype_of(INT64.enum)
    assert pickle.loads(pickle.dumps(dtype)) is dtype and copy.deepcopy(dtype) is dtype
    assert repr(dtype) == "DType(INT64=7, 'int64')"


@pytest.mark.parametrize("value", [0, 99, -1, True, None, 1.0, "no such type", np.dtype("datetime64[s]"), object()])
def test_anything_else_is_no_element_type(value):
    with pytest.raises(DslTypeError, match="is not an"):
        element_type_of(value)


def test_names_read_as_numpy_reads_them_first():
    assert element_type_of("float") == onnx.TensorProto.DOUBLE  # numpy's float is float64
    assert element_type_of("FLOAT") == onnx.TensorProto.FLOAT  # ONNX's name, where numpy reads none
    assert element_type_of(float) == onnx.TensorProto.DOUBLE and element_type_of(bool) == onnx.TensorProto.BOOL
    assert element_type_of("bfloat16") == onnx.TensorProto.BFLOAT16


def test_the_mismatch_error_names_both_types_and_the_cast():
    error = dtype_mismatch(FLOAT.enum, INT64.enum, None, "x")
    assert "x is FLOAT" in str(error) and "INT64" in str(error)
    assert error.hint == "convert it: x = op.Cast(x, to=INT64.dtype)"
