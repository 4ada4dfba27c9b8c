"""A called ``@script`` function's results at one call site, checked against its return
annotation with the caller's shapes.

A callee compiled on its own sees its parameters as annotated: ``x: FLOAT[...]`` has no
rank there, so ``-> BOOL`` (a rank-0 result) on ``op.IsNaN(x)`` cannot be refused.  Run
eagerly, the same call returns a ``[3, 3]`` result and the annotation is refused at the
callee's ``return``; compiled, the model used to compute the ``[3, 3]`` result under a
rank-0 declaration.  Here the caller's shapes are carried through the callee's nodes
with :mod:`dsl.shape_rules`, and a result that contradicts its annotation gets the
eager error, at the callee's ``return``.  Only what the rules know is carried: a node
they cannot follow (a nested call, control flow, another domain) leaves its results
unknown, and an unknown shape is never refused.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import numpy as np

from dsl import ir, shape_rules
from dsl.annotation_checks import OUTPUT_HINT, check_declared, output_label
from dsl.frontend.source import function_source
from dsl.shape_rules import Shape

__all__ = ["check_callee_results"]

_MOST_NODES = 400  # (a larger body is not walked again per call: compile time stays linear)


def check_callee_results(callee: ir.Function, python_function: Any, actual: Sequence[Shape],
                         version: int, call_site: Any = None) -> list[Shape] | None:
    """The callee's result shapes for inputs of shapes ``actual`` (None where not known), or
    None when nothing is learned; a ``DslTypeError`` at the callee's ``return`` (at the
    ``call_site`` when the callee has several) when one contradicts the return annotation,
    as eager mode raises it.

    >>> check_callee_results(isnan, isnan.python_function, [(3, 3)], 18)  # doctest: +SKIP
    Traceback (most recent call last):
    dsl.errors.DslTypeError: error: output 0 is BOOL[3, 3] but the annotation says BOOL: rank 2, not 0
    """
    if not _learns_something(callee, actual) or len(callee.graph.nodes) > _MOST_NODES:
        return None
    shapes = _carried(callee, actual, version)
    found = [shapes.get(output) for output in callee.outputs]
    for index, (output, shape) in enumerate(zip(callee.outputs, found)):
        declared = output.type
        if shape is None or not isinstance(declared, ir.TensorType):
            continue
        if declared.shape is not None and len(declared.shape) == len(shape) and all(
                not isinstance(d, int) or d == s for d, s in zip(declared.shape, shape)):
            continue  # (the usual case: it fits; the location is looked up only for an error)
        location, name = _return_site(python_function, index, len(callee.outputs))
        check_declared(output_label(index, name), shape, declared.elem_type, declared, location or call_site,
                       OUTPUT_HINT)
    return found


def _learns_something(callee: ir.Function, actual: Sequence[Shape]) -> bool:
    """Whether a caller's shape says more than the callee's parameter annotation."""
    for formal, shape in zip(callee.inputs, actual):
        declared = formal.type.shape if isinstance(formal.type, ir.TensorType) else None
        if shape is not None and (declared is None or any(not isinstance(d, int) for d in declared)):
            return True
    return False


def _carried(callee: ir.Function, actual: Sequence[Shape], version: int) -> dict[ir.Value, Shape]:
    shapes: dict[ir.Value, Shape] = dict(zip(callee.inputs, actual))
    constants: dict[ir.Value, np.ndarray] = {}
    for node in callee.graph.nodes:
        if node.domain not in ("", "ai.onnx") or node.callee is not None or _has_subgraph(node):
            continue  # (its results stay unknown)
        if node.op_type == "Constant":
            _remember_constant(node, constants)
        inputs = [shapes.get(value, _declared(value)) if value is not None else None for value in node.inputs]
        values = [constants.get(value) if value is not None else None for value in node.inputs]
        names = [value.name if value is not None else "" for value in node.inputs]
        found = shape_rules.infer(node.op_type, inputs, names, node.attributes, values, node.location, version)
        if found and found[0] is not None and node.outputs:
            shapes[node.outputs[0]] = found[0]
    return shapes


def _declared(value: ir.Value) -> Shape:
    return value.type.shape if isinstance(value.type, ir.TensorType) else None


def _has_subgraph(node: ir.Node) -> bool:
    """A body (If, Loop, Scan) or an attribute forwarded from the callee's own parameters,
    whose value differs per call: the rules cannot follow the node."""
    return any(attribute.kind in (ir.AttrKind.GRAPH, ir.AttrKind.GRAPHS) or attribute.ref_attr_name is not None
               for attribute in node.attributes.values())


def _remember_constant(node: ir.Node, constants: dict[ir.Value, np.ndarray]) -> None:
    """A small integer Constant's value (a Reshape's target, a Slice's bounds)."""
    for name in ("value", "value_int", "value_ints"):
        attribute = node.attributes.get(name)
        if attribute is None or attribute.value is None or not node.outputs:
            continue
        value = attribute.value
        array = value.array if isinstance(value, ir.Tensor) else np.asarray(value)
        if array.size <= 64 and array.dtype.kind in "iu":
            constants[node.outputs[0]] = array


def _return_site(python_function: Any, index: int, count: int) -> tuple[ir.SourceLocation | None, str]:
    """The location of the callee's one ``return`` and the name result ``index`` has there."""
    source = function_source(python_function)
    returns = [node for node in ast.walk(source.tree) if isinstance(node, ast.Return)]
    if len(returns) != 1:
        return None, "return_val"
    value = returns[0].value
    items = value.elts if isinstance(value, ast.Tuple) else [value] if value is not None else []
    item = items[index] if len(items) == count else None
    return source.location(returns[0]), item.id if isinstance(item, ast.Name) else "return_val"
