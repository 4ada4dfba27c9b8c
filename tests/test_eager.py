"""Eager op calls, EagerTensor operators, eager @script bodies, the session cache, errors.

Oracles: numpy (and ml_dtypes for the narrow float/int types), and the exported model
run in onnxruntime (through tests.helpers.check_script).
"""

from __future__ import annotations

import logging
import traceback

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import eager
import eager.kernels
from dsl import BOOL, FLOAT, INT64, EagerError, OpAttributeError, OpCallError, graph, script, types
from dsl import opset18 as op
from dsl.errors import DslError, DslTypeError
from dsl.onnxruntime_limits import max_opset
from dsl.opsets import get_opset
from eager import EagerTensor
from eager.ortvalues import from_ortvalue, to_ortvalue
from tests.helpers import check_script
from tests.runtime_probes import onnxruntime_runs

try:
    import torch
except ImportError:  # the optional torch extra
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (pip install torch==2.13.0)")

F32 = np.float32


# ------------------------------------------------------------------ element types


def _exact_values(name: str) -> list[float]:
    """Values every element type of this kind represents exactly."""
    if name == "FLOAT8E8M0":
        return [1.0, 2.0, 0.5, 4.0]
    if name.startswith("UINT") or name == "BOOL":
        return [0.0, 1.0, 1.0, 0.0]
    return [0.0, 1.0, -1.0, 0.5 if name not in ("INT2", "INT4", "INT8", "INT16", "INT32", "INT64") else 1.0]


CASTABLE = [name for name in types.ELEMENT_TYPES if name not in ("STRING", "COMPLEX64", "COMPLEX128")]


@pytest.mark.parametrize("name", CASTABLE)
def test_cast_round_trip_every_element_type(name: str) -> None:
    elem = types.ELEMENT_TYPES[name]
    # Cast at opset 25 knows every element type but the 6-bit floats, which exist from 28.
    opset = get_opset("", 28 if name.startswith("FLOAT6") else 25)
    x = np.array(_exact_values(name), dtype=F32)
    y = opset.Cast(x, to=elem.enum)
    assert y.dtype == elem.numpy_dtype
    assert y.shape == x.shape
    np.testing.assert_array_equal(y.astype(F32), x.astype(elem.numpy_dtype).astype(F32))
    back = opset.Cast(y, to=types.FLOAT.enum)
    assert back.dtype == F32
    np.testing.assert_array_equal(back, x)


IDENTITY_TYPES = [name for name in types.ELEMENT_TYPES if not name.startswith("FLOAT6")]


@pytest.mark.parametrize("name", IDENTITY_TYPES)
def test_identity_keeps_bits_of_every_element_type(name: str) -> None:
    elem = types.ELEMENT_TYPES[name]
    if name == "STRING":
        x = np.array(["a", "bc", ""], dtype=object)
    elif name.startswith("COMPLEX"):
        x = np.array([1 + 2j, -3j], dtype=elem.numpy_dtype)
    else:
        x = np.array(_exact_values(name), dtype=F32).astype(elem.numpy_dtype).reshape(2, 2)
    y = get_opset("", 25).Identity(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.tolist() == x.tolist() if name == "STRING" else np.array_equal(y.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32, np.uint64, ml_dtypes.bfloat16]
)
def test_add_matches_numpy_for_numeric_types(dtype: type) -> None:
    a = np.array([[1, 2, 3], [4, 5, 6]]).astype(dtype)
    b = np.array([10, 20, 30]).astype(dtype)
    got = op.Add(a, b)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), (a.astype(np.float64) + b.astype(np.float64)))


def _expected_backend(op_type: str, opset: int, inputs: list[np.ndarray], **attributes: object) -> str:
    return "onnxruntime" if onnxruntime_runs(op_type, opset, inputs, **attributes) else "onnx.reference"


def test_float16_and_bfloat16_arithmetic_run_where_onnxruntime_has_a_kernel() -> None:
    half = np.array([1.5, -2.0], dtype=np.float16)
    assert op.Mul(half, half).tolist() == [2.25, 4.0]
    assert eager.last_backend().backend == _expected_backend("Mul", 18, [half, half])
    brain = half.astype(ml_dtypes.bfloat16)
    assert op.Mul(brain, brain).tolist() == [2.25, 4.0]
    assert eager.last_backend().backend == _expected_backend("Mul", 18, [brain, brain])


@pytest.mark.parametrize("elem", [types.BFLOAT16, types.FLOAT8E4M3FN, types.FLOAT16, types.FLOAT4E2M1],
                         ids=lambda elem: elem.name)
@pytest.mark.parametrize("shape", [(), (1,), (2, 1), (0, 3)], ids=str)
def test_values_passed_to_onnxruntime_keep_their_shape(elem: types.ElementType, shape: tuple[int, ...]) -> None:
    # The raw-buffer path for the types numpy's bridge refuses, checked without choosing an op:
    # a scalar must stay a scalar (a 0-d bfloat16 once became shape (1,)).
    array = np.full(shape, 1.5, dtype=F32).astype(elem.numpy_dtype)
    value = to_ortvalue(array, elem.enum, [])
    assert list(value.shape()) == list(shape)
    back = from_ortvalue(value, elem.enum)
    assert back is not None and back.shape == shape and back.dtype == array.dtype
    np.testing.assert_array_equal(back.astype(F32), array.astype(F32))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32, np.int64])
def test_range_of_scalars_is_rank_one_on_either_backend(dtype: type) -> None:
    start, limit, delta = (np.array(v, dtype=dtype) for v in (1, 5, 2))
    got = get_opset("", 27).Range(start, limit, delta)
    assert got.shape == (2,) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(F32), [1.0, 3.0])


def test_python_scalars_take_the_tensor_element_type() -> None:
    half = np.array([1.0, 2.0], dtype=np.float16)
    assert op.Mul(half, 3).dtype == np.float16
    assert op.Add(2.5, half).dtype == np.float16
    ints = np.array([7, 8], dtype=np.int32)
    got = op.Add(ints, 1)
    assert got.dtype == np.int32 and got.tolist() == [8, 9]
    # no tensor beside it: the Python type decides (int -> INT64, float -> FLOAT)
    assert op.Add(1, 2).dtype == np.int64
    assert op.Add(1.0, 2.0).dtype == np.float32


def test_list_arguments_become_tensors() -> None:
    x = np.arange(6, dtype=F32)
    np.testing.assert_array_equal(op.Reshape(x, [2, 3]), x.reshape(2, 3))


def test_several_outputs_come_back_as_a_tuple() -> None:
    x = np.array([3.0, 1.0, 2.0], dtype=F32)
    values, indices = op.TopK(x, np.array([2]))
    np.testing.assert_array_equal(values, [3.0, 2.0])
    np.testing.assert_array_equal(indices, [0, 2])


def test_optional_outputs_follow_the_unpacking() -> None:
    x = np.arange(4, dtype=F32)
    single = op.Dropout(x)
    assert isinstance(single, np.ndarray)
    output, mask = op.Dropout(x)
    np.testing.assert_array_equal(output, x)
    assert mask.dtype == bool and mask.all()
    assert len(eager.call_op(op.Dropout, (x,), {}, num_outputs=2)) == 2


def test_split_output_count_from_attribute_input_or_unpacking() -> None:
    x = np.arange(6, dtype=F32)
    assert len(get_opset("", 18).Split(x, num_outputs=3)) == 3
    assert len(op.Split(x, np.array([2, 4]))) == 2
    first, second = op.Split(x)
    np.testing.assert_array_equal(first, [0, 1, 2])
    np.testing.assert_array_equal(second, [3, 4, 5])
    with pytest.raises(OpCallError, match="num_outputs"):
        op.Split(x)


def test_omitted_optional_input() -> None:
    x = np.array([-3.0, 2.0, 9.0], dtype=F32)
    np.testing.assert_array_equal(op.Clip(x, None, np.float32(6)), np.minimum(x, 6))


def test_attributes_and_defaults() -> None:
    x = np.array([-2.0, 3.0], dtype=F32)
    np.testing.assert_allclose(op.LeakyRelu(x), np.where(x > 0, x, 0.01 * x))
    np.testing.assert_allclose(op.LeakyRelu(x, alpha=0.5), np.where(x > 0, x, 0.5 * x))
    image = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    weights = np.ones((1, 1, 3, 3), dtype=F32)
    padded = op.Conv(image, weights, pads=[1, 1, 1, 1])
    assert padded.shape == (1, 1, 4, 4)
    assert padded[0, 0, 0, 0] == image[0, 0, :2, :2].sum()


def test_string_tensors() -> None:
    words = np.array(["a", "b"])
    got = op.Identity(words)
    assert got.dtype == object and got.tolist() == ["a", "b"]


# -------------------------------------------------------------------------- torch


@needs_torch
def test_torch_in_torch_out() -> None:
    t = torch.tensor([1.0, -2.0, 3.0])
    got = op.Relu(t)
    assert isinstance(got, torch.Tensor)
    assert got.tolist() == [1.0, 0.0, 3.0]


@needs_torch
def test_torch_bfloat16_and_grad_tensors() -> None:
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    got = op.Add(t, t)
    assert got.dtype == torch.bfloat16 and got.tolist() == [3.0, -4.0]
    weight = torch.nn.Parameter(torch.ones(2))
    assert op.Mul(weight, torch.tensor([2.0, 3.0])).tolist() == [2.0, 3.0]


@needs_torch
def test_torch_input_is_not_copied() -> None:
    from eager.values import numpy_to_torch, torch_to_numpy

    t = torch.zeros(3)
    view = torch_to_numpy(t)
    view[0] = 5.0
    assert t[0].item() == 5.0
    array = np.zeros(2, dtype=F32)
    back = numpy_to_torch(array)
    back[1] = 7.0
    assert array[1] == 7.0


@needs_torch
@pytest.mark.parametrize("shape", [(), (1,), (2, 1), (0, 3)])
def test_reinterpreted_dtypes_keep_their_shape_in_torch(shape: tuple[int, ...]) -> None:
    # bfloat16/float8 go to torch through an integer view: a 0-d array must stay 0-d.
    import ml_dtypes

    from eager.values import numpy_to_torch, torch_to_numpy

    for dtype, torch_dtype in ((ml_dtypes.bfloat16, torch.bfloat16), (ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn)):
        array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape).astype(dtype)
        tensor = numpy_to_torch(array)
        assert tuple(tensor.shape) == shape and tensor.dtype == torch_dtype
        np.testing.assert_array_equal(tensor.float().numpy(), array.astype(np.float32))
        assert torch_to_numpy(tensor).shape == shape


@needs_torch
def test_torch_through_a_script() -> None:
    @script()
    def shifted(x: FLOAT[...]) -> FLOAT[...]:
        return op.Relu(x) + 1.0

    got = shifted(torch.tensor([-1.0, 2.0]))
    assert isinstance(got, torch.Tensor) and got.tolist() == [1.0, 3.0]


# -------------------------------------------------------------------------- cache


@pytest.fixture
def fresh_cache():
    size = eager.cache_info().maxsize
    eager.clear_cache()
    yield
    eager.set_cache_size(size)


def test_one_session_serves_every_shape_of_a_rank(fresh_cache) -> None:
    for n in (1, 5, 1000):
        x = np.ones(n, dtype=F32)
        np.testing.assert_array_equal(op.Add(x, x), 2 * x)
    info = eager.cache_info()
    assert (info.misses, info.hits, info.currsize) == (1, 2, 1)
    op.Add(np.ones((2, 2), F32), np.ones((2, 2), F32))  # a new rank is a new key
    assert eager.cache_info().misses == 2


def test_lru_bound_evicts_the_least_recently_used(fresh_cache) -> None:
    eager.set_cache_size(2)
    x = np.ones(3, dtype=F32)
    op.Relu(x)
    op.Neg(x)
    op.Relu(x)  # Relu is now the most recently used
    op.Abs(x)  # evicts Neg
    info = eager.cache_info()
    assert info.currsize == 2 and info.evictions == 1
    misses = info.misses
    op.Relu(x)
    assert eager.cache_info().misses == misses
    op.Neg(x)
    assert eager.cache_info().misses == misses + 1


def test_unchanged_schema_shares_a_session_across_opsets(fresh_cache) -> None:
    x = np.ones(2, dtype=F32)
    get_opset("", 15).Relu(x)
    get_opset("", 18).Relu(x)  # Relu is unchanged since opset 14
    assert eager.cache_info().misses == 1


def test_bad_cache_size() -> None:
    with pytest.raises(EagerError):
        eager.set_cache_size(0)


# ------------------------------------------------------------- backend selection


NEWEST = onnx.defs.onnx_opset_version()


def _changed_in(opset: int) -> set[str]:
    """ai.onnx ops whose schema in force at ``opset`` was introduced at ``opset``."""
    return {
        schema.name for schema in onnx.defs.get_all_schemas_with_history()
        if schema.domain == "" and schema.since_version == opset and not schema.deprecated
    }


@pytest.fixture
def older_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> int:
    """eager mode facing an onnxruntime that loads ai.onnx opsets up to below NEWEST.

    Whatever the installed release loads, this makes the opset-newer-than-onnxruntime
    path run: the one-op models are built and refused exactly as for a real older release
    (the limit is never above what the installed onnxruntime really loads).
    """
    limit = min(NEWEST - 1, max_opset())
    eager.clear_cache()
    monkeypatch.setattr(eager.kernels, "max_opset", lambda: limit)
    yield limit
    eager.clear_cache()


def test_newer_opset_runs_in_onnxruntime_at_the_schema_version(older_onnxruntime: int) -> None:
    # Relu at the newest opset is the opset-14 schema, which the older onnxruntime knows.
    x = np.array([-1.0, 2.0], dtype=F32)
    relu = get_opset("", NEWEST).Relu
    assert relu.since_version == 14 < older_onnxruntime
    np.testing.assert_array_equal(relu(x), [0.0, 2.0])
    assert eager.last_backend().backend == "onnxruntime"


@pytest.mark.parametrize("name", ["BitShift", "Celu"])
def test_op_newer_than_onnxruntime_falls_back(older_onnxruntime: int, name: str) -> None:
    if name not in _changed_in(NEWEST):
        pytest.skip(f"{name} did not change in opset {NEWEST}, the newest of onnx {onnx.__version__}")
    x = np.array([1, 2], np.uint32) if name == "BitShift" else np.array([-1.0, 2.0], dtype=F32)
    newest = get_opset("", NEWEST)
    if name == "BitShift":
        got = newest.BitShift(x, np.array([1, 1], np.uint32), direction="LEFT")
        np.testing.assert_array_equal(got, [2, 4])
    else:
        np.testing.assert_allclose(newest.Celu(x), np.where(x > 0, x, np.exp(x) - 1), rtol=1e-6)
    report = eager.last_backend()
    assert report.backend == "onnx.reference"
    assert f"{name} changed in opset {NEWEST}" in report.reason
    assert f"up to {older_onnxruntime}" in report.reason


def test_fallback_to_onnx_reference_is_reported(older_onnxruntime: int, caplog: pytest.LogCaptureFixture) -> None:
    if "Celu" not in _changed_in(NEWEST):
        pytest.skip(f"Celu did not change in opset {NEWEST}, the newest of onnx {onnx.__version__}")
    with caplog.at_level(logging.INFO, logger="eager"):
        get_opset("", NEWEST).Celu(np.array([0.5, -1.0], dtype=F32))
    assert eager.last_backend().backend == "onnx.reference"
    assert any("onnx.reference" in record.getMessage() and "Celu" in record.getMessage()
               for record in caplog.records)


@pytest.mark.parametrize("name", sorted(_changed_in(NEWEST) & {"BitShift", "Celu"}))
def test_newest_opset_backend_follows_the_installed_onnxruntime(name: str) -> None:
    eager.clear_cache()
    if name == "BitShift":
        args = [np.array([1, 2], np.uint32), np.array([1, 1], np.uint32)]
        got = get_opset("", NEWEST).BitShift(*args, direction="LEFT")
        np.testing.assert_array_equal(got, [2, 4])
        expected = _expected_backend("BitShift", NEWEST, args, direction="LEFT")
    else:
        x = np.array([-1.0, 2.0], dtype=F32)
        np.testing.assert_allclose(get_opset("", NEWEST).Celu(x), np.where(x > 0, x, np.exp(x) - 1), rtol=1e-6)
        expected = _expected_backend("Celu", NEWEST, [x])
    if max_opset() < NEWEST:  # eager never offers onnxruntime an opset it does not load
        expected = "onnx.reference"
    assert eager.last_backend().backend == expected


def test_cast_to_float4_runs_on_whichever_backend_can() -> None:
    eager.clear_cache()
    x = np.array([0.5, 1.0, -2.0], dtype=F32)
    got = get_opset("", 23).Cast(x, to=types.FLOAT4E2M1.enum)
    np.testing.assert_array_equal(got.astype(F32), x.astype(ml_dtypes.float4_e2m1fn).astype(F32))
    report = eager.last_backend()
    assert report.backend == _expected_backend("Cast", 23, [x], to=types.FLOAT4E2M1.enum)
    if report.backend == "onnx.reference":  # the refusal is onnxruntime's own words
        assert report.reason


def test_a_refused_call_is_one_error_with_the_backend_texts_kept() -> None:
    x = np.ones(3, dtype=F32)
    with pytest.raises(EagerError) as caught:
        op.Conv(x, x)
    assert caught.value.message == "Conv: x: [3] has rank 1, but X is [N, C, spatial...]"
    assert "onnxruntime" not in str(caught.value) and "onnx.reference" not in str(caught.value)
    reports = caught.value.backend_messages  # (each backend's own words, for debugging)
    assert "onnxruntime" in reports and all(reports.values())  # (onnx.reference is not asked once a rule explains)


def test_runtime_shape_mismatch_names_operands_and_axis() -> None:
    left, right = np.ones(3, F32), np.ones(4, F32)
    with pytest.raises(EagerError) as caught:
        op.Add(left, right)
    assert caught.value.message == "Add: left: [3] vs right: [4]: axis -1 is 3 in left and 4 in right"
    assert "broadcast" in (caught.value.hint or "")
    assert "onnx.reference" not in str(caught.value)  # (its failure says nothing more)


def test_runtime_reshape_failure_names_the_element_counts() -> None:
    data = np.ones(6, F32)
    with pytest.raises(EagerError) as caught:
        op.Reshape(data, np.array([4, -1], np.int64))
    assert caught.value.message == (
        "Reshape: data: [6] has 6 elements, which cannot be reshaped to [4, -1] (a multiple of 4)")
    assert "onnxruntime" not in str(caught.value)


def test_runtime_failure_no_rule_explains_keeps_one_sentence_of_onnxruntime() -> None:
    data, k = np.ones((2, 3), F32), np.array([5], np.int64)
    with pytest.raises(EagerError) as caught:
        op.TopK(data, k)  # (onnxruntime's refusal comes with a C++ signature and condition)
    prefix, message = "TopK: data: FLOAT[2, 3], k: INT64[1]: ", caught.value.message
    assert message.startswith(prefix) and "\n" not in message
    reason = message[len(prefix):]  # (the sentence of onnxruntime's text that says what is wrong)
    assert len(reason) > 10 and reason in caught.value.backend_messages["onnxruntime"]
    for status_text in ("[ONNXRuntimeError]", "Status Message", "onnxruntime::", ".h:", "was false", "onnx.reference"):
        assert status_text not in str(caught.value)
    assert "[ONNXRuntimeError]" in caught.value.backend_messages["onnxruntime"]


# -------------------------------------------------------------------------- errors


def test_wrong_element_type_names_op_argument_and_allowed_types() -> None:
    with pytest.raises(DslTypeError) as caught:
        op.Relu(np.array([1, 2], dtype=np.uint8))
    text = str(caught.value)
    assert "Relu" in text and "'X'" in text and "UINT8" in text and "allowed:" in text
    assert caught.value.location is not None and caught.value.location.file == __file__


def test_mixed_element_types() -> None:
    with pytest.raises(DslTypeError, match="same element type"):
        op.Add(np.ones(2, F32), np.ones(2, np.int64))


def test_wrong_input_count() -> None:
    with pytest.raises(OpCallError, match="Add takes 2 inputs, got 1"):
        op.Add(np.ones(2, F32))


def test_missing_required_input() -> None:
    with pytest.raises(OpCallError, match="'B' of Add is required"):
        op.Add(np.ones(2, F32), None)


def test_bad_attribute_name_and_kind() -> None:
    x = np.ones(2, F32)
    with pytest.raises(OpAttributeError, match="no attribute 'alpah'") as caught:
        op.LeakyRelu(x, alpah=0.1)
    assert "alpha" in caught.value.hint
    with pytest.raises(OpAttributeError, match="must be a float"):
        op.LeakyRelu(x, alpha="big")


def test_missing_required_attribute() -> None:
    with pytest.raises(OpAttributeError, match="requires attribute"):
        op.Cast(np.ones(2, F32))


def test_input_that_is_not_a_tensor() -> None:
    with pytest.raises(DslTypeError, match="is a dict"):
        op.Relu({"x": 1})


def test_dtype_onnx_does_not_have() -> None:
    with pytest.raises(DslTypeError, match="no element type"):
        op.Identity(np.array(["2020-01-01"], dtype="datetime64[D]"))


def test_every_error_is_a_dsl_error() -> None:
    for call in (lambda: op.Add(np.ones(2, F32)), lambda: op.Relu(object()), lambda: op.Conv(np.ones(1, F32),
                                                                                              np.ones(1, F32))):
        with pytest.raises(DslError):
            call()


# --------------------------------------------------------------------- EagerTensor


def test_eager_tensor_operators_follow_onnx() -> None:
    ints = EagerTensor(np.array([-7, 7, 5], dtype=np.int64))
    np.testing.assert_array_equal((ints % 3).array, np.mod([-7, 7, 5], 3))  # Python sign
    floats = EagerTensor(np.array([-7.0, 7.0], dtype=F32))
    np.testing.assert_array_equal((floats % 3.0).array, np.fmod([-7.0, 7.0], 3.0))  # fmod=1, ONNX's only float Mod
    np.testing.assert_array_equal((10 - ints).array, [17, 3, 5])
    np.testing.assert_array_equal((ints & 3).array, np.array([-7, 7, 5]) & 3)
    flags = EagerTensor(np.array([True, False]))
    np.testing.assert_array_equal((flags | False).array, [True, False])
    np.testing.assert_array_equal((~flags).array, [False, True])
    np.testing.assert_array_equal((ints != 7).array, [True, False, True])
    np.testing.assert_array_equal((ints >= 5).array, [False, True, True])
    np.testing.assert_array_equal((-floats).array, [7.0, -7.0])
    half = EagerTensor(np.array([1.0], dtype=np.float16))
    assert (half * 2).dtype == np.float16  # the literal takes the tensor's type


def test_numpy_defers_to_eager_tensor() -> None:
    x = EagerTensor(np.array([1, 2], dtype=np.int32))
    got = np.array([3, 4], dtype=np.int32) - x
    assert isinstance(got, EagerTensor)
    np.testing.assert_array_equal(got.array, [2, 2])


def test_eager_tensor_python_conversions_and_repr() -> None:
    x = EagerTensor(np.array([3], dtype=np.int64))
    assert bool(x) and int(x) == 3 and float(x) == 3.0 and [10, 20, 30, 40][x] == 40
    assert "INT64[1]" in repr(x) and "3" in repr(x)
    assert np.asarray(x).tolist() == [3]
    assert x.shape == (1,) and x.dtype == np.int64 and x.rank == 1 and len(x) == 1
    with pytest.raises(DslTypeError, match="one-element"):
        bool(EagerTensor(np.array([1, 2])))
    with pytest.raises(DslTypeError, match="index"):
        [1, 2][EagerTensor(np.array(1.0, dtype=F32))]


def test_eager_tensor_indexing_uses_the_compiler_lowering() -> None:
    x = EagerTensor(np.arange(24, dtype=F32).reshape(2, 3, 4))
    reference = np.arange(24, dtype=F32).reshape(2, 3, 4)
    for index in [(0,), (slice(1, 3),), (Ellipsis, 1), (None, 0), (slice(None), slice(None, None, 2)), (-1, -1)]:
        got = x[index if len(index) > 1 else index[0]]
        np.testing.assert_array_equal(np.asarray(got), reference[index if len(index) > 1 else index[0]])


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=4), elements=st.integers(-50, 50)),
    st.integers(1, 9),
)
def test_integer_operators_match_python_semantics(values: np.ndarray, divisor: int) -> None:
    x = EagerTensor(values)
    np.testing.assert_array_equal((x + divisor).array, values + divisor)
    np.testing.assert_array_equal((x * divisor).array, values * divisor)
    np.testing.assert_array_equal((x % divisor).array, values % divisor)
    np.testing.assert_array_equal((x < divisor).array, values < divisor)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(F32, hnp.array_shapes(max_dims=2, max_side=4), elements=st.floats(-100, 100, width=32)))
def test_float_operators_match_numpy(values: np.ndarray) -> None:
    x = EagerTensor(values)
    np.testing.assert_allclose((x * 2.0 - 1.0).array, values * 2 - 1, rtol=1e-6)
    np.testing.assert_allclose((1.0 / (x * x + 1.0)).array, 1 / (values * values + 1), rtol=1e-6)


# --------------------------------------------------------------- scripts, eagerly


@script()
def _relu_twice(x: FLOAT[...]) -> FLOAT[...]:
    return op.Relu(x) * 2.0


SEEN: list[object] = []


@script()
def _control_flow(x: FLOAT[...], n: int = 3) -> FLOAT[...]:
    SEEN.append(x)
    y = x
    for _ in range(n):
        y = _relu_twice(y) - 1.0
    if op.ReduceSum(y) > 0:
        y = -y
    return y


def _control_flow_oracle(x: np.ndarray, n: int = 3) -> np.ndarray:
    y = x
    for _ in range(n):
        y = np.maximum(y, 0) * 2 - 1
    return -y if y.sum() > 0 else y


def test_script_body_runs_in_python_with_real_values() -> None:
    SEEN.clear()
    x = np.array([1.0, -2.0, 3.0], dtype=F32)
    got = _control_flow(x)
    assert isinstance(got, np.ndarray) and got.dtype == F32
    np.testing.assert_allclose(got, _control_flow_oracle(x))
    assert isinstance(SEEN[0], EagerTensor) and SEEN[0].array is x
    np.testing.assert_allclose(_control_flow(x, n=1), _control_flow_oracle(x, 1))
    np.testing.assert_allclose(_control_flow(-x, 2), _control_flow_oracle(-x, 2))


def test_nested_script_results_stay_eager_inside_a_body() -> None:
    seen = []

    @script()
    def outer(x: FLOAT[...]) -> FLOAT[...]:
        inner = _relu_twice(x)
        seen.append(inner)
        return inner + 1.0

    np.testing.assert_allclose(outer(np.array([-1.0, 1.0], F32)), [1.0, 3.0])
    assert isinstance(seen[0], EagerTensor)


def test_script_several_outputs_and_scalars() -> None:
    @script()
    def stats(x: FLOAT[...]):
        return op.ReduceMean(x, keepdims=0), op.ReduceMax(x, keepdims=0)

    mean, largest = stats(np.array([1.0, 2.0, 6.0], F32))
    assert float(mean) == 3.0 and float(largest) == 6.0


def test_script_argument_checks() -> None:
    @script()
    def takes_matrix(x: FLOAT[2, "N"]) -> FLOAT[2, "N"]:
        return op.Relu(x)

    with pytest.raises(DslTypeError, match="INT64"):
        takes_matrix(np.ones((2, 2), np.int64))
    with pytest.raises(DslTypeError, match="rank 2"):
        takes_matrix(np.ones(2, F32))
    with pytest.raises(DslTypeError, match="axis 0"):
        takes_matrix(np.ones((3, 2), F32))
    with pytest.raises(DslTypeError, match="takes_matrix"):
        takes_matrix(np.ones((2, 2), F32), np.ones(1, F32))


def test_python_number_for_a_tensor_parameter_takes_the_declared_type() -> None:
    @script()
    def add_one(x: INT64) -> INT64:
        return x + 1

    got = add_one(41)
    assert got.dtype == np.int64 and got.tolist() == 42


def test_error_inside_a_body_points_at_the_user_line() -> None:
    @script()
    def broken(x: FLOAT[...]) -> FLOAT[...]:
        return op.Add(x, np.ones(7, F32))  # wrong shape: the error must name this line

    with pytest.raises(EagerError) as caught:
        broken(np.ones(3, F32))
    frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert "broken" in frames
    assert caught.value.location.source_line.strip().startswith("return op.Add(x, np.ones(7, F32))")


def test_check_script_runs_both_ways() -> None:
    from tests.helpers import check_script

    x = np.array([1.0, -2.0, 3.0], dtype=F32)
    check_script(_relu_twice, [x], np.maximum(x, 0) * 2)

    @script()
    def arithmetic(a: FLOAT[...], b: FLOAT[...]) -> FLOAT[...]:
        return (a * 2.0 + b) / (b - 10.0) % 3.0

    b = np.array([4.0, 5.0, 6.0], dtype=F32)
    check_script(arithmetic, [x, b], np.fmod((x * 2 + b) / (b - 10), 3), rtol=1e-6)


# ------------------------------------------------- If / Loop / Scan with @graph bodies


@script()
def _choose(x: FLOAT[...]) -> FLOAT[...]:
    @graph()
    def then_branch():
        return x * 2.0

    @graph()
    def else_branch():
        return -x

    return op.If(op.ReduceSum(x) > 0.0, then_branch=then_branch, else_branch=else_branch)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_with_graph_branches_runs_the_chosen_branch(sign: float) -> None:
    from tests.helpers import check_script

    x = np.array([1.0, 2.0], F32) * sign
    check_script(_choose, [x], x * 2 if sign > 0 else -x)


def test_loop_with_graph_body_carries_values_and_stacks_scan_outputs() -> None:
    seen_steps = []

    @script()
    def cumulative(x: FLOAT["N"], n: INT64):
        @graph()
        def body(i: INT64, cond: BOOL, acc: FLOAT["N"]):
            seen_steps.append(int(i))
            total = acc + x
            return cond, total, total * 10.0

        return op.Loop(n, None, x, body=body)

    x = np.array([1.0, 2.0], F32)
    final, history = cumulative(x, np.array(3, np.int64))
    assert seen_steps == [0, 1, 2]
    np.testing.assert_allclose(final, 4 * x)
    np.testing.assert_allclose(history, [20 * x, 30 * x, 40 * x])


def test_loop_stops_on_condition() -> None:
    @graph()
    def body(i: INT64, cond: BOOL, acc: INT64):
        nxt = acc * 2
        return nxt < 50, nxt

    final = op.Loop(None, np.array(True), np.array(1, np.int64), body=body)
    assert int(final) == 64  # 2, 4, ... 64: the first value not below 50 ends the loop


def test_scan_with_graph_body_and_reversed_input() -> None:
    @graph()
    def body(total: FLOAT[2], row: FLOAT[2]):
        new_total = total + row
        return new_total, new_total

    rows = np.arange(6, dtype=F32).reshape(3, 2)
    total, partial = op.Scan(np.zeros(2, F32), rows, body=body, num_scan_inputs=1, scan_input_directions=[1])
    np.testing.assert_allclose(total, rows.sum(axis=0))
    np.testing.assert_allclose(partial, np.cumsum(rows[::-1], axis=0))


def _batched_scan_oracle(start: np.ndarray, x: np.ndarray, lengths: list[int], directions: list[int]) -> tuple:
    """Opset 8's Scan in numpy: each batch entry on its own, steps past its length zeros."""
    finals, totals, diffs = [], np.zeros_like(x), np.zeros_like(x)
    for entry, length in enumerate(lengths):
        total = start[entry]
        for step in range(length):
            x_t = x[entry, length - 1 - step if directions[0] else step]
            y_t = x[entry, length - 1 - step if directions[1] else step]
            total = total + x_t
            totals[entry, step], diffs[entry, step] = total * 2.0, x_t - y_t
        finals.append(total)
    return np.stack(finals), totals, diffs


@pytest.mark.parametrize("directions", [[0, 0], [1, 0], [0, 1]])
@pytest.mark.parametrize("lengths", [None, [3, 1]])
def test_opset8_scan_runs_eagerly_as_its_model_does(directions: list[int], lengths: list[int] | None) -> None:
    # Scan of opset 8 takes sequence_lens and a leading batch axis (9 on: neither); eager
    # mode ran the later form on it and called the body with the wrong arguments.
    op8 = get_opset("", 8)

    @graph()
    def body(total: FLOAT[2], x_t: FLOAT[2], y_t: FLOAT[2]):
        new_total = total + x_t
        return new_total, new_total * 2.0, x_t - y_t

    @script()
    def scanned(start: FLOAT[2, 2], x: FLOAT[2, 3, 2], steps: INT64[2]) -> tuple[FLOAT[2, 2], FLOAT[2, 3, 2],
                                                                                FLOAT[2, 3, 2]]:
        return op8.Scan(steps, start, x, x, body=body, num_scan_inputs=2, directions=directions)

    @script()
    def scanned_whole(start: FLOAT[2, 2], x: FLOAT[2, 3, 2]) -> tuple[FLOAT[2, 2], FLOAT[2, 3, 2], FLOAT[2, 3, 2]]:
        return op8.Scan(None, start, x, x, body=body, num_scan_inputs=2, directions=directions)

    rng = np.random.default_rng(8)
    start, x = rng.standard_normal((2, 2)).astype(F32), rng.standard_normal((2, 3, 2)).astype(F32)
    expected = _batched_scan_oracle(start, x, lengths or [3, 3], directions)
    if lengths is None:
        check_script(scanned_whole, [start, x], expected)
    else:
        check_script(scanned, [start, x, np.array(lengths, np.int64)], expected)


def test_opset8_scan_lengths_out_of_range_are_refused() -> None:
    op8 = get_opset("", 8)

    @graph()
    def body(total: FLOAT[2], x_t: FLOAT[2]):
        return total + x_t, x_t

    with pytest.raises(DslTypeError, match=r"sequence_lens \[3, 0\] must give each of the 2 batch entries a length "
                                           r"from 1 to 3"):
        op8.Scan(np.array([3, 0], np.int64), np.zeros((2, 2), F32), np.ones((2, 3, 2), F32), body=body,
                 num_scan_inputs=1)


def test_numpy_str_arrays_become_string_tensors_every_time() -> None:
    for _ in range(2):  # the second call takes the cached path
        got = op.Concat(np.array(["a", "b"]), np.array(["c"]), axis=0)
        assert got.dtype == object and got.tolist() == ["a", "b", "c"]


def test_unhashable_attribute_value_is_a_clean_error() -> None:
    with pytest.raises(OpAttributeError, match="alpha"):
        op.LeakyRelu(np.ones(2, F32), alpha={"a": 1})
