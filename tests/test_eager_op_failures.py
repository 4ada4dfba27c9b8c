"""An eager op call the backends refuse is one error at the user's line, in the user's terms.

Each wrong call asserts the whole report: ``file:line:column``, the source line with its
caret, the message naming the operands as written here with their shapes, and the hint;
never onnxruntime's status text or onnx.reference's words (those stay on the error's
``backend_messages``).  The rules that explain a failure agree with numpy on which
operands fit (the property tests), so they never blame a call that would run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl import FLOAT, EagerError, UnknownOpError, script
from dsl import opset18 as op
from eager.op_failures import Operand, backend_reason, explain

F32 = np.float32
SOURCE = Path(__file__).read_text(encoding="utf-8").splitlines()


def _report(code: str, message: str, hint: str) -> str:
    """What ``str(error)`` must be for an error raised at the one line of this file that
    holds ``code`` unquoted (the caret under ``code``)."""
    quoted = (f'"{code}', f"'{code}")
    lines = [number for number, text in enumerate(SOURCE, 1)
             if code in text and not any(q in text for q in quoted)]
    assert len(lines) == 1, f"{code!r} is on lines {lines} of this file"
    text = SOURCE[lines[0] - 1]
    column = text.index(code)
    indent = len(text) - len(text.lstrip())
    caret = " " * (column - indent) + "^" * len(code)
    return f"{__file__}:{lines[0]}:{column + 1}: error: {message}\n    {text.strip()}\n    {caret}\nhint: {hint}"


def _line_of(code: str) -> int:
    return next(number for number, text in enumerate(SOURCE, 1) if text.strip() == code)


def _raised(call, error: type[Exception] = EagerError) -> Exception:
    with pytest.raises(error) as caught:
        call()
    text = str(caught.value)
    for backend_text in ("[ONNXRuntimeError]", "Status Message", "onnxruntime::", "onnx.reference", "numpy"):
        assert backend_text not in text
    return caught.value


# ------------------------------------------------------------------------------- Reshape

RESHAPE_HINT = "the new shape must hold the {n} elements of {name}: give -1 for the one size to infer and 0 to keep a size of {name}"


def test_reshape_to_more_elements_names_both_counts() -> None:
    x, heads = np.ones((1, 4, 64), F32), np.array([1, 4, 8, 32], np.int64)
    error = _raised(lambda: op.Reshape(x, heads))
    assert str(error) == _report(
        "op.Reshape(x, heads)",
        "Reshape: x: [1, 4, 64] has 256 elements, which cannot be reshaped to [1, 4, 8, 32] (1024 elements)",
        RESHAPE_HINT.format(n=256, name="x"))
    assert "[ONNXRuntimeError]" in error.backend_messages["onnxruntime"]  # (kept for debugging)


def test_reshape_whose_minus_one_cannot_be_inferred() -> None:
    tokens = np.ones((2, 5, 6), F32)
    error = _raised(lambda: op.Reshape(tokens, np.array([2, -1, 4], np.int64)))
    assert str(error) == _report(
        "op.Reshape(tokens, np.array([2, -1, 4], np.int64))",
        "Reshape: tokens: [2, 5, 6] has 60 elements, which cannot be reshaped to [2, -1, 4] (a multiple of 8)",
        RESHAPE_HINT.format(n=60, name="tokens"))


def test_reshape_keeping_an_axis_the_input_lacks() -> None:
    row = np.ones(6, F32)
    error = _raised(lambda: op.Reshape(row, np.array([2, 0, 3], np.int64)))
    assert str(error) == _report(
        "op.Reshape(row, np.array([2, 0, 3], np.int64))",
        "Reshape: the shape [2, 0, 3] keeps axis 1 of row: [6] (a 0 there), which has no axis 1",
        RESHAPE_HINT.format(n=6, name="row"))


# -------------------------------------------------------------------------------- Concat

def test_concat_on_the_wrong_axis_suggests_the_right_one() -> None:
    cache, step = np.ones((1, 4, 8, 16), F32), np.ones((1, 4, 1, 16), F32)
    error = _raised(lambda: op.Concat(cache, step, axis=1))
    assert str(error) == _report(
        "op.Concat(cache, step, axis=1)",
        "Concat: cache: [1, 4, 8, 16] vs step: [1, 4, 1, 16]: axis 2 is 8 in cache and 1 in step (joining on axis 1)",
        "all axes but the joined one (axis=1) must be equal; they differ only on axis 2: did you mean axis=2?")


def test_concat_of_different_ranks() -> None:
    a, b = np.ones((2, 3), F32), np.ones((2, 3, 1), F32)
    error = _raised(lambda: op.Concat(a, b, axis=0))
    assert str(error) == _report(
        "op.Concat(a, b, axis=0)", "Concat: a: [2, 3] vs b: [2, 3, 1]: ranks 2 and 3",
        "Concat joins tensors of one rank; add the missing axis with op.Unsqueeze")


def test_concat_of_three_names_the_pair_that_disagrees() -> None:
    a, b, c = np.ones((2, 3), F32), np.ones((4, 3), F32), np.ones((1, 5), F32)
    error = _raised(lambda: op.Concat(a, b, c, axis=0))
    assert str(error) == _report(
        "op.Concat(a, b, c, axis=0)", "Concat: a: [2, 3] vs c: [1, 5]: axis 1 is 3 in a and 5 in c (joining on axis 0)",
        "all axes but the joined one (axis=0) must be equal")


def test_concat_axis_out_of_range() -> None:
    a = np.ones((2, 3), F32)
    error = _raised(lambda: op.Concat(a, a, axis=2))
    assert str(error) == _report(
        "op.Concat(a, a, axis=2)", "Concat: axis 2 is out of range for a: [2, 3] (rank 2)",
        "axes of a rank-2 tensor are -2..1")


# ------------------------------------------------------------- inside a scripted function

@script()
def append_step(cache: FLOAT[1, 4, 8, 16], step: FLOAT[1, 4, 1, 16]) -> FLOAT[1, 4, 9, 16]:
    joined = op.Concat(cache, step, axis=3)
    return joined


@script()
def probabilities(logits: FLOAT[2, 3]) -> FLOAT[2, 3]:
    return op.Softmaxx(logits)


def test_failure_inside_a_scripted_function_points_into_its_body() -> None:
    cache, step = np.ones((1, 4, 8, 16), F32), np.ones((1, 4, 1, 16), F32)
    error = _raised(lambda: append_step(cache, step))
    assert str(error) == _report(
        "op.Concat(cache, step, axis=3)",
        "Concat: cache: [1, 4, 8, 16] vs step: [1, 4, 1, 16]: axis 2 is 8 in cache and 1 in step (joining on axis 3)",
        "all axes but the joined one (axis=3) must be equal; they differ only on axis 2: did you mean axis=2?")


def test_unknown_op_eagerly_in_a_scripted_function_has_its_line() -> None:
    error = _raised(lambda: probabilities(np.ones((2, 3), F32)), UnknownOpError)
    assert str(error) == _report("op.Softmaxx", "opset ai.onnx 18 has no op 'Softmaxx'",
                                 "did you mean Softmax or LogSoftmax?")


def test_unknown_op_at_top_level_has_its_line() -> None:
    logits = np.ones((2, 3), F32)
    error = _raised(lambda: op.Sofmax(logits), UnknownOpError)
    assert str(error) == _report("op.Sofmax", "opset ai.onnx 18 has no op 'Sofmax'",
                                 "did you mean Softmax or LogSoftmax?")
    assert not hasattr(op, "Sofmax")  # (hasattr still answers False)


# ----------------------------------------------------------------- Conv, Gemm, Gather...

def test_conv_weight_with_other_input_channels() -> None:
    image, kernel = np.ones((1, 3, 8, 8), F32), np.ones((2, 4, 3, 3), F32)
    error = _raised(lambda: op.Conv(image, kernel))
    assert str(error) == _report(
        "op.Conv(image, kernel)",
        "Conv: image: [1, 3, 8, 8] vs kernel: [2, 4, 3, 3]: image has 3 channels (axis 1), kernel expects 4",
        "the weight of Conv is [M, C / group, kernel...]; check the weight or the group attribute")


def test_conv_with_a_bias_of_the_wrong_size() -> None:
    image, kernel, bias = np.ones((1, 3, 8, 8), F32), np.ones((2, 3, 3, 3), F32), np.ones(5, F32)
    error = _raised(lambda: op.Conv(image, kernel, bias))
    assert str(error) == _report(
        "op.Conv(image, kernel, bias)", "Conv: the bias bias: [5] has 5 values, but kernel makes 2 output channels "
        "(axis 0)", "the bias of Conv holds one value per output channel: shape [2]; reshape it with "
        "op.Reshape(bias, [-1]) or add it after the convolution instead")


def test_gemm_with_an_untransposed_linear_weight() -> None:
    x, weight = np.ones((2, 256), F32), np.ones((64, 256), F32)
    error = _raised(lambda: op.Gemm(x, weight))
    assert str(error) == _report(
        "op.Gemm(x, weight)",
        "Gemm: x: [2, 256] vs weight: [64, 256]: axis 1 of x is 256, axis 0 of weight is 64 (transA=0, transB=0)",
        "Gemm multiplies A [M, K] by B [K, N] after the transposes transA/transB ask for; set transB=1 for a weight "
        "stored [N, K]")


def test_gemm_of_a_batched_input_is_refused_though_onnx_reference_would_run_it() -> None:
    batch, weight = np.ones((2, 3, 8), F32), np.ones((8, 4), F32)
    error = _raised(lambda: op.Gemm(batch, weight))
    assert str(error) == _report(
        "op.Gemm(batch, weight)", "Gemm: batch: [2, 3, 8] has rank 3, but Gemm multiplies matrices (rank 2)",
        "use op.MatMul (or x @ w) for inputs with batch axes, or reshape them to [M, K]")
    assert set(error.backend_messages) == {"onnxruntime"}  # (onnx.reference was not asked to run it)


@script()
def batched_gemm(tokens: FLOAT[2, 3, 8], weight: FLOAT[8, 4]) -> FLOAT[2, 3, 4]:
    return op.Gemm(tokens, weight)


def test_gemm_of_a_batched_input_is_refused_compiled_with_the_same_message() -> None:
    from dsl import DslError

    with pytest.raises(DslError) as caught:
        batched_gemm.to_model_proto()
    assert caught.value.message == "Gemm: tokens: [2, 3, 8] has rank 3, but Gemm multiplies matrices (rank 2)"
    assert caught.value.location is not None and caught.value.location.line == _line_of("return op.Gemm(tokens, weight)")


def test_gemm_with_transb_reads_the_weight_rows() -> None:
    x, projection = np.ones((2, 256), F32), np.ones((64, 128), F32)
    error = _raised(lambda: op.Gemm(x, projection, transB=1))
    assert error.message == ("Gemm: x: [2, 256] vs projection: [64, 128]: axis 1 of x is 256, axis 1 of projection "
                             "is 128 (transA=0, transB=1)")


def test_reshape_to_a_negative_size_other_than_minus_one() -> None:
    # (sizes whose product is the element count: the compiler's count rule lets them pass)
    row = np.ones(6, F32)
    error = _raised(lambda: op.Reshape(row, np.array([-2, -3], np.int64)))
    assert error.message == "Reshape: the shape [-2, -3] has a negative size other than -1"


def test_gather_index_out_of_range() -> None:
    table, ids = np.ones((10, 4), F32), np.array([3, 12], np.int64)
    error = _raised(lambda: op.Gather(table, ids, axis=0))
    assert str(error) == _report(
        "op.Gather(table, ids, axis=0)", "Gather: index 12 is out of range for axis 0 of table: [10, 4] (size 10)",
        "indices on an axis of size 10 are in [-10, 9]")


def test_expand_to_a_shape_that_does_not_broadcast() -> None:
    x = np.ones((3, 2), F32)
    error = _raised(lambda: op.Expand(x, np.array([4, 4], np.int64)))
    assert str(error) == _report(
        "op.Expand(x, np.array([4, 4], np.int64))",
        "Expand: x: [3, 2] cannot be expanded to [4, 4]",
        "Expand broadcasts: each axis of the input must equal the target's or be 1")


def test_split_sizes_that_do_not_add_up() -> None:
    x = np.ones((2, 7), F32)
    error = _raised(lambda: op.Split(x, np.array([3, 3], np.int64), axis=1))
    assert error.message == "Split: the sizes [3, 3] add up to 6, axis 1 of x: [2, 7] is 7"


def test_matmul_message_is_unchanged() -> None:
    x, wk = np.ones((1, 3, 256), F32), np.ones((64, 256), F32)
    error = _raised(lambda: op.MatMul(x, wk))
    assert error.message == "MatMul: x: [1, 3, 256] vs wk: [64, 256]: axis -1 of x is 256, axis -2 of wk is 64"


def test_an_op_no_backend_runs_says_so_without_the_status_text() -> None:
    from dsl.opsets import get_opset

    x = np.ones(3, F32)
    error = _raised(lambda: get_opset("com.example", 1).Frobnicate(x))
    assert error.message.startswith("Frobnicate: x: FLOAT[3]: ") and "Fatal error" not in error.message
    assert error.hint == ("no schema defines com.example::Frobnicate: a backend runs it only with a kernel "
                          "registered for it; the backends' own reports are in the error's backend_messages")


def test_backend_reason_keeps_the_sentence_that_says_what_is_wrong() -> None:
    enforced = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Unsqueeze node. "
                "Name:'' Status Message: /src/onnxruntime/core/providers/common.h:31 int64_t "
                "onnxruntime::HandleNegativeAxis(int64_t, int64_t) IsAxisInRange(axis, tensor_rank) was false. "
                "axis 5 is not in valid range [-3,2]\n")
    assert backend_reason(enforced) == "axis 5 is not in valid range [-3,2]"
    thrown = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Pad node. Name:'' "
              "Status Message: /src/padbase.h:122 static void onnxruntime::PadBase::Compute(Ctx&, size_t) "
              "[with Ctx = onnxruntime::OpKernelContext; size_t = long unsigned int] Pads size is wrong")
    assert backend_reason(thrown) == "Pads size is wrong"
    assert backend_reason("index 5 is out of bounds for axis 0 with size 2") == \
        "index 5 is out of bounds for axis 0 with size 2"


# ------------------------------------------------ the rules agree with numpy's verdicts

dims = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def _numpy_accepts(call) -> bool:
    try:
        call()
    except ValueError:  # (numpy's refusal of these shapes is the oracle's answer)
        return False
    return True


@given(dims, st.lists(st.integers(-1, 6), min_size=1, max_size=4))
def test_reshape_rule_blames_exactly_what_numpy_refuses(shape: tuple[int, ...], asked: list[int]) -> None:
    found = explain("Reshape", [Operand("x", shape), Operand("s", (len(asked),), np.array(asked, np.int64))], {})
    sizes = [shape[i] if size == 0 and i < len(shape) else size for i, size in enumerate(asked)]
    kept_missing = any(size == 0 and i >= len(shape) for i, size in enumerate(asked))
    accepted = not kept_missing and _numpy_accepts(lambda: np.zeros(shape).reshape(sizes))
    assert (found is None) == accepted


@given(dims, dims, st.integers(-4, 4))
def test_concat_rule_blames_exactly_what_numpy_refuses(first: tuple[int, ...], second: tuple[int, ...],
                                                       axis: int) -> None:
    found = explain("Concat", [Operand("a", first), Operand("b", second)], {"axis": axis})
    numpy_ok = _numpy_accepts(lambda: np.concatenate([np.zeros(first), np.zeros(second)], axis=axis))
    assert (found is None) == (numpy_ok and -len(first) <= axis < len(first))


@given(dims, st.lists(st.integers(-6, 6), min_size=1, max_size=3), st.integers(0, 3))
def test_gather_rule_blames_exactly_what_numpy_refuses(shape: tuple[int, ...], ids: list[int], axis: int) -> None:
    indices = np.array(ids, np.int64)
    found = explain("Gather", [Operand("x", shape), Operand("i", indices.shape, indices)], {"axis": axis})
    try:
        np.take(np.zeros(shape), indices, axis=axis)
        numpy_ok = True
    except (IndexError, np.exceptions.AxisError):  # (numpy's refusal is the oracle's answer)
        numpy_ok = False
    assert (found is None) == numpy_ok
