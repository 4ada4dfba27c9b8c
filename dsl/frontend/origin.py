"""Where the names a scripted function does not bind come from: its closure, its
module's globals, and builtins (:class:`Origin`), looked up in that order."""

from __future__ import annotations

import ast
import builtins
from typing import Any

from dsl.errors import DslTypeError
from dsl.frontend.bindings import PyValue
from dsl.frontend.source import FunctionSource

__all__ = ["MISSING", "Origin"]

MISSING = object()  # what Origin.resolve returns for a name found nowhere
_BUILTINS = vars(builtins)  # a dict lookup: getattr raises and catches for every miss


class Origin:
    """Where names not bound in the body come from: the closure, the globals, builtins."""

    __slots__ = ("closure", "defining_locals", "globals", "operands", "source")

    def __init__(self, python_function: Any, source: FunctionSource, defining_locals: dict[str, Any] | None = None) -> None:
        self.source = source
        self.defining_locals = defining_locals or {}
        # Names resolved here, as operands: made once per compile (``op`` in every ``op.X``).
        self.operands: dict[str, PyValue] = {}
        self.globals: dict[str, Any] = getattr(python_function, "__globals__", {})
        code = python_function.__code__
        cells = python_function.__closure__ or ()
        self.closure: dict[str, Any] = {}
        for name, cell in zip(code.co_freevars, cells):
            try:
                self.closure[name] = cell.cell_contents
            except ValueError:  # a closure variable not assigned yet
                continue

    def resolve(self, name: str) -> Any:
        found = self.closure.get(name, MISSING)
        if found is MISSING:
            found = self.globals.get(name, MISSING)
        if found is MISSING:
            found = _BUILTINS.get(name, MISSING)
        return found

    def evaluate(self, node: ast.expr) -> Any:
        """Evaluate an annotation expression in the function's namespace."""
        location = self.source.location(node)
        try:
            code = compile(ast.Expression(body=node), location.file, "eval")
            return eval(code, self.globals, {**self.defining_locals, **self.closure})
        except Exception as err:
            raise DslTypeError(
                f"cannot evaluate annotation: {type(err).__name__}: {err}",
                location,
                hint="annotations must name tensor types (FLOAT[...]) or int/float/str/bool/list[...]",
            ) from None
