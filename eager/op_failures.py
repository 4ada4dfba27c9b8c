"""Why an eager op call failed, said in the user's terms.

onnxruntime reports a refusal as its C++ status (``[ONNXRuntimeError] : 1 : FAIL :
Non-zero status code returned while running Reshape node. ... reshape_helper.h:91
onnxruntime::ReshapeHelper::ReshapeHelper(...)``) and onnx.reference as numpy's words;
neither names the user's values.  Here the op's own rules are checked on the operands
after a kernel has failed (a call that runs pays nothing): Reshape's element count,
Concat's ranks and non-axis sizes, Conv's channels, Gemm's inner sizes, Gather's
indices, Expand's and Split's sizes, besides the broadcasting and MatMul rules of
:mod:`eager.shape_mismatch`.  Each message names the operands as the user wrote them with
their shapes, and comes with a hint.  A failure no rule explains keeps one sentence of the
backend's reason, with the status prefix, source paths and C++ names taken out; the
backends' full texts stay on the error (``backend_messages``) for debugging.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eager.shape_mismatch import broadcast_mismatch, disagreement

__all__ = ["Operand", "explain", "backend_reason"]

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
    'Reshape: x: [1, 4, 64] has 256 elements; the shape [1, 4, 8, 32] holds 1024'
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
    known = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
    if -1 in sizes:
        if known == 0 or count % known:
            return (f"Reshape: {_named(data)} has {count} elements, which the sizes of {_text(asked)} other than "
                    f"-1 (product {known}) do not divide", hint)
        return None
    if known != count:
        return f"Reshape: {_named(data)} has {count} elements; the shape {_text(asked)} holds {known}", hint
    return None


def _concat(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    tensors = [o for o in operands if o.shape is not None]
    axis = attributes.get("axis")
    if len(tensors) < 2 or not isinstance(axis, int):
        return None
    listed = ", ".join(_named(o) for o in tensors)
    first = tensors[0]
    rank = len(first.shape or ())
    for other in tensors[1:]:
        if len(other.shape or ()) != rank:
            return (f"Concat: {_named(first)} vs {_named(other)}: rank {rank} vs rank {len(other.shape or ())}",
                    "Concat joins tensors of one rank; add the missing axis with op.Unsqueeze or x[:, None]")
    if not -rank <= axis < rank:
        return (f"Concat: axis {axis} is out of range for {listed} (rank {rank})",
                f"the axis of Concat is in [-{rank}, {rank - 1}]")
    joined = axis % rank
    for other in tensors[1:]:
        differing = [a for a in range(rank) if a != joined and (first.shape or ())[a] != (other.shape or ())[a]]
        if differing:
            where = differing[0]
            hint = f"tensors joined on axis {axis} must have the same size on every other axis"
            if len(differing) == 1 and (first.shape or ())[joined] == (other.shape or ())[joined]:
                hint += f" (they differ only on axis {where}: did you mean axis={where}?)"
            return (f"Concat on axis {axis}: {_named(first)} vs {_named(other)}: axis {where} is "
                    f"{(first.shape or ())[where]} in {first.name} and {(other.shape or ())[where]} in {other.name}",
                    hint)
    return None


def _conv(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None or operands[1].shape is None:
        return None
    x, w = operands[0], operands[1]
    x_shape, w_shape = x.shape or (), w.shape or ()
    layout = "[batch, channels, spatial...]"
    if len(x_shape) < 3:
        return (f"Conv: {_named(x)} has rank {len(x_shape)}; Conv needs at least 3 axes",
                f"Conv reads its input as {layout}: add the batch axis with op.Unsqueeze(x, [0])")
    if len(w_shape) != len(x_shape):
        return (f"Conv: {_named(x)} vs {_named(w)}: rank {len(x_shape)} vs rank {len(w_shape)}",
                f"the weight is [out channels, in channels / group, kernel...] with one kernel size per spatial "
                f"axis of the input {layout}")
    group = int(attributes.get("group", 1))
    if x_shape[1] != w_shape[1] * group:
        return (f"Conv: {_named(x)} vs {_named(w)}: {x.name} has {x_shape[1]} channels (axis 1); {w.name} takes "
                f"{w_shape[1]} x group {group} = {w_shape[1] * group}",
                "the weight is [out channels, in channels / group, kernel...]: check the layer's in_channels "
                "and that the input is channels-first")
    if len(operands) > 2 and operands[2].shape is not None and operands[2].shape != (w_shape[0],):
        return (f"Conv: the bias {_named(operands[2])} does not match the {w_shape[0]} output channels of {w.name}",
                "the bias has one value per output channel (axis 0 of the weight)")
    return None


def _gemm(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None or operands[1].shape is None:
        return None
    a, b = operands[0], operands[1]
    if len(a.shape or ()) != 2 or len(b.shape or ()) != 2:
        bad = a if len(a.shape or ()) != 2 else b
        return f"Gemm: {_named(bad)} has rank {len(bad.shape or ())}; Gemm multiplies matrices", \
            "use MatMul (x @ w) for batched inputs, or flatten with op.Reshape"
    a_axis = 0 if attributes.get("transA", 0) else 1
    b_axis = 1 if attributes.get("transB", 0) else 0
    if (a.shape or ())[a_axis] != (b.shape or ())[b_axis]:
        return (f"Gemm: {_named(a)} vs {_named(b)}: axis {a_axis} of {a.name} is {(a.shape or ())[a_axis]}, "
                f"axis {b_axis} of {b.name} is {(b.shape or ())[b_axis]} (transA={1 - a_axis}, transB={b_axis})",
                "Gemm computes A' @ B' with A' = A.T when transA=1 and B' = B.T when transB=1; a torch Linear "
                "weight [out, in] needs transB=1")
    return None


def _gather(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None:
        return None
    data, indices = operands[0], operands[1].integers()
    shape, axis = data.shape or (), int(attributes.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return (f"Gather: axis {axis} is out of range for {_named(data)}",
                f"the axis of Gather is in [-{len(shape)}, {len(shape) - 1}]")
    size = shape[axis]
    outside = [i for i in indices or () if not -size <= i < size]
    if outside:
        return (f"Gather: index {outside[0]} is out of range for axis {axis} of {_named(data)} (size {size})",
                f"indices on an axis of size {size} are in [-{size}, {size - 1}]")
    return None


def _expand(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if len(operands) < 2 or operands[0].shape is None:
        return None
    asked = operands[1].integers()
    if asked is None:
        return None
    found = broadcast_mismatch(operands[0].shape or (), asked, operands[0].name, "the shape", "Expand")
    if found is None:
        return None
    return found[0], "Expand broadcasts: each size of the input must equal the new size or be 1"


def _split(operands: Sequence[Operand], attributes: dict[str, Any]) -> Explanation | None:
    if not operands or operands[0].shape is None:
        return None
    data, shape, axis = operands[0], operands[0].shape or (), int(attributes.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return (f"Split: axis {axis} is out of range for {_named(data)}",
                f"the axis of Split is in [-{len(shape)}, {len(shape) - 1}]")
    sizes = operands[1].integers() if len(operands) > 1 else None
    if sizes is not None and sum(sizes) != shape[axis]:
        return (f"Split: the sizes {_text(sizes)} add up to {sum(sizes)}, axis {axis} of {_named(data)} is "
                f"{shape[axis]}", "the split sizes must add up to the size of the axis split")
    return None


_RULES: dict[str, Callable[[Sequence[Operand], dict[str, Any]], Explanation | None]] = {
    "Reshape": _reshape, "Concat": _concat, "Conv": _conv, "Gemm": _gemm, "Gather": _gather,
    "Expand": _expand, "Split": _split,
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
