"""What each Python operator means in ONNX, shared by the compiler and eager mode.

Both ``@script`` (which sees ``a + b`` in the ``ast``) and eager tensors (whose ``__add__``
runs at call time) read these tables, so an operator cannot mean one thing in the
exported graph and another while debugging.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsl import types

__all__ = ["OpSpelling", "BINARY", "UNARY", "COMPARE", "literal_elem_type", "binary_spelling"]


@dataclass(frozen=True, slots=True)
class OpSpelling:
    """``op_type`` applied to the operands; ``negate`` wraps the result in ``Not``
    (``!=`` is ``Not(Equal)``); ``swap`` exchanges the operands (``a > b`` stays
    ``Greater``, but ``rsub`` style reflection happens in eager code, not here)."""

    op_type: str
    negate: bool = False
    attributes: tuple[tuple[str, int], ...] = ()


# ast operator class name -> ONNX op.  ``%`` is ONNX Mod with fmod=0 (the sign of the
# divisor, as in Python) for integers; ONNX allows only fmod=1 for floats, which is C's
# fmod — :func:`binary_spelling` picks by element type and the difference is documented.
BINARY: dict[str, OpSpelling] = {
    "Add": OpSpelling("Add"),
    "Sub": OpSpelling("Sub"),
    "Mult": OpSpelling("Mul"),
    "Div": OpSpelling("Div"),
    "MatMult": OpSpelling("MatMul"),
    "Pow": OpSpelling("Pow"),
    "Mod": OpSpelling("Mod"),
    "BitAnd": OpSpelling("And"),
    "BitOr": OpSpelling("Or"),
    "BitXor": OpSpelling("Xor"),
}

UNARY: dict[str, OpSpelling] = {
    "USub": OpSpelling("Neg"),
    "Invert": OpSpelling("Not"),
    "Not": OpSpelling("Not"),
    "UAdd": OpSpelling("Identity"),
}

COMPARE: dict[str, OpSpelling] = {
    "Eq": OpSpelling("Equal"),
    "NotEq": OpSpelling("Equal", negate=True),
    "Lt": OpSpelling("Less"),
    "LtE": OpSpelling("LessOrEqual"),
    "Gt": OpSpelling("Greater"),
    "GtE": OpSpelling("GreaterOrEqual"),
}

_FLOATING = {
    types.FLOAT.enum, types.DOUBLE.enum, types.FLOAT16.enum, types.BFLOAT16.enum,
}
_BITWISE_INTS = {
    types.INT8.enum, types.INT16.enum, types.INT32.enum, types.INT64.enum,
    types.UINT8.enum, types.UINT16.enum, types.UINT32.enum, types.UINT64.enum,
}


def binary_spelling(ast_op: str, elem_type: int | None) -> OpSpelling:
    """The ONNX spelling of a binary operator for operands of ``elem_type``.

    ``&``, ``|``, ``^`` are logical on BOOL and bitwise on integers; ``%`` on floats
    needs ``fmod=1``.  Raises ``KeyError`` for an operator with no ONNX meaning.
    """
    spelling = BINARY[ast_op]
    if ast_op == "Mod" and elem_type in _FLOATING:
        return OpSpelling("Mod", attributes=(("fmod", 1),))
    if ast_op in ("BitAnd", "BitOr", "BitXor") and elem_type in _BITWISE_INTS:
        return OpSpelling({"BitAnd": "BitwiseAnd", "BitOr": "BitwiseOr", "BitXor": "BitwiseXor"}[ast_op])
    return spelling


def unary_spelling(ast_op: str, elem_type: int | None) -> OpSpelling:
    """``~x`` is logical Not on BOOL and BitwiseNot on integers; ``-x`` is Neg."""
    if ast_op == "Invert" and elem_type in _BITWISE_INTS:
        return OpSpelling("BitwiseNot")
    return UNARY[ast_op]


def literal_elem_type(value: object, other_elem_type: int | None) -> int | None:
    """The element type a Python number literal takes beside a tensor of ``other_elem_type``.

    A literal adopts the tensor's type (``x * 2`` with FLOAT16 ``x`` is FLOAT16 2), so no
    CastLike is needed when the type is known; with an unknown partner the caller emits
    ``CastLike``.  A float literal beside an integer tensor keeps FLOAT (ONNX would reject
    the mix either way, and the type check reports it).
    """
    if other_elem_type is None:
        return None
    if isinstance(value, bool):
        return other_elem_type if other_elem_type == types.BOOL.enum else types.BOOL.enum
    if isinstance(value, float) and other_elem_type not in _FLOATING:
        return types.FLOAT.enum
    return other_elem_type
