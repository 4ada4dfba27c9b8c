"""The leaves of the structural comparison, and how a difference is reported.

:mod:`converter.compare` pairs values and nodes of two protos; where the walk reaches
something compared by content — a value's type, a tensor (initializer or attribute),
a sparse tensor, a float attribute — it asks this module.  The first difference found
is raised as :class:`Different`, whose text says what differs and, through the
:class:`Step` chain the walk keeps, the way back from there to a graph output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = [
    "Different",
    "Step",
    "render",
    "at_step",
    "compare_types",
    "compare_tensors",
    "compare_sparse",
    "same_floats",
    "tensor_key",
    "sparse_key",
]


class Different(Exception):
    """The first difference; its text is what :func:`first_difference` returns."""


@dataclass(slots=True)
class Step:
    """How the walk reached a value pair, kept as a linked list and rendered only on failure."""

    label: str
    parent: Step | None


def render(step: Step | None) -> str:
    """The way back to a graph output, innermost first; long paths keep both ends."""
    labels: list[str] = []
    while step is not None:
        labels.append(step.label)
        step = step.parent
    if len(labels) > 8:
        labels = [*labels[:6], f"... {len(labels) - 7} more ...", labels[-1]]
    return " <- ".join(labels)


def at_step(step: Step | None) -> str:
    """``(at <path>)`` for a difference found below a graph output, else nothing."""
    return f"(at {render(step)})" if step is not None else ""


def compare_types(type_a: Any, type_b: Any, label: str, strict: bool, step: Step | None) -> None:
    """Main-graph inputs and outputs: equal types.  Subgraphs: compatible ones, since a
    subgraph's declared types only restate what its nodes compute (a round trip may
    leave out a shape the original spelled out)."""
    if strict:
        if type_a != type_b and _type_text(type_a) != _type_text(type_b):
            raise Different(f"{label}: type {_type_text(type_a)} vs {_type_text(type_b)} {at_step(step)}")
    elif not _compatible(type_a, type_b):
        raise Different(f"{label}: incompatible types {_type_text(type_a)} vs {_type_text(type_b)} {at_step(step)}")


def _compatible(type_a: Any, type_b: Any) -> bool:
    which_a, which_b = type_a.WhichOneof("value"), type_b.WhichOneof("value")
    if which_a is None or which_b is None:
        return True
    if which_a != which_b:
        return False
    if which_a in ("tensor_type", "sparse_tensor_type"):
        tensor_a, tensor_b = getattr(type_a, which_a), getattr(type_b, which_b)
        if tensor_a.elem_type and tensor_b.elem_type and tensor_a.elem_type != tensor_b.elem_type:
            return False
        if not (tensor_a.HasField("shape") and tensor_b.HasField("shape")):
            return True
        if len(tensor_a.shape.dim) != len(tensor_b.shape.dim):
            return False
        return all(
            not (a.HasField("dim_value") and b.HasField("dim_value")) or a.dim_value == b.dim_value
            or min(a.dim_value, b.dim_value) < 0  # (a negative size is an unknown one, as onnxruntime reads it)
            for a, b in zip(tensor_a.shape.dim, tensor_b.shape.dim)
        )
    if which_a == "sequence_type":
        return _compatible(type_a.sequence_type.elem_type, type_b.sequence_type.elem_type)
    if which_a == "optional_type":
        return _compatible(type_a.optional_type.elem_type, type_b.optional_type.elem_type)
    return bool(type_a == type_b)


def _type_text(type_proto: Any) -> str:
    which = type_proto.WhichOneof("value")
    if which is None:
        return "untyped"
    if which in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(type_proto, which)
        elem = _dtype_text(tensor.elem_type) if tensor.elem_type else "?"
        if not tensor.HasField("shape"):
            return f"{elem}[...]"
        dims = [
            # (a negative size is an unknown one, as onnxruntime reads it and the converter writes it back)
            str(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0
            else (repr(d.dim_param) if d.HasField("dim_param") else "?")
            for d in tensor.shape.dim
        ]
        return f"{elem}[{', '.join(dims)}]"
    if which == "sequence_type":
        return f"Sequence[{_type_text(type_proto.sequence_type.elem_type)}]"
    if which == "optional_type":
        return f"Optional[{_type_text(type_proto.optional_type.elem_type)}]"
    if which == "map_type":
        return f"Map[{type_proto.map_type.key_type}, {_type_text(type_proto.map_type.value_type)}]"
    return which


def _dtype_text(elem_type: int) -> str:
    """``TensorProto.FLOAT``; a number no onnx release defines (a corrupt model) as itself."""
    try:
        return onnx.helper.tensor_dtype_to_string(elem_type)
    except (KeyError, ValueError):
        return f"element type {elem_type}"


def compare_tensors(tensor_a: Any, tensor_b: Any, label: str, step: Step | None) -> None:
    """Equal element type, shape and values (NaN equal to NaN), else :class:`Different`."""
    where = _Where(step, label)
    if tensor_a.data_type != tensor_b.data_type:
        raise Different(
            f"{where}: element type {_dtype_text(tensor_a.data_type)} vs {_dtype_text(tensor_b.data_type)}"
        )
    if list(tensor_a.dims) != list(tensor_b.dims):
        raise Different(f"{where}: shape {list(tensor_a.dims)} vs {list(tensor_b.dims)}")
    array_a = _tensor_array(tensor_a)
    array_b = _tensor_array(tensor_b)
    if array_a.dtype == object or array_b.dtype == object:
        same = array_a.tolist() == array_b.tolist()
    elif array_a.tobytes() == array_b.tobytes():
        same = True
    else:
        same = array_a.dtype.kind in "fc" and _same_float_values(array_a, array_b)
        if not same and array_a.dtype.kind == "V":
            # ml_dtypes floats: NaNs with different payloads are still the same value.
            try:
                same = _same_float_values(array_a.astype(np.float32), array_b.astype(np.float32))
            except (TypeError, ValueError):
                same = False
    if not same:
        flat_a = array_a.reshape(-1)
        flat_b = array_b.reshape(-1)
        first = next((i for i in range(flat_a.size) if flat_a[i].tobytes() != flat_b[i].tobytes()), 0)
        raise Different(f"{where}: values differ at flat index {first} ({flat_a[first]!r} vs {flat_b[first]!r})")


class _Where:
    """The place of a tensor comparison, rendered only when there is a difference."""

    __slots__ = ("label", "step")

    def __init__(self, step: Step | None, label: str) -> None:
        self.step = step
        self.label = label

    def __str__(self) -> str:
        return f"{render(self.step)}: {self.label}" if self.step is not None else self.label


def compare_sparse(sparse_a: Any, sparse_b: Any, label: str, step: Step | None) -> None:
    """Equal dims, values and indices of two sparse tensors, else :class:`Different`."""
    if list(sparse_a.dims) != list(sparse_b.dims):
        raise Different(f"{render(step)}: {label}: dims {list(sparse_a.dims)} vs {list(sparse_b.dims)}")
    compare_tensors(sparse_a.values, sparse_b.values, f"{label} values", step)
    compare_tensors(sparse_a.indices, sparse_b.indices, f"{label} indices", step)


def same_floats(first: Any, second: Any) -> bool:
    """Float attribute values equal as float32 (NaN equal to NaN, -0.0 not equal to 0.0)."""
    return _same_float_values(np.asarray(first, dtype=np.float32), np.asarray(second, dtype=np.float32))


def _same_float_values(first: np.ndarray, second: np.ndarray) -> bool:
    """Equal values, NaN equal to NaN whatever its payload, and the same sign of every zero
    (``1 / -0.0`` is ``-inf``: a Constant of -0.0 computes something else than one of 0.0)."""
    if not np.array_equal(first, second, equal_nan=True):
        return False
    if first.dtype.kind != "f":
        return True
    return bool(np.array_equal(np.signbit(first) | np.isnan(first), np.signbit(second) | np.isnan(second)))


def _tensor_array(tensor: Any) -> np.ndarray:
    if tensor.data_type == onnx.TensorProto.STRING and tensor.data_location != onnx.TensorProto.EXTERNAL:
        strings = np.empty(len(tensor.string_data), dtype=object)
        strings[:] = list(tensor.string_data)  # raw bytes: not every string is UTF-8
        return strings
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError, OSError, onnx.checker.ValidationError) as error:
        # Data that does not match its shape or type, or is missing: as with a name nothing
        # defines, a malformed proto is reported, not compared.
        raise Different(f"tensor {tensor.name!r}: its data cannot be read ({error})") from None


def tensor_key(tensor: Any) -> tuple[Any, ...]:
    """A hashable stand-in for a tensor's type, shape and content (unused initializers are a multiset)."""
    array = _tensor_array(tensor)
    payload = repr(array.tolist()) if array.dtype == object else array.tobytes()
    return (tensor.data_type, tuple(tensor.dims), payload)


def sparse_key(sparse: Any) -> tuple[Any, ...]:
    """:func:`tensor_key` of a sparse tensor: its values, indices and dims."""
    return (tensor_key(sparse.values), tensor_key(sparse.indices), tuple(sparse.dims))
