"""The arithmetic inside ``expr(...)``: a recursive-descent parser that evaluates as it parses.

Agrippa's evaluator mis-handles any expression with two operators and has no
parentheses; this one follows Python's grammar and results exactly (``-2 ** 2 == -4``,
``2 ** 3 ** 2 == 512``, ``7 // -2 == -4``, ``7 % -2 == -1``), with ``^`` as a second
spelling of ``**`` (Agrippa's).  Operands are numbers, bound names and ``var(name)``;
nothing is ever handed to ``eval``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dsl.errors import MarkupError
from dsl.ir import SourceLocation

__all__ = ["evaluate", "Number", "number_of_binding"]

Number = int | float

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|//|[-+*/%^()])"
    r")"
)
_MAX_EXPONENT_BITS = 4096  # an int result wider than this is surely a typo, and slow to build (or print)
_MAX_NESTING = 100  # parentheses and signs nested deeper than this are no arithmetic a person wrote


def number_of_binding(value: Any) -> Number | None:
    """A binding as a number: ints and floats as they are, numeric strings parsed."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return None
    return None


class _Parser:
    def __init__(self, text: str, bindings: Mapping[str, Any], location: SourceLocation | None) -> None:
        self.text = text
        self.bindings = bindings
        self.location = location
        self.tokens: list[tuple[str, str, int]] = []
        self.index = 0
        self.depth = 0
        self._tokenize()

    def _where(self, offset: int, width: int = 1) -> SourceLocation | None:
        if self.location is None:
            return None
        column = self.location.column + offset
        return replace(self.location, column=column, end_column=column + max(width, 1))

    def _fail(self, message: str, offset: int, width: int = 1, hint: str = "") -> MarkupError:
        return MarkupError(message, self._where(offset, width), hint=hint or _HINT)

    def _tokenize(self) -> None:
        position = 0
        text = self.text
        end = len(text.rstrip())  # (not a strip per token: that is quadratic in a long expression)
        while position < end:
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position or match.lastgroup is None:
                bad = position + len(text[position:]) - len(text[position:].lstrip())
                raise self._fail(f"unexpected character {text[bad]!r} in expression", bad)
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.tokens.append(("end", "", len(text)))

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.index]

    def take(self) -> tuple[str, str, int]:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        kind, value, offset = self.take()
        if value != text or kind != "op":
            shown = "the end" if kind == "end" else repr(value)
            raise self._fail(f"expected {text!r} in expression, found {shown}", offset)

    # additive := multiplicative (("+" | "-") multiplicative)*
    def additive(self) -> Number:
        result = self.multiplicative()
        while self.peek()[1] in ("+", "-") and self.peek()[0] == "op":
            _, op, offset = self.take()
            right = self.multiplicative()
            result = self.apply(op, result, right, offset)
        return result

    # multiplicative := unary (("*" | "/" | "//" | "%") unary)*
    def multiplicative(self) -> Number:
        result = self.unary()
        while self.peek()[1] in ("*", "/", "//", "%") and self.peek()[0] == "op":
            _, op, offset = self.take()
            right = self.unary()
            result = self.apply(op, result, right, offset)
        return result

    # unary := ("-" | "+") unary | power      (so -2 ** 2 == -(2 ** 2), as in Python)
    def unary(self) -> Number:
        kind, value, offset = self.peek()
        if kind == "op" and value in ("-", "+"):
            self.take()
            self.nest(offset)
            operand = self.unary()
            self.depth -= 1
            return -operand if value == "-" else +operand
        return self.power()

    def nest(self, offset: int) -> None:
        """One level deeper into the recursive descent; bounded, so Python's stack never runs out."""
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self._fail(f"expression nested more than {_MAX_NESTING} levels deep", offset,
                             hint="split the expression, or bind part of it to a name")

    # power := primary (("**" | "^") unary)?   (right-associative; 2 ** -1 == 0.5)
    def power(self) -> Number:
        base = self.primary()
        kind, value, offset = self.peek()
        if kind == "op" and value in ("**", "^"):
            self.take()
            exponent = self.unary()
            return self.apply("**", base, exponent, offset)
        return base

    # primary := number | name | var(name) | "(" additive ")"
    def primary(self) -> Number:
        kind, value, offset = self.take()
        if kind == "number":
            try:
                number: Number = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:  # (more digits than Python converts)
                raise self._fail(f"the number {value[:20]}... has too many digits", offset, len(value)) from None
            if isinstance(number, float) and not math.isfinite(number):
                raise self._fail(f"the number {value[:20]} is not finite", offset, len(value))
            return number
        if kind == "name":
            if value == "var" and self.peek()[1] == "(":
                self.take()
                name_kind, name, name_offset = self.take()
                if name_kind != "name":
                    raise self._fail("var(...) takes a variable name", name_offset)
                self.expect(")")
                return self.lookup(name, name_offset)
            return self.lookup(value, offset)
        if kind == "op" and value == "(":
            self.nest(offset)
            result = self.additive()
            self.expect(")")
            self.depth -= 1
            return result
        shown = "the end of the expression" if kind == "end" else repr(value)
        raise self._fail(f"expected a number, a name or '(' in expression, found {shown}", offset)

    def lookup(self, name: str, offset: int) -> Number:
        if name not in self.bindings:
            known = ", ".join(sorted(self.bindings)) or "none"
            raise MarkupError(
                f"undefined variable {name!r} in expression",
                self._where(offset, len(name)),
                hint=f"bind it: export(..., bindings={{{name!r}: ...}}) or --bind {name}=...; bound: {known}",
            )
        number = number_of_binding(self.bindings[name])
        if number is None:
            raise MarkupError(
                f"variable {name!r} is bound to {self.bindings[name]!r}, not a number",
                self._where(offset, len(name)),
                hint="only numbers can take part in expr(...) arithmetic",
            )
        return number

    def apply(self, op: str, left: Number, right: Number, offset: int) -> Number:
        try:
            if op == "+":
                result: Any = left + right
            elif op == "-":
                result = left - right
            elif op == "*":
                result = left * right
            elif op == "/":
                result = left / right
            elif op == "//":
                result = left // right
            elif op == "%":
                result = left % right
            else:
                if isinstance(left, int) and isinstance(right, int) and right > 0:
                    if abs(left) > 1 and right * max(abs(left).bit_length() - 1, 1) > _MAX_EXPONENT_BITS:
                        raise self._fail(f"{left} ** {right} is too large", offset, len(op))
                result = left**right
        except ZeroDivisionError:
            raise self._fail(f"division by zero in expression ({left} {op} {right})", offset, len(op)) from None
        except OverflowError:
            raise self._fail(f"{left} {op} {right} overflows a float", offset, len(op)) from None
        if isinstance(result, int) and result.bit_length() > _MAX_EXPONENT_BITS:
            raise self._fail(f"the result of {op} has {result.bit_length()} bits, too large for a size", offset, len(op))
        if isinstance(result, complex):
            raise self._fail(f"{left} ** {right} is not a real number", offset, len(op))
        if isinstance(result, float) and not math.isfinite(result):
            raise self._fail(f"{left} {op} {right} is not finite", offset, len(op))
        return result


_HINT = "expr() takes numbers, bound names, var(name), + - * / // % ** ^ and parentheses"


def evaluate(text: str, bindings: Mapping[str, Any], location: SourceLocation | None = None) -> Number:
    """Evaluate the arithmetic inside ``expr(...)`` with Python's precedence and results.

    ``location`` is where ``text`` starts in the markup, so errors point at the exact
    operand or operator.

    >>> evaluate("d_model / heads + 2 ^ 3", {"d_model": 512, "heads": 8})
    72.0
    """
    parser = _Parser(text, bindings, location)
    if parser.peek()[0] == "end":
        raise parser._fail("empty expression", 0)
    result = parser.additive()
    kind, value, offset = parser.peek()
    if kind != "end":
        raise parser._fail(f"unexpected {value!r} after the end of the expression", offset, len(value))
    return result
