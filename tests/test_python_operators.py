"""Every Python operator, ``range`` with tensor bounds and Scan directions, against numpy
and Python itself, both exported (onnxruntime) and eager.

Eager tensors and ``@script`` read the same operator table (``dsl/operators.py``), so
comparing eager mode with the exported model cannot catch a wrong entry there (``<=``
lowered to ``Less`` would agree with itself); numpy and Python's own ``range`` are the
oracles here.  Comparison operands share equal elements, so ``<`` and ``<=`` differ;
integer and bool results are compared exactly.
"""

from __future__ import annotations

import itertools
import linecache
import operator
import textwrap
from typing import Any

import numpy as np
import pytest

from dsl import script
from tests.helpers import export_and_run, run_eager

_counter = itertools.count()
_HEADER = "from dsl import script, graph, FLOAT, INT64, INT32, BOOL, opset18 as op\n"


def _define(source: str) -> Any:
    """The one @script function in ``source`` (compiled from a file linecache knows)."""
    filename = f"<operator-case-{next(_counter)}>"
    text = _HEADER + textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(text, filename, "exec"), namespace)
    return namespace["f"]


def _assert_exact_or_close(got: Any, want: np.ndarray, label: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, f"{label}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=label)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=label)


def _check(function: Any, inputs: list[np.ndarray], want: np.ndarray | tuple[np.ndarray, ...]) -> None:
    wanted = list(want) if isinstance(want, tuple) else [want]
    for kind, got in (("exported", export_and_run(function, inputs)), ("eager", run_eager(function, inputs))):
        assert len(got) == len(wanted), kind
        for index, (g, w) in enumerate(zip(got, wanted)):
            _assert_exact_or_close(g, np.asarray(w), f"{kind} output {index}")


_FLOATS = (np.array([-2.5, -1.0, 0.0, 1.5, 3.0, 3.0], np.float32), np.array([1.5, -1.0, 2.0, 1.5, -0.5, 4.0], np.float32))
_INTS = (np.array([-7, -1, 0, 3, 5, 5], np.int64), np.array([2, -1, 3, 3, -2, 4], np.int64))
_BOOLS = (np.array([True, True, False, False]), np.array([True, False, True, False]))

# (operator, element type, numpy oracle)
_BINARY: list[tuple[str, str, Any]] = [
    ("+", "FLOAT", np.add), ("-", "FLOAT", np.subtract), ("*", "FLOAT", np.multiply), ("/", "FLOAT", np.divide),
    ("**", "FLOAT", lambda a, b: np.power(np.abs(a), b)),
    ("%", "FLOAT", np.fmod),  # ONNX allows only fmod=1 for floats (C's fmod), as documented
    ("+", "INT64", np.add), ("-", "INT64", np.subtract), ("*", "INT64", np.multiply),
    ("%", "INT64", np.mod),  # the sign of the divisor, as in Python
    ("&", "INT64", np.bitwise_and), ("|", "INT64", np.bitwise_or), ("^", "INT64", np.bitwise_xor),
    ("&", "BOOL", np.logical_and), ("|", "BOOL", np.logical_or), ("^", "BOOL", np.logical_xor),
]
_COMPARE: list[tuple[str, Any]] = [
    ("==", operator.eq), ("!=", operator.ne), ("<", operator.lt), ("<=", operator.le), (">", operator.gt), (">=", operator.ge),
]


def _operands(elem: str) -> tuple[np.ndarray, np.ndarray]:
    return {"FLOAT": _FLOATS, "INT64": _INTS, "BOOL": _BOOLS}[elem]


@pytest.mark.parametrize(("symbol", "elem", "oracle"), _BINARY, ids=[f"{s} {e}" for s, e, _ in _BINARY])
def test_binary_operator_matches_numpy(symbol: str, elem: str, oracle: Any) -> None:
    a, b = _operands(elem)
    left = "op.Abs(a)" if symbol == "**" else "a"
    function = _define(f"""
        @script()
        def f(a: {elem}["N"], b: {elem}["N"]):
            return {left} {symbol} b
    """)
    _check(function, [a, b], oracle(a, b))


def test_matmul_operator_matches_numpy() -> None:
    function = _define("""
        @script()
        def f(a: FLOAT[2, 3], b: FLOAT[3, 2]):
            return a @ b
    """)
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    b = np.arange(6, dtype=np.float32).reshape(3, 2) * 0.5
    _check(function, [a, b], a @ b)


@pytest.mark.parametrize("elem", ["FLOAT", "INT64"])
@pytest.mark.parametrize(("symbol", "oracle"), _COMPARE, ids=[s for s, _ in _COMPARE])
def test_comparison_operator_matches_numpy(symbol: str, oracle: Any, elem: str) -> None:
    a, b = _operands(elem)
    function = _define(f"""
        @script()
        def f(a: {elem}["N"], b: {elem}["N"]):
            return a {symbol} b
    """)
    _check(function, [a, b], oracle(a, b))


@pytest.mark.parametrize(("symbol", "oracle"), _COMPARE, ids=[s for s, _ in _COMPARE])
def test_comparison_with_a_literal_on_either_side_matches_numpy(symbol: str, oracle: Any) -> None:
    a, _ = _FLOATS
    function = _define(f"""
        @script()
        def f(a: FLOAT["N"]):
            return a {symbol} 3.0, 1.5 {symbol} a
    """)
    _check(function, [a], (oracle(a, np.float32(3.0)), oracle(np.float32(1.5), a)))


# (operator, element type, numpy oracle)
_UNARY: list[tuple[str, str, Any]] = [
    ("-", "FLOAT", np.negative), ("+", "FLOAT", np.positive), ("-", "INT64", np.negative), ("+", "INT64", np.positive),
    ("~", "INT64", np.invert), ("~", "BOOL", np.logical_not),
]


@pytest.mark.parametrize(("symbol", "elem", "oracle"), _UNARY, ids=[f"{s.strip()} {e}" for s, e, _ in _UNARY])
def test_unary_operator_matches_numpy(symbol: str, elem: str, oracle: Any) -> None:
    a, _ = _operands(elem)
    function = _define(f"""
        @script()
        def f(a: {elem}["N"]):
            return {symbol}a
    """)
    _check(function, [a], oracle(a))


@pytest.mark.parametrize("value", [True, False])
def test_not_of_a_scalar_matches_python(value: bool) -> None:
    """``not`` cannot be overloaded: eagerly it asks the one-element tensor for its truth."""
    function = _define("""
        @script()
        def f(a: BOOL):
            return not a
    """)
    _check(function, [np.array(value)], np.array(not value))


def test_reflected_operators_with_literals_match_numpy() -> None:
    function = _define("""
        @script()
        def f(a: FLOAT["N"]):
            return 1.0 - a, 2.0 / (a + 10.0), 3.0 * a, 0.5 + a, 2.0 ** a
    """)
    a, _ = _FLOATS
    one = np.float32
    _check(function, [a], (one(1) - a, one(2) / (a + one(10)), one(3) * a, one(0.5) + a, np.power(one(2), a)))


# ------------------------------------------------------------------ range

_RANGES = [
    (0, 9, 3), (0, 10, 3), (9, 0, -3), (10, 0, -3), (5, 5, 1), (5, 5, -1), (0, -5, 1), (0, 5, -1),
    (-5, 5, 2), (5, -5, -2), (1, 2, 5), (2, 1, -5), (-3, -9, -4), (7, 3, 1),
]

_RANGE_FORMS = {
    "start, stop, step": "range(a, b, c)",
    "stop": "range(b)",
    "start, stop": "range(a, b)",
    "tensor step only": "range(0, 9, c)",
    "tensor start only": "range(a, 9, 2)",
    "tensor start, negative constant step": "range(a, -2, -4)",
}


def _python_range(form: str, start: int, stop: int, step: int) -> range:
    return {
        "start, stop, step": range(start, stop, step), "stop": range(stop), "start, stop": range(start, stop),
        "tensor step only": range(0, 9, step), "tensor start only": range(start, 9, 2),
        "tensor start, negative constant step": range(start, -2, -4),
    }[form]


@pytest.mark.parametrize("form", sorted(_RANGE_FORMS))
@pytest.mark.parametrize(("start", "stop", "step"), _RANGES, ids=[f"{a},{b},{c}" for a, b, c in _RANGES])
def test_range_with_tensor_bounds_runs_as_python_range(form: str, start: int, stop: int, step: int) -> None:
    function = _define(f"""
        @script()
        def f(a: INT64, b: INT64, c: INT64) -> tuple[INT64, INT64, INT64]:
            total = a * 0
            count = a * 0
            last = a * 0 - 100
            for i in {_RANGE_FORMS[form]}:
                total = total + i
                count = count + 1
                last = i
            return total, count, last
    """)
    numbers = list(_python_range(form, start, stop, step))
    want = (np.int64(sum(numbers)), np.int64(len(numbers)), np.int64(numbers[-1] if numbers else -100))
    _check(function, [np.array(start, np.int64), np.array(stop, np.int64), np.array(step, np.int64)], want)


def test_range_with_constant_bounds_runs_as_python_range() -> None:
    function = _define("""
        @script()
        def f(a: INT64) -> INT64:
            total = a
            for i in range(10, -3, -4):
                total = total * 10 + i
            return total
    """)
    want = np.int64(0)
    for i in range(10, -3, -4):
        want = want * 10 + i
    _check(function, [np.array(0, np.int64)], want)


# ------------------------------------------------------------------ Scan

@pytest.mark.parametrize("input_direction", [0, 1])
@pytest.mark.parametrize("output_direction", [0, 1])
@pytest.mark.parametrize("output_axis", [0, 1])
def test_scan_directions_and_axes_match_numpy(input_direction: int, output_direction: int, output_axis: int) -> None:
    function = _define(f"""
        @script()
        def f(x: FLOAT[4, 3]) -> tuple[FLOAT[3], FLOAT[...]]:
            @graph()
            def body(state: FLOAT[3], row: FLOAT[3]):
                total = state + row
                return total, total * 2.0

            return op.Scan(op.ReduceSum(x, [0], keepdims=0) * 0.0, x, body=body, num_scan_inputs=1,
                           scan_input_directions=[{input_direction}], scan_output_directions=[{output_direction}],
                           scan_output_axes=[{output_axis}])
    """)
    x = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5) ** 2
    rows = x[::-1] if input_direction else x
    partials = np.cumsum(rows, axis=0) * 2
    if output_direction:
        partials = partials[::-1]
    if output_axis:
        partials = partials.T
    _check(function, [x], (x.sum(axis=0), np.ascontiguousarray(partials)))


def test_scan_input_axis_matches_numpy() -> None:
    function = _define("""
        @script()
        def f(x: FLOAT[3, 4]) -> tuple[FLOAT[3], FLOAT[4, 3]]:
            @graph()
            def body(state: FLOAT[3], column: FLOAT[3]):
                total = state + column
                return total, total

            return op.Scan(op.ReduceSum(x, [1], keepdims=0) * 0.0, x, body=body, num_scan_inputs=1,
                           scan_input_axes=[1], scan_input_directions=[1])
    """)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) ** 2
    columns = x.T[::-1]
    _check(function, [x], (x.sum(axis=1), np.cumsum(columns, axis=0)))


assert script  # the functions above are compiled from text, with script in their own namespace


# ------------------------------------- every operator with literals, eagerly and compiled

_AGREEMENT_INPUTS = {
    "FLOAT": np.array([1.5, -2.0, 3.0], np.float32), "DOUBLE": np.array([1.5, -2.0, 3.0]),
    "FLOAT16": np.array([1.5, -2.0, 3.0], np.float16), "INT32": np.array([5, -7, 3], np.int32),
    "INT64": np.array([5, -7, 3], np.int64), "INT8": np.array([5, -7, 3], np.int8),
    "UINT8": np.array([5, 7, 3], np.uint8), "BOOL": np.array([True, False, True]),
}
_AGREEMENT_OPERATORS = ("+", "-", "*", "/", "//", "%", "**", "<", "==", "&", "|", "^", ">>", "<<")
_AGREEMENT_LITERALS = ("1", "2.5", "-3", "True", "0.5", "7")


def _outcome(call: Any, *arguments: Any) -> tuple[str, Any]:
    """("ok", outputs) or (the DslError class's name, message) of ``call(*arguments)``."""
    from dsl.errors import DslError

    try:
        return "ok", call(*arguments)
    except DslError as error:
        return type(error).__name__, error.message


def _compiled_outputs(function: Any, x: np.ndarray) -> list[Any]:
    """The exported model's outputs: onnxruntime's, or onnx.reference's where onnxruntime
    has no kernel for the model's op (eager mode runs onnx.reference there too)."""
    import onnx.reference
    import onnxruntime

    from tests.helpers import ranked_io_types

    try:
        return export_and_run(function, [x])
    except onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented:
        model = function.to_model_proto(io_types=ranked_io_types(function, [x]))
        return list(onnx.reference.ReferenceEvaluator(model).run(None, {model.graph.input[0].name: x}))


@pytest.mark.parametrize("elem", sorted(_AGREEMENT_INPUTS))
def test_every_operator_with_a_literal_computes_the_same_eagerly_and_compiled(elem: str) -> None:
    # (the principle, over 14 operators, a literal on either side or none: both succeed with
    # equal outputs of one dtype, or both raise the same DslError; `7 ** x` of a FLOAT x gave
    # an INT64 base eagerly, and `x << 1` a TypeError)
    forms = [(f"x {symbol} {literal}", f"{literal} {symbol} x") for symbol in _AGREEMENT_OPERATORS
             for literal in _AGREEMENT_LITERALS]
    bodies = [body for pair in forms for body in pair] + [f"x {symbol} x" for symbol in _AGREEMENT_OPERATORS]
    bodies += ["-x", "+x", "~x", "abs(x)", "abs(x[0]) * 2", "divmod(x[0], 2)"]
    x = _AGREEMENT_INPUTS[elem]
    header = "from dsl import DOUBLE, FLOAT16, INT8, UINT8\n"
    disagreements = []
    for body in bodies:
        function = _define(header + f"@script()\ndef f(x: {elem}[3]):\n    return {body}\n")
        eager, compiled = _outcome(run_eager, function, [x]), _outcome(_compiled_outputs, function, x)
        if eager[0] != compiled[0] or (eager[0] == "UnsupportedSyntaxError" and eager[1] != compiled[1]):
            disagreements.append(f"{body}: eagerly {eager[0]} {str(eager[1])[:80]}, compiled {compiled[0]} "
                                 f"{str(compiled[1])[:80]}")
        elif eager[0] == "ok":
            got, want = np.asarray(eager[1][0]), np.asarray(compiled[1][0])
            if got.dtype != want.dtype or got.shape != want.shape or not np.allclose(
                    got.astype(np.float64), want.astype(np.float64), rtol=1e-3, equal_nan=True):
                disagreements.append(f"{body}: eagerly {got.dtype} {got.tolist()}, compiled {want.dtype} {want.tolist()}")
    assert not disagreements, "\n".join(disagreements)


def test_a_number_raised_to_a_tensor_takes_the_tensors_type() -> None:
    function = _define("""
        @script()
        def f(a: FLOAT["N"], n: INT32["N"]):
            return 7 ** a, 2 ** n, 0.5 ** a
    """)
    a = np.array([1.5, -2.0, 3.0], np.float32)
    n = np.array([3, 0, 5], np.int32)
    _check(function, [a, n], (np.float32(7) ** a, np.int32(2) ** n, np.float32(0.5) ** a))
