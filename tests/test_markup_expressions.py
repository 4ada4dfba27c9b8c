"""``expr(...)`` against Python arithmetic, and the attribute readers built on it.

Hypothesis draws random expression trees, renders them as text (with random spacing,
redundant parentheses and both spellings of power), and compares the evaluator with
Python evaluating the same text — the oracle, used only here in the test.
"""

from __future__ import annotations

import ast
import math
import operator

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsl.errors import MarkupError
from dsl.ir import AttrKind, SourceLocation
from dsl.markup.attributes import read_dims, read_int, read_literal, read_onnx_attribute, read_string
from dsl.markup.document import Attribute, parse_text
from dsl.markup.expressions import evaluate

BINDINGS = {"a": 3, "b": -2, "c": 0.5, "d_model": 512, "s": "7"}
PYTHON_VALUES = {"a": 3, "b": -2, "c": 0.5, "d_model": 512, "s": 7}

leaves = st.one_of(
    st.integers(min_value=0, max_value=50).map(str),
    st.sampled_from(["0.5", "2.25", "1e1", ".5", "3."]),
    st.sampled_from(sorted(BINDINGS)),
    st.sampled_from(["var(a)", "var(c)"]),
)


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "^"]), children).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"
    )
    unary = st.tuples(st.sampled_from(["-", "+", "- -"]), children).map(lambda t: f"{t[0]}{t[1]}")
    grouped = children.map(lambda c: f"({c})")
    return st.one_of(binary, unary, grouped)


expressions = st.recursive(leaves, _combine, max_leaves=8)


_PYTHON_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


class _TooLarge(Exception):
    """An integer power Python would take minutes to compute (50 ** 50 ** 50)."""


def _python_value(node: ast.AST) -> object:
    # Python's own parser and operators are the oracle; only integer powers are screened
    # first, because Python computes 50 ** 50 ** 50 exactly, however long it takes.
    if isinstance(node, ast.Expression):
        return _python_value(node.body)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return PYTHON_VALUES[node.id]
    if isinstance(node, ast.UnaryOp):
        return _PYTHON_OPERATORS[type(node.op)](_python_value(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = _python_value(node.left), _python_value(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int):
            if abs(left) > 1 and right * max(abs(left).bit_length() - 1, 1) > 100_000:
                raise _TooLarge
        return _PYTHON_OPERATORS[type(node.op)](left, right)
    raise AssertionError(f"unexpected syntax {ast.dump(node)}")


def _python(text: str) -> object:
    source = text.replace("^", "**").replace("var(a)", "a").replace("var(c)", "c")
    return _python_value(ast.parse(source, mode="eval"))


@settings(max_examples=400, deadline=None)
@given(expressions)
def test_expressions_match_python(text: str) -> None:
    try:
        expected = _python(text)
    except (ZeroDivisionError, OverflowError):
        with pytest.raises(MarkupError):
            evaluate(text, BINDINGS)
        return
    except (MemoryError, _TooLarge):
        assume(False)
        return
    if isinstance(expected, complex) or (isinstance(expected, float) and not math.isfinite(expected)):
        with pytest.raises(MarkupError):
            evaluate(text, BINDINGS)
        return
    if isinstance(expected, int) and abs(expected).bit_length() > 4000:
        assume(False)
    try:
        got = evaluate(text, BINDINGS)
    except MarkupError as error:
        assert "too large" in error.message  # the only refusal of a value Python computes
        return
    assert type(got) is type(expected)
    if isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-300) or (math.isnan(got) and math.isnan(expected))
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ^ 3 ^ 2", 512),
        ("-2 ** 2", -4),
        ("2 ** -1", 0.5),
        ("7 // -2", -4),
        ("7 % -2", -1),
        ("d_model / 8 + 1", 65.0),
        ("var(a) * b - c", -6.5),
        ("a*b+a*b-a", -15),  # two operators: Agrippa's evaluator gets these wrong
    ],
)
def test_known_values(text: str, value: float) -> None:
    assert evaluate(text, BINDINGS) == value


@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ("1 +", "found the end of the expression", 3),
        ("(1 + 2", "expected ')'", 6),
        ("1 / (a - 3)", "division by zero", 2),
        ("1 $ 2", "unexpected character '$'", 2),
        ("a b", "unexpected 'b' after the end", 2),
        ("zz * 2", "undefined variable 'zz'", 0),
        ("", "empty expression", 0),
        ("(-8) ^ 0.5", "is not a real number", 5),
        ("10 ** 10 ** 10", "too large", 3),
        ("var(1)", "var(...) takes a variable name", 4),
    ],
)
def test_expression_errors_point_at_the_operand(text: str, fragment: str, column: int) -> None:
    where = SourceLocation("m.agr", 3, 20, "x" * 40)
    with pytest.raises(MarkupError) as caught:
        evaluate(text, BINDINGS, where)
    assert fragment in caught.value.message
    assert caught.value.location.column == 20 + column
    assert caught.value.location.line == 3


def _attribute(text: str) -> Attribute:
    root = parse_text(f'<model value="{text}"/>', "m.agr")
    return root.attributes["value"]


def test_substitution_in_attributes() -> None:
    bindings = {"n": 4, "half": 0.5, "kind": "float32"}
    assert read_dims(_attribute("[var(n), expr(n * 2 - 1), 1]"), bindings) == (4, 7, 1)
    assert read_dims(_attribute("[expr(n / 2)]"), bindings) == (2,)
    assert read_dims(_attribute('[&quot;batch&quot;, var(n)]'), bindings) == ("batch", 4)
    assert read_int(_attribute("var(n)"), bindings, "rep") == 4
    assert read_literal(_attribute("var(half)"), bindings) == 0.5
    assert read_string(_attribute("var(kind)"), bindings) == "float32"
    assert read_literal(_attribute("[expr((n + 1) ^ 2), var(half)]"), bindings) == [25, 0.5]


def test_substitution_errors() -> None:
    with pytest.raises(MarkupError, match="has no closing parenthesis"):
        read_string(_attribute("[expr(1 + 2]"), {})
    with pytest.raises(MarkupError, match=r"dimension 2\.5"):
        read_dims(_attribute("[expr(5 / 2)]"), {})
    with pytest.raises(MarkupError, match="dimension -1"):
        read_dims(_attribute("[-1, 2]"), {})
    with pytest.raises(MarkupError, match="cannot read"):
        read_dims(_attribute("[N, 2]"), {})
    with pytest.raises(MarkupError, match="must be at least 1"):
        read_int(_attribute("0"), {}, "rep", minimum=1)


def test_onnx_attribute_kinds() -> None:
    assert read_onnx_attribute(_attribute("3"), AttrKind.INT, {}) == 3
    assert read_onnx_attribute(_attribute("float16"), AttrKind.INT, {}) == 10  # an element type word
    assert read_onnx_attribute(_attribute("0.25"), AttrKind.FLOAT, {}) == 0.25
    assert read_onnx_attribute(_attribute("3"), AttrKind.FLOAT, {}) == 3.0
    assert read_onnx_attribute(_attribute("constant"), AttrKind.STRING, {}) == "constant"
    assert read_onnx_attribute(_attribute("[1, 2]"), AttrKind.INTS, {}) == [1, 2]
    assert read_onnx_attribute(_attribute("2"), AttrKind.INTS, {}) == [2]
    assert read_onnx_attribute(_attribute("[1, 2.5]"), AttrKind.FLOATS, {}) == [1.0, 2.5]
    assert read_onnx_attribute(_attribute('[&quot;a&quot;, &quot;b&quot;]'), AttrKind.STRINGS, {}) == ["a", "b"]
    tensor = read_onnx_attribute(_attribute("[[1, 2]]"), AttrKind.TENSOR, {})
    assert tensor.shape == (1, 2) and tensor.dtype.name == "int64"
    with pytest.raises(MarkupError, match="must be a list of integers"):
        read_onnx_attribute(_attribute("[1.5]"), AttrKind.INTS, {})
    with pytest.raises(MarkupError, match="must be a number"):
        read_onnx_attribute(_attribute("[1]"), AttrKind.FLOAT, {})
