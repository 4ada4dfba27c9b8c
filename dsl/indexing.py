"""Python subscripts (``x[1:3, ::2]``, ``x[..., 0]``, ``x[None]``, ``x[i]``) lowered to ONNX ops.

The compiler and eager mode must give an index the same meaning, so the lowering lives
here once and is parameterised by an *emit* callback instead of building IR itself::

    def emit(op_type: str, inputs: list[T], attributes: dict[str, Any]) -> list[T]: ...

    result = lower_subscript(target, index, emit)

``target`` and the results are whatever the caller's tensors are (``ir.Value`` in the
compiler, arrays or eager tensors in eager mode); the lowering never looks inside them.
``index`` is exactly what Python hands to ``__getitem__``: one item or a tuple of items,
each one of

* a Python ``int`` (or numpy integer)   -> that position, the axis is removed;
* a ``slice`` whose bounds are ints, ``None`` or tensors (scalar or 1-element);
* ``None``                               -> a new axis of size 1 (``Unsqueeze``);
* ``Ellipsis``                           -> as many full axes as needed;
* a list of ints                         -> a constant index tensor (``Gather``);
* anything else                          -> a tensor of indices (``Gather``, numpy semantics
  for a single advanced index; at most one tensor index per subscript).

Constants are requested through the same callback as
``emit("Constant", [], {"value": numpy.ndarray})``; every other op is one of ``Slice``,
``Squeeze``, ``Unsqueeze``, ``Gather``, ``Reshape``, ``Cast`` and ``Concat`` (opset 13
forms: axes and bounds are inputs), and ``Shape``, ``Less`` and ``Where`` for a backward
slice from a start below -1 (see ``_backward_stop``).  Each
call returns a list with one output.  Attribute values are plain Python values (ints,
lists of ints).  Mistakes raise :class:`dsl.errors.DslTypeError` without a location;
callers attach theirs with ``err.with_location(...)``.

Example (eager-style callback on numpy, for illustration)::

    >>> import numpy as np
    >>> from dsl.indexing import lower_subscript
    >>> calls = []
    >>> def emit(op_type, inputs, attributes):
    ...     calls.append(op_type)
    ...     return [attributes["value"]] if op_type == "Constant" else [op_type]
    >>> lower_subscript("x", (slice(1, 3), 0), emit)
    'Squeeze'
    >>> calls
    ['Constant', 'Constant', 'Constant', 'Slice', 'Constant', 'Squeeze']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl.errors import DslTypeError

__all__ = ["Emit", "lower_subscript", "INT64_MAX", "INT64_MIN"]

Emit = Callable[[str, list[Any], dict[str, Any]], list[Any]]

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)
_INT64 = 7  # onnx TensorProto.INT64


def _is_int(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


@dataclass(slots=True)
class _Axis:
    """One index item placed on an input axis (negative: counted from the end)."""

    item: Any
    axis: int


def lower_subscript(target: Any, index: Any, emit: Emit) -> Any:
    """Lower ``target[index]`` to ops sent through ``emit``; returns the result tensor.

    Slices and integer positions become one ``Slice`` (plus one ``Squeeze`` for the
    integer positions), new axes one ``Unsqueeze``, a tensor index one ``Gather``.

    >>> def emit(op_type, inputs, attributes):
    ...     return [attributes.get("value", op_type)]
    >>> lower_subscript("x", slice(None, None, -1), emit)
    'Slice'
    """
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for item in items if item is Ellipsis) > 1:
        raise DslTypeError("an index can only have a single ellipsis ('...')", hint="keep one '...'")
    if any(isinstance(item, (bool, np.bool_)) for item in items):
        raise DslTypeError("boolean indices are not supported", hint="use op.Compress or op.Where instead")
    # identity tests only: ``==`` on a tensor item would build an Equal op
    if not any(item is Ellipsis for item in items):
        items.append(Ellipsis)
    split = next(position for position, item in enumerate(items) if item is Ellipsis)
    before, after = items[:split], items[split + 1 :]

    placed_before = _place(before, from_end=False)
    placed_after = _place(after, from_end=True)
    placed = placed_before + placed_after
    tensors = [p for p in placed if _is_tensor_item(p.item)]
    if len(tensors) > 1:
        raise DslTypeError(
            "at most one tensor index per subscript is supported",
            hint="index one axis at a time, or use op.GatherND for combined indices",
        )

    result = _slice(target, placed, emit)
    squeeze_axes = [p.axis for p in placed if _is_int(p.item)]
    if squeeze_axes:
        result = _one(emit("Squeeze", [result, _const(emit, squeeze_axes)], {}))

    new_axes = _output_positions(before, after, want=lambda item: item is None)
    if new_axes:
        result = _one(emit("Unsqueeze", [result, _const(emit, new_axes)], {}))

    if tensors:
        (gather_axis,) = _output_positions(before, after, want=_is_tensor_item)
        indices = tensors[0].item
        if isinstance(indices, (list, np.ndarray)):
            indices = _const(emit, indices)
        result = _one(emit("Gather", [result, indices], {"axis": gather_axis}))
    return result


def _is_tensor_item(item: Any) -> bool:
    return not (item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item))


def _place(items: list[Any], from_end: bool) -> list[_Axis]:
    consuming = [item for item in items if item is not None]
    placed: list[_Axis] = []
    position = -len(consuming) if from_end else 0
    for item in items:
        if item is None:
            continue
        placed.append(_Axis(item, position))
        position += 1
    return placed


def _output_positions(before: list[Any], after: list[Any], want: Callable[[Any], bool]) -> list[int]:
    """Axes, in the result after Squeeze/Unsqueeze, of the items ``want`` selects.

    Items before the ellipsis count from the front, items after it from the back, so
    the rank of the tensor is never needed.  Integer positions leave no axis.
    """
    positions: list[int] = []
    out = 0
    for item in before:
        if want(item):
            positions.append(out)
        if not _is_int(item):
            out += 1
    out = -1
    for item in reversed(after):
        if want(item):
            positions.append(out)
        if not _is_int(item):
            out -= 1
    return positions


def _slice(target: Any, placed: list[_Axis], emit: Emit) -> Any:
    starts: list[Any] = []
    ends: list[Any] = []
    steps: list[Any] = []
    axes: list[int] = []
    for entry in placed:
        item = entry.item
        if _is_int(item):
            position = int(item)
            starts.append(position)
            ends.append(INT64_MAX if position == -1 else position + 1)
            steps.append(1)
            axes.append(entry.axis)
        elif isinstance(item, slice):
            bounds = _slice_bounds(item)
            if bounds is not None:
                start, stop, step = bounds
                if _is_int(step) and step < 0 and _is_int(start) and start < -1:
                    stop = _backward_stop(target, entry.axis, int(start), stop, emit)
                starts.append(start)
                ends.append(stop)
                steps.append(step)
                axes.append(entry.axis)
    if not axes:
        return target
    inputs = [target, _vector(emit, starts), _vector(emit, ends), _const(emit, axes)]
    if any(not (_is_int(step) and step == 1) for step in steps):
        inputs.append(_vector(emit, steps))
    return _one(emit("Slice", inputs, {}))


def _backward_stop(target: Any, axis: int, start: int, stop: Any, emit: Emit) -> Any:
    """The end of a backward slice starting at ``start`` < -1, as Python means it.

    Going backwards from a start before the first element (``x[-9::-1]`` on 3 elements)
    Python selects nothing, while ONNX's Slice clamps such a start to the first element
    and, with an end before it too, selects that element.  An end of 0 selects nothing
    backwards from 0 in ONNX, so the end becomes 0 where the axis is shorter than
    ``-start`` (known only at run time: Shape, Less, Where)."""
    size = _one(emit("Gather", [_one(emit("Shape", [target], {})), _const(emit, [axis])], {}))
    short = _one(emit("Less", [size, _const(emit, [-start])], {}))
    return _one(emit("Where", [short, _const(emit, [0]), _vector(emit, [stop])], {}))


def _slice_bounds(item: slice) -> tuple[Any, Any, Any] | None:
    """(start, stop, step) with ONNX defaults filled in; None for a full ``:``."""
    step = 1 if item.step is None else item.step
    if _is_int(step):
        if step == 0:
            raise DslTypeError("slice step cannot be zero", hint="use a positive or negative step")
        forward = step > 0
    elif item.start is None or item.stop is None:
        raise DslTypeError(
            "a slice with a tensor step needs explicit start and stop",
            hint="write x[start:stop:step]; the default bounds depend on the sign of the step",
        )
    else:
        forward = True
    start = item.start if item.start is not None else (0 if forward else INT64_MAX)
    stop = item.stop if item.stop is not None else (INT64_MAX if forward else INT64_MIN)
    if item.start is None and item.stop is None and _is_int(step) and step == 1:
        return None
    return start, stop, step


def _vector(emit: Emit, parts: list[Any]) -> Any:
    """A 1-D INT64 tensor from ints and scalar/1-element tensors (Concat when mixed)."""
    if all(_is_int(p) for p in parts):
        return _const(emit, [int(p) for p in parts])
    pieces: list[Any] = []
    run: list[int] = []
    for part in parts:
        if _is_int(part):
            run.append(int(part))
            continue
        if run:
            pieces.append(_const(emit, run))
            run = []
        flat = _one(emit("Reshape", [part, _const(emit, [-1])], {}))
        pieces.append(_one(emit("Cast", [flat], {"to": _INT64})))
    if run:
        pieces.append(_const(emit, run))
    if len(pieces) == 1:
        return pieces[0]
    return _one(emit("Concat", pieces, {"axis": 0}))


def _const(emit: Emit, values: Any) -> Any:
    return _one(emit("Constant", [], {"value": np.asarray(values, dtype=np.int64)}))


def _one(outputs: list[Any]) -> Any:
    return outputs[0]
