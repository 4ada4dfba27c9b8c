"""Which ai.onnx opset a function is compiled against, decided before compiling it.

Python operators (``+`` -> ``Add``) and constants need an opset before the first op call
is reached.  The opsets a function can name are among the global and closure names its
code object lists (``co_names``/``co_freevars``, nested code included), so they are found
without walking the syntax tree: each such name is resolved once, and Opsets, Ops and
modules holding opsets (``dsl.opset18``) are collected.  Two versions of one domain are
an error, located by a walk of the tree that only happens in that case.
"""

from __future__ import annotations

import ast
import types as pytypes
from collections.abc import Callable, Iterator
from typing import Any

from dsl.errors import DslTypeError
from dsl.frontend.scripted import Loaded, Scripted
from dsl.opsets import OPSET_NAME, Op, Opset

__all__ = ["referenced_opsets", "imported_onnx_opset"]


def _code_objects(code: pytypes.CodeType) -> Iterator[pytypes.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, pytypes.CodeType):
            yield from _code_objects(constant)


def referenced_opsets(
    code: pytypes.CodeType, tree: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[str], Any], locate: Callable[[Any], Any]
) -> tuple[dict[str, int], list[Scripted | Loaded]]:
    """Domain -> version of the opsets the function names, and the scripted functions and
    loaded models it names (whose opset decides when the function calls no op itself)."""
    opsets: list[Opset] = []
    callees: list[Scripted | Loaded] = []
    _collect(code, resolve, opsets, callees, set())
    versions: dict[str, int] = {}
    for opset in opsets:
        previous = versions.setdefault(opset.domain, opset.version)
        if previous != opset.version:
            raise DslTypeError(
                f"this function uses {opset.domain or 'ai.onnx'} opset versions {previous} and {opset.version}",
                _first_use(tree, resolve, opset, locate),
                hint=f"use one version per domain, e.g. opset{max(previous, opset.version)} everywhere",
            )
    return versions, callees


def imported_onnx_opset(namespace: dict[str, Any]) -> Opset | None:
    """The ai.onnx opset a module imports (``from dsl import opset18 as op``), when it
    imports one version only: what a function that calls no op itself is compiled with."""
    found = {value.version: value for value in list(namespace.values())
             if isinstance(value, Opset) and value.domain == ""}
    return next(iter(found.values())) if len(found) == 1 else None


def _collect(
    code: pytypes.CodeType, resolve: Callable[[str], Any], opsets: list[Opset], callees: list[Scripted | Loaded],
    seen: set[int], depth: int = 0,
) -> None:
    """The opsets and callees ``code`` names, and those of the plain Python helpers it
    names (their bodies compile in place, so their ops are this function's)."""
    from dsl.frontend.python_values import is_user_function

    names: dict[str, None] = {}
    for nested in _code_objects(code):
        names.update(dict.fromkeys(nested.co_names))
        names.update(dict.fromkeys(nested.co_freevars))
    modules: list[Any] = []
    for name in names:
        target = resolve(name)
        if isinstance(target, Op):
            target = target.opset
        if isinstance(target, Opset):
            opsets.append(target)
        elif isinstance(target, (Scripted, Loaded)):
            callees.append(target)
        elif isinstance(target, pytypes.ModuleType):
            modules.append(target)
        elif depth < _HELPER_DEPTH and is_user_function(target) and id(target.__code__) not in seen:
            seen.add(id(target.__code__))
            _collect(target.__code__, _resolver(target), opsets, callees, seen, depth + 1)
    for module in modules:
        namespace = vars(module)
        for name in names:
            found = namespace.get(name)
            if found is None and OPSET_NAME.match(name):
                # dsl.opset18 and friends exist only through the module's lazy __getattr__;
                # other names are read from the namespace so no module hook (numpy's
                # deprecation warnings, say) runs for names that merely share a spelling.
                try:
                    found = getattr(module, name, None)
                except Exception:  # a module whose __getattr__ fails is not an opset module
                    continue
            if isinstance(found, Opset):
                opsets.append(found)


_HELPER_DEPTH = 4


def _resolver(function: Any) -> Callable[[str], Any]:
    """Name -> value in a helper's own namespace: its closure, its globals, builtins."""
    import builtins

    closure = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:
            continue
    namespace = function.__globals__
    return lambda name: closure.get(name, namespace.get(name, vars(builtins).get(name)))


def _first_use(tree: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[str], Any], opset: Opset, locate: Callable[[Any], Any]) -> Any:
    """Where the body first names ``opset`` (for the error message)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            target = resolve(node.id)
            if target is opset or (isinstance(target, Op) and target.opset is opset):
                return locate(node)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = resolve(node.value.id)
            if isinstance(base, pytypes.ModuleType) and getattr(base, node.attr, None) is opset:
                return locate(node)
    return locate(tree)
