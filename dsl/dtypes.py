"""``x.dtype``: a tensor's element type as one object, eagerly and compiled.

Code written for onnxscript reads ``x.dtype`` as onnx_ir's ``DataType`` (an ``IntEnum``
whose value is the ONNX element type: ``op.Cast(y, to=x.dtype)``, ``dtype.bitwidth``,
``dtype.is_integer()``); code written for numpy reads it as a numpy dtype
(``x.dtype == np.float32``, ``np.zeros(3, x.dtype)``).  :class:`DType` serves both: it is
an ``int`` holding the ONNX ``TensorProto.DataType`` number, it compares equal to the
numpy dtypes, scalar types and dtype names of that element type, numpy accepts it
wherever a dtype is expected (through numpy's ``.dtype``-attribute protocol), and it
reads like onnx_ir's ``DataType`` and like a numpy dtype.

Hashing is an int's (``hash(x.dtype) == hash(1)`` for FLOAT), which Python needs for
``ir.DataType(x.dtype)`` and ``onnx.helper`` tables keyed by the element type number.
So a dict or set keyed by ints, ``ir.DataType`` or ``FLOAT.dtype`` finds ``x.dtype``;
one keyed by numpy dtypes, scalar types or names (``{np.float32, np.float64}``) does
not, although ``==`` holds: look those up with ``x.dtype.numpy()`` (a real numpy dtype),
or test membership in a tuple (``x.dtype in (np.float32, np.float64)``).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from dsl import ir, types
from dsl.errors import DslTypeError

__all__ = ["DType", "dtype_mismatch", "dtype_of", "element_type_of"]

_STRING = types.STRING.enum

# Bits per element, in ONNX's numbering (``TensorProto.DataType``); STRING has none.
_BITWIDTHS: dict[int, int] = dict(zip(range(1, len(ir.ELEMENT_TYPE_NAMES) + 1), (
    32, 8, 8, 16, 16, 32, 64, 0, 8, 16, 64, 32, 64, 64, 128, 16, 8, 8, 8, 8, 4, 4, 4, 8, 2, 2, 6, 6,
), strict=True))
del _BITWIDTHS[_STRING]

_INTEGERS = frozenset(types.ELEMENT_TYPES[name].enum for name in (
    "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "UINT32", "UINT64", "UINT4", "INT4", "UINT2", "INT2"))
_FLOATS = frozenset(types.ELEMENT_TYPES[name].enum for name in (
    "FLOAT", "FLOAT16", "DOUBLE", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
    "FLOAT4E2M1", "FLOAT8E8M0", "FLOAT6E2M3", "FLOAT6E3M2"))
_COMPLEX = frozenset({types.COMPLEX64.enum, types.COMPLEX128.enum})
# Signed: the signed integers, the complex types and every float with a sign bit (all but
# FLOAT8E8M0, a power-of-two scale; onnx_ir's DataType calls that one signed too).
_SIGNED = frozenset(types.ELEMENT_TYPES[name].enum for name in (
    "INT8", "INT16", "INT32", "INT64", "INT4", "INT2")) | _COMPLEX | (_FLOATS - {types.FLOAT8E8M0.enum})


class DType(int):
    """The element type of a tensor: what ``x.dtype`` gives, eagerly and in ``@script``.

    An ``int`` whose value is the ONNX element type, equal to numpy's dtype of that type,
    and usable where numpy wants a dtype.  Reading it: onnx_ir's ``bitwidth``,
    ``itemsize``, ``is_integer()``, ``is_floating_point()``, ``is_signed()``,
    ``numpy()``; numpy's ``kind``, ``name``, ``type``, ``char``, ``str``; ``str()`` is
    numpy's name.  Hashing is an int's: see the module's docstring for the dict keys
    that do not find it.

    >>> import numpy as np
    >>> dtype = DType(np.float32)
    >>> (int(dtype), dtype == 1, dtype == np.float32, dtype == "float32", str(dtype))
    (1, True, True, True, 'float32')
    >>> np.zeros(2, dtype=dtype).dtype, dtype.bitwidth, dtype.is_floating_point()
    (dtype('float32'), 32, True)
    """

    __slots__ = ()

    def __new__(cls, element_type: Any) -> DType:
        return super().__new__(cls, element_type_of(element_type))

    # ------------------------------------------------------------ onnx_ir's DataType
    @property
    def onnx_name(self) -> builtins.str:
        """The ONNX name (``"FLOAT"``), as ``ir.DataType(x.dtype).name`` gives it."""
        return ir.element_type_name(int(self))

    @property
    def bitwidth(self) -> int:
        """Bits per element (4 for INT4); ``TypeError`` for STRING, as in onnx_ir."""
        bits = _BITWIDTHS.get(int(self))
        if bits is None:
            raise TypeError(f"{self.onnx_name} has no bit width")
        return bits

    @property
    def itemsize(self) -> builtins.int | builtins.float:
        """Bytes per element: an int where whole (numpy's ``itemsize``), else onnx_ir's
        fraction (0.5 for INT4, whose numpy dtype takes a byte)."""
        bits = self.bitwidth
        return bits // 8 if bits % 8 == 0 else bits / 8

    def is_integer(self) -> bool:
        """Whether this is an integer type (BOOL is not one, as in onnx_ir)."""
        return int(self) in _INTEGERS

    def is_floating_point(self) -> bool:
        """Whether this is a real floating-point type (complex types are not)."""
        return int(self) in _FLOATS

    def is_signed(self) -> bool:
        """Whether values can be negative."""
        return int(self) in _SIGNED

    def is_complex(self) -> bool:
        """Whether this is COMPLEX64 or COMPLEX128."""
        return int(self) in _COMPLEX

    def is_string(self) -> bool:
        """Whether this is STRING."""
        return int(self) == _STRING

    def numpy(self) -> np.dtype:
        """The numpy dtype holding these values (``object`` for STRING, ml_dtypes for
        bfloat16, float8, 4-bit...); ``TypeError`` where the installed ml_dtypes lacks it."""
        try:
            return types.numpy_dtype(int(self))
        except (AttributeError, ImportError):
            raise TypeError(f"the installed numpy/ml_dtypes has no dtype for {self.onnx_name}") from None

    # ------------------------------------------------------------------ numpy's dtype
    @property
    def dtype(self) -> np.dtype:
        """numpy's dtype protocol: ``np.dtype(x.dtype)``, ``np.zeros(3, x.dtype)`` and
        ``a.astype(x.dtype)`` read this attribute of an object that is not a dtype."""
        return self.numpy()

    @property
    def kind(self) -> builtins.str:
        return self.numpy().kind

    @property
    def name(self) -> builtins.str:
        """numpy's name (``"float32"``); :attr:`onnx_name` is ONNX's (``"FLOAT"``)."""
        return self.numpy().name

    @property
    def type(self) -> builtins.type:
        return self.numpy().type

    @property
    def char(self) -> builtins.str:
        return self.numpy().char

    @property
    def str(self) -> builtins.str:
        return self.numpy().str

    # ---------------------------------------------------------------- comparisons
    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_)):
            return int(self) == int(other)
        try:
            return int(self) == element_type_of(other)
        except DslTypeError:  # not an element type at all: unequal, as numpy's dtype says
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = int.__hash__

    def __repr__(self) -> builtins.str:
        return f"DType({self.onnx_name}={int(self)}, {self._numpy_name()!r})"

    def __str__(self) -> builtins.str:
        return self._numpy_name()

    def __reduce__(self) -> Any:
        return (dtype_of, (int(self),))

    def _numpy_name(self) -> builtins.str:
        try:
            return self.numpy().name
        except TypeError:
            return self.onnx_name.lower()


_BY_ELEMENT_TYPE: dict[int, DType] = {}


def dtype_of(element_type: int) -> DType:
    """The :class:`DType` of an ONNX element type number (one object per type).

    >>> dtype_of(7) == np.int64
    True
    """
    found = _BY_ELEMENT_TYPE.get(element_type)
    if found is None:
        found = _BY_ELEMENT_TYPE[element_type] = DType(element_type)
    return found


def element_type_of(value: Any) -> int:
    """The ONNX element type a dtype-like value names: an element type number (``DType``,
    ``ir.DataType``, ``FLOAT.dtype``, ``onnx.TensorProto.FLOAT``), ``FLOAT`` itself, what
    numpy reads as a dtype (``np.float32``, ``np.dtype("int64")``, ``"float32"``, ``float``;
    numpy's reading comes first, so ``"float"`` is float64; str, bytes and object dtypes
    are STRING), else an ml_dtypes or ONNX name (``"bfloat16"``, ``"FLOAT16"``).  A
    :class:`DslTypeError` without a location for anything else (the caller knows where it
    was written).

    >>> element_type_of("int64"), element_type_of(np.float16), element_type_of("BFLOAT16")
    (7, 10, 16)
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if 1 <= int(value) <= len(ir.ELEMENT_TYPE_NAMES):
            return int(value)
        raise DslTypeError(f"{int(value)} is not an ONNX element type", None,
                           hint="use FLOAT.dtype, INT64.dtype, ... or a numpy dtype")
    if isinstance(value, types.ElementType):
        return value.enum
    if value is not None and not isinstance(value, (bool, np.bool_, float, np.ndarray)):
        try:
            return types.element_type_of_dtype(np.dtype(value))
        except (TypeError, ValueError, KeyError):
            pass
        if isinstance(value, str):
            try:
                return types.element_type_from_name(value).enum
            except KeyError:
                pass
    raise DslTypeError(f"{value!r} is not an element type", None,
                       hint="use FLOAT.dtype, another tensor's .dtype or a numpy dtype (np.float32)")


def dtype_mismatch(have: int, wanted: int, location: Any, name: str = "the tensor") -> DslTypeError:
    """The error of ``x.dtype = T`` where ``x`` is known to hold another element type:
    assigning ``.dtype`` declares the type, it does not convert (eagerly and compiled).

    >>> dtype_mismatch(1, 7, None, "x").hint
    'convert it: x = op.Cast(x, to=INT64.dtype)'
    """
    have_name, wanted_name = ir.element_type_name(have), ir.element_type_name(wanted)
    converted = name if name.isidentifier() else "y"
    return DslTypeError(
        f"{name} is {have_name}; assigning .dtype = {wanted_name} declares its element type, it does not "
        "convert it", location, hint=f"convert it: {converted} = op.Cast({name}, to={wanted_name}.dtype)")
