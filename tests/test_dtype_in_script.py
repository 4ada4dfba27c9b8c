"""``x.dtype`` read and declared (``t.dtype = T``) inside ``@script``: the same
:class:`~dsl.dtypes.DType` eagerly and compiled, the same declarations and errors, and
torch_lib-style code (written here in our own words) that reads it compiles and runs to
numpy's results (eagerly, and exported under onnxruntime with the full checker)."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import FLOAT, INT64, Tensor, script, types
from dsl import opset18 as op
from dsl.dtypes import DType
from dsl.errors import DslTypeError, UnsupportedSyntaxError
from tests.helpers import check_script

RNG = np.random.default_rng(26)
# Element types an onnxruntime model input can take and numpy holds natively.
NUMERIC = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
           np.uint32, np.uint64, np.bool_]


def _run_model(function: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    model = function.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: array for i, array in zip(session.get_inputs(), inputs, strict=True)})


def _read_properties(numpy_type: Any) -> Any:
    """A @script function of one input of ``numpy_type`` returning what it read of
    ``x.dtype`` as an INT64 vector (every entry a Python value while compiling)."""
    vector = Annotated[Tensor, types.element_type(types.element_type_of_dtype(numpy_type))["N"]]

    @script()
    def properties(x: vector) -> INT64[9]:
        d = x.dtype
        return op.Constant(value_ints=[
            d, d.bitwidth, int(d.is_integer()), int(d.is_floating_point()), int(d.is_signed()),
            int(d == np.float32), int(d == "int64"), int(d == FLOAT.dtype), np.zeros(1, dtype=d).itemsize,
        ])

    return properties


@settings(max_examples=24, deadline=None)
@given(st.sampled_from(NUMERIC))
def test_dtype_reads_the_same_eagerly_and_compiled_as_numpy_says(numpy_type: Any):
    dtype = np.dtype(numpy_type)
    expected = np.array([
        onnx.helper.np_dtype_to_tensor_dtype(dtype), dtype.itemsize * 8,
        np.issubdtype(dtype, np.integer), np.issubdtype(dtype, np.floating),
        np.issubdtype(dtype, np.signedinteger) or np.issubdtype(dtype, np.floating),
        dtype == np.float32, dtype == np.int64, dtype == np.float32, dtype.itemsize,
    ], dtype=np.int64)
    x = np.zeros(3, dtype=dtype)
    check_script(_read_properties(numpy_type), [x], expected)


def test_eager_and_compiled_dtype_are_one_object():
    seen: list[Any] = []

    @script()
    def record(x: FLOAT["N"]) -> FLOAT["N"]:
        seen.append(x.dtype)  # eagerly: the tensor's; compiled: a Python call at compile time
        return x

    record(np.ones(2, np.float32))
    record.to_model_proto()
    assert len(seen) == 2 and seen[0] is seen[1] and isinstance(seen[0], DType) and seen[0] == np.float32


@pytest.mark.parametrize("numpy_type", [np.float16, np.float64, np.int32])
def test_dtype_passes_to_numpy_cast_and_onnx_helper(numpy_type: Any):
    vector = Annotated[Tensor, types.element_type(types.element_type_of_dtype(numpy_type))[3]]

    @script()
    def shifted(x: vector, i: INT64[3]) -> vector:
        ones = np.ones(3, dtype=x.dtype)  # a numpy constant of x's type
        two = op.Constant(value=onnx.helper.make_tensor("two", x.dtype, [], [2]))
        return x + op.Cast(i, to=x.dtype) * two + ones.astype(x.dtype)

    x, i = np.arange(3).astype(numpy_type), np.array([1, 2, 3], np.int64)
    check_script(shifted, [x, i], (x + i.astype(numpy_type) * 2 + 1).astype(numpy_type))


# ------------------------------------------------------------------ t.dtype = T

def test_declaring_the_known_type_changes_nothing():
    @script()
    def same(x: FLOAT["N"]) -> FLOAT["N"]:
        x.dtype = np.float32
        y = op.Abs(x)
        y.dtype = FLOAT.dtype
        return y

    x = RNG.standard_normal(4).astype(np.float32)
    check_script(same, [x], np.abs(x))
    assert [node.op_type for node in same.to_model_proto().graph.node] == ["Abs"]


@script()
def declares_another(x: FLOAT["N"]) -> FLOAT["N"]:
    x.dtype = INT64.dtype
    return x


def _error_text(call: Any) -> str:
    with pytest.raises(DslTypeError) as caught:
        call()
    return str(caught.value)


def test_declaring_another_type_is_the_same_error_eagerly_and_compiled():
    compiled = _error_text(declares_another.to_model_proto)
    eager = _error_text(lambda: declares_another(np.ones(2, np.float32)))
    assert compiled == eager
    assert "x is FLOAT; assigning .dtype = INT64" in compiled and "x.dtype = INT64.dtype" in compiled
    assert "hint: convert it: x = op.Cast(x, to=INT64.dtype)" in compiled


def test_declaring_something_that_is_no_type_is_an_error_at_the_line():
    @script()
    def nonsense(x: FLOAT["N"]) -> FLOAT["N"]:
        x.dtype = "no such type"
        return x

    compiled = _error_text(nonsense.to_model_proto)
    assert compiled == _error_text(lambda: nonsense(np.ones(2, np.float32)))
    assert "'no such type' is not an element type" in compiled and 'x.dtype = "no such type"' in compiled


def test_declaring_an_unknown_type_gives_it_to_the_value():
    @script()
    def plus_one(x):
        y = op.Abs(x)
        y.dtype = FLOAT.dtype  # an untyped input: now the literal below is a FLOAT, no CastLike
        return y + 1

    @script()
    def plus_one_undeclared(x):
        return op.Abs(x) + 1

    function = plus_one.to_function_proto()
    assert [n.op_type for n in function.node] == ["Abs", "Constant", "Add"]
    constant = onnx.numpy_helper.to_array(function.node[1].attribute[0].t)
    assert constant.dtype == np.float32 and constant == 1
    assert "CastLike" in [n.op_type for n in plus_one_undeclared.to_function_proto().node]

    @script()
    def caller(x: FLOAT[3]) -> FLOAT[3]:
        return plus_one(x)

    x = np.array([-1.5, 0.0, 2.0], np.float32)
    check_script(caller, [x], np.abs(x) + 1)


def test_a_numpy_arrays_dtype_stays_numpys_and_is_not_assigned_in_script():
    table = np.zeros(2, np.float32)

    @script()
    def reinterpret(x: FLOAT[2]) -> FLOAT[2]:
        table.dtype = np.int32
        return x

    with pytest.raises(UnsupportedSyntaxError, match=r"only a tensor's \.dtype can be assigned"):
        reinterpret.to_model_proto()


# ------------------------------------------- torch_lib-style code that reads x.dtype

def concat_sizes(sizes):
    """A shape vector of Python ints and INT64 tensors, declared INT64 piece by piece."""
    pieces = [op.Constant(value_ints=[s]) if isinstance(s, int) else op.Reshape(s, [-1]) for s in sizes]
    for piece in pieces:
        piece.dtype = onnx.TensorProto.INT64
    return op.Concat(*pieces, axis=0)


def zeros_of(sizes, dtype=FLOAT.dtype):
    zero = op.Constant(value=onnx.helper.make_tensor("zero", dtype, [], [0]))
    return op.Expand(zero, concat_sizes(sizes))


@script()
def reshaped_static(x: FLOAT[2, 6]) -> FLOAT[3, 4]:
    return op.Reshape(x, concat_sizes([3, 4]))  # every size known: the helper runs at compile time


@script()
def reshaped_dynamic(x: FLOAT["A", 6], rows: INT64) -> FLOAT["R", "C"]:
    return op.Reshape(x, concat_sizes((rows, -1)))  # a tensor size: the helper is compiled in place


@script()
def zeros_static(x: FLOAT[2, 3]) -> FLOAT[2, 3]:
    return x + zeros_of([2, 3])


def test_a_size_helper_declaring_int64_runs_and_compiles_alike():
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    check_script(reshaped_static, [x], x.reshape(3, 4))
    check_script(reshaped_dynamic, [x, np.array(4, np.int64)], x.reshape(4, 3))
    check_script(zeros_static, [x[:, :3]], x[:, :3])


def product(x):
    """Integers multiply as INT64 (a small integer type would overflow), as torch does."""
    if x.dtype.is_integer() and x.dtype.bitwidth < 64:
        x = op.Cast(x, to=INT64.dtype)
    return op.ReduceProd(x, keepdims=0)


def shift_right(x, bits):
    """A logical shift of signed integers: the sign bits masked off (bitwidth sized)."""
    unsigned = np.dtype(f"uint{x.dtype.bitwidth}")
    shifted = op.BitShift(op.Cast(x, to=unsigned), op.Cast(bits, to=unsigned), direction="RIGHT")
    return op.Cast(shifted, to=x.dtype)


def angle(y, x):
    """atan2 for positive x: a constant of the inputs' own type (as ``constant(pi, dtype)``)."""
    half = op.Constant(value=onnx.helper.make_tensor("half", int(x.dtype), [], [0.5]))
    return op.Atan(op.Div(y, x)) * (half * 2)


@script()
def product_int8(x: Annotated[Tensor, types.INT8[4]]) -> INT64:
    return product(x)


@script()
def product_float(x: FLOAT[4]) -> FLOAT:
    return product(x)


@script()
def shift_int32(x: Annotated[Tensor, types.INT32[4]], bits: Annotated[Tensor, types.INT32[4]]) -> (
        Annotated[Tensor, types.INT32[4]]):
    return shift_right(x, bits)


@script()
def angle_float(y: FLOAT[3], x: FLOAT[3]) -> FLOAT[3]:
    return angle(y, x)


def test_torch_lib_style_dtype_readers_run_and_compile_alike():
    small = np.array([5, 7, 9, 11], np.int8)  # 3465 overflows int8: the cast to INT64 decides
    check_script(product_int8, [small], np.prod(small.astype(np.int64)))
    floats = np.array([0.5, 2.0, 3.0, 1.5], np.float32)
    check_script(product_float, [floats], np.prod(floats))
    values, bits = np.array([-8, 16, -1, 3], np.int32), np.array([1, 2, 28, 0], np.int32)
    check_script(shift_int32, [values, bits], (values.view(np.uint32) >> bits.view(np.uint32)).view(np.int32))
    y, x = np.array([1.0, -2.0, 0.5], np.float32), np.array([2.0, 1.0, 4.0], np.float32)
    check_script(angle_float, [y, x], np.arctan2(y, x))


def test_onnx_ir_data_type_reads_and_declares():
    onnx_ir = pytest.importorskip("onnx_ir", reason="torch_lib writes onnx_ir's DataType; not installed")

    @script()
    def cast_back(x: FLOAT[3], i: INT64[3]) -> FLOAT[3]:
        i.dtype = onnx_ir.DataType.INT64
        kind = onnx_ir.DataType(x.dtype)
        if x.dtype == onnx_ir.DataType.FLOAT and kind.is_floating_point():
            return x + op.Cast(i, to=kind)
        return x

    x, i = np.array([0.5, 1.0, 2.0], np.float32), np.array([1, 2, 3], np.int64)
    check_script(cast_back, [x, i], x + i.astype(np.float32))


def test_the_compiled_model_matches_onnxruntime_on_the_static_helper():
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (got,) = _run_model(reshaped_static, [x])
    np.testing.assert_array_equal(got, x.reshape(3, 4))
    nodes = [n.op_type for n in reshaped_static.to_model_proto().graph.node]
    assert nodes.count("Concat") == 0  # the sizes were computed while compiling: one constant


def test_a_weights_dtype_is_the_same_object_eagerly_and_compiled():
    from dsl import initializer

    weight = initializer(np.array([1, 2, 3], np.int32), "w")
    seen: list[Any] = []

    @script()
    def scaled(x: FLOAT[3]) -> FLOAT[3]:
        seen.append(weight.dtype)
        return x * op.Cast(weight, to=FLOAT.dtype) if weight.dtype.is_integer() else x

    x = np.array([0.5, 1.0, 2.0], np.float32)
    check_script(scaled, [x], x * np.array([1, 2, 3], np.float32))
    assert all(found is weight.dtype for found in seen) and weight.dtype == np.int32
