"""Eager sequences, optionals and result typing, against the exported model and Python oracles.

Sequence ops run eagerly on lists of arrays; the oracle is Python's own list semantics
(the ONNX spec defines SequenceAt/Insert/Erase positions as Python's, negative ones
counting from the back) and numpy.  Scripted functions go through
:func:`tests.helpers.check_script`, so eager mode and the exported model (onnxruntime)
must give the same values and dtypes — including for Python literals returned under a
declared type — and the same kind of error where the model cannot be built.
"""

from __future__ import annotations

import linecache
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dsl import BOOL, DOUBLE, FLOAT, INT32, INT64, Optional, Sequence, graph, script, types
from dsl import opset18 as op
from dsl.errors import DslError, DslTypeError, EagerError
from dsl.opsets import get_opset
from tests.helpers import check_script, export_and_run, run_model
from tests.test_frontend_control_flow import blocks, define

F32 = np.float32


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape).astype(F32)


# ------------------------------------------------------------- sequence ops eagerly

items_strategy = st.lists(
    hnp.arrays(F32, st.integers(1, 4), elements=st.floats(-100, 100, width=32)), min_size=1, max_size=5
)


@settings(max_examples=40, deadline=None)
@given(items_strategy, st.data())
def test_sequence_ops_follow_python_list_semantics(items: list[np.ndarray], data: st.DataObject) -> None:
    n = len(items)
    seq = op.SequenceConstruct(*items)
    assert isinstance(seq, list) and seq.elem_type == types.FLOAT.enum
    assert [a.tolist() for a in seq] == [a.tolist() for a in items]
    position = data.draw(st.integers(-n, n - 1))
    np.testing.assert_array_equal(op.SequenceAt(seq, position), items[position])
    np.testing.assert_array_equal(seq[position], items[position])
    np.testing.assert_array_equal(seq[np.array(position, np.int64)], items[position])  # a tensor position
    assert int(op.SequenceLength(seq)) == n
    np.testing.assert_array_equal(op.ConcatFromSequence(seq, axis=0), np.concatenate(items))

    inserted = np.full(2, 7.0, F32)
    at = data.draw(st.integers(-n, n))
    expected = list(items)
    expected.insert(at, inserted)
    got = op.SequenceInsert(seq, inserted, np.array(at, np.int64))
    assert [a.tolist() for a in got] == [a.tolist() for a in expected]
    appended = op.SequenceInsert(seq, inserted)
    assert [a.tolist() for a in appended] == [a.tolist() for a in [*items, inserted]]

    erased = list(items)
    del erased[position]
    assert [a.tolist() for a in op.SequenceErase(seq, position)] == [a.tolist() for a in erased]
    assert [a.tolist() for a in op.SequenceErase(seq)] == [a.tolist() for a in items[:-1]]
    # a plain list of arrays is a sequence too, where the op takes one
    np.testing.assert_array_equal(op.SequenceAt(list(items), -1), items[-1])


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.int64, st.integers(1, 12), elements=st.integers(-50, 50)), st.data())
def test_split_to_sequence_matches_numpy(x: np.ndarray, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(x)))
    parts = op.SplitToSequence(x, np.array([cut, len(x) - cut], np.int64))
    assert [p.tolist() for p in parts] == [x[:cut].tolist(), x[cut:].tolist()]
    whole = op.SplitToSequence(x, axis=0, keepdims=0)
    assert [p.tolist() for p in whole] == [int(v) for v in x]


def test_empty_sequences_keep_their_element_type() -> None:
    empty = op.SequenceEmpty(dtype=DOUBLE.enum)
    assert empty == [] and empty.elem_type == DOUBLE.enum
    assert int(op.SequenceLength(empty)) == 0
    filled = op.SequenceInsert(empty, np.array([1.5]))
    assert filled.elem_type == DOUBLE.enum and filled[0].dtype == np.float64
    with pytest.raises(DslTypeError, match="holds DOUBLE, the tensor is FLOAT"):
        op.SequenceInsert(empty, np.array([1.5], F32))
    erased = op.SequenceErase(op.SequenceConstruct(np.ones(2, np.int32)))
    assert erased == [] and erased.elem_type == INT32.enum  # read from ONNX type inference
    assert int(op.SequenceLength([])) == 0


@pytest.mark.parametrize("version", [15, 18])
def test_optional_ops_on_tensors_sequences_and_none(version: int) -> None:
    ops = get_opset("", version)
    x = f32(3)
    seq = op.SequenceConstruct(x, x)
    assert bool(ops.OptionalHasElement(x)) and bool(ops.OptionalHasElement(seq))
    np.testing.assert_array_equal(ops.OptionalGetElement(x), x)
    assert [a.tolist() for a in ops.OptionalGetElement(seq)] == [x.tolist(), x.tolist()]
    wrapped = ops.Optional(x)
    np.testing.assert_array_equal(ops.OptionalGetElement(wrapped), x)
    empty = ops.Optional(type=FLOAT[None])
    assert empty is None
    if version >= 18:
        assert not bool(ops.OptionalHasElement(empty))  # an omitted input is an empty optional
    else:
        assert not bool(ops.OptionalHasElement(None))  # typed optional(...) only: fed as an empty optional
        with pytest.raises(EagerError, match=r"no value|contains no data"):
            ops.OptionalGetElement(None)


def test_sequence_misuse_is_a_dsl_error() -> None:
    x = f32(3)
    seq = op.SequenceConstruct(x, x)
    with pytest.raises(DslTypeError, match="takes a sequence of tensors, got a tensor"):
        op.SequenceAt(x, 0)
    with pytest.raises(DslTypeError, match="takes a tensor, got a sequence"):
        op.Relu(seq)
    with pytest.raises(DslTypeError, match="must have the same element type"):
        op.SequenceConstruct(x, np.ones(3, np.int64))
    with pytest.raises(DslTypeError, match="item 1 of a sequence is INT64"):
        op.SequenceLength([x, np.ones(3, np.int64)])
    with pytest.raises(DslTypeError, match="only be indexed by one position"):
        seq[0:1]
    with pytest.raises(EagerError, match="out of range"):
        seq[2]


def test_sequences_keep_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    seq = op.SequenceConstruct(torch.ones(2), torch.zeros(3))
    assert all(isinstance(item, torch.Tensor) for item in seq)
    assert torch.equal(op.ConcatFromSequence(seq, axis=0), torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]))


# ------------------------------------------------- scripted functions: both ways


@script()
def pick_items(x: FLOAT["N"], i: INT64) -> tuple[FLOAT["N"], FLOAT["N"], FLOAT["N"]]:
    parts = op.SequenceConstruct(x, x + 1.0, x * 3.0)
    return parts[-1], parts[i], op.SequenceAt(parts, 0)


def test_subscript_of_a_sequence_is_sequence_at_in_both_modes() -> None:
    x = f32(4)
    for i in (0, 1, -1):
        check_script(pick_items, [x, np.array(i, np.int64)], (x * 3, [x, x + 1, x * 3][i], x))


@script()
def first_plus_last(items: Sequence[FLOAT["N"]]) -> FLOAT["N"]:
    return op.SequenceAt(items, 0) + items[-1]


def test_sequence_parameter() -> None:
    x = f32(3)
    check_script(first_plus_last, [[x, x + 1.0, x * 2.0]], x + x * 2.0)
    with pytest.raises(DslTypeError, match=r"argument 'items\[1\]' is declared FLOAT"):
        first_plus_last([x, x.astype(np.float64)])


@script()
def plus_maybe(x: FLOAT["N"], maybe: Optional[FLOAT["N"]]) -> FLOAT["N"]:
    if op.OptionalHasElement(maybe):
        y = x + op.OptionalGetElement(maybe)
    else:
        y = x
    return y


def test_optional_parameter_with_and_without_a_value() -> None:
    x = f32(3)
    check_script(plus_maybe, [x, x * 2.0], x * 3.0)
    check_script(plus_maybe, [x, None], x)


@script()
def wrap_and_unwrap(x: FLOAT["N"]) -> tuple[BOOL, FLOAT["N"]]:
    wrapped = op.Optional(x)
    return op.OptionalHasElement(wrapped), op.OptionalGetElement(wrapped)


def test_optional_values_in_a_body() -> None:
    x = f32(3)
    check_script(wrap_and_unwrap, [x], (np.array(True), x))


@script()
def scaled_each(x: FLOAT["N"], y: FLOAT["N"]) -> Sequence[FLOAT["N"]]:
    @graph()
    def body(item: FLOAT["N"], scale: FLOAT) -> FLOAT["N"]:
        return item * scale

    return op.SequenceMap(op.SequenceConstruct(x, y), op.Constant(value_float=2.0), body=body)


def test_sequence_map_with_a_graph_body() -> None:
    x, y = f32(3), f32(3) + 10
    check_script(scaled_each, [x, y], ([x * 2, y * 2],))
    result = scaled_each(x, y)
    assert type(result) is list and all(isinstance(item, np.ndarray) for item in result)


@script()
def gathered(x: FLOAT["N"], n: INT64) -> tuple[FLOAT["M"], INT64]:
    parts = op.SequenceEmpty(dtype=FLOAT.enum)
    for i in range(n):
        parts = op.SequenceInsert(parts, x * op.Cast(i, to=FLOAT.enum))
    return op.ConcatFromSequence(parts, axis=0), op.SequenceLength(parts)


def test_sequence_built_in_a_loop() -> None:
    x = f32(2)
    for n in (1, 3):
        expected = np.concatenate([x * k for k in range(n)])
        check_script(gathered, [x, np.array(n, np.int64)], (expected, np.array(n, np.int64)))
    # Concatenating an empty sequence fails in the exported model, and eagerly
    with pytest.raises(Exception, match="1 or more inputs"):
        export_and_run(gathered, [x, np.array(0, np.int64)])
    with pytest.raises(EagerError, match="1 or more inputs"):
        gathered(x, np.array(0, np.int64))


@script()
def split_and_drop(x: FLOAT["N"]) -> tuple[FLOAT["M"], Sequence[FLOAT["K"]]]:
    parts = op.SplitToSequence(x, 2)
    rest = op.SequenceErase(parts, 0)
    return op.ConcatFromSequence(rest, axis=0), rest


def test_split_erase_and_a_sequence_result() -> None:
    x = np.arange(6, dtype=F32)
    check_script(split_and_drop, [x], (x[2:], [x[2:4], x[4:6]]))


@script()
def sliced_sequence(x: FLOAT["N"]) -> FLOAT["N"]:
    parts = op.SequenceConstruct(x, x)
    return parts[0:1]


def test_slicing_a_sequence_fails_in_both_modes() -> None:
    with pytest.raises(DslTypeError, match="only be indexed by one position"):
        _ = sliced_sequence.function
    with pytest.raises(DslTypeError, match="only be indexed by one position"):
        sliced_sequence(f32(2))


# ------------------------------------------------------------ typed results


@script()
def clamp_negative(x: DOUBLE) -> DOUBLE:
    if x < 0.0:
        return 0.0
    return x


def test_returned_float_literal_takes_the_declared_type() -> None:
    for value in (-1.5, 2.5):
        x = np.array(value, np.float64)
        check_script(clamp_negative, [x], np.maximum(x, 0.0))


def _define(source: str, name: str) -> object:
    filename = f"<eager-results-{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("type_name", ["FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT32", "INT64", "UINT8", "BOOL"])
@pytest.mark.parametrize("literal", ["3", "2.5", "True"])
def test_returned_literal_typing_matches_the_compiler(type_name: str, literal: str) -> None:
    fn = _define(
        f"from dsl import script, FLOAT, {type_name}\n"
        "@script()\n"
        f"def constant(x: FLOAT) -> {type_name}:\n"
        f"    return {literal}\n",
        "constant",
    )
    x = np.array(1.0, F32)
    want = types.numpy_dtype(getattr(types, type_name).enum)
    try:
        exported = export_and_run(fn, [x])[0]
    except DslTypeError as compile_error:
        with pytest.raises(DslTypeError, match="but the annotation says"):
            fn(x)
        assert "but the annotation says" in str(compile_error)
        return
    got = fn(x)
    assert exported.dtype == want and got.dtype == want
    np.testing.assert_array_equal(got, exported)


@script()
def wrong_result_type(x: FLOAT["N"]) -> DOUBLE["N"]:
    return x + 1.0


def test_result_of_another_element_type_fails_in_both_modes() -> None:
    with pytest.raises(DslTypeError, match="FLOAT but the annotation says DOUBLE"):
        _ = wrong_result_type.function
    with pytest.raises(DslTypeError, match="FLOAT but the annotation says DOUBLE") as caught:
        wrong_result_type(f32(2))
    assert caught.value.location is not None


@script()
def attribute_result(x: FLOAT["N"], alpha: float = 2.5) -> INT64:
    return alpha


def test_returned_attribute_is_cast_like_the_compiler_does() -> None:
    check_script(attribute_result, [f32(2)], np.array(2, np.int64))
    check_script(attribute_result, [f32(2)], np.array(7, np.int64), attributes={"alpha": 7.9})


@script(opset=op)
def two_as_double(x: DOUBLE) -> DOUBLE:
    return 2


@script(opset=op)
def identity_of_callee(x: DOUBLE) -> DOUBLE:
    return op.Identity(two_as_double(x)) * x


def test_nested_call_result_is_typed_by_the_callee_annotation() -> None:
    x = np.array(1.5, np.float64)
    check_script(identity_of_callee, [x], x * 2)


@script()
def relu_with_branches(x: FLOAT) -> FLOAT:
    @graph()
    def negative() -> FLOAT:
        return 0.0

    @graph()
    def positive() -> FLOAT:
        return op.Identity(x)

    return op.If(x < 0.0, then_branch=negative, else_branch=positive)


@script()
def count_to(n: INT64) -> INT32:
    @graph()
    def body(i: INT64, cond: BOOL, total: INT32) -> tuple[BOOL, INT32]:
        return True, total + op.Cast(i, to=INT32.enum)

    return op.Loop(n, None, np.int32(0), body=body)


def test_graph_body_literals_take_the_declared_type() -> None:
    for value in (-2.0, 3.0):
        x = np.array(value, F32)
        check_script(relu_with_branches, [x], np.maximum(x, F32(0)))
    check_script(count_to, [np.array(4, np.int64)], np.array(6, np.int32))


# ----------------------------------------- random programs: eager equals exported


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.floats(-3, 3, width=32), st.floats(-3, 3, width=32), st.integers(0, 4))
def test_random_control_flow_eager_equals_exported(data: st.DataObject, a: float, b: float, n: int) -> None:
    body = data.draw(blocks(1, 0, None))
    program = define(body)
    inputs = [np.array(a, F32), np.array(b, F32), np.array(n, np.int64)]
    exported = run_model(program.to_model_proto(), inputs)
    with np.errstate(all="ignore"):
        got = program(*inputs)
        for g, e in zip(got, exported):
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg="\n".join(body))


@script()
def one_for_two(x: FLOAT["N"]) -> tuple[FLOAT["N"], FLOAT["N"]]:
    return x + 1.0


@script()
def returns_a_dict(x: FLOAT["N"]) -> FLOAT["N"]:
    return {"y": x}


def test_results_the_compiler_rejects_fail_eagerly_too() -> None:
    x = f32(2)
    with pytest.raises(DslTypeError, match="annotation declares 2"):
        _ = one_for_two.function
    with pytest.raises(DslTypeError, match="annotation declares 2"):
        one_for_two(x)
    with pytest.raises(DslError):
        _ = returns_a_dict.function
    with pytest.raises(DslTypeError, match="result 0 is a dict, which is not a tensor"):
        returns_a_dict(x)


# ------------------------------------------------- Python lists where an op takes a sequence


@script()
def concat_listed(a: FLOAT["N"], b: FLOAT["M"]) -> FLOAT["K"]:
    return op.ConcatFromSequence([a, b], axis=0)


@script()
def concat_appended(a: FLOAT["N"], b: FLOAT["M"]) -> FLOAT["K"]:
    parts = [a]
    parts.append(b * 2.0)
    return op.ConcatFromSequence(parts, axis=0)


@script()
def concat_tupled(a: FLOAT["N"], b: FLOAT["M"]) -> FLOAT["K"]:
    return op.ConcatFromSequence((a, b), axis=0)


@script()
def length_after_insert(a: INT32["N"]) -> tuple[INT64, INT32["N"]]:
    seq = op.SequenceInsert([], a)
    return op.SequenceLength(seq), op.SequenceAt(seq, 0)


@script()
def empty_length(a: FLOAT["N"]) -> INT64:
    return op.SequenceLength([])


def test_a_list_of_tensors_is_a_sequence_in_both_modes() -> None:
    # Eager mode hands onnxruntime a list where the op takes a sequence; the model builds it
    # with SequenceConstruct (SequenceEmpty for [], of the inserted tensor's type, else FLOAT).
    a, b = f32(2), f32(3)
    check_script(concat_listed, [a, b], np.concatenate([a, b]))
    check_script(concat_appended, [a, b], np.concatenate([a, b * 2]))
    check_script(concat_tupled, [a, b], np.concatenate([a, b]))
    ints = np.array([4, 5], np.int32)
    check_script(length_after_insert, [ints], (np.array(1, np.int64), ints))
    check_script(empty_length, [a], np.array(0, np.int64))
    ops = [node.op_type for node in concat_listed.to_model_proto().graph.node]
    assert ops == ["SequenceConstruct", "ConcatFromSequence"]


@script()
def listed_where_a_tensor_is_taken(a: FLOAT["N"], b: FLOAT["N"]) -> FLOAT["N"]:
    return op.Add([a, b], b)


@script()
def sequence_with_a_number(a: FLOAT["N"]) -> FLOAT["K"]:
    return op.ConcatFromSequence([a, 1.0], axis=0)


def test_lists_that_are_neither_tensor_nor_sequence_are_refused_in_both_modes() -> None:
    a = f32(2)
    for call in (lambda: listed_where_a_tensor_is_taken.function, lambda: listed_where_a_tensor_is_taken(a, a)):
        with pytest.raises(DslTypeError, match="a list of tensors is not a tensor"):
            call()
    for call in (lambda: sequence_with_a_number.function, lambda: sequence_with_a_number(a)):
        with pytest.raises(DslTypeError, match="item 1 of a sequence is a float, not a tensor") as refused:
            call()
        assert "ConcatFromSequence([a, 1.0]" in str(refused.value)


# ------------------------------------------- inputs typed optional(...) only (opsets 15-17)


@pytest.mark.parametrize("version", [15, 16, 17, 18])
def test_tensors_lists_and_none_where_an_op_takes_optionals_only(version: int) -> None:
    # Before opset 18, OptionalHasElement and OptionalGetElement take optional(...) only:
    # eager mode feeds them a tensor, a list (a sequence) or None (an empty optional) as
    # an optional, and the model wraps the same with Optional; an optional is passed as is.
    ops = get_opset("", version)

    @script()
    def has_tensor(a: FLOAT["N"]) -> BOOL:
        return ops.OptionalHasElement(a)

    @script()
    def has_none(a: FLOAT["N"]) -> BOOL:
        return ops.OptionalHasElement(None)

    @script()
    def has_empty_list(a: FLOAT["N"]) -> BOOL:
        return ops.OptionalHasElement([])

    @script()
    def get_listed(a: FLOAT["N"], b: FLOAT["M"]) -> FLOAT["K"]:
        return ops.ConcatFromSequence(ops.OptionalGetElement([a, b]), axis=0)

    @script()
    def get_wrapped(a: FLOAT["N"]) -> FLOAT["N"]:
        return ops.OptionalGetElement(ops.Optional(a)) * 2.0

    @script()
    def get_sequence(a: FLOAT["N"]) -> FLOAT["K"]:
        return ops.ConcatFromSequence(ops.OptionalGetElement(ops.SequenceConstruct(a, a)), axis=0)

    @script()
    def get_parameter(a: FLOAT["N"], maybe: Optional[FLOAT["N"]]) -> FLOAT["N"]:
        return ops.OptionalGetElement(maybe) + a

    @script()
    def carried_tensor(a: FLOAT["N"], n: INT64) -> tuple[BOOL, BOOL]:
        h = a
        inside = ops.OptionalHasElement(a)
        for _ in range(n):
            inside = ops.OptionalHasElement(h)  # (a Loop body's carried input)
            h = h + 1.0
        return ops.OptionalHasElement(h), inside  # (the Loop's output)

    @script()
    def carried_optional(a: FLOAT["N"], maybe: Optional[FLOAT["N"]], n: INT64) -> FLOAT["N"]:
        h = maybe
        for _ in range(n):
            h = ops.Optional(ops.OptionalGetElement(h) + a)
        return ops.OptionalGetElement(h)

    @script()
    def doubled(a: FLOAT["N"]) -> FLOAT["N"]:
        return a * 2.0

    @script()
    def called_tensor(a: FLOAT["N"]) -> BOOL:
        return ops.OptionalHasElement(doubled(a))  # (a call's output, declared a tensor)

    @script()
    def branched_tensor(a: FLOAT["N"], c: BOOL) -> BOOL:
        chosen = a if c else a * 2.0
        return ops.OptionalHasElement(chosen)  # (an If's output, both of its branches tensors)

    @script()
    def carried_made(a: FLOAT["N"], n: INT64) -> FLOAT["N"]:
        h = ops.Optional(a)
        for _ in range(n):
            h = ops.Optional(ops.OptionalGetElement(h) + a)
        return ops.OptionalGetElement(h)

    a, b = f32(2), f32(3)
    check_script(carried_tensor, [a, np.array(2, np.int64)], (np.array(True), np.array(True)))
    if version >= 16:  # (Loop carries optionals from opset 16)
        check_script(carried_optional, [a, a, np.array(2, np.int64)], a * 3)
        check_script(carried_made, [a, np.array(2, np.int64)], a * 3)
    check_script(has_tensor, [a], np.array(True))
    check_script(branched_tensor, [a, np.array(False)], np.array(True))
    check_script(called_tensor, [a], np.array(True))
    check_script(has_none, [a], np.array(False))
    check_script(has_empty_list, [a], np.array(True))
    check_script(get_listed, [a, b], np.concatenate([a, b]))
    check_script(get_wrapped, [a], a * 2)
    check_script(get_sequence, [a], np.concatenate([a, a]))
    check_script(get_parameter, [a, a], a * 2)
    for function in (has_tensor, has_none, has_empty_list, get_listed, get_wrapped, get_sequence, get_parameter,
                     carried_tensor, branched_tensor, called_tensor, *([carried_optional, carried_made] if version >= 16 else [])):
        onnx.checker.check_model(function.to_model_proto(), full_check=True)
    wrapped = [node.op_type for node in get_listed.to_model_proto().graph.node].count("Optional")
    assert wrapped == (1 if version < 18 else 0)  # (opset 18 takes the sequence itself)


# ------------------------------- sequences and optionals through If and Loop at old opsets


def _carried_sequence(version: int) -> Any:
    ops = get_opset("", version)

    @script()
    def carried_sequence(a: FLOAT["N"], n: INT64) -> FLOAT["K"]:
        parts = ops.SequenceConstruct(a)
        for _ in range(n):
            parts = ops.SequenceInsert(parts, a)
        return ops.ConcatFromSequence(parts, axis=0)

    return carried_sequence


def _branch_sequence(version: int) -> Any:
    ops = get_opset("", version)

    @script()
    def branch_sequence(a: FLOAT["N"], c: BOOL) -> FLOAT["K"]:
        if c:
            parts = ops.SequenceConstruct(a)
        else:
            parts = ops.SequenceConstruct(a, a)
        return ops.ConcatFromSequence(parts, axis=0)

    return branch_sequence


def _carried_optional(version: int) -> Any:
    ops = get_opset("", version)

    @script()
    def carried_optional(a: FLOAT["N"], n: INT64) -> FLOAT["N"]:
        kept = ops.Optional(a)
        for _ in range(n):
            kept = ops.Optional(ops.OptionalGetElement(kept) + a)
        return ops.OptionalGetElement(kept)

    return carried_optional


def _branch_optional(version: int) -> Any:
    ops = get_opset("", version)

    @script()
    def branch_optional(a: FLOAT["N"], c: BOOL) -> FLOAT["N"]:
        kept = ops.Optional(a) if c else ops.Optional(a * 2.0)
        return ops.OptionalGetElement(kept)

    return branch_optional


A2, N2, YES = np.ones(2, np.float32), np.array(2, np.int64), np.array(True)
CONTROL_FLOW_CASES = [  # (make, passed from opset, inputs, expected, message)
    (_carried_sequence, 13, [A2, N2], np.ones(6, np.float32),
     "this loop carries 'parts', a sequence, but Loop at opset 12 (Loop-11) passes tensors only"),
    (_branch_sequence, 13, [A2, YES], A2,
     "this if gives 'parts', a sequence, but If at opset 12 (If-11) passes tensors only"),
    (_carried_optional, 16, [A2, N2], A2 * 3,
     "this loop carries 'kept', an optional, but Loop at opset 15 (Loop-13) passes tensors and sequences only"),
    (_branch_optional, 16, [A2, YES], A2,
     "this if gives an optional, but If at opset 15 (If-13) passes tensors and sequences only"),
]


@pytest.mark.parametrize(("make", "since", "inputs", "expected", "message"), CONTROL_FLOW_CASES,
                         ids=[case[0].__name__.strip("_") for case in CONTROL_FLOW_CASES])
def test_a_sequence_or_optional_if_or_loop_cannot_pass_is_refused_at_its_line(
        make: Any, since: int, inputs: list[Any], expected: Any, message: str) -> None:
    # Eager mode runs the Python loop or branch itself; the model needs If/Loop of an opset
    # that passes the kind, and one built anyway fails onnx.checker with no line of the program.
    check_script(make(since), inputs, expected)
    onnx.checker.check_model(make(since).to_model_proto(), full_check=True)
    old = make(since - 1 if since == 16 else 12)
    with pytest.raises(DslTypeError, match="passes tensors") as refused:
        old.to_model_proto()
    assert message in refused.value.message
    assert refused.value.location is not None and refused.value.location.source_line.strip().startswith(
        ("for ", "if ", "kept = "))
    np.testing.assert_allclose(old(*inputs), expected)  # (eager mode runs it)


def test_an_input_of_a_type_its_schema_does_not_admit_is_a_user_error() -> None:
    # (ONNX's node inference raises ValidationError, not InferenceError, for these: the
    # compiler and eager mode both ask it, and it is the program's mistake, at its line)
    import onnx.defs
    import onnx.helper as oh

    from dsl.node_inference import infer_node

    node = oh.make_node("OptionalHasElement", ["x"], ["y"])
    with pytest.raises(DslTypeError, match=r"OptionalHasElement: .*unsupported type: tensor\(float\)") as refused:
        infer_node(onnx.defs.get_schema("OptionalHasElement", 15), node, {"x": oh.make_tensor_type_proto(1, [2])})
    assert "get_schema('OptionalHasElement', 15)" in (refused.value.hint or "")


# ------------------------------------------------------------- returned tuples of sizes


def test_a_returned_shape_is_one_output_in_both_modes() -> None:
    # (`return x.shape` is one INT64 output compiled; eagerly the shape is a Python tuple,
    # which was taken for one output a size; `return a, b` stays an output each)
    @script()
    def whole_shape(x: FLOAT["N", 4]):
        return x.shape

    @script()
    def named_shape(x: FLOAT["N", 4]):
        dims = x.shape
        return dims

    @script()
    def sizes_apart(x: FLOAT["N", 4]):
        return x.shape[0], x.shape[1]

    @script()
    def shape_and_tensor(x: FLOAT["N", 4]):
        return x.shape, x * 2.0

    x = f32(3, 4)
    for function in (whole_shape, named_shape):
        check_script(function, [x], np.array([3, 4], np.int64))
        assert len(function.to_model_proto().graph.output) == 1
    check_script(sizes_apart, [x], (np.array(3, np.int64), np.array(4, np.int64)))
    check_script(shape_and_tensor, [x], (np.array([3, 4], np.int64), x * 2))


# ------------------------------- a sequence known through an if or a loop, indexed or iterated


@script()
def branch_sequence_indexed(x: FLOAT["N"], c: BOOL) -> FLOAT["N"]:
    parts = op.SequenceConstruct(x) if c else op.SequenceConstruct(x * 2.0, x)
    return parts[0]


@script()
def branch_sequence_iterated(x: FLOAT["N"], c: BOOL) -> FLOAT["N"]:
    parts = op.SequenceConstruct(x) if c else op.SequenceConstruct(x, x)
    total = x * 0.0
    for part in parts:
        total = total + part
    return total


@script()
def carried_sequence_indexed(x: FLOAT["N"]) -> FLOAT["N"]:
    parts = op.SequenceConstruct(x)
    total = x
    for _ in range(3):
        total = total + parts[0]
        parts = op.SequenceInsert(parts, x)
    return total


def test_a_sequence_out_of_an_if_or_carried_by_a_loop_is_indexed_and_iterated_as_a_sequence() -> None:
    # (x[i] was SequenceAt only for a value a sequence op made: the output of an if whose
    # branches are sequences, or a loop's carried sequence, compiled to Gather or Slice of a
    # sequence, a model onnx.checker refuses; the compiler now asks dsl.frontend.value_kinds)
    x = f32(3)
    check_script(branch_sequence_indexed, [x, np.array(False)], x * 2)
    check_script(branch_sequence_iterated, [x, np.array(False)], x * 2)
    check_script(carried_sequence_indexed, [x], x * 4)
