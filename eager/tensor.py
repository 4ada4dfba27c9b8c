"""EagerTensor: a concrete value inside an eagerly run ``@script`` body.

Its Python operators run the ONNX ops the compiler would emit for the same expression
(both read :mod:`dsl.operators`), so ``x % 2`` or ``a & b`` mean in a debugger exactly
what they mean in the exported graph — not numpy's promotion rules.  Conversions to
Python (``bool``, ``int``, ``float``, ``__index__``) let native ``if``/``for``/``while``
decide on real values; ``__array__`` hands the data to numpy and ``repr`` shows it;
numpy's array methods come from :class:`~eager.numpy_view.NumpyInspection` (operator
ufuncs, ``np.add(a, x)`` which ``a + x`` runs, keep ONNX semantics there too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import hooks, types
from dsl.dtypes import DType, dtype_mismatch, dtype_of, element_type_of
from dsl.errors import DslError, DslTypeError, UnsupportedSyntaxError
from dsl.operators import COMPARE, binary_spelling, literal_elem_type, unary_spelling, unsupported_operator
from eager.call_site import assigned_attribute_owner, caller_location
from eager.indexing import eager_getitem
from eager.numpy_view import NumpyInspection
from eager.script_context import operator_opset
from eager.values import ELEM_BY_DTYPE, elem_type_of_array, literal_input_array

__all__ = ["EagerTensor"]

_NO_ATTRIBUTES: dict[str, Any] = {}  # shared and never mutated: an eager op call only reads attributes


def _call(op_type: str, inputs: tuple[Any, ...], attributes: tuple[tuple[str, int], ...]) -> Any:
    # What ``op.Add(a, b)`` does in user code (Op.__call__), one call shorter: an operator
    # runs many times in a loop, and eager calls are timed in microseconds.
    op = operator_opset().get_op(op_type)
    return hooks.run_op_eagerly(op, inputs, dict(attributes) if attributes else _NO_ATTRIBUTES)


class EagerTensor(NumpyInspection):
    """A tensor value (a numpy array underneath) with ONNX operator semantics.

    numpy's array methods and attributes (``x.max()``, ``x.sum(axis=0)``, ``x.tolist()``)
    give numpy's results, for inspection (:mod:`eager.numpy_view`).

    >>> import numpy as np
    >>> from eager import EagerTensor
    >>> x = EagerTensor(np.array([1, 2, 3], dtype=np.int64))
    >>> x % 2
    EagerTensor(INT64[3], [1 0 1])
    """

    __slots__ = ("__weakref__", "array", "from_torch")

    def __init__(self, array: np.ndarray, from_torch: bool = False) -> None:
        self.array = array
        self.from_torch = from_torch

    # ------------------------------------------------------------------ description

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> DType:
        """The element type as :class:`~dsl.dtypes.DType`, the object ``x.dtype`` is in
        ``@script`` too: the ONNX element type number, equal to numpy's dtype."""
        return dtype_of(self.elem_type)

    @dtype.setter
    def dtype(self, declared: Any) -> None:
        # ``x.dtype = INT64.dtype`` declares the element type, as onnxscript's tracing lets
        # code do; it never converts (the compiled function could not either).
        try:
            wanted = element_type_of(declared)
        except DslError as err:
            raise err.with_location(caller_location()) from None
        if wanted != self.elem_type:
            owner = assigned_attribute_owner() or "the tensor"
            raise dtype_mismatch(self.elem_type, wanted, caller_location(), owner)

    @property
    def elem_type(self) -> int:
        """The ONNX element type (a ``TensorProto.DataType`` number)."""
        found = ELEM_BY_DTYPE.get(self.array.dtype)
        if found is None:
            found = elem_type_of_array(self.array)
        return types.STRING.enum if found is None else found

    @property
    def rank(self) -> int:
        return self.array.ndim

    ndim = rank

    def numpy(self) -> np.ndarray:
        """The value as a numpy array (no copy)."""
        return self.array

    def __repr__(self) -> str:
        name = types.element_type_name(self.elem_type)
        shape = ", ".join(str(d) for d in self.array.shape)
        return f"EagerTensor({name}[{shape}], {np.array2string(self.array, threshold=64)})"

    def __str__(self) -> str:
        return str(self.array)

    # -------------------------------------------------------- conversions to Python

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self.array.dtype:
            return self.array.astype(dtype)
        return self.array.copy() if copy else self.array

    def _scalar(self, kind: str) -> Any:
        if self.array.size != 1:
            raise DslTypeError(
                f"{kind}() of a tensor of shape {list(self.array.shape)}: only a one-element tensor has one value",
                hint="reduce it first (op.ReduceMax, op.ReduceSum...) or compare element-wise with op.Equal",
            )
        return self.array.reshape(()).item()

    def __bool__(self) -> bool:
        return bool(self._scalar("bool"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __index__(self) -> int:
        if self.array.dtype.kind not in "iub":
            raise DslTypeError(
                f"a {types.element_type_name(self.elem_type)} tensor cannot be used as an index",
                hint="cast it to an integer type with op.Cast(x, to=INT64.enum)",
            )
        return int(self._scalar("index"))

    def __len__(self) -> int:
        if self.array.ndim == 0:
            raise DslTypeError("len() of a scalar tensor", hint="use op.Size(x) or x.shape")
        return int(self.array.shape[0])

    # ------------------------------------------------------------- ONNX operators

    def _binary(self, ast_op: str, left: Any, right: Any) -> Any:
        spelling = binary_spelling(ast_op, ELEM_BY_DTYPE.get(self.array.dtype) or self.elem_type)
        return _call(spelling.op_type, (left, right), spelling.attributes)

    def __add__(self, other: Any) -> Any:
        return self._binary("Add", self, other)

    def __radd__(self, other: Any) -> Any:
        return self._binary("Add", other, self)

    def __sub__(self, other: Any) -> Any:
        return self._binary("Sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return self._binary("Sub", other, self)

    def __mul__(self, other: Any) -> Any:
        return self._binary("Mult", self, other)

    def __rmul__(self, other: Any) -> Any:
        return self._binary("Mult", other, self)

    def __truediv__(self, other: Any) -> Any:
        return self._binary("Div", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return self._binary("Div", other, self)

    def __matmul__(self, other: Any) -> Any:
        return self._binary("MatMult", self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return self._binary("MatMult", other, self)

    def __pow__(self, other: Any) -> Any:
        return self._binary("Pow", self, self._number_beside(other, "Y"))

    def __rpow__(self, other: Any) -> Any:
        return self._binary("Pow", self._number_beside(other, "X"), self)

    def _number_beside(self, value: Any, formal: str) -> Any:
        """A Python number on the other side of ``**`` as the compiler makes it: of this
        tensor's element type (:func:`dsl.operators.literal_elem_type`).  Pow's base and
        exponent are of two type parameters, so the op's own rule (a literal takes the type
        of a tensor of its parameter) would make ``7 ** x`` an INT64 base, and Pow's output
        INT64 where the compiled ``7 ** x`` of a FLOAT ``x`` is FLOAT."""
        if type(value) not in (bool, int, float):
            return value
        elem = literal_elem_type(value, ELEM_BY_DTYPE.get(self.array.dtype) or self.elem_type)
        if elem is None:
            return value
        return literal_input_array(value, elem, "Pow", formal,
                                   "write a value of the tensor's element type, or cast explicitly with op.Cast")

    def __mod__(self, other: Any) -> Any:
        return self._binary("Mod", self, other)

    def __rmod__(self, other: Any) -> Any:
        return self._binary("Mod", other, self)

    def __and__(self, other: Any) -> Any:
        return self._binary("BitAnd", self, other)

    def __rand__(self, other: Any) -> Any:
        return self._binary("BitAnd", other, self)

    def __or__(self, other: Any) -> Any:
        return self._binary("BitOr", self, other)

    def __ror__(self, other: Any) -> Any:
        return self._binary("BitOr", other, self)

    def __xor__(self, other: Any) -> Any:
        return self._binary("BitXor", self, other)

    def __rxor__(self, other: Any) -> Any:
        return self._binary("BitXor", other, self)

    def _unsupported(self, ast_op: str) -> Any:
        message, hint = unsupported_operator(ast_op)  # (the compiler's words)
        raise UnsupportedSyntaxError(message, caller_location(), hint=hint)

    def __floordiv__(self, other: Any) -> Any:
        return self._unsupported("FloorDiv")

    __rfloordiv__ = __floordiv__

    def __lshift__(self, other: Any) -> Any:
        return self._unsupported("LShift")

    __rlshift__ = __lshift__

    def __rshift__(self, other: Any) -> Any:
        return self._unsupported("RShift")

    __rrshift__ = __rshift__

    def _unary(self, ast_op: str) -> Any:
        spelling = unary_spelling(ast_op, self.elem_type)
        return _call(spelling.op_type, (self,), spelling.attributes)

    def __neg__(self) -> Any:
        return self._unary("USub")

    def __pos__(self) -> Any:
        return self._unary("UAdd")

    def __invert__(self) -> Any:
        return self._unary("Invert")

    def __abs__(self) -> Any:
        return _call("Abs", (self,), ())  # (abs(x) is op.Abs compiled too)

    def __divmod__(self, other: Any) -> Any:
        raise DslTypeError(  # (the compiler's words: floor division has no ONNX operator)
            "divmod() of a tensor needs its value at run time", caller_location(),
            hint="use ONNX ops on tensors (op.Max, op.Min, op.Abs, op.Cast, op.ReduceSum...)",
        )

    __rdivmod__ = __divmod__

    def _compare(self, ast_op: str, other: Any) -> Any:
        spelling = COMPARE[ast_op]
        result = _call(spelling.op_type, (self, other), spelling.attributes)
        if spelling.negate:
            result = _call("Not", (result,), ())
        return result

    def __eq__(self, other: Any) -> Any:
        return self._compare("Eq", other)

    def __ne__(self, other: Any) -> Any:
        return self._compare("NotEq", other)

    def __lt__(self, other: Any) -> Any:
        return self._compare("Lt", other)

    def __le__(self, other: Any) -> Any:
        return self._compare("LtE", other)

    def __gt__(self, other: Any) -> Any:
        return self._compare("Gt", other)

    def __ge__(self, other: Any) -> Any:
        return self._compare("GtE", other)

    __hash__ = None  # type: ignore[assignment]  # == is element-wise, as in numpy

    # ------------------------------------------------------------------ indexing

    def __getitem__(self, index: Any) -> Any:
        return eager_getitem(self, index)
