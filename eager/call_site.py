"""The user's line that made an eager call: for error locations and the number of outputs.

The number of outputs of an op with optional outputs is, in compiled code, the number
of names the call is assigned to (``y, mask = op.Dropout(x)`` binds two).  Eager mode
reads the same fact from the caller's bytecode: a call whose result is immediately
unpacked (``UNPACK_SEQUENCE n``) asks for ``n`` outputs.  The lookup is cached per
(code object, instruction offset), so it costs a dict lookup after the first time.
"""

from __future__ import annotations

import ast
import dis
import linecache
import sys
from types import CodeType, FrameType

from dsl.ir import SourceLocation
from dsl.tracebacks import expression_span, frame_location, is_library_frame

__all__ = ["user_frame", "caller_location", "caller_operands", "assigned_attribute_owner", "unpacked_count"]


def user_frame() -> FrameType | None:
    """The innermost frame whose module is not part of dsl, eager or converter (the user's code)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and is_library_frame(frame):
        frame = frame.f_back
    return frame


def caller_location() -> SourceLocation | None:
    """Where the user's code called into eager mode, for error messages: the expression
    running (``x @ w``, ``op.Relu(x)``) when Python knows its columns, else the line."""
    frame = user_frame()
    if frame is None:
        return None
    return frame_location(frame)


def caller_operands(count: int) -> list[str]:
    """The user's source text of the ``count`` operands of the running call or operator
    (``["x", "w"]`` for ``x @ w``); ``input 0``, ``input 1``... where it cannot be read."""
    fallback = [f"input {index}" for index in range(count)]
    running = _running_expression()
    if running is None:
        return fallback
    text, expression = running
    if isinstance(expression, ast.BinOp):
        operands: list[ast.expr] = [expression.left, expression.right]
    elif isinstance(expression, ast.Call):
        operands = list(expression.args)
    else:
        return fallback
    if len(operands) != count:
        return fallback
    return [ast.get_source_segment(text, operand) or name for operand, name in zip(operands, fallback)]


def assigned_attribute_owner() -> str | None:
    """The user's source text of ``owner`` in the running ``owner.attribute = ...`` (``"x"``
    in ``x.dtype = INT64.dtype``), as the compiler names it in the same error; None where
    it cannot be read."""
    running = _running_expression()
    if running is None or not isinstance(running[1], ast.Attribute):
        return None
    return ast.get_source_segment(running[0], running[1].value)


def _running_expression() -> tuple[str, ast.expr] | None:
    """(source text, parsed expression) of the user's expression running now; None where
    the frame, its position or the text cannot be had."""
    frame = user_frame()
    span = expression_span(frame) if frame is not None else None
    if frame is None or span is None:
        return None
    text = linecache.getline(frame.f_code.co_filename, span[0])[span[1]:span[2]]
    try:
        return text, ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


_UNPACK_BY_SITE: dict[tuple[CodeType, int], int | None] = {}


def unpacked_count() -> int | None:
    """How many names the user's call result is unpacked into, or None if it is not unpacked."""
    frame = user_frame()
    if frame is None:
        return None
    key = (frame.f_code, frame.f_lasti)
    if key in _UNPACK_BY_SITE:
        return _UNPACK_BY_SITE[key]
    found = _unpack_after(frame.f_code, frame.f_lasti)
    if len(_UNPACK_BY_SITE) > 4096:
        _UNPACK_BY_SITE.clear()
    _UNPACK_BY_SITE[key] = found
    return found


def _unpack_after(code: CodeType, offset: int) -> int | None:
    passed = False
    for instruction in dis.get_instructions(code):
        if instruction.offset == offset:
            passed = True
            continue
        if not passed or instruction.opname in ("CACHE", "EXTENDED_ARG", "PRECALL"):
            continue
        if instruction.opname == "UNPACK_SEQUENCE":
            return int(instruction.arg or 0)
        return None
    return None
