"""The Python front end, construct by construct: each test compiles a function using the
construct, and compares the exported model (onnxruntime) and eager execution with a
numpy oracle through tests.helpers.check_script; IR-level facts (names, constant types,
opset choice) are asserted on the compiled function."""

from __future__ import annotations

import linecache
import textwrap

import numpy as np
import onnx
import pytest

import dsl
from dsl import (
    BOOL,
    DOUBLE,
    FLOAT,
    FLOAT16,
    INT32,
    INT64,
    Optional,
    Sequence,
    SourceUnavailableError,
    graph,
    opset15,
    opset18,
    script,
)
from dsl import opset18 as op
from dsl.onnxruntime_limits import max_opset
from tests.helpers import check_script, export_and_run

rng = np.random.default_rng(0)
WEIGHTS = rng.standard_normal((4, 3)).astype(np.float32)
OFFSET = np.float32(0.25)
SCALE = 3.0


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def op_types(function) -> list[str]:
    return [node.op_type for node in function.function.nodes]


# --------------------------------------------------------------------------- part A


@script()
def layer_norm(X: FLOAT["B", 16], scale: FLOAT[16], bias: FLOAT[16]) -> FLOAT["B", 16]:
    """Normalise the last axis."""
    mean = op.ReduceMean(X, op.Constant(value_ints=[-1]), keepdims=1)
    d = X - mean
    var = op.ReduceMean(d * d, op.Constant(value_ints=[-1]), keepdims=1)
    return d / op.Sqrt(var + 1e-5) * scale + bias


def test_layer_norm_matches_numpy():
    x, s, b = f32(3, 16), f32(16), f32(16)
    mean = x.mean(-1, keepdims=True)
    d = x - mean
    expected = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * s + b
    check_script(layer_norm, [x, s, b], expected, rtol=1e-4, atol=1e-5)
    fn = layer_norm.function
    assert fn.doc_string == "Normalise the last axis."
    assert [v.name for v in fn.inputs] == ["X", "scale", "bias"]
    assert fn.opset_imports[""] == 18
    assert fn.nodes[0].location.line == layer_norm.python_function.__code__.co_firstlineno + 3


@script()
def arithmetic(a: FLOAT["N"], b: FLOAT["N"], m: FLOAT[2, 2]) -> tuple[FLOAT["N"], FLOAT["N"], FLOAT[2, 2]]:
    r = (a + b) * 2.0 - b / 4.0
    r = r ** 2.0 + -a
    s = a % 1.5
    return r, s, m @ m


def test_arithmetic_operators():
    a, b, m = f32(5), f32(5), f32(2, 2)
    r = ((a + b) * 2 - b / 4) ** 2 + -a
    s = np.fmod(a, np.float32(1.5))
    check_script(arithmetic, [a, b, m], (r, s, m @ m), rtol=1e-4, atol=1e-5)


@script()
def integer_ops(a: INT64["N"], b: INT64["N"]) -> tuple[INT64["N"], INT64["N"], INT64["N"], INT64["N"]]:
    return a % b, a & b, a | 3, ~a ^ b


def test_integer_operators_follow_python():
    a = np.array([7, -7, 5, 12], dtype=np.int64)
    b = np.array([3, 3, -2, 5], dtype=np.int64)
    check_script(integer_ops, [a, b], (a % b, a & b, a | 3, ~a ^ b))


@script()
def comparisons(a: FLOAT["N"], b: FLOAT["N"]) -> tuple[BOOL["N"], BOOL["N"], BOOL["N"], BOOL]:
    inside = (0.0 < a) & (a < b)
    different = a != b
    either = (a > 0.5) | (b <= -0.5)
    return inside, different, either ^ ~different, not 0.0 < op.ReduceMax(a, keepdims=0) < 10.0


def test_comparisons_and_logic():
    a, b = f32(8), f32(8)
    inside = (0 < a) & (a < b)
    different = a != b
    either = (a > 0.5) | (b <= -0.5)
    check_script(comparisons, [a, b], (inside, different, either ^ ~different, np.array(not 0 < a.max() < 10)))


@script()
def half_precision(x: FLOAT16["N"]) -> FLOAT16["N"]:
    return x * 2 + 1.5


def test_literal_takes_tensor_type_without_castlike():
    x = np.array([1, 2, 3], dtype=np.float16)
    check_script(half_precision, [x], x * np.float16(2) + np.float16(1.5))
    assert "CastLike" not in op_types(half_precision)
    constants = [n for n in half_precision.function.nodes if n.op_type == "Constant"]
    assert {c.attributes["value"].value.elem_type for c in constants} == {FLOAT16.enum}


@script()
def untyped_input(x):
    return x + 1


def test_literal_beside_unknown_type_uses_castlike():
    assert op_types(untyped_input) == ["Constant", "CastLike", "Add"]
    x = np.array([1.5, 2.5], dtype=np.float32)
    check_script(untyped_input, [x], x + 1, io_types=[FLOAT["N"], FLOAT["N"]])


@script()
def outer_constants(x: FLOAT["B", 4]) -> FLOAT["B", 3]:
    y = op.MatMul(x, WEIGHTS) + OFFSET
    return y * SCALE + OFFSET * SCALE


def test_outer_scope_constants_are_deduplicated():
    x = f32(2, 4)
    check_script(outer_constants, [x], ((x @ WEIGHTS + OFFSET) * 3 + OFFSET * 3).astype(np.float32), rtol=1e-5)
    constants = [n for n in outer_constants.function.nodes if n.op_type == "Constant"]
    # WEIGHTS, OFFSET, SCALE (float beside FLOAT) and the folded OFFSET*SCALE: OFFSET is made once
    payloads = [c.attributes["value"].value.array.tobytes() for c in constants]
    assert len(payloads) == len(set(payloads))


@script()
def elu_like(x: FLOAT["N"], alpha: float = 0.5, axis: int = 0) -> FLOAT["N"]:
    return op.Elu(x, alpha=alpha) * alpha + op.Softmax(x, axis=axis)


@script()
def calls_elu(x: FLOAT["N"]) -> FLOAT["N"]:
    return elu_like(x, alpha=2.0)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * (np.exp(x) - 1)).astype(np.float32)


def test_attribute_parameters_as_attributes_and_tensors():
    fn = elu_like.function
    assert [(p.name, p.kind.name, p.default.value) for p in fn.attr_params] == [("alpha", "FLOAT", 0.5),
                                                                               ("axis", "INT", 0)]
    elu_node = next(n for n in fn.nodes if n.op_type == "Elu")
    assert elu_node.attributes["alpha"].ref_attr_name == "alpha"
    constant = next(n for n in fn.nodes if n.op_type == "Constant")
    assert constant.attributes["value_float"].ref_attr_name == "alpha"
    x = f32(6)
    check_script(elu_like, [x], elu(x, 0.5) * 0.5 + softmax(x), rtol=1e-5)
    # A caller passes another value: the model-local function receives it as an attribute.
    check_script(calls_elu, [x], elu(x, 2.0) * 2.0 + softmax(x), rtol=1e-5)
    assert calls_elu.to_model_proto().functions[0].name == "elu_like"


@script()
def ssa_names(x: FLOAT["N"]) -> FLOAT["N"]:
    d = x + 1.0
    d = d * d
    d += 3.0
    unused = d - 1.0
    del unused
    pass
    return d


def test_reassignment_gets_fresh_readable_names():
    fn = ssa_names.function
    names = [o.name for n in fn.nodes for o in n.outputs if n.op_type != "Constant"]
    # the returned value takes the plain name; the earlier versions keep d_<k> names
    assert names[2:] == ["d", "unused"]
    assert names[:2] == ["d_1", "d_2"]
    x = f32(4)
    check_script(ssa_names, [x], (x + 1) ** 2 + 3)


@script()
def returns_input_twice(x: FLOAT["N"]) -> tuple[FLOAT["N"], FLOAT["N"], FLOAT["N"]]:
    y = op.Relu(x)
    return x, y, y


def test_outputs_that_are_inputs_or_repeated_get_identity():
    fn = returns_input_twice.function
    assert len({v.name for v in fn.outputs}) == 3
    assert fn.outputs[1].name == "y"
    assert op_types(returns_input_twice).count("Identity") == 2
    x = f32(5)
    check_script(returns_input_twice, [x], (x, np.maximum(x, 0), np.maximum(x, 0)))


@script()
def top_two(x: FLOAT[2, 5]) -> tuple[FLOAT[2, 2], INT64[2, 2], FLOAT[2, 3]]:
    values, indices = op.TopK(x, [2], axis=-1)
    _, rest = op.Split(x, [2, 3], axis=1)
    return values, indices, rest


def test_multi_output_ops():
    x = f32(2, 5)
    order = np.argsort(-x, axis=-1)[:, :2]
    check_script(top_two, [x], (np.take_along_axis(x, order, -1), order, x[:, 2:]))


@script()
def older_opset(x: FLOAT["N"]) -> FLOAT["N"]:
    return opset15.Relu(x) + 1.0


@script()
def only_operators(x: FLOAT["N"]) -> FLOAT["N"]:
    return x * x


@script(opset=opset18)
def pinned_opset(x: FLOAT["N"]) -> FLOAT["N"]:
    return x * x


def test_opset_is_inferred_or_pinned():
    assert older_opset.function.opset_imports == {"": 15}
    assert only_operators.function.opset_imports == {"": max_opset()}
    assert pinned_opset.function.opset_imports == {"": 18}
    x = f32(3)
    check_script(older_opset, [x], np.maximum(x, 0) + 1)
    check_script(only_operators, [x], x * x)


@script()
def python_constants_fold(x: FLOAT["N"]) -> FLOAT["N"]:
    n = 3
    m = n * 2 + 1
    return x * m


def test_constant_expressions_fold_at_compile_time():
    assert op_types(python_constants_fold) == ["Constant", "Mul"]
    x = f32(3)
    check_script(python_constants_fold, [x], x * 7)


# --------------------------------------------------------------------------- if/else


@script()
def branchy(x: FLOAT["N"], t: FLOAT) -> FLOAT["N"]:
    if op.ReduceSum(x) > t:
        y = x * 2.0
    elif op.ReduceMax(x) > t:
        y = x + 100.0
    else:
        y = -x
    return y


def test_if_elif_else():
    x = np.array([-5.0, 3.0, 1.0], np.float32)
    for t, expected in ((-2.0, x * 2), (0.0, x + 100), (10.0, -x)):
        check_script(branchy, [x, np.array(t, np.float32)], expected)
    assert op_types(branchy).count("If") == 1


@script()
def if_without_else(x: FLOAT["N"]) -> FLOAT["N"]:
    y = x
    if op.ReduceMin(x) < 0.0:
        y = op.Abs(x)
    return y + 1.0


def test_if_without_else_keeps_previous_value():
    for x in (np.array([1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32)):
        check_script(if_without_else, [x], (np.abs(x) if x.min() < 0 else x) + 1)


@script()
def early_return(x: FLOAT["N"]) -> FLOAT["N"]:
    if op.ReduceSum(x) < 0.0:
        return -x
    y = x * 3.0
    if op.ReduceMax(y) > 10.0:
        return y - 10.0
    return y


def test_early_return_becomes_structured_if():
    for x in ([-1.0, -2.0], [1.0, 2.0], [1.0, 5.0]):
        a = np.array(x, np.float32)
        expected = -a if a.sum() < 0 else (a * 3 - 10 if (a * 3).max() > 10 else a * 3)
        check_script(early_return, [a], expected)


@script()
def static_if(x: FLOAT["N"]) -> FLOAT["N"]:
    if SCALE > 2:
        y = x * SCALE
    else:
        y = x
    return y


def test_if_on_python_constant_is_decided_when_compiling():
    assert "If" not in op_types(static_if)
    x = f32(3)
    check_script(static_if, [x], x * 3)


@script()
def if_on_attribute(x: FLOAT["N"], negate: bool = False) -> FLOAT["N"]:
    if negate:
        y = -x
    else:
        y = x
    return y


@script()
def negate_caller(x: FLOAT["N"]) -> tuple[FLOAT["N"], FLOAT["N"]]:
    return if_on_attribute(x, negate=True), if_on_attribute(x)


def test_if_on_attribute_parameter_is_a_runtime_if():
    assert "If" in op_types(if_on_attribute)
    x = f32(4)
    check_script(if_on_attribute, [x], x)
    check_script(negate_caller, [x], (-x, x))


@script()
def conditional_expression(x: FLOAT["N"]) -> FLOAT["N"]:
    return x * 2.0 if op.ReduceSum(x) > 0.0 else x - 1.0


def test_conditional_expression():
    for x in (np.array([1.0, 2.0], np.float32), np.array([-1.0, -2.0], np.float32)):
        check_script(conditional_expression, [x], x * 2 if x.sum() > 0 else x - 1)


# ---------------------------------------------------------------------------- loops


@script()
def running_sum(x: FLOAT["N"], n: INT64) -> FLOAT["N"]:
    total = x * 0.0
    for i in range(n):
        total = total + x * op.Cast(i, to=FLOAT.enum)
    return total


def test_for_range_with_tensor_bound():
    x = f32(3)
    for n in (0, 1, 4):
        check_script(running_sum, [x, np.array(n, np.int64)], x * float(sum(range(n))), rtol=1e-5, atol=1e-5)


@script()
def ranges(x: FLOAT, a: INT64, b: INT64) -> tuple[FLOAT, FLOAT, FLOAT, FLOAT]:
    s1 = x * 0.0
    for i in range(2, 11, 3):
        s1 = s1 + op.Cast(i, to=FLOAT.enum)
    s2 = x * 0.0
    for j in range(b, a, -2):
        s2 = s2 + op.Cast(j, to=FLOAT.enum)
    s3 = x * 0.0
    for k in range(a, b):
        s3 = s3 + op.Cast(k, to=FLOAT.enum)
    s4 = x * 0.0
    for m in range(10, 0, -3):
        s4 = s4 + op.Cast(m, to=FLOAT.enum)
    return s1, s2, s3, s4


def test_range_forms():
    x = np.array(0, np.float32)
    for a, b in ((1, 8), (3, 3), (5, 2)):
        expected = tuple(np.array(sum(r), np.float32) for r in (range(2, 11, 3), range(b, a, -2), range(a, b), range(10, 0, -3)))
        check_script(ranges, [x, np.array(a, np.int64), np.array(b, np.int64)], expected)


@script()
def collatz_steps(n: INT64) -> INT64:
    steps = op.Constant(value_int=0)
    while n > 1:
        if n % 2 == 0:
            n = n / 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def collatz(n: int) -> int:
    steps = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_while_loop_with_if_inside():
    for n in (1, 6, 27):
        check_script(collatz_steps, [np.array(n, np.int64)], np.array(collatz(n), np.int64))


@script()
def break_and_continue(x: FLOAT["N"], limit: FLOAT) -> tuple[FLOAT, FLOAT]:
    total = op.ReduceSum(x * 0.0, keepdims=0)
    skipped = total
    for i in range(op.Size(x)):
        v = x[i]
        if v < 0.0:
            skipped = skipped + v
            continue
        total = total + v
        if total > limit:
            break
    return total, skipped


def break_continue_oracle(x: np.ndarray, limit: float) -> tuple[np.float32, np.float32]:
    total = np.float32(0)
    skipped = np.float32(0)
    for v in x:
        if v < 0:
            skipped += v
            continue
        total += v
        if total > limit:
            break
    return np.float32(total), np.float32(skipped)


def test_break_and_continue():
    x = np.array([1.0, -1.0, 2.0, -0.5, 4.0, 8.0, -3.0], np.float32)
    for limit in (0.5, 6.0, 100.0):
        check_script(break_and_continue, [x, np.array(limit, np.float32)], break_continue_oracle(x, limit))


@script()
def while_true_break(x: FLOAT) -> FLOAT:
    y = x
    while True:
        y = y * 2.0
        if y > 100.0:
            break
    return y


def test_while_true_with_break():
    check_script(while_true_break, [np.array(3, np.float32)], np.array(192, np.float32))


@script()
def nested_loops(n: INT64) -> INT64:
    total = op.Constant(value_int=0)
    for i in range(n):
        for j in range(i):
            if (i + j) % 3 == 0:
                continue
            total = total + i * j
    return total


def test_nested_loops_with_continue():
    for n in (0, 3, 7):
        expected = sum(i * j for i in range(n) for j in range(i) if (i + j) % 3 != 0)
        check_script(nested_loops, [np.array(n, np.int64)], np.array(expected, np.int64))


@script()
def loop_local_value(x: FLOAT["N"]) -> FLOAT["N"]:
    acc = x
    for _ in range(3):
        step = acc * 0.5
        acc = acc + step
    return acc


def test_values_first_defined_inside_the_loop():
    x = f32(4)
    check_script(loop_local_value, [x], x * 1.5**3, rtol=1e-5)


# ------------------------------------------------------------------------- indexing


@script()
def slicing(x: FLOAT[4, 6, 5]) -> tuple[
    FLOAT[...], FLOAT[...], FLOAT[...], FLOAT[...], FLOAT[...], FLOAT[...], FLOAT[...]
]:
    a = x[1:3, ::2]
    b = x[::-1, -1]
    c = x[..., 0]
    d = x[None, 2]
    e = x[-1, 1:-1:2, None, ...]
    f = x[:, :, 4:0:-2]
    g = x[0, 1, 2]
    return a, b, c, d, e, f, g


def test_slices_ints_ellipsis_newaxis():
    x = f32(4, 6, 5)
    expected = (x[1:3, ::2], x[::-1, -1], x[..., 0], x[None, 2], x[-1, 1:-1:2, None, ...], x[:, :, 4:0:-2],
                x[0, 1, 2])
    check_script(slicing, [x], expected)


@script()
def tensor_indices(x: FLOAT[5, 3], i: INT64, idx: INT64[2], k: INT64) -> tuple[
    FLOAT[...], FLOAT[...], FLOAT[...], FLOAT[...]
]:
    return x[i], x[idx, 1:], x[:, idx[0]], x[k:k + 2]


def test_tensor_indices():
    x = f32(5, 3)
    idx = np.array([2, 0], np.int64)
    check_script(tensor_indices, [x, np.array(-2, np.int64), idx, np.array(1, np.int64)],
                 (x[-2], x[idx, 1:], x[:, idx[0]], x[1:3]))


# ------------------------------------------------------------------ calls, subgraphs


@script()
def scaled(x: FLOAT["N"], factor: float = 2.0) -> FLOAT["N"]:
    return x * factor


@script(inline=True)
def inlined_square(x: FLOAT["N"]) -> FLOAT["N"]:
    y = x * x
    return y


@script(domain="com.example.custom")
def custom_domain(x: FLOAT["N"]) -> FLOAT["N"]:
    return op.Neg(x)


@script()
def caller(x: FLOAT["N"]) -> tuple[FLOAT["N"], FLOAT["N"], FLOAT["N"], FLOAT["N"]]:
    return scaled(x), scaled(x, factor=5.0), inlined_square(x), custom_domain(x)


def test_calls_to_script_functions():
    fn = caller.function
    assert [n.op_type for n in fn.nodes if n.callee is not None] == ["scaled", "scaled", "custom_domain"]
    assert "inlined_square" not in op_types(caller)
    assert fn.nodes[0].attributes["factor"].value == 2.0  # the default is applied on the call
    assert fn.opset_imports["com.example.custom"] == 1
    model = caller.to_model_proto()
    assert sorted((f.domain, f.name) for f in model.functions) == [("com.example.custom", "custom_domain"),
                                                                     ("this", "scaled")]
    x = f32(3)
    check_script(caller, [x], (x * 2, x * 5, x * x, -x))
    check_script(caller, [x], (x * 2, x * 5, x * x, -x), inline=True)


@script()
def with_scan(x: FLOAT[4, 3], bias: FLOAT[3]) -> tuple[FLOAT[3], FLOAT[4, 3]]:
    @graph()
    def body(state: FLOAT[3], row: FLOAT[3]) -> tuple[FLOAT[3], FLOAT[3]]:
        total = state + row + bias
        return total, total

    final, partials = op.Scan(bias * 0.0, x, body=body, num_scan_inputs=1)
    return final, partials


def test_graph_attribute_captures_outer_values():
    x, bias = f32(4, 3), f32(3)
    partials = np.cumsum(x + bias, axis=0)
    check_script(with_scan, [x, bias], (partials[-1], partials), rtol=1e-5, atol=1e-5)


@script()
def hand_written_if(x: FLOAT["N"]) -> FLOAT["N"]:
    @graph()
    def positive() -> FLOAT["N"]:
        return x + 1.0

    @graph()
    def negative() -> FLOAT["N"]:
        return x - 1.0

    return op.If(op.ReduceSum(x) > 0.0, then_branch=positive, else_branch=negative)


def test_hand_written_if_branches():
    for x in (np.array([1.0, 2.0], np.float32), np.array([-3.0, 1.0], np.float32)):
        check_script(hand_written_if, [x], x + 1 if x.sum() > 0 else x - 1)


@script()
def clipped(x: FLOAT["N"], high: FLOAT) -> tuple[FLOAT["N"], FLOAT]:
    parts = op.SequenceConstruct(x, x * 2.0)
    second = op.SequenceAt(parts, 1)
    return op.Clip(second, None, high), op.ReduceSum(op.ConcatFromSequence(parts, axis=0), keepdims=0)


def test_sequences_and_omitted_optional_inputs():
    x = f32(3)
    expected = (np.minimum(x * 2, 0.5), np.array((x + x * 2).sum(), np.float32))
    check_script(clipped, [x, np.array(0.5, np.float32)], expected, rtol=1e-5)


@script()
def optional_input(x: FLOAT["N"], maybe: Optional[FLOAT["N"]]) -> FLOAT["N"]:
    if op.OptionalHasElement(maybe):
        y = x + op.OptionalGetElement(maybe)
    else:
        y = x
    return y


def test_optional_annotation_is_an_optional_input():
    assert optional_input.function.inputs[1].type == Optional[FLOAT["N"]]
    model = optional_input.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[1].type.HasField("optional_type")


@script()
def sequence_input(items: Sequence[FLOAT["N"]]) -> FLOAT["N"]:
    return op.SequenceAt(items, 0) + op.SequenceAt(items, -1)


def test_sequence_annotation():
    assert sequence_input.function.inputs[0].type == Sequence[FLOAT["N"]]
    onnx.checker.check_model(sequence_input.to_model_proto(), full_check=True)


@script()
def sequence_indexing(x: FLOAT["N"], i: INT64) -> tuple[FLOAT["N"], FLOAT["N"]]:
    parts = op.SequenceConstruct(x, x + 1.0, x * 3.0)
    return parts[-1], parts[i]


def test_subscript_of_a_sequence_is_sequence_at():
    assert op_types(sequence_indexing).count("SequenceAt") == 2
    x = f32(3)
    outputs = export_and_run(sequence_indexing, [x, np.array(1, np.int64)])
    np.testing.assert_allclose(outputs[0], x * 3, rtol=1e-6)
    np.testing.assert_allclose(outputs[1], x + 1, rtol=1e-6)


# -------------------------------------------------------------- nested combination


@script()
def halve_until_small(x: FLOAT, big: FLOAT) -> FLOAT:
    y = x
    if y > big:
        while y > big:
            y = y / 2.0
    else:
        y = y * 10.0
    return y


@script()
def uses_nested(x: FLOAT, big: FLOAT) -> FLOAT:
    return halve_until_small(x, big) + 1.0


def halve_oracle(x: float, big: float) -> np.float32:
    y = np.float32(x)
    if y > big:
        while y > big:
            y = y / np.float32(2)
    else:
        y = y * np.float32(10)
    return np.float32(y + 1)


def test_while_inside_if_inside_called_function():
    for x, big in ((100.0, 3.0), (1.0, 3.0)):
        check_script(uses_nested, [np.array(x, np.float32), np.array(big, np.float32)], np.array(halve_oracle(x, big)))


@script()
def cast_types(x: INT32["N"]) -> DOUBLE["N"]:
    return op.Cast(x, to=DOUBLE) * 0.5


def test_element_type_attribute_and_double_literal():
    x = np.array([1, 2, 3], np.int32)
    check_script(cast_types, [x], x.astype(np.float64) * 0.5)
    constant = next(n for n in cast_types.function.nodes if n.op_type == "Constant")
    assert constant.attributes["value"].value.elem_type == DOUBLE.enum


# ---------------------------------------------------------------- interactive use


def exec_source(text: str, filename: str) -> dict:
    text = textwrap.dedent(text)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(text, filename, "exec"), namespace)
    return namespace


def test_functions_defined_in_exec_code_and_redefined():
    first = exec_source(
        """
        from dsl import script, FLOAT, opset18 as op
        @script()
        def cell(x: FLOAT["N"]) -> FLOAT["N"]:
            return x + 1.0
        """,
        "<cell-1>",
    )
    second = exec_source(
        """
        from dsl import script, FLOAT, opset18 as op
        @script()
        def cell(x: FLOAT["N"]) -> FLOAT["N"]:
            return x * 10.0
        """,
        "<cell-2>",
    )
    x = f32(2)
    np.testing.assert_allclose(export_and_run(first["cell"], [x])[0], x + 1)
    np.testing.assert_allclose(export_and_run(second["cell"], [x])[0], x * 10)
    assert first["cell"].function.nodes[-1].location.file == "<cell-1>"


def test_plain_repl_without_source_raises_source_unavailable():
    namespace: dict = {}
    exec(compile("from dsl import script, FLOAT\n@script()\ndef lost(x: FLOAT):\n    return x\n",
                 "<stdin>", "exec"), namespace)
    with pytest.raises(SourceUnavailableError) as caught:
        namespace["lost"].function
    assert "linecache" in str(caught.value)


def test_indented_definition_keeps_user_columns():
    @script()
    def indented(x: FLOAT["N"]) -> FLOAT["N"]:
        return op.Relu(x)

    node = indented.function.nodes[0]
    assert node.location.column == node.location.source_line.index("op.Relu")
    assert node.location.line == indented.python_function.__code__.co_firstlineno + 2


def test_model_from_every_construct_passes_full_check():
    for fn in (layer_norm, branchy, collatz_steps, break_and_continue, nested_loops, slicing, caller, with_scan):
        onnx.checker.check_model(fn.to_model_proto(), full_check=True)
    assert opset18.version == 18


# ------------------------------------------------------------------ more of part B


@graph()
def cumulative_body(total: FLOAT[3], row: FLOAT[3]) -> tuple[FLOAT[3], FLOAT[3]]:
    following = total + row
    return following, following * 2.0


@script()
def module_level_graph(x: FLOAT[4, 3]) -> tuple[FLOAT[3], FLOAT[4, 3]]:
    return op.Scan(op.ReduceSum(x, [0], keepdims=0) * 0.0, x, body=cumulative_body, num_scan_inputs=1)


def test_module_level_graph_function_as_attribute():
    x = f32(4, 3)
    running = np.cumsum(x, axis=0)
    check_script(module_level_graph, [x], (running[-1], running * 2), rtol=1e-5, atol=1e-5)


@script()
def hand_written_loop(x: FLOAT["N"], n: INT64) -> FLOAT["N"]:
    @graph()
    def body(i: INT64, keep_going: BOOL, acc: FLOAT["N"]) -> tuple[BOOL, FLOAT["N"]]:
        if i > 1:
            acc = acc + x
        else:
            acc = acc - x
        return keep_going, acc

    return op.Loop(n, None, x, body=body)


def test_hand_written_loop_body_with_if_and_capture():
    x = f32(3)
    for n in (0, 2, 5):
        expected = x.copy()
        for i in range(n):
            expected = expected + x if i > 1 else expected - x
        check_script(hand_written_loop, [x, np.array(n, np.int64)], expected, rtol=1e-5, atol=1e-6)


@script()
def calls_in_loop(x: FLOAT["N"], n: INT64) -> FLOAT["N"]:
    y = x
    for _ in range(n):
        y = scaled(y, factor=0.5)
    return y


def test_call_inside_loop_body():
    x = f32(3)
    check_script(calls_in_loop, [x, np.array(3, np.int64)], x * 0.125)
    model = calls_in_loop.to_model_proto()
    assert [f.name for f in model.functions] == ["scaled"]


@script()
def permute(x: FLOAT[2, 3, 4], perm: list[int] = (2, 0, 1)) -> FLOAT[4, 2, 3]:
    return op.Transpose(x, perm=perm) + op.Cast(op.ReduceSum(perm), to=FLOAT.enum) * 0.0


def test_list_attribute_parameter_as_attribute_and_tensor():
    fn = permute.function
    assert fn.attr_params[0].kind.name == "INTS"
    assert fn.attr_params[0].default.value == [2, 0, 1]
    transpose = next(n for n in fn.nodes if n.op_type == "Transpose")
    assert transpose.attributes["perm"].ref_attr_name == "perm"
    x = f32(2, 3, 4)
    check_script(permute, [x], np.transpose(x, (2, 0, 1)))


@script()
def python_counter(x: FLOAT["N"]) -> FLOAT["N"]:
    n = 1
    n += 2
    n *= 2
    return x * n


def test_augmented_assignment_on_constants():
    assert op_types(python_counter) == ["Constant", "Mul"]
    x = f32(2)
    check_script(python_counter, [x], x * 6)


RELU = op.Relu


@script()
def op_aliases(x: FLOAT["N"]) -> FLOAT["N"]:
    import_free = dsl.opset18.Abs
    neg = op.Neg
    return RELU(x) + import_free(x) + neg(x)


def test_ops_bound_to_names_and_module_attributes():
    assert op_aliases.function.opset_imports == {"": 18}
    x = f32(4)
    check_script(op_aliases, [x], np.maximum(x, 0) + np.abs(x) - x)


def test_custom_domain_op_without_schema():
    from dsl import Opset

    ms = Opset("com.microsoft", 1)

    @script()
    def gelu(x: FLOAT["N"]) -> FLOAT["N"]:
        return ms.Gelu(x)

    fn = gelu.function
    assert (fn.nodes[0].domain, fn.nodes[0].op_type) == ("com.microsoft", "Gelu")
    assert fn.opset_imports["com.microsoft"] == 1
    x = f32(5)
    from math import erf

    expected = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x], np.float32)
    np.testing.assert_allclose(export_and_run(gelu, [x])[0], expected, rtol=1e-5, atol=1e-6)


@script()
def elif_returns(x: FLOAT) -> FLOAT:
    if x < 0.0:
        return -x
    elif x < 1.0:
        y = x * 10.0
        if y < 5.0:
            return y
    return x + 100.0


def test_returns_in_elif_chains_and_nested_ifs():
    for value in (-2.0, 0.2, 0.7, 3.0):
        x = np.array(value, np.float32)
        if value < 0:
            expected = -x
        elif value < 1 and x * 10 < 5:
            expected = x * np.float32(10)
        else:
            expected = x + np.float32(100)
        check_script(elif_returns, [x], np.asarray(expected, np.float32))


@script()
def clamp_negative(x: DOUBLE) -> DOUBLE:
    if x < 0.0:
        return 0.0
    return x


def test_returned_literal_takes_the_declared_type():
    for value in (-1.5, 2.5):
        x = np.array(value, np.float64)
        check_script(clamp_negative, [x], np.maximum(x, 0.0))


@script()
def weights_twice(x: FLOAT["B", 4]) -> FLOAT["B", 3]:
    return op.MatMul(x, WEIGHTS) + op.MatMul(x * 2.0, WEIGHTS)


def test_large_outer_arrays_become_one_constant():
    constants = [n for n in weights_twice.function.nodes if n.op_type == "Constant"]
    assert sum(c.attributes["value"].value.shape == (4, 3) for c in constants) == 1
    x = f32(2, 4)
    check_script(weights_twice, [x], x @ WEIGHTS + (x * 2) @ WEIGHTS, rtol=1e-5, atol=1e-5)


@script()
def keyword_only(x: FLOAT["N"], /, y: FLOAT["N"], *, alpha: float = 0.5, axes: list[int] = (0,)) -> FLOAT:
    total = op.ReduceSum(x * alpha + y, axes, keepdims=0)  # a list attribute used as an input tensor
    return total


@script()
def calls_keyword_only(x: FLOAT["N"]) -> FLOAT:
    return keyword_only(x, x, alpha=2.0)


def test_positional_only_and_keyword_only_parameters():
    fn = keyword_only.function
    assert [v.name for v in fn.inputs] == ["x", "y"]
    assert [p.name for p in fn.attr_params] == ["alpha", "axes"]
    x = f32(3)
    check_script(calls_keyword_only, [x], np.array((x * 2 + x).sum(), np.float32), rtol=1e-5)


def walk_graph(graph):
    """Every (graph, node) pair of ``graph`` and its subgraphs."""
    for node in graph.nodes:
        yield graph, node
        for attr in node.attributes.values():
            if attr.kind.name == "GRAPH":
                yield from walk_graph(attr.value)


@pytest.mark.parametrize("fn", [layer_norm, branchy, break_and_continue, nested_loops, with_scan, slicing,
                                early_return, hand_written_loop, collatz_steps])
def test_names_unique_and_every_object_located(fn):
    function = fn.function
    names = [v.name for v in function.inputs]
    seen_graphs = {id(function.graph)}
    for owner, node in walk_graph(function.graph):
        assert node.location is not None and node.location.file == __file__
        assert node.location.source_line.strip(), node
        if id(owner) not in seen_graphs:
            seen_graphs.add(id(owner))
            names += [v.name for v in owner.inputs]
            assert owner.location is not None
        names += [v.name for v in node.outputs if v.name]
        for value in node.outputs:
            assert value.location is not None
        for attr in node.attributes.values():
            assert attr.location is not None, (node, attr)
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert function.location.line == fn.python_function.__code__.co_firstlineno + 1


def test_type_expressions_inside_attributes_are_evaluated_at_compile_time() -> None:
    # Sequence[FLOAT[5]] is a Python-level type expression, not tensor indexing.
    from dsl import Sequence

    @dsl.script()
    def empty_optional_sequence(x: FLOAT[5]) -> BOOL:
        nothing = op.Optional(type=Sequence[FLOAT[5]])
        return op.OptionalHasElement(nothing)

    model = empty_optional_sequence.to_model_proto()
    type_attr = model.graph.node[0].attribute[0]
    assert type_attr.tp.sequence_type.elem_type.tensor_type.shape.dim[0].dim_value == 5
    check_script(empty_optional_sequence, [np.ones(5, np.float32)], np.array(False))


def test_compile_time_object_indexed_by_a_tensor_is_a_located_error() -> None:
    settings = {"scale": 2.0}

    @dsl.script()
    def bad(x: FLOAT[5]) -> FLOAT[5]:
        return x * settings[op.Shape(x)]

    with pytest.raises(dsl.DslTypeError, match="known at compile time") as info:
        bad.to_model_proto()
    assert "settings[op.Shape(x)]" in str(info.value)
