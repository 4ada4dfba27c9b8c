"""The results of an eagerly run ``@script`` or ``@graph()`` body, typed as compiled code types them.

The compiler turns a returned Python literal into a constant of the declared element
type (``return 0.0`` under ``-> DOUBLE`` is a DOUBLE 0.0, by the literal-adoption rule
of :func:`dsl.operators.literal_elem_type`), gives an undeclared literal its own type
(``0.0`` is FLOAT), keeps the dtype of a numpy constant, and rejects a result whose
element type differs from the declared one (the model would not load).  An attribute
parameter returned as is becomes a ``Cast`` to the declared type.  Eager results follow
the same rules, so a function returns the same dtypes called eagerly and exported.
"""

from __future__ import annotations

import inspect
import typing
import weakref
from typing import Any

import numpy as np

from dsl import ir, types
from dsl.annotation_checks import (
    OUTPUT_HINT,
    check_declared,
    check_output_elem,
    fits_declared,
    output_label,
)
from dsl.errors import DslTypeError
from dsl.operators import literal_elem_type
from eager import values
from eager.annotation_sites import return_site, returns_a_tuple_display
from eager.call_site import caller_location
from eager.returned_lists import is_returned_list, packed_result
from eager.sequences import EagerSequence, sequence_arrays
from eager.tensor import EagerTensor

__all__ = ["declared_results", "typed_results"]

_DECLARED: weakref.WeakKeyDictionary[Any, list[Any] | None] = weakref.WeakKeyDictionary()
# A literal adapts to the declared type as this representative of its own type would.
_REPRESENTATIVE = {types.FLOAT.enum: 1.0, types.INT64.enum: 1, types.BOOL.enum: True, types.STRING.enum: ""}
_LITERAL_TYPES = (bool, int, float, str, list, tuple)


def declared_results(python_function: Any) -> list[Any] | None:
    """The IR types of the return annotation (one per result), or None when there is none."""
    try:
        return _DECLARED[python_function]
    except KeyError:
        pass
    annotation = inspect.signature(python_function).return_annotation
    found: list[Any] | None = None
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, getattr(python_function, "__globals__", {}))
        except Exception:  # the compiler reports a bad annotation; eagerly it just declares nothing
            annotation = inspect.Signature.empty
    if annotation is not inspect.Signature.empty and annotation is not None:
        items = list(typing.get_args(annotation)) if typing.get_origin(annotation) is tuple else [annotation]
        found = [types.read_annotation(item)[1] for item in items]
    _DECLARED[python_function] = found
    return found


def typed_results(
    function_name: str, result: Any, declared: list[Any] | None, attribute_values: tuple[Any, ...] = (),
    python_function: Any = None, check_ranks: bool = True,
) -> Any:
    """``result`` (one value or a tuple) with literals made tensors and declared types checked.

    Tensors come back as EagerTensors (sequences as EagerSequences); ``attribute_values``
    are the attribute arguments of the call, which are cast rather than adopted.  A
    tensor whose element type, rank or a static size disagrees with the annotation is
    refused as the compiler refuses it, at the body's ``return`` (``python_function``'s).
    """
    if type(result) is EagerTensor and declared is not None and len(declared) == 1:
        want = declared[0]
        if type(want) is ir.TensorType and result.elem_type == want.elem_type and (
                want.shape is None or fits_declared(result.array.shape, None, want, check_ranks)):
            return result  # the common case, kept short: eager calls are timed in microseconds
    many = isinstance(result, tuple)
    if many and python_function is not None and _is_size_tuple(result) \
            and returns_a_tuple_display(python_function) is False:
        # ``return x.shape``: one INT64 output, as the compiler packs a tuple of sizes
        result, many = EagerTensor(np.array(result, dtype=np.int64).reshape(-1)), False
    items = list(result) if many else [result]
    if declared is not None and len(declared) != len(items):
        raise DslTypeError(
            f"{function_name} returns {len(items)} value(s) but its annotation declares {len(declared)}",
            caller_location(),
            hint="make the return statement and the return annotation agree",
        )
    typed = []
    for index, item in enumerate(items):
        if is_returned_list(item):  # (packed into one tensor as compiled, or the compiler's error)
            item = packed_result(item, python_function, len(items), index)
        want = declared[index] if declared is not None else None
        from_attribute = any(item is value for value in attribute_values)
        typed.append(_typed(function_name, index, item, want, from_attribute))
    for index, tensor in enumerate(typed):
        want = declared[index] if declared is not None else None
        if not isinstance(tensor, EagerTensor) or not isinstance(want, ir.TensorType):
            continue
        if python_function is None:  # a @graph() body: element types only, as compiled
            _check_elem(function_name, index, tensor.elem_type, want.elem_type)
        elif not fits_declared(tensor.array.shape, tensor.elem_type, want, check_ranks):
            _refuse_result(python_function, len(typed), index, tensor, want)
    return tuple(typed) if many else typed[0]


def _is_size_tuple(result: tuple[Any, ...]) -> bool:
    """A tuple of Python ints (a shape), which the compiler returns as one INT64 tensor."""
    return all(isinstance(part, (int, np.integer)) and not isinstance(part, (bool, np.bool_)) for part in result)


def _refuse_result(python_function: Any, count: int, index: int, tensor: EagerTensor, want: Any) -> None:
    """Raise the compiler's error for result ``index``, at the ``return`` that gave it."""
    location, names = return_site(python_function, count)
    check_output_elem(index, tensor.elem_type, want, location)
    check_declared(output_label(index, names[index]), tensor.array.shape, tensor.elem_type, want, location,
                   OUTPUT_HINT)


def _typed(function_name: str, index: int, item: Any, want: Any, from_attribute: bool) -> Any:
    elem = want.elem_type if isinstance(want, ir.TensorType) else None
    if isinstance(item, EagerSequence):
        return _typed_sequence(function_name, index, item, want)
    if isinstance(item, EagerTensor):
        tensor = item
    elif isinstance(item, (np.ndarray, np.generic)):
        tensor = EagerTensor(np.asarray(item))
    elif values.is_torch_tensor(item):
        tensor = EagerTensor(values.torch_to_numpy(item), True)
    elif isinstance(item, _LITERAL_TYPES):
        tensor = EagerTensor(_literal_array(function_name, index, item, elem, from_attribute))
    elif item is None:
        return None  # an empty optional (op.Optional(type=...)); compiled code has a value there
    else:
        raise DslTypeError(
            f"{function_name}: result {index} is a {type(item).__name__}, which is not a tensor",
            caller_location(),
            hint="return tensors (values computed by ops), numbers, or sequences made by op.SequenceConstruct",
        )
    return tensor


def _literal_array(function_name: str, index: int, item: Any, elem: int | None, from_attribute: bool) -> np.ndarray:
    own = types.element_type_of_python(item)
    if own is None:
        raise DslTypeError(
            f"{function_name}: result {index} is {item!r}, which is not a tensor",
            caller_location(),
            hint="return tensors, numbers or lists of numbers of one kind",
        )
    chosen = own
    if elem is not None:
        if from_attribute:
            chosen = elem  # compiled: Cast of the attribute's constant to the declared type
        else:
            chosen = literal_elem_type(_REPRESENTATIVE.get(own, item), elem) or own
    try:
        array = np.asarray(item, dtype=types.numpy_dtype(chosen))
    except (TypeError, ValueError, OverflowError) as err:
        raise DslTypeError(
            f"{function_name}: the constant {item!r} returned as result {index} does not fit "
            f"{types.element_type_name(chosen)}: {err}",
            caller_location(),
            hint="write a value of the result's element type, or cast explicitly with op.Cast",
        ) from None
    return array.astype(object) if chosen == types.STRING.enum else array


def _check_elem(function_name: str, index: int, have: int, want: int) -> None:
    if have != want:
        raise DslTypeError(
            f"{function_name}: result {index} is {types.element_type_name(have)} but the annotation says "
            f"{types.element_type_name(want)}",
            caller_location(),
            hint="cast the result with op.Cast(..., to=...) or fix the annotation",
        )


def _typed_sequence(function_name: str, index: int, items: list[Any], want: Any) -> EagerSequence:
    declared_elem = want.elem.elem_type if isinstance(want, ir.SequenceType) and isinstance(
        want.elem, ir.TensorType) else None
    known = getattr(items, "elem_type", None)
    arrays, elem, from_torch, _ = sequence_arrays(items, known)
    if declared_elem is not None and elem is not None:
        _check_elem(function_name, index, elem, declared_elem)
    return EagerSequence([EagerTensor(a, from_torch) for a in arrays], elem or declared_elem)
