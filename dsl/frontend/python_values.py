"""Python objects that hold tensors while compiling: lists of layers, dicts of weights.

A ``@script`` body runs as Python while it compiles wherever a value does not depend on
a tensor's data, so a Python container may hold tensors (``ir.Value``), weights
(:class:`dsl.frontend.weights.Initializer`) and plain numbers side by side, exactly the
objects eager mode would see in the same places.  Such an object travels as the
operand :class:`~dsl.frontend.bindings.PyValue` whose leaves are those objects
themselves; :func:`raw_of` turns any operand into that Python object (what a Python
function is handed) and :func:`operand_of` turns a Python object back into the
operand an expression compiles to (a weight read from a container becomes its
initializer, a tensor stays a tensor).
"""

from __future__ import annotations

import builtins
import dataclasses
import types as pytypes
from typing import Any

from dsl import ir
from dsl.frontend.bindings import AttrRef, PyValue, ValueTuple

__all__ = ["raw_of", "operand_of", "holds_tensor", "STRUCTURAL_BUILTINS", "is_user_function", "CONTAINER_METHODS",
           "CONTAINER_TYPES", "MUTATING_METHODS"]

# Builtins that only arrange objects (never read a tensor's data): called on the Python
# objects themselves, tensors included, as eager mode calls them.
STRUCTURAL_BUILTINS = frozenset({
    builtins.len, builtins.isinstance, builtins.enumerate, builtins.zip, builtins.reversed,
    builtins.list, builtins.tuple, builtins.dict, builtins.range, builtins.getattr, builtins.hasattr,
    builtins.sorted, builtins.min, builtins.max, builtins.abs, builtins.int, builtins.float, builtins.bool,
    builtins.str, builtins.iter, builtins.next, builtins.issubclass, builtins.type, builtins.callable,
    builtins.any, builtins.all, builtins.set, builtins.frozenset, builtins.divmod, builtins.round,
})
# Methods of Python containers, called on containers that may hold tensors.
CONTAINER_TYPES = (list, tuple, dict, set, pytypes.SimpleNamespace)
MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                              "reverse"})
CONTAINER_METHODS = MUTATING_METHODS | {"get", "items", "keys", "values", "index", "count", "copy"}
_LIBRARY_MODULES = ("numpy", "dsl", "eager", "converter", "onnx", "onnxruntime", "torch", "builtins", "math")
_DEPTH = 64  # how deep holds_tensor looks into nested containers


def raw_of(operand: Any) -> Any:
    """The Python object an operand stands for: a tensor is its ``ir.Value``, a tuple of
    results a tuple, an attribute parameter its :class:`AttrRef`."""
    if isinstance(operand, PyValue):
        return operand.value
    if isinstance(operand, ValueTuple):
        return tuple(raw_of(item) for item in operand.items)
    return operand


def operand_of(value: Any, weight_operand: Any) -> Any:
    """The operand for a Python object read while compiling; ``weight_operand(w)`` is the
    initializer Value of a weight (the compiler's rule for weights)."""
    from dsl.frontend.weights import Initializer

    if isinstance(value, (ir.Value, AttrRef)):
        return value
    if isinstance(value, Initializer):
        return weight_operand(value)
    if isinstance(value, tuple) and type(value) is tuple and any(holds_tensor(item) for item in value):
        return ValueTuple(tuple(operand_of(item, weight_operand) for item in value))
    return PyValue(value)


def holds_tensor(value: Any, depth: int = 0) -> bool:
    """Whether a Python object is, or holds (in lists, tuples, dicts, dataclasses,
    namespaces), a tensor of the graph being compiled or a weight."""
    from dsl.frontend.weights import Initializer

    if isinstance(value, (ir.Value, Initializer)):
        return True
    if depth > _DEPTH or isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_tensor(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return any(holds_tensor(item, depth + 1) for item in value.values())
    if isinstance(value, pytypes.SimpleNamespace):
        return any(holds_tensor(item, depth + 1) for item in vars(value).values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(holds_tensor(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value))
    return False


def is_user_function(target: Any) -> bool:
    """Whether ``target`` is a plain Python function of the user's code, whose body the
    compiler reads in place when it is called with tensors (not a library's)."""
    if not isinstance(target, pytypes.FunctionType):
        return False
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] not in _LIBRARY_MODULES
