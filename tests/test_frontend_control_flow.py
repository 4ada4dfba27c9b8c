"""Random programs with if/else, for, break and continue: the exported model (onnxruntime)
must compute what the same Python function computes when Python runs it on numpy
scalars, an oracle independent of the compiler and of the eager evaluator."""

from __future__ import annotations

import itertools
import linecache

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import BOOL, FLOAT, INT64, script
from dsl import opset18 as op
from tests.helpers import check_script, run_model

VARIABLES = ("a", "b", "c")
_counter = itertools.count()


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from([*VARIABLES, "0.5", "1.5", "2.0", "-1.0"]))
    operator = draw(st.sampled_from(["+", "-", "*"]))
    return f"({draw(expressions(depth + 1))} {operator} {draw(expressions(depth + 1))})"


@st.composite
def conditions(draw: st.DrawFn, loop_variable: str | None) -> str:
    if loop_variable is not None and draw(st.booleans()):
        return f"{loop_variable} {draw(st.sampled_from(['<', '>', '==', '!=']))} {draw(st.integers(0, 3))}"
    return f"{draw(expressions())} {draw(st.sampled_from(['<', '>', '<=', '>=']))} {draw(expressions())}"


@st.composite
def blocks(draw: st.DrawFn, indent: int, depth: int, loop_variable: str | None) -> list[str]:
    lines: list[str] = []
    pad = "    " * indent
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "assign", "if", "for", "while"] if depth < 2 else ["assign"]))
        if kind == "assign":
            lines.append(f"{pad}{draw(st.sampled_from(VARIABLES))} = {draw(expressions())}")
        elif kind == "if":
            lines.append(f"{pad}if {draw(conditions(loop_variable))}:")
            lines += draw(blocks(indent + 1, depth + 1, loop_variable))
            if loop_variable is not None and draw(st.booleans()):
                lines.append(f"{pad}    {draw(st.sampled_from(['break', 'continue']))}")
            if draw(st.booleans()):
                lines.append(f"{pad}else:")
                lines += draw(blocks(indent + 1, depth + 1, loop_variable))
        elif kind == "for":
            variable = f"i{depth}"
            bound = draw(st.sampled_from(["n", "3", "0"]))
            lines.append(f"{pad}for {variable} in range({bound}):")
            lines += draw(blocks(indent + 1, depth + 1, variable))
        else:  # a while loop whose counter moves first, so continue cannot make it endless
            counter = f"w{depth}"
            bound = draw(st.sampled_from(["n", "2"]))
            lines += [f"{pad}{counter} = 0", f"{pad}while {counter} < {bound}:", f"{pad}    {counter} = {counter} + 1"]
            lines += draw(blocks(indent + 1, depth + 1, counter))
    return lines


def define(body: list[str]) -> object:
    text = (
        "from dsl import script, FLOAT, INT64\n"
        "@script()\n"
        "def program(a: FLOAT, b: FLOAT, n: INT64) -> tuple[FLOAT, FLOAT, FLOAT]:\n"
        "    c = a * 0.5\n" + "\n".join(body) + "\n    return a, b, c\n"
    )
    filename = f"<control-flow-{next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(text, filename, "exec"), namespace)
    return namespace["program"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(blocks(1, 0, None), st.floats(-3, 3, width=32), st.floats(-3, 3, width=32), st.integers(0, 4))
def test_random_control_flow_matches_python(body: list[str], a: float, b: float, n: int) -> None:
    program = define(body)
    inputs = [np.array(a, np.float32), np.array(b, np.float32), np.array(n, np.int64)]
    expected = program.python_function(np.float32(a), np.float32(b), np.int64(n))
    got = run_model(program.to_model_proto(), inputs)
    with np.errstate(all="ignore"):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, np.float32(e), rtol=1e-5, atol=1e-5, err_msg="\n".join(body))


def test_while_condition_of_rank_one_exports_and_runs() -> None:
    # ReduceMax keeps a reduced axis by default, so the condition is a one-element rank-1
    # tensor; the loop body must not claim its condition input is a scalar.
    @script()
    def halve_until_small(x: FLOAT[3], limit: float = 1.0) -> FLOAT[3]:
        while op.ReduceMax(op.Abs(x)) > limit:
            x = x / 2.0
        return x

    x = np.array([8.0, -3.0, 0.5], np.float32)
    expected = x.copy()
    while np.abs(expected).max() > 1.0:
        expected = expected / np.float32(2.0)
    check_script(halve_until_small, [x], expected)


def _loop_nodes(model) -> list:
    return [n for n in model.graph.node if n.op_type == "Loop"]


def test_loops_compile_to_the_minimal_loop() -> None:
    # range(n) is the trip count itself (a Loop runs no iteration for n <= 0); ``while c``
    # carries no copy of c; a leading ``if not c: break`` is the condition input; a final
    # ``if b: break`` is Not(b).  Each runs like Python does.
    @script()
    def counted(x: FLOAT, n: INT64) -> FLOAT:
        for _i in range(n):
            x = x + 1.0
        return x

    @script()
    def until(x: FLOAT, limit: FLOAT) -> FLOAT:
        going = x < limit
        while going:
            x = x * 2.0
            going = x < limit
        return x

    @script()
    def guarded(x: FLOAT, n: INT64, go: BOOL) -> FLOAT:
        for _i in range(n):
            if not go:
                break
            x = x + 1.0
        return x

    @script()
    def stopped(x: FLOAT, n: INT64) -> FLOAT:
        for _i in range(n):
            x = x + 1.0
            if x > 3.0:
                break
        return x

    shapes = {}
    for fn in (counted, until, guarded, stopped):
        model = fn.to_model_proto()
        (loop,) = _loop_nodes(model)
        body = loop.attribute[0].g
        shapes[fn.name] = (list(loop.input), len(body.input), sorted(n.op_type for n in model.graph.node))
    assert shapes["counted"] == (["n", "", "x"], 3, ["Loop"])
    assert shapes["until"][0][:2] == ["", "going"] and shapes["until"][1] == 3
    assert shapes["guarded"] == (["n", "go", "x"], 3, ["Loop"])
    assert shapes["stopped"][0][0] == "n" and shapes["stopped"][2] == ["Constant", "Loop"]
    def f32(v):
        return np.array(v, np.float32)

    for n in (-2, 0, 3):
        count = np.array(n, np.int64)
        check_script(counted, [f32(1), count], f32(1 + max(n, 0)))
        check_script(stopped, [f32(0), count], f32(min(max(n, 0), 4)))
        check_script(guarded, [f32(0), count, np.array(False)], f32(0))
        check_script(guarded, [f32(0), count, np.array(True)], f32(max(n, 0)))
    check_script(until, [f32(1), f32(10)], f32(16))
    check_script(until, [f32(20), f32(10)], f32(20))


def test_both_branches_binding_the_same_outer_value_rebinds_the_name() -> None:
    # Found by the random-program property test: `b = c` in both branches used to leave
    # `b` unchanged, because the two branches agreeing was read as "neither assigned it".
    @script()
    def both_branches(a: FLOAT, b: FLOAT, n: INT64) -> FLOAT:
        c = a * 0.5
        for i in range(n):
            if i < 0:
                b = c
            else:
                b = c
        return b

    for n in (0, 1, 3):
        expected = np.float32(0.0 if n else 1.0)
        inputs = [np.array(0.0, np.float32), np.array(1.0, np.float32), np.array(n, np.int64)]
        check_script(both_branches, inputs, np.array(expected))


@script()
def summed_three_times(x: FLOAT["N"]):
    total = x * 0.0
    for _ in range(3):
        total = total + x
    return total


@script()
def counted_up(x: FLOAT["N"]):
    count = x[0] * 0.0
    while count < 3.0:
        count = count + 1.0
    return count


@script()
def summed_until_large(x: FLOAT["N"]):
    total = x * 0.0
    for _ in range(5):
        if total[0] > 2.0:
            break
        total = total + x
    return total


@script()
def grown(x: FLOAT["N"]):
    joined = x
    for _ in range(3):
        joined = op.Concat(joined, x, axis=0)
    return joined


def test_a_loops_results_export_without_a_return_annotation() -> None:
    # (ONNX's inference cannot tell a Loop's carried output ranks, and a model's outputs
    # need one: the compiler gives them the rank it found invariant, which eager mode never
    # asked the user for; the sizes stay open, as a carried size may change)
    x = np.array([1.5, -2.0, 3.0], np.float32)
    check_script(summed_three_times, [x], x * 3)
    check_script(counted_up, [x], np.array(3.0, np.float32))
    check_script(summed_until_large, [x], x * 2)
    check_script(grown, [x], np.concatenate([x] * 4))
    output = grown.to_model_proto().graph.output[0]
    assert [d.WhichOneof("value") for d in output.type.tensor_type.shape.dim] == [None]  # (rank 1, size open)
    doubled = script()(_doubled)  # (any other result: the sizes ONNX's inference finds)
    assert [d.dim_value for d in doubled.to_model_proto().graph.output[0].type.tensor_type.shape.dim] == [3]


def _doubled(x: FLOAT[3]):
    return x * 2.0


def test_iterating_builtins_over_a_tensor_say_what_a_for_loop_over_it_says() -> None:
    # (enumerate(x) was "calling 'enumerate' failed: TypeError: 'Value' object is not iterable")
    from dsl.errors import UnsupportedSyntaxError

    for iteration in ("for v, w in zip(x, x)", "for v in reversed(x)", "for v in list(x)"):
        text = (f"from dsl import script, FLOAT\n@script()\ndef program(x: FLOAT['N']):\n    total = x[0] * 0.0\n"
                f"    {iteration}:\n        total = total + x[0]\n    return total\n")
        filename = f"<control-flow-{next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace: dict = {}
        exec(compile(text, filename, "exec"), namespace)
        try:
            namespace["program"].to_model_proto()
        except UnsupportedSyntaxError as error:
            assert "over a tensor needs its values at run time" in error.message, error.message
            assert "for i in range(n)" in (error.hint or "")
        else:
            raise AssertionError(f"{iteration} compiled")


@script()
def rows_summed(x: FLOAT["N", 2]):
    total = x[0] * 0.0
    for row in x:
        total = total + row
    return total


@script()
def rows_weighted(x: FLOAT[3, 2]):
    total = x[0] * 0.0
    for index, row in enumerate(x):
        total = total + row * index
    return total


@script()
def rows_until_large(x: FLOAT["N"]):
    total = x[0] * 0.0
    for value in x:
        if total > 2.0:
            break
        total = total + value
    return total


def test_a_for_loop_over_a_tensor_runs_a_row_an_iteration_both_ways() -> None:
    # (eagerly a for loop over a tensor takes its rows; compiled it was refused as needing
    # the tensor's values, though only the first axis's size is needed: a Loop over it)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    check_script(rows_summed, [x], x.sum(axis=0))
    y = x[:3]
    check_script(rows_weighted, [y], (y * np.arange(3, dtype=np.float32)[:, None]).sum(axis=0))
    z = np.array([1.5, 2.0, -4.0, 9.0], np.float32)
    check_script(rows_until_large, [z], np.array(3.5, np.float32))
    assert "Loop" in [node.op_type for node in rows_summed.to_model_proto().graph.node]  # (N rows: not unrolled)


@script()
def items_summed(x: FLOAT["N"]) -> FLOAT["N"]:
    parts = op.SequenceConstruct(x, x * 2.0)
    total = x * 0.0
    for part in parts:
        total = total + part
    return total


def test_a_for_loop_over_a_sequence_runs_an_item_an_iteration_both_ways() -> None:
    # (over a sequence the loop's length is SequenceLength, and x[i] a SequenceAt: the
    # shape of a sequence, which a tensor's loop reads, is no ONNX value)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    check_script(items_summed, [x], x * 3)
    assert "SequenceLength" in [node.op_type for node in items_summed.to_model_proto().graph.node]


def test_a_for_loop_over_an_optional_is_refused_with_the_loops_hint() -> None:
    # (an optional has no rows nor items: the loop needs its value at run time)
    from dsl import Optional
    from dsl.errors import UnsupportedSyntaxError

    @script()
    def over_optional(x: FLOAT["N"], maybe: Optional[FLOAT["N"]]) -> FLOAT["N"]:
        total = x * 0.0
        for value in maybe:
            total = total + value
        return total

    try:
        over_optional.to_model_proto()
    except UnsupportedSyntaxError as error:
        assert "needs its values at run time" in error.message and "for i in range(n)" in (error.hint or "")
    else:
        raise AssertionError("a loop over an optional compiled")
