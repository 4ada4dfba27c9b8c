"""Shape rules of Gemm, Conv and ConvTranspose: the ops whose weight's layout an attribute sets.

A fully connected or convolution layer lowers to one of these ops, and the mistakes
their static sizes prove are about the weight: Gemm's ``transA``/``transB`` decide which
axes of A and B meet, Conv's ``group`` how many input channels each filter reads, and
ConvTranspose's weight is laid out the other way round.  :mod:`dsl.shape_rules` (which
asks these rules from its ``infer``, for the compiler and eager mode alike) keeps the
rules of the ops without a weight.  Like every rule there, these refuse only what static
sizes prove: a symbolic size may be anything.

>>> class Call:  # what dsl.shape_rules hands a rule
...     op_type, shapes, names, attributes = "Gemm", [(2, 3), (4, 3)], ["x", "w"], {"transB": 1}
...     shape = lambda self, i: self.shapes[i] if i < len(self.shapes) else None
...     name = lambda self, i: self.names[i]
...     operand = lambda self, i: f"{self.names[i]}: {shape_text(self.shapes[i])}"
...     attribute = lambda self, name, default=None: self.attributes.get(name, default)
...     fail = lambda self, detail, hint: ValueError(f"{self.op_type}: {detail}")
>>> GEMM_CONV_RULES["Gemm"](Call())
[(2, 4)]
>>> Call.attributes = {}  # the same weight, not transposed
>>> GEMM_CONV_RULES["Gemm"](Call())
Traceback (most recent call last):
...
ValueError: Gemm: x: [2, 3] vs w: [4, 3]: axis 1 of x is 3, axis 0 of w is 4 (transA=0, transB=0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dsl.shape_rules_inputs import RuleCall, fits_into
from dsl.shape_sizes import Dim, Shape, shape_text
from dsl.shape_sizes import differ as _differ
from dsl.shape_sizes import is_static as _static

__all__ = ["GEMM_CONV_RULES"]

def _gemm(call: RuleCall) -> list[Shape]:
    a, b = call.shape(0), call.shape(1)
    for index, shape in ((0, a), (1, b)):
        if shape is not None and len(shape) != 2:
            raise call.fail(f"{call.operand(index)} has rank {len(shape)}, but Gemm multiplies matrices (rank 2)",
                            "use op.MatMul (or x @ w) for inputs with batch axes, or reshape them to [M, K]")
    if a is None or b is None:
        return [None]
    trans_a, trans_b = bool(call.attribute("transA", 0)), bool(call.attribute("transB", 0))
    inner_a, inner_b = (0 if trans_a else 1), (1 if trans_b else 0)
    if _differ(a[inner_a], b[inner_b]):
        raise call.fail(
            f"{call.operand(0)} vs {call.operand(1)}: axis {inner_a} of {call.name(0)} is {a[inner_a]}, "
            f"axis {inner_b} of {call.name(1)} is {b[inner_b]} (transA={int(trans_a)}, transB={int(trans_b)})",
            "Gemm multiplies A [M, K] by B [K, N] after the transposes transA/transB ask for; "
            "set transB=1 for a weight stored [N, K]",
        )
    out = (a[1 - inner_a], b[1 - inner_b])
    if call.shape(2) is not None:
        if fits_into(call.shape(2), out) is not None:  # type: ignore[arg-type]
            raise call.fail(f"{call.operand(2)} does not broadcast to the product's {shape_text(out)}",
                            "C is added to A @ B and must broadcast to [M, N]")
    return [out]


def _conv(call: RuleCall) -> list[Shape]:
    x, w = call.shape(0), call.shape(1)
    if x is None or w is None:
        return [None]
    if len(x) < 3:
        raise call.fail(f"{call.operand(0)} has rank {len(x)}, but X is [N, C, spatial...]",
                        "add the batch and channel axes with op.Unsqueeze (or op.Reshape)")
    if len(x) != len(w):
        raise call.fail(f"{call.operand(0)} vs {call.operand(1)}: ranks {len(x)} and {len(w)}",
                        "X is [N, C, spatial...] and W [M, C / group, kernel...], of the same rank")
    group = int(call.attribute("group", 1))
    transposed = call.op_type == "ConvTranspose"
    w_in = 0 if transposed else 1
    expected = w[w_in] if transposed else (w[1] * group if _static(w[1]) else None)  # type: ignore[operator]
    if _differ(x[1], expected):
        layout = "[C, M / group, kernel...]" if transposed else "[M, C / group, kernel...]"
        raise call.fail(
            f"{call.operand(0)} vs {call.operand(1)}: {call.name(0)} has {x[1]} channels (axis 1), "
            f"{call.name(1)} expects {expected}" + (f" ({w[1]} per group x group={group})" if group != 1 and
                                                    not transposed else ""),
            f"the weight of {call.op_type} is {layout}; check the weight or the group attribute",
        )
    out_channels = w[1] * group if transposed and _static(w[1]) else (None if transposed else w[0])  # type: ignore[operator]
    if not transposed and _static(w[0]) and w[0] % group:  # type: ignore[operator]
        raise call.fail(f"{call.operand(1)}: {w[0]} output channels do not split into group={group}",
                        "the number of output channels (axis 0 of W) must be a multiple of group")
    spatial: list[Dim] = [None] * (len(x) - 2)
    if not transposed:
        spatial = _conv_spatial(call, x[2:], w[2:])
    return [(x[0], out_channels, *spatial)]


def _conv_spatial(call: RuleCall, sizes: Sequence[Dim], kernel: Sequence[Dim]) -> list[Dim]:
    count = len(sizes)
    strides = call.attribute("strides") or [1] * count
    dilations = call.attribute("dilations") or [1] * count
    pads = call.attribute("pads") or [0] * (2 * count)
    auto_pad = call.attribute("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    out: list[Dim] = []
    for axis in range(count):
        size, extent = sizes[axis], kernel[axis]
        if not _static(size) or not _static(extent):
            out.append(None)
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-int(size) // int(strides[axis])))  # type: ignore[arg-type]
        elif auto_pad == "VALID":
            span = (int(extent) - 1) * int(dilations[axis]) + 1  # type: ignore[arg-type]
            out.append((int(size) - span) // int(strides[axis]) + 1)  # type: ignore[arg-type]
        else:
            span = (int(extent) - 1) * int(dilations[axis]) + 1  # type: ignore[arg-type]
            padded = int(size) + int(pads[axis]) + int(pads[axis + count])  # type: ignore[arg-type]
            out.append((padded - span) // int(strides[axis]) + 1)
    return out


# The rules by op type, which dsl.shape_rules.infer looks up with its own.
GEMM_CONV_RULES: dict[str, Callable[[RuleCall], list[Shape]]] = {"Gemm": _gemm, "Conv": _conv, "ConvTranspose": _conv}
