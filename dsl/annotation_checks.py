"""A value checked against the annotation it flows into: a returned value against the
return annotation, an argument against the called function's parameter annotation.

The compiler checks what it inferred (symbolic sizes by name, ``None`` unknown) and eager
mode what it computed (numpy shapes); both build the message here, so a wrong program
gets the same words at the same line either way.  Only what sizes prove is refused: a
static size against another static size, a rank (for outputs), an element type.  A
symbolic size in the annotation matches any size, in both modes, and is not bound across
axes: compiled code does not require ``N`` to be one size everywhere, so eager mode does
not either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsl import ir, types
from dsl.errors import DslTypeError
from dsl.shape_rules import Shape, shape_text

__all__ = ["NOT_A_TENSOR_HINT", "OUTPUT_HINT", "argument_hint", "arguments_keep_ranks", "check_declared",
           "check_output_elem", "fits_declared", "inputs_fix_ranks", "output_label"]

OUTPUT_HINT = "fix the computation or the return annotation (a symbolic size may be any size)"
# A list of tensors where a tensor is expected (returned, or passed to an op): compiled and eager alike.
NOT_A_TENSOR_HINT = "use op.Concat(*parts, axis=0) to join tensors, or op.SequenceConstruct(*parts) for a sequence"


def output_label(index: int, name: str) -> str:
    """``output 0 (y)`` for ``return y``; ``output 0`` for a returned expression.

    >>> output_label(1, "h"), output_label(0, "return_val")
    ('output 1 (h)', 'output 0')
    """
    return f"output {index}" + (f" ({name})" if name != "return_val" else "")


def inputs_fix_ranks(input_types: Sequence[Any]) -> bool:
    """Whether a function's tensor inputs all declare a rank (``FLOAT[3, "N"]``, a bare
    ``FLOAT``), so that the ranks its return annotation promises are ones its body keeps
    for every call.  An input of any rank (``FLOAT[...]``, a TypeVar of several types,
    ``Tensor``, no annotation) leaves the results' ranks to the body: they are then not
    checked against the return annotation, eagerly or compiled (onnxscript's functions
    annotate ``-> BOOL`` for a result of the input's rank).

    >>> inputs_fix_ranks([ir.TensorType(1, ("N",)), ir.TensorType(1, ())]), inputs_fix_ranks([None])
    (True, False)
    """
    for declared in input_types:
        while isinstance(declared, ir.OptionalType):
            declared = declared.elem
        if isinstance(declared, ir.SequenceType):
            continue
        if not isinstance(declared, ir.TensorType) or declared.shape is None:
            return False
    return True


def arguments_keep_ranks(shapes: Sequence[Any], input_types: Sequence[Any]) -> bool:
    """Whether a call's arguments (their ``shapes``, None where unknown: then nothing says
    they do) have the ranks the callee's inputs declare: a call may pass another rank (ONNX checks none at a
    call; a scalar stands for a one-element input), and then the callee's return
    annotation says nothing about its results' ranks at that call.

    >>> arguments_keep_ranks([(3, 3)], [ir.TensorType(1, ())]), arguments_keep_ranks([()], [ir.TensorType(1, ())])
    (False, True)
    """
    if not inputs_fix_ranks(input_types):
        return False
    for shape, declared in zip(shapes, input_types):
        while isinstance(declared, ir.OptionalType):
            declared = declared.elem
        if isinstance(declared, ir.TensorType) and declared.shape is not None and (
                shape is None or len(shape) != len(declared.shape)):
            return False
    return True


def argument_hint(callee: str, formal: str, declared: Any) -> str:
    """The hint for an argument whose annotation disagrees.

    >>> argument_hint("project", "v", ir.TensorType(1, ("N", 4)))
    "project declares v: FLOAT['N', 4]; pass a value of that shape or fix the annotation"
    """
    return f"{callee} declares {formal}: {declared!r}; pass a value of that shape or fix the annotation"


def check_output_elem(index: int, elem: int | None, declared: Any, location: Any) -> None:
    """A ``DslTypeError`` when output ``index`` has element type ``elem`` but is declared another.

    >>> check_output_elem(0, 7, ir.TensorType(1, None), None)
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: output 0 is INT64 but the annotation says FLOAT
    ...
    """
    if isinstance(declared, ir.TensorType) and elem is not None and elem != declared.elem_type:
        raise DslTypeError(
            f"output {index} is {types.element_type_name(elem)} but the annotation says "
            f"{types.element_type_name(declared.elem_type)}",
            location,
            hint="cast the result with op.Cast(..., to=...) or fix the annotation",
        )


def fits_declared(shape: Sequence[Any], elem: int | None, declared: Any, check_rank: bool = True) -> bool:
    """Whether :func:`check_declared` would accept ``shape`` and ``elem``: the quick test
    eager calls make before building any message.

    >>> fits_declared((2, 4), 1, ir.TensorType(1, ("N", 4))), fits_declared((2, 3), 1, ir.TensorType(1, ("N", 4)))
    (True, False)
    """
    if not isinstance(declared, ir.TensorType):
        return True
    if elem is not None and elem != declared.elem_type:
        return False
    want = declared.shape
    if want is None:
        return True
    if len(want) != len(shape):
        return not check_rank
    for have, size in zip(shape, want):
        if have != size and type(size) is int and isinstance(have, int):
            return False
    return True


def check_declared(
    what: str, shape: Shape, elem: int | None, declared: Any, location: Any, hint: str, check_rank: bool = True
) -> None:
    """A ``DslTypeError`` at ``location`` when an annotation (``declared``) disagrees with the
    element type ``elem`` or ``shape``: a rank (unless not ``check_rank``: a called
    function, like onnxscript's, takes a scalar for a one-element input), or a static size
    against another.

    >>> check_declared("output 0", (3, 2), 1, ir.TensorType(1, (2, 3)), None, "fix it")
    Traceback (most recent call last):
    ...
    dsl.errors.DslTypeError: error: output 0 is FLOAT[3, 2] but the annotation says FLOAT[2, 3]: axis 0 is 3, not 2
    ...
    """
    if not isinstance(declared, ir.TensorType):
        return
    if elem is not None and elem != declared.elem_type:
        raise DslTypeError(
            f"{what} is {types.element_type_name(elem)} but the annotation says "
            f"{types.element_type_name(declared.elem_type)}", location,
            hint="cast the value with op.Cast(..., to=...) or fix the annotation")
    if shape is None or declared.shape is None:
        return
    if len(shape) == len(declared.shape) and not any(
        isinstance(have, int) and isinstance(want, int) and have != want for have, want in zip(shape, declared.shape)
    ):
        return  # (the usual case: no message to write)
    written = _type_text(elem if elem is not None else declared.elem_type, shape)
    wanted = _type_text(declared.elem_type, declared.shape)
    if len(shape) != len(declared.shape):
        if not check_rank:
            return
        raise DslTypeError(
            f"{what} is {written} but the annotation says {wanted}: rank {len(shape)}, not "
            f"{len(declared.shape)}", location, hint=hint)
    for axis, (have, want) in enumerate(zip(shape, declared.shape)):
        if isinstance(have, int) and isinstance(want, int) and have != want:
            raise DslTypeError(
                f"{what} is {written} but the annotation says {wanted}: axis {axis} is {have}, not {want}",
                location, hint=hint)


def _type_text(elem: int, shape: Sequence[Any]) -> str:
    return f"{types.element_type_name(elem)}{shape_text(shape)}" if shape else types.element_type_name(elem)
