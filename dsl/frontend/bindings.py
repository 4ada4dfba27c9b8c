"""What a Python name or expression stands for while compiling.

An expression compiles to an *operand*: an ``ir.Value`` (a tensor computed at run time),
a :class:`PyValue` (a Python object known at compile time: a literal, an outer-scope
constant, an opset, another scripted function), an :class:`AttrRef` (an attribute
parameter of the function being compiled), a :class:`ValueTuple` (the outputs of a
multi-output call), or a :class:`GraphDef` (a nested ``@graph()`` definition).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Union

from dsl import ir

__all__ = ["PyValue", "AttrRef", "ValueTuple", "GraphDef", "Undefined", "Operand"]


@dataclass(slots=True, frozen=True)
class PyValue:
    """A compile-time Python object; it becomes a Constant only where a tensor is needed."""

    value: Any


@dataclass(slots=True, frozen=True)
class AttrRef:
    """An attribute parameter; as an op attribute it is forwarded by reference."""

    param: ir.AttrParam


@dataclass(slots=True, frozen=True)
class ValueTuple:
    """Several values at once: ``a, b = op.TopK(...)`` or ``return a, b``."""

    items: tuple[Any, ...]


@dataclass(slots=True, frozen=True)
class GraphDef:
    """A nested ``def`` decorated ``@graph()``, compiled where it is passed as an attribute."""

    tree: ast.FunctionDef
    scope: Any


@dataclass(slots=True, frozen=True)
class Undefined:
    """A name that exists in Python's eyes but has no value here; ``reason`` says why."""

    reason: str
    hint: str


Operand = Union[ir.Value, PyValue, AttrRef, ValueTuple, GraphDef]
