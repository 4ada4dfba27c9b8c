"""Element types and annotations against onnx's own tables (the independent oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl import ir, types


def test_every_onnx_element_type_is_named_with_onnxs_number() -> None:
    onnx_types = {name: number for name, number in onnx.TensorProto.DataType.items() if number != 0}
    ours = {name: t.enum for name, t in types.ELEMENT_TYPES.items()}
    assert ours == onnx_types


@pytest.mark.parametrize("name", list(types.ELEMENT_TYPES))
def test_numpy_dtype_matches_onnx_helper(name: str) -> None:
    enum = types.ELEMENT_TYPES[name].enum
    expected = onnx.helper.tensor_dtype_to_np_dtype(enum)
    assert types.numpy_dtype(enum) == expected
    if name != "STRING":
        assert types.element_type_of_dtype(expected) == enum


def test_annotation_forms() -> None:
    assert types.FLOAT.tensor_type == ir.TensorType(1, ())
    assert types.FLOAT[2, "N"] == ir.TensorType(1, (2, "N"))
    assert types.FLOAT[None, 3] == ir.TensorType(1, (None, 3))
    assert types.FLOAT[...] == ir.TensorType(1, None)
    assert types.INT64[5] == ir.TensorType(7, (5,))
    assert repr(types.FLOAT[2, "N"]) == "FLOAT[2, 'N']"
    assert repr(types.BFLOAT16[...]) == "BFLOAT16[...]"
    assert types.Sequence[types.FLOAT[...]] == ir.SequenceType(ir.TensorType(1, None))
    assert types.Optional[types.INT64] == ir.OptionalType(ir.TensorType(7, ()))


@pytest.mark.parametrize("bad", [-1, 2.5, True, object()])
def test_bad_dimension_is_rejected_with_advice(bad: object) -> None:
    with pytest.raises(TypeError, match="non-negative int"):
        types.FLOAT[bad]  # type: ignore[index]


@given(st.one_of(st.booleans(), st.integers(-(2**62), 2**62), st.floats(allow_nan=False), st.text(max_size=5)))
def test_python_literal_types_follow_onnx_conventions(value: object) -> None:
    expected = {bool: "BOOL", int: "INT64", float: "FLOAT", str: "STRING"}[type(value)]
    assert types.element_type_name(types.element_type_of_python(value)) == expected  # type: ignore[arg-type]


def test_python_list_takes_widest_element() -> None:
    assert types.element_type_of_python([1, 2.0]) == types.FLOAT.enum
    assert types.element_type_of_python([1, 2]) == types.INT64.enum
    assert types.element_type_of_python(["a", 1]) is None
    assert types.element_type_of_python([]) is None


def test_lookup_by_name_and_numpy_name() -> None:
    assert types.element_type_from_name("float32") is types.FLOAT
    assert types.element_type_from_name("bfloat16") is types.BFLOAT16
    assert types.element_type_from_name("int64") is types.INT64
    with pytest.raises(KeyError):
        types.element_type_from_name("float33")
    assert types.element_type_name(999) == "DataType(999)"
    assert types.element_type_of_dtype(np.dtype("<U3")) == types.STRING.enum
