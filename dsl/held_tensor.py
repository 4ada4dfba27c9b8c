"""A constant tensor that keeps the serialized TensorProto it was read from, undecoded.

Composition (``converter.merge``, ``converter.cut``) reads models, rewires and renames
their values and writes them back: the hundreds of small weights of an exported model
are carried over untouched.  Decoding each into an array and encoding it again costs
more than the rest of their journey, so a front end reading for a writer may make an
initializer a :class:`HeldTensor`: it keeps the serialized proto and what the IR needs
eagerly (element type, shape, name, doc string), and its ``array`` is made on first
read.  A writer asks :meth:`HeldTensor.unchanged_proto` for the bytes to copy.

What keeps a stale byte from being written: while an object is a HeldTensor, its
``array`` slot holds its :data:`HeldBytes`; reading ``array`` decodes them (a read-only
array, as every array read from a proto is), and reading or assigning ``array`` makes
the object a plain :class:`ir.Tensor` for good, so ``type(tensor) is HeldTensor`` means
the array was never read nor replaced.  ``elem_type`` and ``doc_string`` are compared
with those read before the bytes are given out.  The name is the writer's to write:
protobuf keeps the last of a field given twice, so a writer renames the copy by
appending the current name.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dsl import ir

__all__ = ["HeldTensor", "HeldBytes", "hold"]

# What a front end read, in the ``array`` slot of a HeldTensor: (the serialized
# TensorProto, where its raw data starts, its dims, the numpy dtype of its raw data,
# and the elem_type, name and doc string in the proto).  A plain tuple: one is made per
# initializer read, and a class would cost more than the rest of the reading.
HeldBytes = tuple[bytes, int, list[int], np.dtype, int, str, str]

_ARRAY: Any = ir.Tensor.__dict__["array"]  # the slot itself, below the property of HeldTensor


class HeldTensor(ir.Tensor):
    """An :class:`ir.Tensor` whose data is still the bytes of the proto it was read from
    (see the module's docstring); made by :func:`hold`.

    >>> import numpy as np
    >>> tensor = hold((b"\\x08\\x01\\x10\\x01J\\x04\\x00\\x00\\x80?", 6, [1], np.dtype("<f4"), 1, "", ""))
    >>> tensor.shape, type(tensor).__name__
    ((1,), 'HeldTensor')
    >>> tensor.array, type(tensor).__name__
    (array([1.], dtype=float32), 'Tensor')
    """

    __slots__ = ()

    @property  # (over the slot of ir.Tensor, which holds the HeldBytes meanwhile)
    def array(self) -> np.ndarray:
        serialized, start, dims, dtype, *_ = _ARRAY.__get__(self)
        # (a copy of the data, as TensorProto.raw_data gives: aligned, immutable bytes)
        raw = serialized[start:start + dtype.itemsize * math.prod(dims)]
        array = np.frombuffer(raw, dtype) if len(dims) == 1 else np.ndarray(dims, dtype, raw)
        self.array = array
        return array

    @array.setter
    def array(self, array: np.ndarray) -> None:
        _ARRAY.__set__(self, array)
        self.__class__ = ir.Tensor  # type: ignore[assignment]  # (the same slots: the held bytes are gone)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(_ARRAY.__get__(self)[2])

    def __reduce__(self) -> tuple[Any, ...]:
        # (a copy or a pickle is a plain Tensor of the decoded array: by default the class
        # would be taken before the state, whose reading makes this one a plain Tensor)
        return ir.Tensor, (self.array, self.elem_type, self.name, self.doc_string)

    def unchanged_proto(self) -> tuple[bytes, str] | None:
        """The serialized TensorProto and the name it holds, or None where ``elem_type`` or
        ``doc_string`` was changed since (the tensor must then be written from its array).
        The caller writes the tensor's current name itself."""
        serialized, _, _, _, elem_type, name, doc_string = _ARRAY.__get__(self)
        if self.elem_type != elem_type or self.doc_string != doc_string:
            return None
        return serialized, name


def hold(held: HeldBytes) -> HeldTensor:
    """A :class:`HeldTensor` of ``held``: the caller vouches that its bytes are a TensorProto
    holding exactly the dims, ``raw_data`` (where ``held[1]`` says), elem_type, name and doc
    string given, in the order protobuf writes them, and nothing else."""
    tensor = ir.Tensor(held, held[4], held[5], held[6])  # type: ignore[arg-type]  # (the array slot holds them)
    tensor.__class__ = HeldTensor
    return tensor  # type: ignore[return-value]  # (its class is)
