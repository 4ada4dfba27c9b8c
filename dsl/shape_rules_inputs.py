"""Static rules on the inputs that ride beside an op's main operand: a convolution's bias,
a normalization's scale, bias and statistics, a loss's target and weight, Gemm's C.

These inputs have fixed ranks and sizes tied to the main operand (one bias value per
output channel; a target one axis shorter than the scores), which ``onnx.checker`` does
not check and onnxruntime refuses only when the model runs (``bias must be a 1D tensor``),
far from the line that built the node.  :mod:`dsl.shape_rules` asks these rules for every
node the compiler builds and for every op eager mode could not run, so a program gets
the same message both ways.  Like the shape rules, a rule refuses only what static sizes
prove: a symbolic size may be anything.

>>> class Call:  # what dsl.shape_rules hands a rule
...     op_type, version, shapes, names, attributes = "Conv", 21, [(1, 4, 8, 8), (6, 4, 3, 3), (1, 6)], ["x", "w", "b"], {}
...     shape = lambda self, i: self.shapes[i] if i < len(self.shapes) else None
...     name = lambda self, i: self.names[i]
...     operand = lambda self, i: f"{self.names[i]}: {shape_text(self.shapes[i])}"
...     attribute = lambda self, name, default=None: self.attributes.get(name, default)
...     fail = lambda self, detail, hint: ValueError(f"{self.op_type}: {detail}")
>>> check_inputs(Call())
Traceback (most recent call last):
...
ValueError: Conv: the bias b: [1, 6] must be 1-D with one value per output channel (6, axis 0 of w), not rank 2
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from dsl.errors import DslTypeError
from dsl.shape_sizes import Dim, shape_text
from dsl.shape_sizes import differ as _differ
from dsl.shape_sizes import is_static as _static
from dsl.shape_sizes import product as _product

__all__ = ["ELEMENT_RULES", "INPUT_RULES", "MODEL_ONLY_RULES", "RuleCall", "check_element_types", "check_inputs",
           "expanded_rank", "fits_into", "shape_text"]

class RuleCall(Protocol):
    """The view of one op application the rules read (``dsl.shape_rules``' call object)."""

    op_type: str
    version: int  # the opset's

    def shape(self, index: int) -> tuple[Dim, ...] | None: ...
    def name(self, index: int) -> str: ...
    def operand(self, index: int) -> str: ...
    def attribute(self, name: str, default: Any = None) -> Any: ...
    def fail(self, detail: str, hint: str) -> Exception: ...


def fits_into(small: Sequence[Dim], large: Sequence[Dim]) -> int | None:
    """The axis of ``small`` (counted from the end, negative) that proves it does not
    broadcast one way into ``large`` (each axis equal to ``large``'s or 1, no more axes),
    0 when it has more axes, or None when it fits as far as the sizes say."""
    if len(small) > len(large):
        return 0
    for axis in range(-1, -len(small) - 1, -1):
        if small[axis] != 1 and _differ(small[axis], large[axis]):
            return axis
    return None


def expanded_rank(data: tuple[Dim, ...], length: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
    """The shape of an Expand of ``data`` to a target computed at run time whose own shape is
    ``length``: its rank when the target's length is static, and the sizes of ``data`` other
    than 1 (the target's size there must be 1 or the same); None when the length is unknown.

    >>> expanded_rank((), (2,)), expanded_rank((3, 1), (3,))
    ((None, None), (None, 3, None))
    """
    if length is None or len(length) != 1 or not _static(length[0]):
        return None
    rank = max(len(data), int(length[0]))  # type: ignore[arg-type]
    out: list[Dim] = [None] * rank
    for axis in range(1, len(data) + 1):
        if _static(data[-axis]) and data[-axis] != 1:
            out[-axis] = data[-axis]
    return tuple(out)


def _one_per(call: RuleCall, index: int, role: str, count: Dim, counted: str, hint: str) -> None:
    """Input ``index`` (absent: nothing to check) must be 1-D of ``count`` values."""
    shape = call.shape(index)
    if shape is None:
        return
    if len(shape) != 1:
        raise call.fail(f"the {role} {call.operand(index)} must be 1-D with one value per {counted}, "
                        f"not rank {len(shape)}", hint)
    if _differ(shape[0], count):
        raise call.fail(f"the {role} {call.operand(index)} has {shape[0]} values, but there are {count} "
                        f"{counted}s", hint)


def _convolution(call: RuleCall) -> None:
    data, weight = call.shape(0), call.shape(1)
    if data is not None and (len(data) < 3 or (weight is not None and len(weight) != len(data))):
        return  # (dsl.shape_rules names the wrong rank of X or W first)
    _convolution_attributes(call)
    _conv_bias(call)


def _convolution_attributes(call: RuleCall) -> None:
    """One stride, dilation and kernel size per spatial axis, two pads."""
    known = call.shape(0) if call.shape(0) is not None else call.shape(1)
    if known is None or len(known) < 3:
        return
    spatial = len(known) - 2
    for name, per_axis in (("strides", 1), ("dilations", 1), ("kernel_shape", 1), ("pads", 2)):
        given = call.attribute(name)
        if given is not None and len(given) != spatial * per_axis:
            source = 0 if call.shape(0) is not None else 1
            raise call.fail(
                f"{name}={list(given)} has {len(given)} values, but {call.operand(source)} has {spatial} spatial "
                f"ax{'i' if spatial == 1 else 'e'}s", f"give {name} {'two values (begin, end) ' if per_axis == 2 else 'one value '}per spatial "
                f"axis: {spatial * per_axis} values" + (" (all the begins, then all the ends)" if per_axis == 2 else ""))


def _conv_bias(call: RuleCall) -> None:
    weight, group = call.shape(1), int(call.attribute("group", 1) or 1)
    count: Dim = None
    if weight is not None and len(weight) >= 2:
        if call.op_type == "Conv":
            count = weight[0]
        elif _static(weight[1]):
            count = int(weight[1]) * group  # type: ignore[arg-type]
    where = "axis 0" if call.op_type == "Conv" else f"axis 1 x group={group}"
    counted = f"output channel ({count}, {where} of {call.name(1)})" if count is not None else "output channel"
    hint = (f"the bias of {call.op_type} holds one value per output channel: shape [{count if count is not None else 'M'}]"
            f"; reshape it with op.Reshape({call.name(2)}, [-1]) or add it after the convolution instead")
    shape = call.shape(2)
    if shape is not None and len(shape) != 1:
        raise call.fail(f"the bias {call.operand(2)} must be 1-D with one value per {counted}, not rank {len(shape)}",
                        hint)
    if shape is not None and _differ(shape[0], count):
        raise call.fail(f"the bias {call.operand(2)} has {shape[0]} values, but {call.name(1)} makes {count} "
                        f"output channels ({where})", hint)


def _channels(data: tuple[Dim, ...]) -> Dim:
    return data[1] if len(data) >= 2 else 1  # (a rank-1 input is [N]: one channel)


def _batch_normalization(call: RuleCall) -> None:
    data = call.shape(0)
    if data is None or not int(call.attribute("spatial", 1)):
        return  # (spatial=0, before opset 9: the statistics are per element, [C, D1, ...])
    channels = _channels(data)
    hint = (f"scale, B, input_mean and input_var of BatchNormalization hold one value per channel (axis 1 of "
            f"{call.name(0)}): shape [{channels}]")
    for index, role in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")):
        _one_per(call, index, role, channels, "channel", hint)


def _instance_normalization(call: RuleCall) -> None:
    data = call.shape(0)
    if data is None:
        return
    if len(data) < 3:
        raise call.fail(f"{call.operand(0)} has rank {len(data)}, but X is [N, C, D1, ...] (rank 3 or more)",
                        "add a spatial axis with op.Unsqueeze(x, [2]), or normalize with op.LayerNormalization")
    hint = f"scale and B of InstanceNormalization hold one value per channel (axis 1 of {call.name(0)}): shape [{data[1]}]"
    _one_per(call, 1, "scale", data[1], "channel", hint)
    _one_per(call, 2, "bias", data[1], "channel", hint)


def _layer_normalization(call: RuleCall) -> None:
    data = call.shape(0)
    if data is None:
        return
    axis = int(call.attribute("axis", -1))
    if not -len(data) <= axis < len(data):
        raise call.fail(f"axis {axis} is out of range for {call.operand(0)} (rank {len(data)})",
                        f"the normalized axes run from axis to the last: axis is in [{-len(data)}, {len(data) - 1}]")
    normalized = data[axis:]
    for index, role in ((1, "scale"), (2, "bias")):
        shape = call.shape(index)
        if shape is None or fits_into(shape, data) is None:
            continue
        raise call.fail(
            f"the {role} {call.operand(index)} does not broadcast to {call.operand(0)}"
            + (" (it has more axes)" if len(shape) > len(data) else ""),
            f"scale and B of {call.op_type} have the normalized shape {shape_text(normalized)} "
            f"(the axes of {call.name(0)} from axis={axis}), or a shape that broadcasts to {call.name(0)}",
        )


def _group_normalization(call: RuleCall) -> None:
    data, groups = call.shape(0), call.attribute("num_groups")
    if groups is None:
        return
    channels = data[1] if data is not None and len(data) >= 2 else None
    if _static(channels) and (int(groups) <= 0 or int(channels) % int(groups)):  # type: ignore[arg-type]
        raise call.fail(f"num_groups={int(groups)} does not divide the {channels} channels of {call.operand(0)} (axis 1)",
                        "the channels are split into num_groups groups of equal size: pick a divisor of the channels")
    # One scale and bias a group (GroupNormalization-18) or a channel (21 on); onnxruntime
    # also takes one value for all, and reads any shape of that many values.
    per_channel = call.version >= 21
    count = channels if per_channel else int(groups)
    if not _static(count):
        return
    for index, role in ((1, "scale"), (2, "bias")):
        shape = call.shape(index)
        size = None if shape is None else _product(shape)
        if size is not None and size not in (1, int(count)):  # type: ignore[arg-type]
            counted = f"{count} channels" if per_channel else f"num_groups={count}"
            raise call.fail(
                f"the {role} {call.operand(index)} holds {size} values, but "
                f"{'from' if per_channel else 'before'} opset 21 GroupNormalization takes one value a "
                f"{'channel' if per_channel else 'group'} ({counted})",
                f"give the {role} shape [{count}]" + ("" if per_channel else
                                                        " (from opset 21 it holds one value a channel)"),
            )


def _loss_target(call: RuleCall) -> None:
    scores, target = call.shape(0), call.shape(1)
    if scores is not None and len(scores) < 2:
        raise call.fail(f"{call.operand(0)} has rank {len(scores)}, but the scores are [N, C, D1, ...]",
                        f"add the batch axis with op.Unsqueeze({call.name(0)}, [0]) (and to the target)")
    if scores is not None and target is not None:
        expected = (scores[0], *scores[2:])
        hint = (f"the target holds one class index per score vector: shape {shape_text(expected)} (the axes of "
                f"{call.name(0)} without the class axis 1)")
        if len(target) != len(scores) - 1:
            raise call.fail(f"{call.operand(1)} has rank {len(target)}, but {call.operand(0)} needs a target of "
                            f"rank {len(scores) - 1}", hint)
        for position, (want, got) in enumerate(zip(expected, target)):
            if _differ(want, got):
                raise call.fail(f"{call.operand(1)} vs {call.operand(0)}: axis {position} of the target is {got}, "
                                f"the scores have {want}", hint)
    weight = call.shape(2)
    if weight is not None and len(weight) != 1:
        raise call.fail(f"the weight {call.operand(2)} must be 1-D with one value per class, not rank {len(weight)}",
                        "the weight of a loss holds one value per class (axis 1 of the scores): shape [C]")


def _scalars(call: RuleCall, roles: Sequence[tuple[int, str]]) -> None:
    """Inputs that hold one number: rank 0, or one value of rank 1."""
    for index, role in roles:
        shape = call.shape(index)
        if shape is not None and (len(shape) > 1 or (len(shape) == 1 and _differ(shape[0], 1))):
            raise call.fail(f"the {role} {call.operand(index)} must be a scalar (rank 0, or one value)",
                            f"take one value out with op.Squeeze (or op.ReduceMax) of {call.name(index)}")


def _range(call: RuleCall) -> None:
    _scalars(call, ((0, "start"), (1, "limit"), (2, "delta")))


def _clip(call: RuleCall) -> None:
    _scalars(call, ((1, "min"), (2, "max")))


def _top_k(call: RuleCall) -> None:
    count = call.shape(1)
    if count is not None and (len(count) != 1 or _differ(count[0], 1)):
        raise call.fail(f"K {call.operand(1)} must be a 1-D tensor of one value", "write K as op.Constant(value_ints=[k]) "
                        f"or op.Reshape({call.name(1)}, [1])")


def _pad(call: RuleCall) -> None:
    data, pads, value = call.shape(0), call.shape(1), call.shape(2)
    hint = "pads are all the begins, then all the ends: 2 values per padded axis, in a 1-D tensor"
    if pads is not None and not (len(pads) == 1 or (len(pads) == 2 and not _differ(pads[0], 1))):
        raise call.fail(f"the pads {call.operand(1)} must be 1-D (or [1, 2 * rank]), not rank {len(pads)}", hint)
    axes_given = call.shape(3) is not None
    if data is not None and pads is not None and not axes_given and _differ(pads[-1], 2 * len(data)):
        raise call.fail(f"the pads {call.operand(1)} have {pads[-1]} values, but {call.operand(0)} needs "
                        f"{2 * len(data)} (2 per axis)", hint + " (or give axes to pad only some axes)")
    if value is not None and any(_static(d) for d in value) and _differ(_product(value), 1):
        raise call.fail(f"the constant_value {call.operand(2)} must hold one value",
                        f"pass one value: op.Reshape({call.name(2)}, [1]) of a one-element tensor, or a scalar")


def _one_hot(call: RuleCall) -> None:
    depth, values = call.shape(1), call.shape(2)
    if depth is not None and (_product(depth) or 0) > 1:
        raise call.fail(f"depth {call.operand(1)} must hold one value", "give depth as a scalar (rank 0) or one value")
    if values is not None and (len(values) != 1 or _differ(values[0], 2)):
        raise call.fail(f"values {call.operand(2)} must be [off_value, on_value]: a 1-D tensor of two values",
                        "write values as op.Constant(value_floats=[0.0, 1.0]) (off, on)")


def _split_sizes(call: RuleCall) -> None:
    sizes = call.shape(1)
    if sizes is not None and len(sizes) != 1:
        raise call.fail(f"the split sizes {call.operand(1)} must be 1-D (one size per output), not rank {len(sizes)}",
                        f"flatten them with op.Reshape({call.name(1)}, [-1]), or give num_outputs for equal parts")


def _elements(call: RuleCall) -> None:
    """GatherElements / ScatterElements: indices of the data's rank (updates of their shape)."""
    data, indices = call.shape(0), call.shape(1)
    if data is None or indices is None:
        return
    hint = (f"{call.op_type} picks one element per index along axis: the indices have the rank of "
            f"{call.name(0)}; for whole slices use op.{'Gather' if call.op_type == 'GatherElements' else 'ScatterND'}")
    if len(indices) != len(data):
        raise call.fail(f"{call.operand(1)} has rank {len(indices)}, {call.operand(0)} rank {len(data)}", hint)
    updates = call.shape(2) if call.op_type != "GatherElements" else None
    if updates is not None and (len(updates) != len(indices) or any(map(_differ, updates, indices))):
        raise call.fail(f"{call.operand(2)} vs {call.operand(1)}: the updates must have the shape of the indices",
                        "each index places the update at its own position")


def _scatter_nd(call: RuleCall) -> None:
    """ScatterND: indices whose last axis ``k`` is at most the data's rank, and updates of
    the indices' shape without that axis followed by the data's axes from ``k``."""
    data, indices, updates = call.shape(0), call.shape(1), call.shape(2)
    if data is None or indices is None or not indices or not _static(indices[-1]):
        return
    depth = int(indices[-1])  # type: ignore[arg-type]
    hint = (f"each index (the last axis of {call.name(1)}) picks a slice of {call.name(0)}; the updates hold one "
            f"such slice an index")
    if depth > len(data):
        raise call.fail(f"{call.operand(1)}: an index holds {depth} coordinates, but {call.operand(0)} has rank "
                        f"{len(data)}", hint)
    expected = (*indices[:-1], *data[depth:])
    if updates is not None and (len(updates) != len(expected) or any(map(_differ, updates, expected))):
        raise call.fail(f"{call.operand(2)} vs {call.operand(1)} and {call.operand(0)}: the updates must have shape "
                        f"{shape_text(expected)}", hint)


INPUT_RULES: dict[str, Callable[[RuleCall], None]] = {
    "ScatterND": _scatter_nd,
    "Range": _range, "Clip": _clip, "TopK": _top_k, "Pad": _pad, "OneHot": _one_hot, "Split": _split_sizes, "GatherElements": _elements, "ScatterElements": _elements,
    "Conv": _convolution, "ConvTranspose": _convolution, "BatchNormalization": _batch_normalization,
    "InstanceNormalization": _instance_normalization, "LayerNormalization": _layer_normalization,
    "RMSNormalization": _layer_normalization, "GroupNormalization": _group_normalization,
    "NegativeLogLikelihoodLoss": _loss_target, "SoftmaxCrossEntropyLoss": _loss_target,
}

# Ops whose rule refuses shapes a one-op onnxruntime session of unknown shapes still runs
# (a target shorter than the scores), but a model with static shapes does not load: eager
# mode asks these before running (the others it asks only when onnxruntime fails).
MODEL_ONLY_RULES = frozenset({"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})


def check_inputs(call: RuleCall) -> None:
    """Raise ``call.fail(...)`` where the sizes prove an input beside the main operand has the
    wrong rank or size for ``call.op_type`` (nothing for an op without such a rule)."""
    rule = INPUT_RULES.get(call.op_type)
    if rule is not None:
        rule(call)


ELEMENT_RULES = frozenset({"Mod"})  # ops check_element_types knows
_FLOATING = {1: "FLOAT", 10: "FLOAT16", 11: "DOUBLE", 16: "BFLOAT16"}  # (TensorProto element types)


def check_element_types(op_type: str, since_version: int | None, elems: Sequence[int | None],
                        attributes: Mapping[str, Any], location: Any = None) -> None:
    """A ``DslTypeError`` at ``location`` for a default-domain ``op_type`` node (its schema
    ``since_version``) whose input element types ``elems`` its attributes do not allow, which
    onnxruntime refuses only when the model runs; eager mode and the compiler both ask.

    >>> check_element_types("Mod", 13, [1, 1], {})
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: Mod: fmod=0 (Python's %) is defined for integers only before opset 28, the inputs are FLOAT
    ...
    """
    if op_type != "Mod" or since_version is None or since_version >= 28 or not elems:
        return
    floating = _FLOATING.get(elems[0])  # type: ignore[arg-type]
    fmod = attributes.get("fmod", 0)
    fmod = getattr(fmod, "value", fmod)  # (an ir.Attr, compiling)
    if floating is not None and not fmod:
        raise DslTypeError(
            f"Mod: fmod=0 (Python's %) is defined for integers only before opset 28, the inputs are {floating}",
            location,
            hint="write op.Mod(a, b, fmod=1) for C's fmod (the sign of a), or a - op.Floor(a / b) * b for the "
                 "sign of b, or import opset28 or later",
        )
