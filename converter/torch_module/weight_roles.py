"""Which float weights train: decided by the role of the inputs they feed.

An exporter stores more than weights as float initializers: a ``Pow`` exponent, a
``Clip`` bound, ``Resize`` scales, ``Range`` bounds, a quantization scale, the epsilon a
normalisation adds before a square root.  Gradient descent on those is wrong (the
exponent's gradient is NaN wherever the base is negative: one SGD step turns every
output into NaN) or meaningless (a shape).  A float weight is a parameter unless every
use of it is in such a role; it is then a buffer, written back unchanged, unless the
caller names it in ``to_torch(..., trainable=[...])``.

Roles by (op type, input index), for ai.onnx ops:

- ``Pow`` 1 (exponent); ``Clip`` 1, 2 (bounds); ``Resize`` 1, 2 and ``Upsample`` 1
  (roi, scales); ``Range`` 0, 1, 2; ``Pad`` 2 (the pad value); ``Dropout`` 1 (ratio);
  ``QuantizeLinear``/``DequantizeLinear`` 1, 2 (scale, zero point);
- an epsilon: a one-element weight added (``Add``) to a value whose sum is read only by
  ``Sqrt``, ``Reciprocal``, ``Log``, as a ``Pow`` base or as a ``Div`` divisor.

>>> fixed_weights(model.graph)   # doctest: +SKIP
{<Value 'onnx::Pow_3'>}
"""

from __future__ import annotations

from dsl import ir

__all__ = ["fixed_weights", "FIXED_ROLES"]

FIXED_ROLES: frozenset[tuple[str, int]] = frozenset({
    ("Pow", 1), ("Clip", 1), ("Clip", 2), ("Resize", 1), ("Resize", 2), ("Upsample", 1), ("Range", 0),
    ("Range", 1), ("Range", 2), ("Pad", 2), ("Dropout", 1), ("QuantizeLinear", 1), ("QuantizeLinear", 2),
    ("DequantizeLinear", 1), ("DequantizeLinear", 2),
})
# What reads a sum whose one-element addend is an epsilon: (op type, input index or None for any).
_GUARDED = frozenset({("Sqrt", None), ("Reciprocal", None), ("Log", None), ("Pow", 0), ("Div", 1)})


def fixed_weights(graph: ir.Graph, weights: set[ir.Value]) -> set[ir.Value]:
    """The ``weights`` of ``graph`` (its bodies included) every use of which is a role
    that does not train (see the module docstring)."""
    uses: dict[ir.Value, list[tuple[ir.Node, int]]] = {}
    for node, _ in ir.walk(graph):
        for index, value in enumerate(node.inputs):
            if value is not None:
                uses.setdefault(value, []).append((node, index))
    fixed = set()
    for value in weights:
        found = uses.get(value, [])
        if found and all(_fixed_role(node, index, value, uses) for node, index in found):
            fixed.add(value)
    return fixed


def _fixed_role(node: ir.Node, index: int, value: ir.Value, uses: dict[ir.Value, list[tuple[ir.Node, int]]]) -> bool:
    if node.domain not in ("", "ai.onnx") or node.callee is not None:
        return False
    if (node.op_type, index) in FIXED_ROLES:
        return True
    return node.op_type == "Add" and _one_element(value) and bool(node.outputs) and _guarded(node.outputs[0], uses)


def _one_element(value: ir.Value) -> bool:
    tensor = value.initializer
    if tensor is None and value.producer is not None:
        (attr,) = value.producer.attributes.values() if len(value.producer.attributes) == 1 else (None,)
        tensor = attr.value if attr is not None and attr.kind == ir.AttrKind.TENSOR else None
    return tensor is not None and tensor.array.size == 1


def _guarded(total: ir.Value, uses: dict[ir.Value, list[tuple[ir.Node, int]]]) -> bool:
    readers = uses.get(total, [])
    return bool(readers) and all(
        reader.domain in ("", "ai.onnx") and ((reader.op_type, None) in _GUARDED or (reader.op_type, index) in _GUARDED)
        for reader, index in readers)
