"""numpy's array methods and attributes on eager values, for looking at them.

In a debugger or a notebook an eager value should answer what a numpy array answers:
``scores.max()``, ``x.mean(axis=-1)``, ``x.tolist()``, ``np.isnan(x).any()``,
``np.allclose(x, expected)``.  :class:`NumpyInspection` gives :class:`~eager.tensor.EagerTensor`
those methods, each computed by numpy on the value's array, with numpy's result: a
scalar or a list comes back as numpy gives it, an array comes back as an EagerTensor
holding numpy's array (same dtype, shape and values), so that an operator applied to it
afterwards still means what it means in the exported graph.

Operators keep ONNX semantics everywhere, numpy ufuncs included: ``a + t`` with ``a`` a
numpy array runs ``np.add(a, t)``, which numpy hands to :meth:`__array_ufunc__`, and the
ufuncs that stand for Python operators (``np.add``, ``np.less``, ``np.negative``...)
run the ONNX op the compiler emits for the operator.  Every other ufunc (``np.exp``,
``np.isnan``) and every numpy function (``np.mean``, ``np.concatenate``) computes numpy's
result.  The compiler rejects these methods inside ``@script`` (tensors have no
attributes there): they are for inspection, as ``print`` is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl.errors import DslTypeError

__all__ = ["NumpyInspection"]

# The ufuncs numpy runs for Python's operators, by the name dsl.operators gives each operator.
_BINARY_OPERATOR_UFUNCS: dict[Any, str] = {
    np.add: "Add",
    np.subtract: "Sub",
    np.multiply: "Mult",
    np.true_divide: "Div",
    np.matmul: "MatMult",
    np.power: "Pow",
    np.remainder: "Mod",
    np.bitwise_and: "BitAnd",
    np.bitwise_or: "BitOr",
    np.bitwise_xor: "BitXor",
}
_COMPARISON_UFUNCS: dict[Any, str] = {
    np.equal: "Eq",
    np.not_equal: "NotEq",
    np.less: "Lt",
    np.less_equal: "LtE",
    np.greater: "Gt",
    np.greater_equal: "GtE",
}
_UNARY_OPERATOR_UFUNCS: dict[Any, str] = {np.negative: "USub", np.positive: "UAdd", np.invert: "Invert"}


def _arrays_of(value: Any) -> Any:
    """``value`` with every eager value in it (inside lists, tuples, dicts) replaced by its array."""
    if isinstance(value, NumpyInspection):
        return value.array
    if isinstance(value, (list, tuple)):
        return type(value)(_arrays_of(item) for item in value)
    if isinstance(value, dict):
        return {key: _arrays_of(item) for key, item in value.items()}
    return value


class NumpyInspection:
    """numpy's methods and attributes for a class holding ``array`` and ``from_torch``.

    >>> import numpy as np
    >>> from eager import EagerTensor
    >>> x = EagerTensor(np.array([[1.0, 4.0], [3.0, 2.0]], dtype=np.float32))
    >>> x.max(), x.argmax(axis=1).tolist(), x.T.shape
    (np.float32(4.0), [1, 0], (2, 2))
    """

    __slots__ = ()
    array: np.ndarray
    from_torch: bool

    def _result(self, value: Any) -> Any:
        """numpy's result, its arrays made eager values again (scalars and lists as they are)."""
        if type(value) is np.ndarray:
            return type(self)(value, self.from_torch)  # type: ignore[call-arg]
        if type(value) is tuple:
            return tuple(self._result(item) for item in value)
        if type(value) is list and value and type(value[0]) is np.ndarray:
            return [self._result(item) for item in value]
        return value

    # ----------------------------------------------------------------- attributes

    @property
    def size(self) -> int:
        return int(self.array.size)

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    @property
    def itemsize(self) -> int:
        return int(self.array.itemsize)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(self.array.strides)

    @property
    def T(self) -> Any:
        return self._result(self.array.T)

    @property
    def real(self) -> Any:
        return self._result(self.array.real)

    @property
    def imag(self) -> Any:
        return self._result(self.array.imag)

    # -------------------------------------------------------------------- methods

    def all(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.all(*args, **_arrays_of(kwargs)))

    def any(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.any(*args, **_arrays_of(kwargs)))

    def argmax(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.argmax(*args, **_arrays_of(kwargs)))

    def argmin(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.argmin(*args, **_arrays_of(kwargs)))

    def argsort(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.argsort(*args, **kwargs))

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.astype(*args, **kwargs))

    def clip(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.clip(*_arrays_of(args), **_arrays_of(kwargs)))

    def conj(self) -> Any:
        return self._result(self.array.conj())

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.copy(*args, **kwargs))

    def cumprod(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.cumprod(*args, **kwargs))

    def cumsum(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.cumsum(*args, **kwargs))

    def diagonal(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.diagonal(*args, **kwargs))

    def dot(self, other: Any) -> Any:
        return self._result(self.array.dot(_arrays_of(other)))

    def flatten(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.flatten(*args, **kwargs))

    def item(self, *args: Any) -> Any:
        return self.array.item(*args)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.max(*args, **_arrays_of(kwargs)))

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.mean(*args, **_arrays_of(kwargs)))

    def min(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.min(*args, **_arrays_of(kwargs)))

    def nonzero(self) -> Any:
        return self._result(self.array.nonzero())

    def prod(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.prod(*args, **_arrays_of(kwargs)))

    def ravel(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.ravel(*args, **kwargs))

    def repeat(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.repeat(*_arrays_of(args), **kwargs))

    def reshape(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.reshape(*args, **kwargs))

    def round(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.round(*args, **kwargs))

    def squeeze(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.squeeze(*args, **kwargs))

    def std(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.std(*args, **_arrays_of(kwargs)))

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.sum(*args, **_arrays_of(kwargs)))

    def swapaxes(self, first: int, second: int) -> Any:
        return self._result(self.array.swapaxes(first, second))

    def take(self, indices: Any, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.take(_arrays_of(indices), *args, **kwargs))

    def tobytes(self, *args: Any, **kwargs: Any) -> bytes:
        return self.array.tobytes(*args, **kwargs)

    def tolist(self) -> Any:
        return self.array.tolist()

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.trace(*args, **kwargs))

    def transpose(self, *axes: Any) -> Any:
        return self._result(self.array.transpose(*axes))

    def var(self, *args: Any, **kwargs: Any) -> Any:
        return self._result(self.array.var(*args, **_arrays_of(kwargs)))

    # ------------------------------------------------------------ Python protocols

    def __iter__(self) -> Any:
        if self.array.ndim == 0:
            raise DslTypeError("iteration over a scalar tensor", hint="read its value with float(x) or x.item()")
        return (self._result(np.asarray(row)) for row in self.array)

    def __contains__(self, value: Any) -> bool:
        return bool((self.array == _arrays_of(value)).any())

    def __round__(self, digits: int | None = None) -> Any:
        if self.array.ndim != 0:  # (numpy arrays have no round() either: only their scalars)
            raise DslTypeError("round() of a tensor of rank > 0", hint="use x.round(decimals) or np.round(x)")
        scalar: Any = self.array[()]
        return round(scalar) if digits is None else round(scalar, digits)

    def __format__(self, spec: str) -> str:
        if not spec:
            return str(self)
        return format(self.array[()] if self.array.ndim == 0 else self.array, spec)

    # -------------------------------------------------------------- numpy protocols

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """Operator ufuncs run the ONNX op of their operator; every other ufunc is numpy's."""
        if method == "__call__" and not kwargs:
            tensor: Any = self  # (an EagerTensor: its operator methods run the ONNX ops)
            operator = _BINARY_OPERATOR_UFUNCS.get(ufunc)
            if operator is not None and len(inputs) == 2:
                return tensor._binary(operator, inputs[0], inputs[1])
            operator = _COMPARISON_UFUNCS.get(ufunc)
            if operator is not None and len(inputs) == 2:
                if inputs[0] is self:
                    return tensor._compare(operator, inputs[1])
                return tensor._compare(_MIRRORED[operator], inputs[0])
            operator = _UNARY_OPERATOR_UFUNCS.get(ufunc)
            if operator is not None and len(inputs) == 1:
                return tensor._unary(operator)
            if ufunc is np.floor_divide:
                return tensor.__floordiv__(inputs[1])  # (raises the compiler's error for //)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = _arrays_of(out)
        return self._result(getattr(ufunc, method)(*_arrays_of(inputs), **kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """numpy functions (``np.mean``, ``np.concatenate``...) compute numpy's result."""
        if not all(issubclass(kind, (NumpyInspection, np.ndarray)) for kind in types):
            return NotImplemented
        return self._result(func(*_arrays_of(args), **_arrays_of(kwargs)))


# a < b is b > a: a comparison with the eager value on the right, said from its side.
_MIRRORED = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE"}
