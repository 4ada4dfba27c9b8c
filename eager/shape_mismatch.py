"""Which dimensions disagree, when an op fails on the shapes it was given.

onnxruntime reports a shape mismatch as "MatMul dimension mismatch" or "Attempting to
broadcast an axis by a dimension other than 1"; the user wants the two operands, their
shapes and the axis where they disagree, named as in their own source.  The rules are
ONNX's (multidirectional broadcasting, MatMul's numpy semantics), checked on the shapes
only after a kernel has failed, so a call that runs pays nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BROADCASTING_OPS", "broadcast_mismatch", "disagreement"]

# Ops whose inputs broadcast against each other (ONNX "multidirectional broadcasting").
BROADCASTING_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater", "GreaterOrEqual",
    "Less", "LessOrEqual", "Max", "Min", "Mean", "Sum", "Where", "BitShift", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "PRelu",
})

Shape = Sequence[int]


def disagreement(op_type: str, shapes: Sequence[Shape | None], names: Sequence[str]) -> tuple[str, str] | None:
    """``(message, hint)`` naming the operands (``names``, as written by the user) and the
    axis where their ``shapes`` disagree for ``op_type``, or None when they agree."""
    if op_type == "MatMul" and len(shapes) == 2 and shapes[0] is not None and shapes[1] is not None:
        return _matmul(shapes[0], shapes[1], names[0], names[1])
    if op_type in BROADCASTING_OPS:
        known = [(shape, name) for shape, name in zip(shapes, names) if shape is not None]
        for index, (first, first_name) in enumerate(known):
            for second, second_name in known[index + 1:]:
                found = broadcast_mismatch(first, second, first_name, second_name, op_type)
                if found is not None:
                    return found
    return None


def _text(shape: Shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _matmul(a: Shape, b: Shape, a_name: str, b_name: str) -> tuple[str, str] | None:
    if not a or not b:
        return None
    b_axis = -2 if len(b) >= 2 else -1
    if a[-1] != b[b_axis]:
        return (
            f"MatMul: {a_name}: {_text(a)} vs {b_name}: {_text(b)}: axis -1 of {a_name} is {a[-1]}, "
            f"axis {b_axis} of {b_name} is {b[b_axis]}",
            f"a @ b multiplies [..., n, k] by [..., k, m]: the last dimension of {a_name} must equal "
            f"the second-to-last of {b_name} (transpose one with op.Transpose, or check the weight's shape)",
        )
    batch = broadcast_mismatch(a[:-2], b[:-2], a_name, b_name, "MatMul") if len(a) > 2 and len(b) > 2 else None
    if batch is not None:
        return (f"MatMul: {a_name}: {_text(a)} vs {b_name}: {_text(b)}: their batch axes do not broadcast", batch[1])
    return None


def broadcast_mismatch(a: Shape, b: Shape, a_name: str, b_name: str, op_type: str) -> tuple[str, str] | None:
    """``(message, hint)`` naming the last axis where ``a`` and ``b`` do not broadcast, or None."""
    for offset in range(1, min(len(a), len(b)) + 1):
        left, right = a[-offset], b[-offset]
        if left != right and left != 1 and right != 1:
            return (
                f"{op_type}: {a_name}: {_text(a)} vs {b_name}: {_text(b)}: axis -{offset} is {left} in {a_name} "
                f"and {right} in {b_name}",
                "broadcasting lines shapes up from the last axis; each pair of dimensions must be equal "
                "or one of them 1 (insert an axis with x[:, None] or op.Unsqueeze)",
            )
    return None
