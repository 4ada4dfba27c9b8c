"""Shape arithmetic kept as Python ints: ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``.

Exporters compute a reshape target from the input's runtime shape with small int64
tensor ops.  Run as tensor ops, each costs a dispatch, and a kernel reading the result
back (``Reshape`` needs Python ints) is a data-dependent read that ``torch.export`` and
``torch.compile`` cannot trace with a dynamic batch.  Instead the builder follows such
values as :class:`ShapeValue` s: lists of sizes that are Python ints or fx nodes
yielding ints (``x.shape[0]``, a symbolic size under tracing).  A value stays a shape
value only through the ops below, on int64 data; a kernel reading it at a shape
operand (Reshape's shape, Expand's shape, ...) gets the list, and any other reader a
tensor made from it (the same int64 tensor ONNX defines).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.fx

from converter.torch_module.kernels import shapes
from dsl import ir

if TYPE_CHECKING:
    from converter.torch_module.graph_builder import GraphBuilder

__all__ = ["ShapeValue", "fold"]

_INT64 = 7
_LIMIT = 64  # elements of an integer constant taking part


@dataclass(frozen=True)
class ShapeValue:
    """An int64 tensor of rank 0 (``scalar``) or 1 whose elements are known as Python ints
    or fx nodes: ``parts`` when its length is known when converting, else ``whole``, an fx
    node yielding the sizes as a tuple.  ``origin`` is the tensor whose shape it came
    from (a tensor made from the value goes on its device); ``None`` for a value that
    is all constants."""

    parts: tuple[Any, ...] | None
    whole: torch.fx.Node | None
    scalar: bool
    origin: torch.fx.Node | None

    def operand(self) -> Any:
        """What a kernel's shape operand receives: an int-like (scalar) or a sequence."""
        if self.parts is None:
            return self.whole
        return self.parts[0] if self.scalar else list(self.parts)


def fold(builder: GraphBuilder, node: ir.Node) -> bool:
    """Follow ``node`` as shape arithmetic when its inputs allow; False leaves it to a kernel."""
    folder = _FOLDERS.get(node.op_type)
    if folder is None or node.callee is not None or len(node.outputs) != 1 or not node.outputs[0].name:
        return False
    if node.op_type != "Shape" and not any(value in builder.shapes for value in node.inputs if value is not None):
        if not (node.inputs and node.inputs[0] is not None and _lookup(builder, node.inputs[0]) is not None):
            return False
    result = folder(builder, node)
    if result is None:
        return False
    builder.shapes[node.outputs[0]] = result
    return True


def _lookup(builder: GraphBuilder, value: ir.Value | None) -> ShapeValue | None:
    """The shape value ``value`` holds: one followed so far, or a small int64 constant."""
    if value is None:
        return None
    found = builder.shapes.get(value)
    if found is not None:
        return found
    array = builder.table.constant(value)
    if array is None or array.dtype != np.int64:
        return None
    known = builder.table.folded(value, _LIMIT)
    if known is None:
        return None
    return ShapeValue((known,), None, True, None) if isinstance(known, int) else ShapeValue(known, None, False, None)


def _int_attr(node: ir.Node, name: str, default: int | None) -> Any:
    found = node.attributes.get(name)
    if found is None:
        return default
    return found.value if found.kind in (ir.AttrKind.INT, ir.AttrKind.INTS) and found.ref_attr_name is None else None


def _constant(builder: GraphBuilder, node: ir.Node, index: int, attribute: str | None = None) -> Any:
    """An integer operand known when converting (input ``index``, or before the opset that
    made it an input, the attribute): an int, a tuple, ``None`` when absent, or ``...``
    when it is not a known constant."""
    value = node.inputs[index] if index < len(node.inputs) else None
    if value is not None:
        found = builder.shapes.get(value)
        if found is not None:  # only a shape value that is all constants is known when converting
            if found.origin is not None or found.parts is None:
                return ...
            return found.parts[0] if found.scalar else found.parts
        folded = builder.table.folded(value, _LIMIT)
        return ... if folded is None else folded
    if attribute is not None and attribute in node.attributes:
        attr = _int_attr(node, attribute, None)
        return ... if attr is None else (tuple(attr) if isinstance(attr, list) else attr)
    return None


def _source(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    """The shape value node's first input holds, when it is a 1-d one."""
    found = _lookup(builder, node.inputs[0] if node.inputs else None)
    return found if found is not None and not found.scalar else None


def _item(builder: GraphBuilder, shape: ShapeValue, index: int) -> Any:
    if shape.parts is not None:
        return shape.parts[index] if -len(shape.parts) <= index < len(shape.parts) else ...
    return builder.graph.call_function(operator.getitem, (shape.whole, index))


def _shape(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    start, end = _int_attr(node, "start", 0), _int_attr(node, "end", None)
    if start is None or (end is None and "end" in node.attributes) or node.inputs[0] is None:
        return None
    tensor = builder.read(node.inputs[0])
    if not isinstance(tensor, torch.fx.Node):
        return None
    whole = builder.graph.call_function(getattr, (tensor, "shape"))
    if start != 0 or end is not None:
        whole = builder.graph.call_function(operator.getitem, (whole, slice(start, end)))
    return ShapeValue(None, whole, False, tensor)


def _gather(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    shape, indices = _source(builder, node), _constant(builder, node, 1)
    if shape is None or _int_attr(node, "axis", 0) not in (0, -1) or indices is ... or indices is None:
        return None
    if isinstance(indices, int):
        item = _item(builder, shape, indices)
        return None if item is ... else ShapeValue((item,), None, True, shape.origin)
    items = tuple(_item(builder, shape, index) for index in indices)
    return None if ... in items else ShapeValue(items, None, False, shape.origin)


def _unsqueeze(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    found = _lookup(builder, node.inputs[0])
    axes = _constant(builder, node, 1, "axes")
    if found is None or not found.scalar or axes not in ((0,), (-1,), 0, -1):
        return None
    return ShapeValue(found.parts, None, False, found.origin)


def _squeeze(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    shape, axes = _source(builder, node), _constant(builder, node, 1, "axes")
    if shape is None or shape.parts is None or len(shape.parts) != 1 or axes not in ((0,), (-1,), 0, -1, None):
        return None
    return ShapeValue(shape.parts, None, True, shape.origin)


def _concat(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    if _int_attr(node, "axis", None) not in (0, -1):
        return None
    pieces: list[Any] = []  # tuples of known parts, or fx nodes of unknown length
    origin = None
    for value in node.inputs:
        found = _lookup(builder, value)
        if found is None or found.scalar:
            return None
        pieces.append(found.parts if found.parts is not None else found.whole)
        origin = origin or found.origin
    if all(isinstance(piece, tuple) for piece in pieces):
        return ShapeValue(tuple(item for piece in pieces for item in piece), None, False, origin)
    whole = pieces[0]
    for piece in pieces[1:]:
        whole = builder.graph.call_function(operator.add, (whole, piece))
    return ShapeValue(None, whole, False, origin)


def _slice(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    shape = _source(builder, node)
    starts, ends = _constant(builder, node, 1, "starts"), _constant(builder, node, 2, "ends")
    axes, steps = _constant(builder, node, 3, "axes"), _constant(builder, node, 4)
    one = (isinstance(starts, tuple) and len(starts) == 1 and isinstance(ends, tuple) and len(ends) == 1
           and axes in (None, (0,), (-1,)) and (steps is None or (isinstance(steps, tuple) and len(steps) == 1)))
    if shape is None or not one or steps == (0,):
        return None
    bounds = (starts[0], ends[0], 1 if steps is None else steps[0])  # (clamped as the Slice kernel does)
    if shape.parts is not None:
        return ShapeValue(shapes.slice_sequence(shape.parts, *bounds), None, False, shape.origin)
    return ShapeValue(None, builder.graph.call_function(shapes.slice_sequence, (shape.whole, *bounds)), False,
                      shape.origin)


def _same(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    if node.op_type == "Cast" and _int_attr(node, "to", None) != _INT64:
        return None
    return _lookup(builder, node.inputs[0])


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "Div": shapes.truncated_division,
}


def _arithmetic(builder: GraphBuilder, node: ir.Node) -> ShapeValue | None:
    """Element-wise int64 arithmetic of two shape values or a shape value and a constant."""
    if len(node.inputs) != 2 or set(node.attributes) - {"broadcast"} or _int_attr(node, "broadcast", 0):
        return None
    operands: list[tuple[tuple[Any, ...], bool]] = []
    origin = None
    for value in node.inputs:
        found = _lookup(builder, value)
        if found is None or found.parts is None:
            return None
        operands.append((found.parts, found.scalar))
        origin = origin or found.origin
    (left, left_scalar), (right, right_scalar) = operands
    if (len(left) != len(right) and len(left) != 1 and len(right) != 1):
        return None
    if (left_scalar and not right_scalar and len(right) == 0) or (right_scalar and not left_scalar and len(left) == 0):
        return ShapeValue((), None, False, origin)
    count = max(len(left), len(right))
    combine = _ARITHMETIC[node.op_type]
    items = []
    for index in range(count):
        a, b = left[index if len(left) > 1 else 0], right[index if len(right) > 1 else 0]
        if isinstance(a, int) and isinstance(b, int):
            if node.op_type == "Div" and b == 0:
                return None
            items.append(combine(a, b))
        else:
            items.append(builder.graph.call_function(combine, (a, b)))
    return ShapeValue(tuple(items), None, left_scalar and right_scalar, origin)


_FOLDERS: dict[str, Callable[[GraphBuilder, ir.Node], ShapeValue | None]] = {
    "Shape": _shape, "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat,
    "Slice": _slice, "Cast": _same, "Identity": _same, **{op: _arithmetic for op in _ARITHMETIC},
}


def as_tensor(builder: GraphBuilder, shape: ShapeValue, name: str) -> torch.fx.Node:
    """The int64 tensor ONNX defines for ``shape``, for a reader wanting a tensor (a
    constant one is a buffer, like any constant)."""
    if shape.origin is None:
        array = np.array(shape.parts, dtype=np.int64)
        return builder.get_constant(array.reshape(()) if shape.scalar else array, name)
    return builder.graph.create_node("call_function", shapes.shape_tensor,
                                     (shape.operand(), shape.origin, shape.scalar), name=name)
