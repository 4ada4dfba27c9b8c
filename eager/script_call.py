"""Calling a ``@script`` function with arrays: its Python body runs as Python.

The body is not compiled: ``script_function.python_function`` is called with the tensor
arguments wrapped in :class:`EagerTensor`, so ``if``/``for``/``while`` run natively, a
breakpoint stops on real values, and a traceback points at the user's own line.  Ops
and operators inside run one by one through :func:`eager.call_op`.  Parameters
annotated with a tensor type are checked (element type, rank) before the body starts
(in a call from another eagerly running body: as the compiler checks a call of a
scripted function, with its message at the argument; :mod:`dsl.annotation_checks`);
Python numbers given for them become tensors of the annotated type, as a constant would
in the exported model; ``Sequence[...]`` parameters take lists of tensors and
``Optional[...]`` ones None.  Attribute parameters are passed through unchanged.  The
results are typed by the return annotation as the compiler types them
(:mod:`eager.results`): ``return 0.0`` under ``-> DOUBLE`` is a float64 0.0; and checked
against it (element type, rank, static sizes), with the compiler's message at ``return``.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import numpy as np

from dsl import ir, types
from dsl.annotation_checks import argument_hint, check_declared, fits_declared, inputs_fix_ranks
from dsl.errors import DslTypeError
from eager import values
from eager.annotation_sites import argument_location
from eager.call_site import caller_location
from eager.results import declared_results, typed_results
from eager.script_context import IN_EAGER_SCRIPT, OPERATOR_OPSET
from eager.sequences import EagerSequence, sequence_arrays
from eager.tensor import EagerTensor

__all__ = ["call_script"]

_SIGNATURES: weakref.WeakKeyDictionary[
    Any, tuple[inspect.Signature, dict[str, Any], tuple[tuple[str, Any], ...], tuple[tuple[str, int], ...] | None]
] = weakref.WeakKeyDictionary()


def _signature(
    python_function: Any, defining_locals: dict[str, Any] | None = None
) -> tuple[inspect.Signature, dict[str, Any], tuple[tuple[str, Any], ...], tuple[tuple[str, int], ...] | None]:
    """The signature, the IR type of each parameter, the attribute parameters with defaults,
    and each tensor parameter's declared rank, or None where one has any rank (no
    annotation, ``FLOAT[...]``, a TypeVar: then the results' ranks are the body's);
    ``defining_locals`` are the names of the function a nested ``def`` was decorated in."""
    found = _SIGNATURES.get(python_function)
    if found is None:
        signature = inspect.signature(python_function)
        annotations: dict[str, Any] = {}
        open_rank = False
        for name, parameter in signature.parameters.items():
            annotation = parameter.annotation
            if isinstance(annotation, str):
                annotation = _resolve_string_annotation(python_function, annotation, defining_locals)
            understood, annotations[name] = types.read_annotation(annotation)
            open_rank = open_rank or annotation is inspect.Parameter.empty or (
                understood and not inputs_fix_ranks([annotations[name]]))
        attribute_parameters = tuple(
            (name, parameter.default) for name, parameter in signature.parameters.items() if annotations[name] is None
        )
        found = (signature, annotations, attribute_parameters, None if open_rank else _declared_ranks(annotations))
        _SIGNATURES[python_function] = found
    return found


def _resolve_string_annotation(python_function: Any, text: str, defining_locals: dict[str, Any] | None) -> Any:
    try:  # annotations under `from __future__ import annotations`
        return eval(text, getattr(python_function, "__globals__", {}), dict(defining_locals or {}))
    except Exception:
        return None


def call_script(script_function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a scripted function's Python body on real values; what ``fn(x, y)`` does.

    Arrays (numpy or torch) come in; numpy arrays come out (torch tensors if torch came
    in), a tuple for several outputs.  Inside another eagerly running body the results
    stay EagerTensors.

    >>> import numpy as np
    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def double(x: FLOAT[...]) -> FLOAT[...]:
    ...     return x + x
    >>> double(np.array([1.0], dtype=np.float32))        # doctest: +SKIP
    array([2.], dtype=float32)
    """
    python_function = script_function.python_function
    signature, annotations, attribute_parameters, declared_ranks = _signature(
        python_function, getattr(script_function, "defining_locals", None))
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:
        raise DslTypeError(
            f"{script_function.name}: {err}",
            caller_location(),
            hint=f"the parameters of {script_function.name} are {signature}",
        ) from None
    nested = IN_EAGER_SCRIPT.get()
    torch_in = False
    for name, value in bound.arguments.items():
        wrapped, from_torch = _wrap(script_function.name, name, value, annotations.get(name),
                                    signature if nested else None)
        bound.arguments[name] = wrapped
        torch_in = torch_in or from_torch
    # (the outermost call's arguments were checked for their declared ranks just above)
    check_ranks = declared_ranks is not None and (not nested or _ranks_kept(declared_ranks, bound.arguments))
    in_script = IN_EAGER_SCRIPT.set(True)
    opset = script_function.opset if script_function.opset is not None else _opset_named_in_body(python_function)
    opset_token = OPERATOR_OPSET.set(opset) if opset is not None else None
    try:
        result = python_function(*bound.args, **bound.kwargs)
        attribute_values = tuple(bound.arguments.get(name, default) for name, default in attribute_parameters)
        result = typed_results(script_function.name, result, declared_results(python_function), attribute_values,
                               python_function, check_ranks)
    finally:
        IN_EAGER_SCRIPT.reset(in_script)
        if opset_token is not None:
            OPERATOR_OPSET.reset(opset_token)
    if nested:
        return result
    return _unwrap(result, torch_in)


def _declared_ranks(annotations: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Each tensor parameter's declared rank (sequences aside)."""
    found = []
    for name, declared in annotations.items():
        while isinstance(declared, ir.OptionalType):
            declared = declared.elem
        if isinstance(declared, ir.TensorType) and declared.shape is not None:
            found.append((name, len(declared.shape)))
    return tuple(found)


def _ranks_kept(declared_ranks: tuple[tuple[str, int], ...], arguments: dict[str, Any]) -> bool:
    """Whether a call from another body passes tensors of the declared ranks, so that the
    results are checked against the return annotation's ranks, as the compiler checks
    them at such a call (:func:`dsl.annotation_checks.arguments_keep_ranks`)."""
    for name, rank in declared_ranks:
        value = arguments.get(name)
        if type(value) is EagerTensor and value.array.ndim != rank:
            return False
    return True


def _wrap(function_name: str, name: str, value: Any, declared: Any,
          called_from_script: inspect.Signature | None = None) -> tuple[Any, bool]:
    """``value`` as the body sees it, checked against ``declared``.  The outermost call
    checks its inputs' element types, ranks and static sizes (the model's inputs); a call
    from another eagerly running body (``called_from_script`` is the callee's signature,
    to find the argument's text) is checked as the compiler checks a call of a scripted
    function, with the compiler's message."""
    if isinstance(declared, ir.OptionalType):
        return (None, False) if value is None else _wrap(function_name, name, value, declared.elem,
                                                         called_from_script)
    if isinstance(declared, ir.SequenceType) and isinstance(value, (list, tuple)):
        return _wrap_sequence(function_name, name, value, declared)
    if isinstance(value, EagerTensor):
        _check(function_name, name, value.array, declared, called_from_script)
        return value, value.from_torch
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        _check(function_name, name, array, declared, called_from_script)
        return EagerTensor(array), False
    if values.is_torch_tensor(value):
        array = values.torch_to_numpy(value)
        _check(function_name, name, array, declared, called_from_script)
        return EagerTensor(array, True), True
    if isinstance(declared, ir.TensorType) and isinstance(value, (bool, int, float, list, tuple)):
        try:
            array = np.asarray(value, dtype=types.numpy_dtype(declared.elem_type))
        except (TypeError, ValueError, OverflowError) as err:
            raise DslTypeError(
                f"{function_name}: argument {name!r} is declared {declared!r}, got {value!r} ({err})",
                caller_location(),
            ) from None
        _check(function_name, name, array, declared, called_from_script)
        return EagerTensor(array), False
    return value, False


def _check(function_name: str, name: str, array: np.ndarray, declared: Any,
           called_from_script: inspect.Signature | None) -> None:
    if called_from_script is None:
        _check_declared(function_name, name, array, declared)
        return
    # A call of a model-local function: ONNX checks no ranks there (a scalar may stand for
    # a one-element input), but the compiler refuses a static size or element type that
    # disagrees, at the argument.
    elem = values.elem_type_of_array(array)
    if fits_declared(array.shape, elem, declared, check_rank=False):
        return
    check_declared(f"input {name!r} of {function_name}", array.shape, elem, declared,
                   argument_location(called_from_script, name), argument_hint(function_name, name, declared),
                   check_rank=False)


def _wrap_sequence(
    function_name: str, name: str, value: list[Any] | tuple[Any, ...], declared: ir.SequenceType
) -> tuple[EagerSequence, bool]:
    """A list of tensors for a ``Sequence[...]`` parameter: an EagerSequence, each item checked."""
    item_type = declared.elem if isinstance(declared.elem, ir.TensorType) else None
    for position, item in enumerate(value):
        if isinstance(item, (EagerTensor, np.ndarray)) or values.is_torch_tensor(item):
            array = values.torch_to_numpy(item) if values.is_torch_tensor(item) else np.asarray(item)
            _check_declared(function_name, f"{name}[{position}]", array, item_type)
    arrays, elem, from_torch, _ = sequence_arrays(list(value), getattr(value, "elem_type", None))
    if elem is None and item_type is not None:
        elem = item_type.elem_type
    return EagerSequence([EagerTensor(a, from_torch) for a in arrays], elem), from_torch


def _check_declared(function_name: str, name: str, array: np.ndarray, declared: Any) -> None:
    if not isinstance(declared, ir.TensorType):
        return
    elem = values.elem_type_of_array(array)
    if elem is not None and elem != declared.elem_type and not (
        elem == types.STRING.enum and declared.elem_type == types.STRING.enum
    ):
        raise DslTypeError(
            f"{function_name}: argument {name!r} is declared {declared!r}, got "
            f"{types.element_type_name(elem)}{list(array.shape)}",
            caller_location(),
            hint=f"convert it: x.astype({types.numpy_dtype(declared.elem_type).name!r})",
        )
    if declared.shape is None:
        return
    if len(declared.shape) != array.ndim:
        raise DslTypeError(
            f"{function_name}: argument {name!r} is declared {declared!r} (rank {len(declared.shape)}), got shape "
            f"{list(array.shape)} (rank {array.ndim})",
            caller_location(),
            hint="reshape the input, or declare the parameter with [...] for any rank",
        )
    for axis, (want, got) in enumerate(zip(declared.shape, array.shape)):
        if isinstance(want, int) and want != got:
            raise DslTypeError(
                f"{function_name}: argument {name!r} is declared {declared!r}, got shape {list(array.shape)} "
                f"(axis {axis} is {got}, not {want})",
                caller_location(),
            )


def _unwrap(result: Any, torch_in: bool) -> Any:
    """Typed results (see eager.results) as the caller gets them: numpy arrays (torch
    tensors if torch came in), plain lists for sequences, None for an empty optional."""
    if isinstance(result, tuple):
        return tuple(_unwrap(item, torch_in) for item in result)
    if isinstance(result, list):
        return [_unwrap(item, torch_in) for item in result]
    if isinstance(result, EagerTensor):
        return values.numpy_to_torch(result.array) if torch_in else result.array
    return result


def _opset_named_in_body(python_function: Any) -> Any:
    """The one ai.onnx opset the body names (``op.Relu`` with ``from dsl import opset18 as op``),
    which the compiler would infer too: ``x @ w`` then runs (and fails) at the opset the user
    imported, not the newest.  None when the body names no ai.onnx opset, or several."""
    from dsl.opsets import Opset

    code = getattr(python_function, "__code__", None)
    if code is None:
        return None
    scope = getattr(python_function, "__globals__", {})
    named = [scope.get(name) for name in code.co_names]
    for cell in getattr(python_function, "__closure__", None) or ():
        try:
            named.append(cell.cell_contents)
        except ValueError:  # (a cell not bound yet)
            continue
    found = {value.version: value for value in named if isinstance(value, Opset) and value.domain == ""}
    return next(iter(found.values())) if len(found) == 1 else None
