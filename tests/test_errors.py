"""Wrong programs: each must raise the exact DslError subclass, pointing at the offending
construct (file:line:col, the source line, a caret) with a hint, and nothing but a
DslError may ever escape the compiler."""

from __future__ import annotations

import itertools
import linecache
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import (
    DslError,
    DslNameError,
    DslSyntaxError,
    DslTypeError,
    OpAttributeError,
    OpCallError,
    StaticAssertionError,
    UnknownOpError,
    UnsupportedSyntaxError,
)
from tests.helpers import run_model

HEADER = """\
import numpy as np
from dsl import script, graph, FLOAT, INT64, BOOL, opset15, opset18 as op

@script()
def helper(x: FLOAT["N"], alpha: float = 1.0) -> FLOAT["N"]:
    return x * alpha
"""

_counter = itertools.count()


def define(body: str) -> tuple[dict, str, str]:
    """Exec HEADER + body as a fresh 'file' known to linecache; returns (namespace, filename, text)."""
    filename = f"<error-case-{next(_counter)}>"
    text = HEADER + textwrap.dedent(body)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(text, filename, "exec"), namespace)
    return namespace, filename, text


# (name, error class, marker: the text the caret must point at, program)
CASES: list[tuple[str, type, str, str]] = [
    ("try", UnsupportedSyntaxError, "try:", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            try:
                y = op.Relu(x)
            except ValueError:
                y = x
            return y
    """),
    ("lambda", UnsupportedSyntaxError, "lambda v: v", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            g = lambda v: v
            return x
    """),
    ("list comprehension over a tensor", UnsupportedSyntaxError, "x]", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            ys = [v for v in x]
            return x
    """),
    ("generator condition on a tensor", DslTypeError, "v > 0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            ys = (v for v in (x,) if v > 0)
            return x
    """),
    ("global", UnsupportedSyntaxError, "global counter", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            global counter
            return x
    """),
    ("with", UnsupportedSyntaxError, "with open", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            with open("x") as handle:
                y = x
            return y
    """),
    ("class", UnsupportedSyntaxError, "class Inner", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            class Inner:
                pass
            return x
    """),
    ("yield", UnsupportedSyntaxError, "yield x", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            y = yield x
            return x
    """),
    ("starred tensor", UnsupportedSyntaxError, "*x", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Concat(*x, axis=0)
    """),
    ("f-string", UnsupportedSyntaxError, 'f"{x}"', """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            name = f"{x}"
            return x
    """),
    ("walrus", UnsupportedSyntaxError, "(y := op.Relu(x))", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            z = (y := op.Relu(x))
            return z
    """),
    ("assert on a tensor", UnsupportedSyntaxError, "op.ReduceMax(x) > 0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            assert op.ReduceMax(x) > 0
            return x
    """),
    ("failed static assert", StaticAssertionError, "assert", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            assert len((x, x)) == 3, "two parts"
            return x
    """),
    ("raise", UnsupportedSyntaxError, "raise", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            raise ValueError("no")
    """),
    ("import", UnsupportedSyntaxError, "import math", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            import math
            return x
    """),
    ("nested def without graph", UnsupportedSyntaxError, "def inner", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            def inner(v):
                return v
            return x
    """),
    ("subscript assignment", UnsupportedSyntaxError, "x[0]", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            x[0] = 1.0
            return x
    """),
    ("floor division", UnsupportedSyntaxError, "x // 2.0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x // 2.0
    """),
    ("in a tensor", DslTypeError, "1.0 in x", """
        @script()
        def f(x: FLOAT["N"]) -> BOOL:
            return 1.0 in x
    """),
    ("for over zip of tensors", UnsupportedSyntaxError, "zip(x, x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            for v, w in zip(x, x):
                y = v
            return x
    """),
    ("return in loop", UnsupportedSyntaxError, "return y", """
        @script()
        def f(x: FLOAT["N"], n: INT64) -> FLOAT["N"]:
            y = x
            for i in range(n):
                y = y + 1.0
                return y
            return y
    """),
    ("while else", UnsupportedSyntaxError, "z = y", """
        @script()
        def f(x: FLOAT) -> FLOAT:
            y = x
            while y > 1.0:
                y = y / 2.0
            else:
                z = y
            return y
    """),
    ("star args parameter", UnsupportedSyntaxError, "xs", """
        @script()
        def f(*xs):
            return xs
    """),
    ("async def", UnsupportedSyntaxError, "async def f", """
        @script()
        async def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x
    """),
    ("async @graph() body", UnsupportedSyntaxError, "async def body", """
        @script()
        def f(c: BOOL) -> FLOAT:
            return op.If(c, then_branch=body, else_branch=body)

        @graph()
        async def body() -> FLOAT:
            return op.Constant(value_float=1.0)
    """),
    ("unknown op", UnknownOpError, "op.Relux", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Relux(x)
    """),
    ("wrong attribute name", OpAttributeError, "axs=1", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Softmax(x, axs=1)
    """),
    ("wrong attribute type", OpAttributeError, '"last"', """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Softmax(x, axis="last")
    """),
    ("missing required attribute", OpAttributeError, "op.Cast(x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Cast(x)
    """),
    ("too many inputs", OpCallError, "op.Relu(x, x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Relu(x, x)
    """),
    ("too few inputs", OpCallError, "op.Add(x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Add(x)
    """),
    ("wrong number of targets", OpCallError, "op.TopK(x, [1])", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            a, b, c = op.TopK(x, [1])
            return a
    """),
    ("unpack count", DslTypeError, "a, b", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            a, b = 1, 2, 3
            return x
    """),
    ("undefined name", DslNameError, "z", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x + z
    """),
    ("use after del", DslNameError, "y * 2.0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            y = x + 1.0
            del y
            return y * 2.0
    """),
    ("assigned in one branch", DslNameError, "y + 1.0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            if op.ReduceSum(x) > 0.0:
                y = x
            return y + 1.0
    """),
    ("loop variable after loop", DslNameError, "i)", """
        @script()
        def f(x: FLOAT["N"], n: INT64) -> INT64:
            s = n
            for i in range(n):
                s = s + i
            return op.Identity(i)
    """),
    ("tensor as attribute", DslTypeError, "axis=k", """
        @script()
        def f(x: FLOAT["N"], k: INT64) -> FLOAT["N"]:
            return op.Softmax(x, axis=k)
    """),
    ("bad annotation", DslTypeError, "dict", """
        @script()
        def f(x: dict) -> FLOAT["N"]:
            return x
    """),
    ("bad return annotation", DslTypeError, "np.ndarray", """
        @script()
        def f(x: FLOAT["N"]) -> np.ndarray:
            return x
    """),
    ("return missing", DslSyntaxError, "y = op.Relu(x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            y = op.Relu(x)
    """),
    ("return in one branch only", DslSyntaxError, "if op.ReduceSum(x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            if op.ReduceSum(x) > 0.0:
                return x
            y = x * 2.0
    """),
    ("mismatched outputs", DslTypeError, "return x", """
        @script()
        def f(x: FLOAT["N"]) -> tuple[FLOAT["N"], FLOAT["N"]]:
            return x
    """),
    ("output type mismatch", DslTypeError, "return op.Cast(x, to=INT64)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.Cast(x, to=INT64)
    """),
    ("mixed opset versions", DslTypeError, "opset15.Abs", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            y = op.Relu(x)
            return opset15.Abs(y)
    """),
    ("element type mismatch", DslTypeError, "x + op.Cast(x, to=INT64)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x + op.Cast(x, to=INT64)
    """),
    ("tensor attribute access", DslTypeError, "x.T", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return x.T
    """),
    ("python function on tensor", DslTypeError, "len(x)", """
        @script()
        def f(x: FLOAT["N"]) -> INT64:
            return len(x)
    """),
    ("list of tensors", DslTypeError, "[x, x]", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return op.ReduceSum([x, x])
    """),
    ("float range", DslTypeError, "1.5", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            for i in range(1.5):
                x = x + 1.0
            return x
    """),
    ("unknown script parameter", OpAttributeError, "beta=2.0", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return helper(x, beta=2.0)
    """),
    ("script call tensor attribute", DslTypeError, "alpha=x", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return helper(x, alpha=x)
    """),
    ("recursion", DslTypeError, "f(x)", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return f(x)
    """),
    ("attribute default mismatch", OpAttributeError, "alpha", """
        @script()
        def f(x: FLOAT["N"], alpha: int = "no") -> FLOAT["N"]:
            return x
    """),
    ("bare return", DslSyntaxError, "return", """
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            return
    """),
    ("float literal beside integers", DslTypeError, "x + 300.5", """
        @script()
        def f(x: INT64["N"]) -> INT64["N"]:
            return x + 300.5
    """),
    ("unknown name in annotation", DslTypeError, "\"FLAOT[3]\"", """
        @script()
        def f(x: "FLAOT[3]") -> FLOAT["N"]:
            return x
    """),
    ("nonlocal", UnsupportedSyntaxError, "nonlocal", """
        def outer():
            total = 0

            @script()
            def f(x: FLOAT["N"]) -> FLOAT["N"]:
                nonlocal total
                return x
            return f
        f = outer()
    """),
]


@pytest.mark.parametrize(("name", "error", "marker", "body"), CASES, ids=[c[0] for c in CASES])
def test_wrong_program_reports_location_and_hint(name: str, error: type, marker: str, body: str) -> None:
    namespace, filename, text = define(body)
    with pytest.raises(DslError) as caught:
        namespace["f"].function
    err = caught.value
    assert type(err) is error, f"{name}: expected {error.__name__}, got {type(err).__name__}: {err}"
    lines = text.splitlines()
    function_start = next(i for i, line in enumerate(lines) if "def f(" in line)
    line_index = next(i for i in range(function_start, len(lines)) if marker in lines[i])
    column = lines[line_index].index(marker) + 1
    rendered = str(err)
    assert f"{filename}:{line_index + 1}:" in rendered, rendered
    assert err.location.line == line_index + 1, rendered
    caret_column = err.location.column + 1
    assert column <= caret_column < column + len(marker), rendered
    assert lines[line_index].strip() in rendered
    assert "^" in rendered
    assert "hint: " in rendered and len(err.hint) > 10, rendered


def test_carets_point_exactly_at_the_construct() -> None:
    namespace, _, _ = define("""
        @script()
        def f(x: FLOAT["N"]) -> FLOAT["N"]:
            y = op.Relu(x)
            return op.Softmax(y, axis="last")
    """)
    with pytest.raises(OpAttributeError) as caught:
        namespace["f"].function
    rendered = str(caught.value)
    source_line, caret_line = rendered.splitlines()[1:3]
    start = caret_line.index("^")
    assert source_line[start:].startswith('"last"')
    assert caret_line.count("^") == len('"last"')


def test_source_unavailable_is_a_dsl_error() -> None:
    namespace: dict = {}
    exec(compile("from dsl import script\n@script()\ndef f(x):\n    return x\n", "<stdin>", "exec"), namespace)
    with pytest.raises(DslError) as caught:
        namespace["f"].function
    assert "hint:" in str(caught.value)


# ------------------------------------------------------------------------ property tests

_LEAVES = st.sampled_from(["x", "y", "2.0", "0.5", "3.0"])
_BINARY = st.sampled_from(["+", "-", "*"])
_UNARY = st.sampled_from(["op.Abs", "op.Neg", "-", "op.Relu"])


def _expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.tuples(inner, _BINARY, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(_UNARY, inner).map(lambda t: f"{t[0]}({t[1]})" if t[0] != "-" else f"(-{t[1]})"),
        ),
        max_leaves=8,
    )


def _numpy_eval(expression: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    class NumpyOps:
        Abs = staticmethod(np.abs)
        Neg = staticmethod(np.negative)
        Relu = staticmethod(lambda v: np.maximum(v, np.float32(0)))

    result = eval(expression, {"op": NumpyOps, "x": x, "y": y})
    return np.asarray(result, dtype=np.float32)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions())
def test_random_arithmetic_compiles_and_agrees_with_numpy(expression: str) -> None:
    namespace, _, _ = define(f"""
        @script()
        def f(x: FLOAT[4], y: FLOAT[4]) -> FLOAT[...]:
            return ({expression}) + x * 0.0
    """)
    x = np.array([-1.5, 0.0, 2.0, 3.25], np.float32)
    y = np.array([0.5, -2.0, 1.0, -0.25], np.float32)
    (got,) = run_model(namespace["f"].to_model_proto(), [x, y])
    np.testing.assert_allclose(got, _numpy_eval(expression, x, y) + x * 0, rtol=1e-5, atol=1e-5)


_STATEMENTS = [
    "y = op.Relu(x)", "y = x + 1.0", "y = y * 2", "z = op.Add(x, y)", "return y", "return x, y",
    "if y > 0.0:", "    y = -y", "else:", "for i in range(3):", "    y = y + x", "while y > 1.0:",
    "    break", "    continue", "y = x[0:2]", "y = op.Softmax(y, axis=0)", "y, z = op.TopK(x, [1])",
    "del y", "y = x if x else y", "y = op.Unknown(x)", "y = op.Relu(x, x)", "y = op.Softmax(x, axis=x)",
    "y = q", "pass", "y = [x, y]", "y = (x, y)", "y = x.shape", "y = x @ y", "y = not x", "y = 1 < x < 2",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_STATEMENTS), min_size=1, max_size=6))
def test_only_dsl_errors_escape(statements: list[str]) -> None:
    """Random statement soups: Python may refuse them, the compiler may too, but only with a DslError."""
    indent = "    "
    lines = [indent + "y = x"]
    depth = 1
    for statement in statements:
        lines.append(indent * depth + statement.strip())
        if statement.rstrip().endswith(":"):
            depth = min(depth + 1, 3)
        elif statement.startswith("    "):
            depth = max(depth - 1, 1)
    body = "@script()\ndef f(x: FLOAT[4]):\n" + "\n".join(lines) + "\n"
    try:
        namespace, filename, _ = define(body)
    except SyntaxError:
        return  # Python itself refuses the soup: nothing reaches the compiler
    function = namespace["f"]
    try:
        function.function
    except DslError as err:
        # The error points into the soup, at a line that holds the offending source.
        assert err.location is not None, f"{type(err).__name__} without a location: {err}"
        assert err.location.file == filename, (err.location, err)
        assert 1 <= err.location.line <= len(linecache.getlines(filename)), err.location
        assert err.hint, f"{type(err).__name__} without a hint: {err}"
        assert f"{filename}:{err.location.line}:" in str(err)
        return
    _check_compiled_soup(function)


def _check_compiled_soup(function) -> None:
    """A soup that compiles exports to a model ONNX's checker accepts, or is refused with a
    located DslError; eagerly it computes what onnxruntime computes from that model."""
    import onnx

    try:
        model = function.to_model_proto()
    except DslError as err:
        assert err.location is not None and err.hint, err
        return
    onnx.checker.check_model(model, full_check=True)
    x = np.array([0.5, -1.5, 2.0, 3.0], np.float32)
    exported = run_model(model, [x])
    try:
        result = function(x)
    except DslError as err:  # eager mode may refuse what the graph does differently (bool() of a tensor)
        assert err.hint, err
        return
    eager = list(result) if isinstance(result, tuple) else [result]
    assert len(eager) == len(exported)
    for got, want in zip(eager, exported):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
