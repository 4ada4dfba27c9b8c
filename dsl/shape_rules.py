"""Static shape rules: each op's output shapes from its input shapes, and the mistakes
static sizes prove.

ONNX's own shape inference lacks most of these checks (it accepts ``[4, 3] + [4]`` and
a Reshape of 256 elements to 1024) or reports them long after, in another tool, without
a source line.  One rule per op family here serves the compiler (shapes as annotated:
``int`` static sizes, ``str`` symbolic sizes kept by name, ``None`` unknown; ``None`` for a
whole shape of unknown rank) and eager mode (numpy shapes), so a program gets the same
message both ways.  A rule only refuses what sizes *prove*: a symbolic size may be
anything, so it never disagrees with another size.

>>> infer("MatMul", [(1, 3, 256), (64, 256)], ["x", "wk"], {}, [None, None])
Traceback (most recent call last):
...
dsl.errors.DslTypeError: error: MatMul: x: [1, 3, 256] vs wk: [64, 256]: axis -1 of x is 256, axis -2 of wk is 64
...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dsl import ir, reduction_ranks
from dsl.errors import DslTypeError
from dsl.shape_rules_gemm_conv import GEMM_CONV_RULES
from dsl.shape_rules_inputs import INPUT_RULES, expanded_rank
from dsl.shape_sizes import Dim, Shape, shape_text
from dsl.shape_sizes import differ as _differ
from dsl.shape_sizes import is_static as _static
from dsl.shape_sizes import product as _product

__all__ = ["BROADCASTING_OPS", "READS_CONSTANTS", "Dim", "Shape", "SAME_SHAPE_OPS", "broadcast", "check_attributes", "has_rule", "infer",
           "shape_text"]


# Ops whose inputs broadcast against each other (ONNX "multidirectional broadcasting").
BROADCASTING_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater", "GreaterOrEqual",
    "Less", "LessOrEqual", "Max", "Min", "Mean", "Sum", "Where", "BitShift", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "PRelu",
})
# Ops whose first output has the shape of their first input.
SAME_SHAPE_OPS = frozenset({
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization", "BitwiseNot", "Cast",
    "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", "Dropout", "Elu", "Erf", "Exp", "Floor",
    "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", "IsInf", "IsNaN",
    "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "LpNormalization", "Mish", "Neg", "Not",
    "Reciprocal", "Relu", "RMSNormalization", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Trilu",
})
_REDUCE = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceProd", "ReduceSum", "ReduceSumSquare", "ArgMax", "ArgMin",
})
# Ops whose rule reads the value of a constant input (a target shape, axes, slice bounds).
READS_CONSTANTS = frozenset({"Reshape", "Slice", "Unsqueeze", "Squeeze", "Expand", "ConstantOfShape"}) | (
    _REDUCE - {"ArgMax", "ArgMin"})


def infer(
    op_type: str,
    shapes: Sequence[Shape],
    names: Sequence[str],
    attributes: Mapping[str, Any],
    constants: Sequence[np.ndarray | None],
    location: Any = None,
    version: int = 1000,
) -> list[Shape]:
    """The output shapes of an ``op_type`` node (default domain) from its input ``shapes``
    (``None`` where an input is omitted or its rank unknown), its ``attributes`` (Python
    values or ``ir.Attr``) and the values of its constant inputs; a ``DslTypeError`` at
    ``location`` naming the operands (``names``, as written) when the sizes prove a mistake.
    ``version`` is the opset's: before 7, element-wise ops broadcast only as asked by attributes.
    Only the first output's shape is given for ops with several (a list of one).

    >>> infer("Add", [(4, 3), ("B", 1, 3)], ["a", "b"], {}, [None, None])
    [('B', 4, 3)]
    """
    if op_type in INPUT_RULES:  # a bias, scale or target beside the main operand
        INPUT_RULES[op_type](_Call(op_type, shapes, names, attributes, constants, location, version))
    if op_type in SAME_SHAPE_OPS:
        return [shapes[0] if shapes else None]
    if op_type in BROADCASTING_OPS:
        if version < 7:
            return [None]
        if len(shapes) == 2:  # the usual case, without building a _Call: same shapes, or a scalar
            first, second = shapes
            if first == second or second == ():
                return [first]
            if first == ():
                return [second]
        return [_broadcast_all(_Call(op_type, shapes, names, attributes, constants, location))]
    if op_type in _REDUCE:
        return [_reduce(_Call(op_type, shapes, names, attributes, constants, location))]
    rule = _RULES.get(op_type)
    if rule is not None:
        return rule(_Call(op_type, shapes, names, attributes, constants, location))
    return [None]


class _Call:
    """One op application as the rules see it."""

    __slots__ = ("attributes", "constants", "location", "names", "op_type", "shapes", "version")

    def __init__(self, op_type: str, shapes: Sequence[Shape], names: Sequence[str],
                 attributes: Mapping[str, Any], constants: Sequence[np.ndarray | None], location: Any,
                 version: int = 1000) -> None:
        self.op_type = op_type
        self.version = version  # the opset's (an op's rule may change with it)
        self.shapes = shapes
        self.names = names
        self.attributes = attributes
        self.constants = constants
        self.location = location

    def shape(self, index: int) -> Shape:
        return self.shapes[index] if index < len(self.shapes) else None

    def name(self, index: int) -> str:
        return self.names[index] if index < len(self.names) else f"input {index}"

    def operand(self, index: int) -> str:
        """``x: [1, 3, 256]``."""
        shape = self.shape(index)
        return f"{self.name(index)}: {'[...]' if shape is None else shape_text(shape)}"

    def attribute(self, name: str, default: Any = None) -> Any:
        found = self.attributes.get(name, default)
        if isinstance(found, ir.Attr):
            found = default if found.ref_attr_name else found.value
        if isinstance(found, ir.Tensor):
            found = found.array
        elif hasattr(found, "data_type") and hasattr(found, "dims"):  # an onnx.TensorProto
            from onnx import numpy_helper

            found = numpy_helper.to_array(found)
        return found

    def constant(self, index: int) -> np.ndarray | None:
        return self.constants[index] if index < len(self.constants) else None

    def ints(self, name: str, index: int) -> list[int] | None:
        """An int list given as attribute ``name`` or as constant input ``index`` (the axes of
        Unsqueeze or ReduceSum moved from the first to the second across opsets)."""
        found = self.attribute(name)
        if found is None:
            value = self.constant(index)
            if value is None:
                return None
            found = value.reshape(-1).tolist()
        return [int(v) for v in found]

    def fail(self, detail: str, hint: str) -> DslTypeError:
        return DslTypeError(f"{self.op_type}: {detail}", self.location, hint=hint)


def _total(sizes: Sequence[Dim]) -> int | None:
    """The sum of sizes when all are static (the joined axis of a Concat)."""
    total = 0
    for size in sizes:
        if not _static(size):
            return None
        total += int(size)  # type: ignore[arg-type]
    return total


def _axis(call: _Call, axis: int, rank: int, operand: int, what: str = "axis") -> int:
    """``axis`` made non-negative, or the error that it is out of range for a rank."""
    if not -rank <= axis < rank:
        raise call.fail(
            f"{what} {axis} is out of range for {call.operand(operand)} (rank {rank})",
            f"axes of a rank-{rank} tensor are -{rank}..{rank - 1}",
        )
    return axis + rank if axis < 0 else axis


# --------------------------------------------------------------------- broadcasting
def broadcast(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...] | None:
    """The broadcast shape of ``a`` and ``b``, or None when static sizes prove they do not
    broadcast.  A symbolic size against 1 is itself; against another size it is unknown
    unless equal."""
    out: list[Dim] = []
    for offset in range(max(len(a), len(b)), 0, -1):
        left = a[-offset] if offset <= len(a) else 1
        right = b[-offset] if offset <= len(b) else 1
        if left == right or right == 1:
            out.append(left)
        elif left == 1:
            out.append(right)
        elif _static(left) and _static(right):
            return None
        else:
            out.append(left if _static(left) else right if _static(right) else None)
    return tuple(out)


def _broadcast_pair(call: _Call, a: int, b: int, what: str = "") -> tuple[Dim, ...] | None:
    left, right = call.shape(a), call.shape(b)
    if left is None or right is None:
        return None
    joined = broadcast(left, right)
    if joined is None:
        for offset in range(1, min(len(left), len(right)) + 1):
            x, y = left[-offset], right[-offset]
            if _differ(x, y) and x != 1 and y != 1:
                raise call.fail(
                    f"{call.operand(a)} vs {call.operand(b)}: {what}axis -{offset} is {x} in {call.name(a)} "
                    f"and {y} in {call.name(b)}",
                    "broadcasting lines shapes up from the last axis; each pair of dimensions must be equal "
                    "or one of them 1 (insert an axis with x[:, None] or op.Unsqueeze)",
                )
    return joined


def _broadcast_all(call: _Call) -> Shape:
    if len(call.shapes) == 2:
        return _broadcast_pair(call, 0, 1)
    present = [index for index, shape in enumerate(call.shapes) if shape is not None]
    if len(present) != len(call.shapes):
        for index in present[1:]:  # still check the pairs that are known
            _broadcast_pair(call, present[0], index)
        return None
    if not present:
        return None
    joined: Shape = call.shapes[0]
    for index in present[1:]:
        _broadcast_pair(call, present[0], index)
        if joined is not None:
            joined = broadcast(joined, call.shapes[index])  # type: ignore[arg-type]
    return joined


# --------------------------------------------------------------------- products
def _matmul(call: _Call) -> list[Shape]:
    a, b = call.shape(0), call.shape(1)
    if a is None or b is None or not a or not b:
        return [None]
    b_axis = -2 if len(b) >= 2 else -1
    if _differ(a[-1], b[b_axis]):
        raise call.fail(
            f"{call.operand(0)} vs {call.operand(1)}: axis -1 of {call.name(0)} is {a[-1]}, "
            f"axis {b_axis} of {call.name(1)} is {b[b_axis]}",
            f"a @ b multiplies [..., n, k] by [..., k, m]: the last dimension of {call.name(0)} must equal "
            f"the second-to-last of {call.name(1)} (transpose one with op.Transpose, or check the weight's shape)",
        )
    batch: tuple[Dim, ...] | None = ()
    if len(a) > 2 and len(b) > 2:
        batch = broadcast(a[:-2], b[:-2])
        if batch is None:
            raise call.fail(f"{call.operand(0)} vs {call.operand(1)}: their batch axes do not broadcast",
                            "the axes before the last two broadcast: each pair equal or one of them 1")
    elif len(a) > 2:
        batch = a[:-2]
    elif len(b) > 2:
        batch = b[:-2]
    rows = a[-2:-1] if len(a) >= 2 else ()
    columns = b[-1:] if len(b) >= 2 else ()
    return [(*(batch or ()), *rows, *columns)]


# --------------------------------------------------------------------- layout
def _reshape(call: _Call) -> list[Shape]:
    target = call.constant(1)
    data = call.shape(0)
    if target is None:
        return [None]
    wanted = [int(v) for v in target.reshape(-1).tolist()]
    allow_zero = bool(call.attribute("allowzero", 0))
    dims: list[Dim] = []
    for axis, size in enumerate(wanted):
        if size == 0 and not allow_zero:
            dims.append(data[axis] if data is not None and axis < len(data) else None)
        else:
            dims.append(size)
    total = _product(data) if data is not None else None
    known = _product([d for d in dims if d != -1])
    if total is not None and known is not None:
        wrong = (known != total) if -1 not in dims else (known == 0 or total % known != 0)
        if wrong:
            raise call.fail(
                f"{call.operand(0)} has {total} elements, which cannot be reshaped to {shape_text(wanted)}"
                + (f" ({known} elements)" if -1 not in dims else f" (a multiple of {known})"),
                f"the new shape must hold the {total} elements of {call.name(0)}: give -1 for the one size to "
                f"infer and 0 to keep a size of {call.name(0)}",
            )
        if -1 in dims:
            dims[dims.index(-1)] = total // known if known else None
    elif -1 in dims:
        dims[dims.index(-1)] = None
    return [tuple(dims)]


def _concat(call: _Call) -> list[Shape]:
    present = [(index, shape) for index, shape in enumerate(call.shapes) if shape is not None]
    if not present:
        return [None]
    first_index, first = present[0]
    axis = _axis(call, int(call.attribute("axis", 0)), len(first), first_index)
    for index, shape in present[1:]:
        if len(shape) != len(first):
            raise call.fail(f"{call.operand(first_index)} vs {call.operand(index)}: ranks {len(first)} and {len(shape)}",
                            "Concat joins tensors of one rank; add the missing axis with op.Unsqueeze")
        differing = [p for p, (left, right) in enumerate(zip(first, shape)) if p != axis and _differ(left, right)]
        if differing:
            position = differing[0]
            hint = f"all axes but the joined one (axis={axis}) must be equal"
            if len(differing) == 1 and first[axis] == shape[axis]:
                hint += f"; they differ only on axis {position}: did you mean axis={position}?"
            raise call.fail(
                f"{call.operand(first_index)} vs {call.operand(index)}: axis {position} is {first[position]} in "
                f"{call.name(first_index)} and {shape[position]} in {call.name(index)} (joining on axis {axis})",
                hint,
            )
    if len(present) != len(call.shapes):
        return [None]
    sizes = [shape[axis] for _, shape in present]
    joined: Dim = _total(sizes)
    out = list(first)
    for position in range(len(out)):
        if position != axis and not _static(out[position]):
            out[position] = next((s[position] for _, s in present if _static(s[position])), out[position])
    out[axis] = joined
    return [tuple(out)]


def _transpose(call: _Call) -> list[Shape]:
    data = call.shape(0)
    if data is None:
        return [None]
    perm = call.attribute("perm")
    if perm is None:
        return [tuple(reversed(data))]
    perm = list(map(int, perm))
    if len(perm) != len(data) or set(perm) != set(range(len(data))):
        raise call.fail(f"perm={perm} is not a permutation of the {len(data)} axes of {call.operand(0)}",
                        f"give each axis 0..{len(data) - 1} once")
    return [tuple([data[p] for p in perm])]


def _gather(call: _Call) -> list[Shape]:
    data, indices = call.shape(0), call.shape(1)
    if data is None:
        return [None]
    axis = _axis(call, int(call.attribute("axis", 0)), len(data), 0)
    if indices is None:
        return [None]
    return [(*data[:axis], *indices, *data[axis + 1:])]


def _slice(call: _Call) -> list[Shape]:
    data = call.shape(0)
    if data is None:
        return [None]
    starts, ends = call.constant(1), call.constant(2)
    axes = call.constant(3)
    steps = call.constant(4)
    count = len(starts.reshape(-1)) if starts is not None else None
    axis_list = [int(a) for a in axes.reshape(-1)] if axes is not None else (
        list(range(count)) if count is not None else None)
    if axis_list is None:
        return [tuple([None] * len(data))]
    axis_list = [_axis(call, axis, len(data), 0) for axis in axis_list]
    out = list(data)
    if starts is None or ends is None:
        for axis in axis_list:
            out[axis] = None
        return [tuple(out)]
    step_list = [int(s) for s in steps.reshape(-1)] if steps is not None else [1] * len(axis_list)
    for axis, start, end, step in zip(axis_list, starts.reshape(-1), ends.reshape(-1), step_list):
        size = data[axis]
        out[axis] = len(range(size)[slice(int(start), int(end), step)]) if isinstance(size, int) and step else None
    return [tuple(out)]


def _unsqueeze(call: _Call) -> list[Shape]:
    data, axes = call.shape(0), call.ints("axes", 1)
    if data is None or axes is None:
        return [None]
    rank = len(data) + len(axes)
    positions = sorted(_axis(call, axis, rank, 0, "axes entry") for axis in axes)
    out = list(data)
    for position in positions:
        out.insert(position, 1)
    return [tuple(out)]


def _squeeze(call: _Call) -> list[Shape]:
    data, axes = call.shape(0), call.ints("axes", 1)
    if data is None:
        return [None]
    if axes is None:
        if call.constant(1) is None and len(call.shapes) > 1 and call.shapes[1] is not None:
            return [None]
        return [tuple(d for d in data if d != 1)] if all(_static(d) for d in data) else [None]
    positions = {_axis(call, axis, len(data), 0, "axes entry") for axis in axes}
    for position in positions:
        if _differ(data[position], 1):
            raise call.fail(f"axis {position} of {call.operand(0)} has size {data[position]}, not 1",
                            "Squeeze removes axes of size 1 only; use op.Reshape to merge axes")
    return [tuple(d for axis, d in enumerate(data) if axis not in positions)]


def _reduce(call: _Call) -> Shape:
    data = call.shape(0)
    if data is None:
        return None
    keep = bool(call.attribute("keepdims", 1))
    if call.op_type in ("ArgMax", "ArgMin"):
        axes: list[int] | None = [int(call.attribute("axis", 0))]
    else:
        axes = call.ints("axes", 1)
        if axes is None and len(call.shapes) > 1 and call.shapes[1] is not None:  # axes computed at run time
            return reduction_ranks.reduced_shape(data, call.shapes[1], keep, bool(call.attribute("noop_with_empty_axes", 0)))
        if not axes:
            if call.attribute("noop_with_empty_axes", 0):
                return data
            axes = list(range(len(data)))
    positions = {_axis(call, axis, len(data), 0) for axis in axes or []}
    if keep:
        return tuple(1 if axis in positions else d for axis, d in enumerate(data))
    return tuple(d for axis, d in enumerate(data) if axis not in positions)


def _flatten(call: _Call) -> list[Shape]:
    data = call.shape(0)
    if data is None:
        return [None]
    axis = int(call.attribute("axis", 1))
    axis = axis if axis == len(data) else _axis(call, axis, len(data), 0)
    return [(_product(data[:axis]), _product(data[axis:]))]


def _expand(call: _Call) -> list[Shape]:
    data, target = call.shape(0), call.constant(1)
    if data is not None and target is None:
        return [expanded_rank(data, call.shape(1))]
    if data is None or target is None:
        return [None]
    wanted = tuple(int(v) for v in target.reshape(-1))
    joined = broadcast(data, wanted)
    if joined is None:
        raise call.fail(f"{call.operand(0)} cannot be expanded to {shape_text(wanted)}",
                        "Expand broadcasts: each axis of the input must equal the target's or be 1")
    return [joined]


# --------------------------------------------------------------------- shapes and constants
def _shape(call: _Call) -> list[Shape]:
    data = call.shape(0)
    if data is None:
        return [(None,)]
    start, end = call.attribute("start", 0), call.attribute("end")
    return [(len(range(len(data))[slice(int(start), None if end is None else int(end))]),)]


def check_attributes(op_type: str, attributes: Mapping[str, Any], location: Any = None) -> None:
    """A ``DslTypeError`` at ``location`` for a tensor attribute of the wrong rank or element
    type, which ``onnx.checker`` and onnxruntime refuse (eager mode and the compiler alike).

    >>> check_attributes("ConstantOfShape", {"value": np.float32(1.0)})
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: ConstantOfShape: value must be a 1-D tensor of one element, got a 0-D tensor of shape []
    ...
    """
    if op_type == "ConstantOfShape":
        _constant_of_shape_value(_Call(op_type, (), (), attributes, (), location))


def _constant_of_shape_value(call: _Call) -> None:
    value = call.attribute("value")
    if value is None:
        return
    array = np.asarray(value)
    if array.ndim != 1 or array.size != 1:
        raise call.fail(
            f"value must be a 1-D tensor of one element, got a {array.ndim}-D tensor of shape "
            f"{shape_text(array.shape)}",
            "write value=np.array([1.0], dtype=np.float32) (a one-element 1-D array)",
        )
    if array.dtype.kind not in "biuf" and array.dtype.name not in _EXTRA_NUMBER_DTYPES:
        raise call.fail(f"value must hold a number or bool, got {array.dtype}",
                        "ConstantOfShape fills with a number: value=np.array([0], dtype=np.int64)")


_EXTRA_NUMBER_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})


def _constant_of_shape(call: _Call) -> list[Shape]:
    _constant_of_shape_value(call)
    target = call.constant(0)
    if target is not None:
        return [tuple(int(v) for v in target.reshape(-1))]
    length = call.shape(0)
    if length is not None and len(length) == 1 and _static(length[0]):
        return [tuple([None] * int(length[0]))]  # type: ignore[arg-type]
    return [None]


def _constant(call: _Call) -> list[Shape]:
    value = call.attribute("value")
    if value is not None:
        return [tuple(np.shape(value))]
    for name in ("value_float", "value_int", "value_string"):
        if call.attributes.get(name) is not None:
            return [()]
    for name in ("value_floats", "value_ints", "value_strings"):
        found = call.attribute(name)
        if found is not None:
            return [(len(found),)]
    return [None]


def _size(call: _Call) -> list[Shape]:
    return [()]


def _split(call: _Call) -> list[Shape]:
    data = call.shape(0)
    if data is not None:
        _axis(call, int(call.attribute("axis", 0)), len(data), 0)
    return [None]


def has_rule(op_type: str) -> bool:
    """Whether :func:`infer` knows ``op_type``'s output shape (its None then means unknown)."""
    return op_type in _RULED


_RULES: dict[str, Callable[[_Call], list[Shape]]] = {
    "MatMul": _matmul, **GEMM_CONV_RULES, "Reshape": _reshape,
    "Concat": _concat, "Transpose": _transpose, "Gather": _gather, "Slice": _slice, "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze, "Flatten": _flatten, "Expand": _expand, "Shape": _shape,
    "ConstantOfShape": _constant_of_shape, "Constant": _constant, "Size": _size, "Split": _split,
}
_RULED = SAME_SHAPE_OPS | BROADCASTING_OPS | _REDUCE | (_RULES.keys() - {"Split"})
