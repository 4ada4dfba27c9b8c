"""Why an eager op call failed, said in the user's terms.

onnxruntime reports a refusal as its C++ status (``[ONNXRuntimeError] : 1 : FAIL :
Non-zero status code returned while running Reshape node. ... reshape_helper.h:91
onnxruntime::ReshapeHelper::ReshapeHelper(...)``) and onnx.reference as numpy's words;
neither names the user's values.  Here the op's own rules are checked on the operands
after a kernel has failed (a call that runs pays nothing): first the compiler's rules
(:mod:`dsl.shape_rules` through :mod:`eager.shape_mismatch`: broadcasting, MatMul, Gemm,
Conv, Reshape's element count, Concat, Expand, the axes of Gather and Split, and the
inputs beside the main operand in :mod:`dsl.shape_rules_inputs`: a bias, a scale, a
loss's target), then the rules here for what those leave open: a Reshape shape with two
-1, a negative size or a 0 past the input's rank, Gemm on a non-matrix, Gather's indices
and Split's sizes.  Each message names the operands as the user wrote them with their
shapes, and comes with a hint.  A failure no rule explains keeps one sentence of the
backend's reason, with the status prefix, source paths and C++ names taken out; the
backends' full texts stay on the error (``backend_messages``) for debugging.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from dsl.errors import DslError
from dsl.node_inference import infer_node
from eager.shape_mismatch import disagreement

__all__ = ["Operand", "explain", "backend_reason", "inference_refusal"]

Shape = tuple[int, ...]
Explanation = tuple[str, str]  # (message, hint)


@dataclass(frozen=True)
class Operand:
    """One input of the failed call: the user's text for it, its shape (None for a
    sequence or an omitted input) and its value (the array, for the rules that read one)."""

    name: str
    shape: Shape | None
    value: Any = None

    def integers(self) -> list[int] | None:
        """The value as a list of ints (a shape, axes, indices), or None when it is none."""
        if self.shape is None or not isinstance(self.value, np.ndarray) or self.value.dtype.kind not in "iu":
            return None
        return [int(v) for v in self.value.reshape(-1)]


def _text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _named(operand: Operand) -> str:
    return f"{operand.name}: {_text(operand.shape or ())}"


def explain(op_type: str, operands: Sequence[Operand], attributes: dict[str, Any],
            version: int = 1000) -> Explanation | None:
    """``(message, hint)`` saying which operands of ``op_type`` do not fit its rules and why,
    or None when no rule explains the failure.  :mod:`dsl.shape_rules` (the compiler's rules,
    at opset ``version``) are asked first, then the rules here for what they leave open.

    >>> x = Operand("x", (1, 4, 64), None)
    >>> shape = Operand("[1, 4, 8, 32]", (4,), np.array([1, 4, 8, 32]))
    >>> explain("Reshape", [x, shape], {})[0]
    'Reshape: x: [1, 4, 64] has 256 elements, which cannot be reshaped to [1, 4, 8, 32] (1024 elements)'
    """
    shared = disagreement(op_type, [o.shape for o in operands], [o.name for o in operands], attributes,
                          [o.value for o in operands], version)
    if shared is not None:  # the compiler's own rule: the same message eagerly and compiled
        return shared
    rule = _RULES.get(op_type)
    return rule(operands, attributes) if rule is not None else None


def _reshape(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None:
        return None
    data, asked = operands[0], operands[1].integers()
    if asked is None:
        return None
    shape, count = data.shape or (), int(np.prod(data.shape or (), dtype=np.int64))
    hint = (f"the new shape must hold the {count} elements of {data.name}: give -1 for the one size to infer "
            f"and 0 to keep a size of {data.name}")
    if asked.count(-1) > 1:
        return f"Reshape: the shape {_text(asked)} has more than one -1", hint
    sizes = list(asked)
    if not attributes.get("allowzero", 0):
        for axis, size in enumerate(asked):
            if size == 0:
                if axis >= len(shape):
                    return (f"Reshape: the shape {_text(asked)} keeps axis {axis} of {_named(data)} (a 0 there), "
                            f"which has no axis {axis}", hint)
                sizes[axis] = shape[axis]
    if any(size < -1 for size in sizes):
        return f"Reshape: the shape {_text(asked)} has a negative size other than -1", hint
    return None  # (a count the sizes do not hold: dsl.shape_rules said so first)


def _gemm(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    """A non-matrix operand alone: dsl.shape_rules answers first for the inner sizes."""
    if len(operands) < 2 or operands[0].shape is None or operands[1].shape is None:
        return None
    bad = next((o for o in operands[:2] if len(o.shape or ()) != 2), None)
    if bad is None:
        return None
    return (f"Gemm: {_named(bad)} has rank {len(bad.shape or ())}; Gemm multiplies matrices",
            "use MatMul (x @ w) for batched inputs, or flatten with op.Reshape")


def _gather(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None:
        return None
    data, indices = operands[0], operands[1].integers()
    shape, axis = data.shape or (), int(attributes.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return None  # (dsl.shape_rules named the axis out of range first)
    size = shape[axis]
    outside = [i for i in indices or () if not -size <= i < size]
    if outside:
        return (f"Gather: index {outside[0]} is out of range for axis {axis} of {_named(data)} (size {size})",
                f"indices on an axis of size {size} are in [-{size}, {size - 1}]")
    return None


def _split(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if not operands or operands[0].shape is None:
        return None
    data, shape, axis = operands[0], operands[0].shape or (), int(attributes.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return None  # (dsl.shape_rules named the axis out of range first)
    sizes = operands[1].integers() if len(operands) > 1 else None
    if sizes is not None and sum(sizes) != shape[axis]:
        return (f"Split: the sizes {_text(sizes)} add up to {sum(sizes)}, axis {axis} of {_named(data)} is "
                f"{shape[axis]}", "the split sizes must add up to the size of the axis split")
    return None


def inference_refusal(schema: Any, n_outputs: int, arrays: Sequence[Any], signature: Sequence[Any],
                      protos: Sequence[Any]) -> Explanation | None:
    """``(message, hint)`` where ONNX's shape inference refuses a node of ``schema`` with the
    call's element types (``signature``), shapes (``arrays``) and attributes, in the words
    the compiler uses (:func:`dsl.node_inference.infer_node`), else None.  Calls with
    literals still undecided, sequences, optionals or subgraphs are left to the backends.

    >>> import onnx.defs, onnx.helper as oh
    >>> flatten = onnx.defs.get_schema("Flatten", 21)
    >>> inference_refusal(flatten, 1, [np.zeros((2, 3))], [(1, 2)], [oh.make_attribute("axis", 5)])[0]
    "Flatten: Invalid value(5) for attribute 'axis'"
    """
    if any(sig is not None and (not isinstance(sig, tuple) or sig[0] in ("seq", "opt")) for sig in signature) or any(
            proto.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for proto in protos):
        return None
    names = ["" if sig is None else f"i{index}" for index, sig in enumerate(signature)]
    types = {name: oh.make_tensor_type_proto(sig[0], list(np.shape(array)))
             for name, sig, array in zip(names, signature, arrays) if sig is not None}
    node = oh.make_node(schema.name, names, [f"o{index}" for index in range(n_outputs)])
    node.attribute.extend(protos)
    try:
        infer_node(schema, node, types)
    except DslError as refused:
        return refused.message, refused.hint
    return None


_RULES: dict[str, Callable[[Sequence[Operand], dict[str, Any]], Explanation | None]] = {
    "Reshape": _reshape, "Gemm": _gemm, "Gather": _gather, "Split": _split,
}

# onnxruntime's status prefix, up to the message it carries.
_ORT_STATUS = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : (?:.*?Status Message: )?", re.S)
# A C++ source position: what starts the text of an ORT_ENFORCE or ORT_THROW.
_CPP_PLACE = re.compile(r"^\S+\.(?:h|cc|cpp|hpp):\d+ ")
_NODE_PREFIX = re.compile(r"^(?:Fatal error: |Node \([^)]*\) Op \([^)]*\) (?:\[\w+\] )?)")
_ENFORCED = " was false. "


def backend_reason(text: str) -> str:
    """The sentence of a backend's error that says what is wrong, without the status
    prefix, source positions, C++ signatures, failed conditions or node names.

    >>> backend_reason("[ONNXRuntimeError] : 1 : FAIL : Node () Op (Conv) [ShapeInferenceError] "
    ...                "Input tensor must have at least 3 dimensions")
    'Input tensor must have at least 3 dimensions'
    """
    reason = _NODE_PREFIX.sub("", _ORT_STATUS.sub("", text.strip()))
    place = _CPP_PLACE.match(reason)
    if place is not None:
        reason = reason[place.end():]
        if _ENFORCED in reason:  # ("<signature> <condition> was false. <message>")
            reason = reason.rpartition(_ENFORCED)[2]
        else:
            reason = _after_signature(reason)
    lines = reason.strip().splitlines()
    return (lines[0] if lines else text.strip()).rstrip(".")


def _after_signature(text: str) -> str:
    """``text`` past a leading C++ function signature (its balanced parentheses, then an
    optional ``const`` and ``[with ...]`` clause)."""
    opened = text.find("(")
    if opened < 0:
        return text
    depth, index = 0, opened
    for index in range(opened, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            break
    rest = text[index + 1:].lstrip()
    rest = rest[len("const"):].lstrip() if rest.startswith("const ") else rest
    if rest.startswith("[with "):
        depth = 0
        for index, char in enumerate(rest):
            depth += {"[": 1, "]": -1}.get(char, 0)
            if depth == 0:
                rest = rest[index + 1:].lstrip()
                break
    return rest
