"""Reading attribute text: ``var(name)`` and ``expr(...)`` substitution, then typed values.

Every XML attribute is a string.  ``var(n)`` and ``expr(...)`` calls are replaced by
their values first (as in Agrippa), then the text is read as what the attribute must
hold: a name, an int, a list of dims, an element type, or an ONNX attribute of the kind
its schema declares.  Each reader raises :class:`MarkupError` pointing at the attribute
value (or at the exact ``var``/``expr`` call) with a hint.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal, overload

import numpy as np

from dsl import ir, types
from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.markup.document import Attribute
from dsl.markup.expressions import evaluate, number_of_binding

__all__ = [
    "substitute",
    "read_string",
    "read_literal",
    "read_int",
    "read_dims",
    "read_element_type",
    "read_choice",
    "read_onnx_attribute",
]

_CALL = re.compile(r"\b(var|expr)\s*\(")
_NO_VALUE = object()


def _at(attribute: Attribute, offset: int, width: int) -> SourceLocation:
    where = attribute.value_location
    return replace(where, column=where.column + offset, end_column=where.column + offset + max(width, 1))


def _closing_paren(text: str, open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _as_text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def substitute(attribute: Attribute, bindings: Mapping[str, Any]) -> tuple[str, Any]:
    """The attribute text with every ``var``/``expr`` call replaced by its value.

    Returns ``(text, whole)``: ``whole`` is the call's typed value when the attribute is
    exactly one call (``dim="var(n)"``), so numbers are not round-tripped through text.
    """
    text = attribute.text
    if "(" not in text:  # the common case: no call at all
        return text, _NO_VALUE
    cached = attribute.resolved
    if cached is not None and cached[0] is bindings:
        return cached[1], cached[2]
    pieces: list[str] = []
    values: list[Any] = []
    cursor = 0
    for match in _CALL.finditer(text):
        if match.start() < cursor:
            continue
        open_index = match.end() - 1
        close_index = _closing_paren(text, open_index)
        if close_index < 0:
            raise MarkupError(
                f"{match.group(1)}( has no closing parenthesis",
                _at(attribute, match.start(), match.end() - match.start()),
                hint="close the call: var(name) or expr(a * b)",
            )
        inner = text[open_index + 1 : close_index]
        inner_offset = open_index + 1
        if match.group(1) == "var":
            name = inner.strip()
            name_offset = inner_offset + len(inner) - len(inner.lstrip())
            if name not in bindings:
                known = ", ".join(sorted(bindings)) or "none"
                raise MarkupError(
                    f"undefined variable {name!r}",
                    _at(attribute, name_offset, len(name)),
                    hint=f"bind it: export(..., bindings={{{name!r}: ...}}) or --bind {name}=...; bound: {known}",
                )
            value = bindings[name]
        else:
            value = evaluate(inner, bindings, _at(attribute, inner_offset, len(inner)))
        pieces.append(text[cursor : match.start()])
        pieces.append(_as_text(value))
        values.append(value)
        cursor = close_index + 1
    pieces.append(text[cursor:])
    result = "".join(pieces)
    stripped_pieces = [p for p in (pieces[0::2]) if p.strip()]
    whole = values[0] if len(values) == 1 and not stripped_pieces else _NO_VALUE
    attribute.resolved = (bindings, result, whole)
    return result, whole


def read_string(attribute: Attribute, bindings: Mapping[str, Any]) -> str:
    """The attribute as text, after substitution."""
    return substitute(attribute, bindings)[0]


def read_literal(attribute: Attribute, bindings: Mapping[str, Any], what: str = "a value") -> Any:
    """The attribute as a JSON (or Python) literal: number, string, bool or nested list."""
    text, whole = substitute(attribute, bindings)
    if whole is not _NO_VALUE:
        number = number_of_binding(whole) if isinstance(whole, str) else whole
        if number is not None:
            return number
        text = str(whole)
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(stripped)  # literals only: never evaluates code
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    raise MarkupError(
        f"cannot read {text if len(text) <= 80 else text[:60] + ' ...'!r} as {what}",
        attribute.value_location,
        hint='write a number, a list such as [3, 4], or a quoted string such as ["N", 3]',
    )


def _integral(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_int(attribute: Attribute, bindings: Mapping[str, Any], what: str, minimum: int | None = None) -> int:
    """An integer attribute (``rep="3"``, ``rep="expr(layers / 2)"``); integral floats accepted."""
    value = read_literal(attribute, bindings, f"an integer ({what})")
    number = _integral(value)
    if number is None:
        raise MarkupError(f"{what} must be an integer, got {value!r}", attribute.value_location)
    if minimum is not None and number < minimum:
        raise MarkupError(f"{what} must be at least {minimum}, got {number}", attribute.value_location)
    return number


@overload
def read_dims(attribute: Attribute, bindings: Mapping[str, Any], symbolic: Literal[False]) -> tuple[int, ...]: ...


@overload
def read_dims(
    attribute: Attribute, bindings: Mapping[str, Any], symbolic: bool = True
) -> tuple[int | str | None, ...]: ...


def read_dims(
    attribute: Attribute, bindings: Mapping[str, Any], symbolic: bool = True
) -> tuple[int | str | None, ...]:
    """A ``dim`` attribute: a list of non-negative ints, or quoted names for symbolic axes."""
    value = read_literal(attribute, bindings, "a list of dimensions")
    if not isinstance(value, (list, tuple)):
        value = [value]
    dims: list[int | str | None] = []
    for item in value:
        number = _integral(item)
        if number is not None and number >= 0:
            dims.append(number)
        elif symbolic and isinstance(item, str) and item:
            dims.append(item)
        elif symbolic and item is None:
            dims.append(None)
        else:
            allowed = "non-negative integers or quoted names" if symbolic else "non-negative integers"
            raise MarkupError(
                f"dimension {item!r} in {attribute.text!r} is not valid",
                attribute.value_location,
                hint=f"dimensions are {allowed}, e.g. dim=\"[var(n), 1]\"",
            )
    return tuple(dims)


def read_element_type(attribute: Attribute | None, bindings: Mapping[str, Any], default: int) -> int:
    """An element type written as ``float32``/``FLOAT``/``int64``...; ``default`` if absent."""
    if attribute is None:
        return default
    name = read_string(attribute, bindings).strip()
    try:
        return types.element_type_from_name(name).enum
    except KeyError:
        raise MarkupError(
            f"unknown element type {name!r}",
            attribute.value_location,
            hint="use an ONNX type name (FLOAT, INT64, BOOL, FLOAT16, ...) or a numpy one (float32, int64, ...)",
        ) from None


def read_choice(attribute: Attribute | None, bindings: Mapping[str, Any], choices: tuple[str, ...], default: str) -> str:
    """An attribute restricted to a few words (``shared="yes"``)."""
    if attribute is None:
        return default
    word = read_string(attribute, bindings).strip()
    if word not in choices:
        raise MarkupError(
            f"{attribute.name} must be {' or '.join(repr(c) for c in choices)}, got {word!r}",
            attribute.value_location,
        )
    return word


# ---------------------------------------------------------------- ONNX attributes

_UNWRITABLE = {
    ir.AttrKind.GRAPH,
    ir.AttrKind.GRAPHS,
    ir.AttrKind.SPARSE_TENSOR,
    ir.AttrKind.SPARSE_TENSORS,
    ir.AttrKind.TYPE_PROTO,
    ir.AttrKind.TYPE_PROTOS,
    ir.AttrKind.TENSORS,
}


def _element_type_word(text: str) -> int | None:
    try:
        return types.element_type_from_name(text.strip()).enum
    except KeyError:
        return None


def read_onnx_attribute(attribute: Attribute, kind: ir.AttrKind | None, bindings: Mapping[str, Any]) -> Any:
    """The Python value of an ONNX attribute written in XML, read as the schema's ``kind``.

    INT accepts an element-type word too (``to="float32"`` on Cast); STRING takes the
    text as written; lists are JSON lists (a single scalar becomes a one-item list);
    TENSOR is a number or nested list.  ``kind`` None (a custom domain) infers the kind.
    """
    K = ir.AttrKind
    if kind in _UNWRITABLE:
        raise MarkupError(
            f"attribute {attribute.name} is a {kind.name.lower()} attribute, which markup cannot write",
            attribute.location,
            hint="write this model with @script, or give the value through an op that takes it as an input",
        )
    if kind == K.STRING:
        return read_string(attribute, bindings)
    if kind is None:
        try:
            return read_literal(attribute, bindings, "an attribute value")
        except MarkupError:
            return substitute(attribute, bindings)[0]  # not a literal: the text itself
    if kind == K.INT:
        text, whole = substitute(attribute, bindings)
        elem = _element_type_word(text) if whole is _NO_VALUE else None
        if elem is not None:
            return elem
    value = read_literal(attribute, bindings, f"a {kind.name} attribute")
    if kind == K.INT:
        return _int_attribute(attribute, value)
    if kind == K.FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MarkupError(f"attribute {attribute.name} must be a number, got {value!r}", attribute.value_location)
        return float(value)
    if kind in (K.INTS, K.FLOATS, K.STRINGS):
        return _list_attribute(attribute, kind, value)
    if kind == K.TENSOR:
        return _tensor_attribute(attribute, value)
    return value


def _int_attribute(attribute: Attribute, value: Any) -> int:
    number = int(value) if isinstance(value, bool) else _integral(value)
    if number is None:
        raise MarkupError(f"attribute {attribute.name} must be an integer, got {value!r}", attribute.value_location)
    return number


def _list_attribute(attribute: Attribute, kind: ir.AttrKind, value: Any) -> list[Any]:
    """INTS, FLOATS or STRINGS: each item checked (a single scalar is a one-item list)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    converted: list[Any] = []
    for item in items:
        if kind == ir.AttrKind.INTS:
            number = _integral(item)
            if number is None:
                raise MarkupError(
                    f"attribute {attribute.name} must be a list of integers, found {item!r}",
                    attribute.value_location,
                    hint="write e.g. [1, 1]",
                )
            converted.append(number)
        elif kind == ir.AttrKind.FLOATS:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise MarkupError(
                    f"attribute {attribute.name} must be a list of numbers, found {item!r}",
                    attribute.value_location,
                )
            converted.append(float(item))
        else:
            converted.append(str(item))
    return converted


def _tensor_attribute(attribute: Attribute, value: Any) -> np.ndarray:
    """A TENSOR: a number or (nested) list of numbers, as float32 or int64 (bool stays bool)."""
    try:
        array = np.asarray(value)
    except ValueError:
        array = None
    if array is None or array.dtype.kind not in "biuf":
        raise MarkupError(
            f"attribute {attribute.name} must be a number or a (nested) list of numbers, got {value!r}",
            attribute.value_location,
        )
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    return array
