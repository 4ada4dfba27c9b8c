"""What a pass is: a callable from an IR function or model to a :class:`PassResult`.

A pass takes an :class:`ir.Function` or :class:`ir.Model` and returns the result and
whether it changed anything, as onnx ir-py's ``passes/_pass_infra.py`` does.  A pass
never modifies its input unless its docstring says it works in place; either way the
caller goes on with ``result.target``.  There is no registry: a caller (the facade)
names the passes it runs, in order.

>>> from dsl.passes import InlinePass
>>> result = InlinePass()(function)          # doctest: +SKIP
>>> result.modified, result.target           # doctest: +SKIP
(True, function main<>...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, Union

from dsl import ir

__all__ = ["Target", "PassResult", "Pass"]

Target = Union[ir.Function, ir.Model]
T = TypeVar("T", ir.Function, ir.Model)


@dataclass(frozen=True, slots=True)
class PassResult(Generic[T]):
    """What a pass returns: the function or model it produced, and whether that differs
    from its input (False means ``target`` may be the input itself, unchanged)."""

    target: T
    modified: bool


class Pass(Protocol):
    """A transformation of IR into IR: ``pass_(target) -> PassResult``.

    >>> result = InlinePass()(function)     # doctest: +SKIP
    """

    def __call__(self, target: T, /) -> PassResult[T]: ...
