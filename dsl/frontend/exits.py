"""Early ``return``, ``break`` and ``continue``, made structured before they are compiled.

ONNX has no jumps: an ``If`` node runs one branch and continues.  So when a branch of an
``if`` may leave the block (``return``/``break``/``continue``), the statements that
follow the ``if`` are moved into the branches that fall through::

    if c:                      if c:
        return a         ->        return a
    y = f(x)                   else:
    return y                       y = f(x)
                                   return y

After this, every exit statement ends its block, and an ``if`` whose branches all exit
ends its block too.  Loops are not looked into: ``break`` there belongs to the inner loop.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

__all__ = ["ReturnExit", "LOOP_EXIT", "contains_exit", "always_exits", "with_continuation"]

_EXIT_STATEMENTS = (ast.Return, ast.Break, ast.Continue)


@dataclass(slots=True)
class ReturnExit:
    """A block that ended in ``return``: the returned operands with their names."""

    values: list[Any]
    names: list[str]
    location: Any
    packed: bool = False  # a helper returned a tuple of these values (not one value)


class _LoopExit:
    """A block that ended in ``break`` or ``continue`` (the loop condition says which)."""

    def __repr__(self) -> str:
        return "LOOP_EXIT"


LOOP_EXIT = _LoopExit()


def contains_exit(statement: ast.stmt) -> bool:
    """Whether ``statement`` (an ``if``) has an exit statement outside nested loops and defs."""
    stack: list[ast.stmt] = [statement]
    while stack:
        current = stack.pop()
        if isinstance(current, _EXIT_STATEMENTS):
            return True
        if isinstance(current, ast.If):
            stack.extend(current.body)
            stack.extend(current.orelse)
    return False


def always_exits(block: list[ast.stmt]) -> bool:
    """Whether every path through ``block`` ends in an exit statement."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, _EXIT_STATEMENTS):
        return True
    if isinstance(last, ast.If):
        return always_exits(last.body) and always_exits(last.orelse)
    return False


def with_continuation(statement: ast.If, continuation: list[ast.stmt]) -> ast.If:
    """A copy of ``statement`` with ``continuation`` appended to each branch that falls through."""
    body = statement.body if always_exits(statement.body) else [*statement.body, *continuation]
    orelse = statement.orelse if always_exits(statement.orelse) else [*statement.orelse, *continuation]
    moved = ast.If(test=statement.test, body=body, orelse=orelse)
    return ast.copy_location(moved, statement)
