"""Shapes known while compiling: one :class:`ShapeTable` per compiled function.

Each node the front end builds gets its output shapes from :mod:`dsl.shape_rules` as it
is appended, so a mistake that static sizes prove (``x @ w`` with 256 against 64) is a
``DslError`` at the line that made the node, and ``x.shape`` can be a tuple of Python
ints where sizes are static.  Shapes live in a side table, as element types do: the IR
keeps only the types the user wrote.  Operand names are the source text of the operands,
read only when a rule refuses (``ast.unparse`` costs more than the rule).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import numpy as np

from dsl import ir, shape_rules
from dsl.annotation_checks import arguments_keep_ranks
from dsl.frontend.onnx_inference import infer_with_onnx
from dsl.shape_rules import Shape

__all__ = ["ShapeTable", "SourceNames", "callee_output_shapes"]


class SourceNames(Sequence[str]):
    """The operands' source text (``["x", "op.Transpose(w)"]``), unparsed on first read."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: Sequence[ast.AST | None]) -> None:
        self._nodes = nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, index: Any) -> Any:
        node = self._nodes[index]
        return f"input {index}" if node is None else ast.unparse(node)


class _ValueNames(Sequence[str]):
    """Operand names from the values' own names, for nodes the compiler makes itself."""

    __slots__ = ("_values",)

    def __init__(self, values: Sequence[ir.Value | None]) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, index: Any) -> Any:
        value = self._values[index]
        return value.name if value is not None and value.name else f"input {index}"


class ShapeTable:
    """The shape (and, for small constants, the value) of each value of one function."""

    __slots__ = ("constants", "shapes")

    def __init__(self) -> None:
        self.shapes: dict[ir.Value, Shape] = {}
        self.constants: dict[ir.Value, np.ndarray] = {}

    def shape(self, value: ir.Value | None) -> Shape:
        """What is known of ``value``'s shape: inferred, else annotated, else None."""
        if value is None:
            return None
        found = self.shapes.get(value, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        declared = value.type
        if isinstance(declared, ir.TensorType):
            return declared.shape
        return None

    def record_node(
        self,
        op_type: str,
        inputs: list[ir.Value | None],
        attributes: dict[str, ir.Attr],
        outputs: list[ir.Value],
        location: Any,
        names: Sequence[str] | None,
        version: int,
        schema: Any = None,
        elems: Sequence[int | None] = (),
    ) -> None:
        """Infer the outputs' shapes of a default-domain node, or raise where sizes prove a mistake."""
        known = self.shapes
        shapes = [known[v] if v in known else self.shape(v) for v in inputs]
        if len(shapes) <= 2 and op_type in _ELEMENTWISE:  # most nodes: same shapes in, same out
            first = shapes[0] if shapes else None
            if len(shapes) == 1 or (first is not None and shapes[1] == first) or (
                    shapes[1] == () and version >= 7):
                known[outputs[0]] = first
                return
        if op_type in shape_rules.READS_CONSTANTS:
            constants = self.constants
            values = [constants.get(v) if v is not None else None for v in inputs]
        else:
            values = _NO_CONSTANTS
        found = shape_rules.infer(op_type, shapes, names if names is not None else _ValueNames(inputs),
                                  attributes, values, location, version)
        first = found[0] if found else None
        if first is not None:
            self.shapes[outputs[0]] = first
        elif schema is not None and not shape_rules.has_rule(op_type) and _all_known(shapes, elems, inputs):
            typed = [None if v is None else (elems[i], shapes[i]) for i, v in enumerate(inputs)]
            inferred = infer_with_onnx(schema, typed, attributes, len(outputs), location)  # type: ignore[arg-type]
            if inferred is not None:
                for output, shape in zip(outputs, inferred):
                    if shape is not None and output.name:
                        self.shapes[output] = shape
        if op_type == "Constant" and outputs:
            attribute = attributes.get("value")
            if attribute is not None and isinstance(attribute.value, ir.Tensor):
                self.remember_constant(outputs[0], attribute.value.array)
            else:
                for name in ("value_ints", "value_int"):
                    attribute = attributes.get(name)
                    if attribute is not None and attribute.value is not None:
                        self.remember_constant(outputs[0], np.asarray(attribute.value, dtype=np.int64))

    def remember_constant(self, value: ir.Value, array: np.ndarray) -> None:
        """A constant's shape, and its value when small enough to decide a shape (Reshape's target)."""
        self.shapes[value] = tuple(array.shape)
        if array.size <= 64 and array.dtype.kind in "iu":
            self.constants[value] = array

    def set(self, value: ir.Value, shape: Shape) -> None:
        self.shapes[value] = shape

    def set_joined(self, value: ir.Value, first: ir.Value, second: ir.Value) -> None:
        """``value`` is one of two others (an If's branches): the sizes they share, by axis."""
        left, right = self.shape(first), self.shape(second)
        if left is None or right is None or len(left) != len(right):
            self.shapes[value] = None
        else:
            self.shapes[value] = tuple(a if a == b else None for a, b in zip(left, right))


_MISSING = object()
_ELEMENTWISE = shape_rules.BROADCASTING_OPS | shape_rules.SAME_SHAPE_OPS


def _all_known(shapes: Sequence[Shape], elems: Sequence[int | None], inputs: Sequence[ir.Value | None]) -> bool:
    """Whether every given input has a known rank and element type (ONNX can infer then)."""
    if len(elems) != len(inputs) or not inputs:
        return False
    return all(v is None or (shapes[i] is not None and elems[i] is not None) for i, v in enumerate(inputs))
_NO_CONSTANTS: list[np.ndarray | None] = []


def callee_output_shapes(formal_types: Sequence[Any], actual_shapes: Sequence[Shape],
                         output_types: Sequence[Any]) -> list[Shape]:
    """The shapes of a scripted callee's outputs at one call: its declared output shapes with
    each symbolic size it shares with an input replaced by the caller's size there
    (``FLOAT["N"] -> FLOAT["N"]`` called on ``FLOAT[5]`` gives ``[5]``); other symbolic
    sizes are the callee's own names and unknown here.  Where the arguments do not have
    the ranks the callee's inputs declare (or those are open), nothing is known.

    >>> callee_output_shapes([ir.TensorType(1, ("N",))], [(5,)], [ir.TensorType(1, ("N", 2))])
    [(5, 2)]
    """
    if not arguments_keep_ranks(actual_shapes, formal_types):
        return [None] * len(output_types)  # the body's ranks differ from its annotations' here
    bound: dict[str, Any] = {}
    for formal, actual in zip(formal_types, actual_shapes):
        if isinstance(formal, ir.TensorType) and formal.shape is not None and actual is not None \
                and len(formal.shape) == len(actual):
            for name, size in zip(formal.shape, actual):
                if isinstance(name, str):
                    bound.setdefault(name, size)
    shapes: list[Shape] = []
    for declared in output_types:
        if not isinstance(declared, ir.TensorType) or declared.shape is None:
            shapes.append(None)
            continue
        shapes.append(tuple(bound.get(d) if isinstance(d, str) else d for d in declared.shape))
    return shapes
