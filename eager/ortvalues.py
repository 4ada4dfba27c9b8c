"""Handing onnxruntime the element types its numpy bridge refuses, as raw buffers.

onnxruntime's ``session.run`` converts numpy arrays itself but knows neither the
``ml_dtypes`` dtypes (bfloat16, float8) nor the packed 2/4/6-bit layouts, and cannot
turn such outputs back into numpy.  These are passed as OrtValues instead: same-width
types are reinterpreted in place (``ortvalue_from_numpy_with_onnx_type``), packed ones
and scalars are allocated by onnxruntime and filled with ONNX's (packed) bytes (the same bytes
``numpy_helper.from_array`` puts in ``raw_data``); outputs are read back from
``data_ptr`` with ``tensor_size_in_bytes`` and unpacked by ``numpy_helper.to_array``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
from onnxruntime.capi import _pybind_state as ort_c

from dsl import types

__all__ = ["NUMPY_NATIVE", "PACKED", "to_ortvalue", "from_ortvalue"]

# Element types onnxruntime's numpy bridge converts itself (both ways).
NUMPY_NATIVE = frozenset(range(1, 16))
# Element types stored several to a byte in ONNX (and in onnxruntime's memory).
PACKED = frozenset({21, 22, 23, 25, 26, 27, 28})

_CPU = ort_c.OrtDevice(ort_c.OrtDevice.cpu(), ort_c.OrtDevice.default_memory(), 0)


def to_ortvalue(array: np.ndarray, elem_type: int, keep_alive: list[Any]) -> Any:
    """An OrtValue over ``array`` (zero-copy unless packed); ``keep_alive`` holds the memory."""
    if elem_type in NUMPY_NATIVE:
        keep_alive.append(array)
        return ort_c.OrtValue.ortvalue_from_numpy(array, _CPU)
    if elem_type not in PACKED and array.ndim:
        array = np.ascontiguousarray(array)
        keep_alive.append(array)
        return ort_c.OrtValue.ortvalue_from_numpy_with_onnx_type(array, elem_type)
    # A scalar goes through onnxruntime's allocator: ``ortvalue_from_numpy_with_onnx_type``
    # gives a 0-d array the shape [1], which an op such as Range then carries into its output.
    value = ort_c.OrtValue.ortvalue_from_shape_and_onnx_type(list(array.shape), elem_type, _CPU)
    packed = onnx.numpy_helper.from_array(array).raw_data
    size = min(len(packed), value.tensor_size_in_bytes())
    if size:
        ctypes.memmove(value.data_ptr(), packed, size)
    return value


def from_ortvalue(value: Any, elem_type: int | None) -> np.ndarray | None:
    """A numpy array (ml_dtypes dtype where needed) holding a copy of an output OrtValue."""
    if not value.has_value():
        return None
    if elem_type is None or elem_type in NUMPY_NATIVE:
        return value.numpy()
    shape = [int(d) for d in value.shape()]
    size = value.tensor_size_in_bytes()
    raw = ctypes.string_at(value.data_ptr(), size) if size else b""
    if elem_type in PACKED:
        proto = onnx.TensorProto(dims=shape, data_type=elem_type, raw_data=raw)
        return onnx.numpy_helper.to_array(proto)
    dtype = types.numpy_dtype(elem_type)
    return np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
