"""What each Python operator means in ONNX, and which ONNX op reads back as which operator.

Both ``@script`` (which sees ``a + b`` in the ``ast``) and eager tensors (whose ``__add__``
runs at call time) read these tables, so an operator cannot mean one thing in the
exported graph and another while debugging.  The Python back end reads the inverse
(:data:`PYTHON_BINARY`, :data:`PYTHON_UNARY`) to write ``a + b`` for an Add.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsl import types

__all__ = [
    "OpSpelling", "BINARY", "UNARY", "COMPARE", "SYMBOLS", "PYTHON_BINARY", "PYTHON_UNARY",
    "literal_elem_type", "binary_spelling", "unary_spelling", "unsupported_operator",
]


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

# The Python spelling of each ast operator name above.
SYMBOLS: dict[str, str] = {
    "Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "MatMult": "@", "Pow": "**", "Mod": "%",
    "BitAnd": "&", "BitOr": "|", "BitXor": "^", "USub": "-", "Invert": "~", "Not": "not ", "UAdd": "+",
    "Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=",
}


def _inverse(tables: tuple[dict[str, OpSpelling], ...], left_out: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for table in tables:
        for ast_op, spelling in table.items():
            if ast_op not in left_out and not spelling.negate and not spelling.attributes:
                found.setdefault(spelling.op_type, SYMBOLS[ast_op])
    return found


# ONNX op -> the Python operator that ``@script`` compiles back into that very op (no
# attributes) whatever element types the op accepts: what a back end may write as
# ``a + b`` or ``-a``.  Left out: ``%`` (Mod's fmod follows the element type), ``!=``
# (two nodes), ``+a`` (Identity) and ``not a`` (``~a`` is the same Not).
PYTHON_BINARY: dict[str, str] = _inverse((BINARY, COMPARE), left_out=("Mod",))
PYTHON_UNARY: dict[str, str] = _inverse((UNARY,), left_out=("UAdd", "Not"))

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


# Python operators with no ONNX operator: the symbol and what to write instead.
_UNSUPPORTED: dict[str, tuple[str, str]] = {
    "FloorDiv": ("//", "use op.Floor(a / b) for floats or a / b for integers (truncating)"),
    "LShift": ("<<", "use op.BitShift(a, b, direction='LEFT'/'RIGHT')"),
    "RShift": (">>", "use op.BitShift(a, b, direction='LEFT'/'RIGHT')"),
}


def unsupported_operator(ast_op: str) -> tuple[str, str]:
    """(message, hint) for a Python operator on tensors that has no ONNX operator, in the
    words the compiler and eager mode both use.

    >>> unsupported_operator("RShift")[0]
    'the operator >> is not supported on tensors'
    """
    symbol, hint = _UNSUPPORTED.get(ast_op, (ast_op, "use the ONNX op (op.X) that computes it"))
    return f"the operator {symbol} is not supported on tensors", hint
