"""A model's inputs as the runner receives them: by position or by name, numpy or torch.

``eager.run`` and the whole-model session both bind what the user passed to the
model's input names here, so a missing, unknown or mistyped input is the same
``DslError`` whichever way the model ends up running; the check happens before
any kernel is built, at the user's call.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnx

from dsl import types
from dsl.errors import DslTypeError, EagerError, ModelLoadError, ModelWarning
from eager import values
from eager.call_site import caller_location

__all__ = ["as_value", "bind_inputs", "check_declared", "quick_checks"]


QuickCheck = tuple[np.dtype, int, tuple[tuple[int, int], ...]]


def quick_checks(declared: dict[str, onnx.TypeProto]) -> dict[str, QuickCheck]:
    """Per input, what an array that passes :func:`check_declared` has: its dtype, rank
    and the fixed sizes ``(axis, size)``; read once per model so a warm run compares
    three things instead of walking the TypeProto.  Inputs whose declaration a dtype
    cannot say exactly (no tensor type, an element type that shares its numpy dtype,
    a negative size that warns) are left out: they take the full check.

    >>> import onnx.helper as oh
    >>> quick_checks({"x": oh.make_tensor_type_proto(1, [2, "n"])})["x"]
    (dtype('float32'), 2, ((0, 2),))
    """
    found: dict[str, QuickCheck] = {}
    for name, proto in declared.items():
        tensor_type = proto.tensor_type if proto.HasField("tensor_type") else None
        if tensor_type is None or not tensor_type.elem_type or not tensor_type.HasField("shape"):
            continue
        try:
            dtype = np.dtype(types.numpy_dtype(tensor_type.elem_type))
        except Exception:  # (any element type numpy cannot hold: the full check names it)
            continue
        if values.elem_type_of_array(np.empty(0, dtype)) != tensor_type.elem_type or dtype.kind in "OUS":
            continue
        dims = tensor_type.shape.dim
        if any(d.HasField("dim_value") and d.dim_value < 0 for d in dims):
            continue
        fixed = tuple((axis, d.dim_value) for axis, d in enumerate(dims) if d.HasField("dim_value"))
        found[name] = (dtype, len(dims), fixed)
    return found


def bind_inputs(names: list[str], inputs: Any, declared: dict[str, onnx.TypeProto], env: dict[str, Any],
                quick: dict[str, QuickCheck] | None = None) -> None:
    """Bind ``inputs`` (a list in order, or a dict by name) to ``names`` in ``env``,
    each checked against its declared type (``quick``: :func:`quick_checks` of
    ``declared``, which a numpy input matching it passes without the full check)."""
    if isinstance(inputs, dict):
        unknown = [name for name in inputs if name not in names]
        if unknown:
            raise EagerError(
                f"the model has no input named {', '.join(map(repr, unknown))}",
                caller_location(),
                hint=f"its inputs are: {', '.join(names)}",
            )
        given = dict(inputs)
    else:
        inputs = list(inputs)
        if len(inputs) > len(names):
            raise EagerError(
                f"the model takes {len(names)} input(s), got {len(inputs)}",
                caller_location(),
                hint=f"its inputs are: {', '.join(names)}",
            )
        given = dict(zip(names, inputs))
    for name in names:
        if name not in given:
            if name in env:  # an initializer that doubles as an input with a default
                continue
            raise EagerError(f"input {name!r} of the model is missing", caller_location(),
                             hint=f"its inputs are: {', '.join(names)}")
        value = given[name]
        expected = quick.get(name) if quick is not None else None
        if expected is not None and type(value) is np.ndarray and _passes(value, expected):
            env[name] = value
            continue
        value = as_value(value)
        check_declared(name, value, declared.get(name))
        env[name] = value


def _passes(value: np.ndarray, expected: QuickCheck) -> bool:
    dtype, rank, fixed = expected
    if value.dtype != dtype or value.ndim != rank:
        return False
    shape = value.shape
    return all(shape[axis] == size for axis, size in fixed)


def as_value(value: Any) -> Any:
    if isinstance(value, list):
        return [as_value(v) for v in value]
    if values.is_torch_tensor(value):
        return values.torch_to_numpy(value)
    if value is None:
        return None
    array = np.asarray(value)
    return array.astype(object) if array.dtype.kind in "US" else array


_KNOWN_ELEM_TYPES = frozenset(t.enum for t in types.ELEMENT_TYPES.values())


def check_declared(name: str, value: Any, declared: onnx.TypeProto | None) -> None:
    if declared is None or not declared.HasField("tensor_type") or not isinstance(value, np.ndarray):
        return
    tensor_type = declared.tensor_type
    elem = values.elem_type_of_array(value)
    if tensor_type.elem_type and tensor_type.elem_type not in _KNOWN_ELEM_TYPES:
        raise ModelLoadError(f"input {name!r} of the model declares the element type {tensor_type.elem_type}, "
                             "which onnx does not define", caller_location(),
                             hint="the file may be damaged; re-export or re-download it")
    if tensor_type.elem_type and elem is not None and elem != tensor_type.elem_type:
        raise DslTypeError(
            f"input {name!r} of the model is {types.element_type_name(tensor_type.elem_type)}, got "
            f"{types.element_type_name(elem)}{list(value.shape)}",
            caller_location(),
            hint=f"convert it with .astype({types.numpy_dtype(tensor_type.elem_type).name!r})",
        )
    if tensor_type.HasField("shape"):
        dims = tensor_type.shape.dim
        if len(dims) != value.ndim:
            raise DslTypeError(
                f"input {name!r} of the model has rank {len(dims)}, got shape {list(value.shape)}",
                caller_location(),
            )
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value < 0:
                _warn_negative_size(name, axis, dim.dim_value)
            elif dim.HasField("dim_value") and dim.dim_value != value.shape[axis]:
                raise DslTypeError(
                    f"input {name!r} of the model has size {dim.dim_value} on axis {axis}, got shape "
                    f"{list(value.shape)}",
                    caller_location(),
                )


def _warn_negative_size(name: str, axis: int, size: int) -> None:
    """A negative declared size (exporters write ``-1`` for a batch) is an unknown one to
    onnxruntime, which runs the model: so it is here, with a warning."""
    warnings.warn(f"input {name!r} of the model declares the size {size} on axis {axis}: read as an unknown size, "
                  "as onnxruntime does (ONNX sizes are >= 0)", ModelWarning, stacklevel=2)
