"""Tensor types for annotations (``FLOAT``, ``FLOAT[2, "N"]``, ``FLOAT[...]``) and dtype tables.

The element-type numbers are ONNX's ``TensorProto.DataType`` values, written out here so
that annotating a function does not need onnx; numpy dtypes for the types numpy lacks
(bfloat16, float8, 4-bit) come from ``ml_dtypes``, which onnx itself depends on.
"""

from __future__ import annotations

import collections.abc
import types as python_types
import typing
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl.errors import AnnotationError
from dsl.ir import ELEMENT_TYPE_NAMES, MapType, OptionalType, SequenceType, TensorType, element_type_name

__all__ = [
    "ElementType",
    "ELEMENT_TYPES",
    "element_type_name",
    "element_type_from_name",
    "numpy_dtype",
    "element_type_of_dtype",
    "element_type_of_python",
    "Sequence",
    "Optional",
    "read_annotation",
    "TensorType",
    "Map",
    "Tensor",
    "unwrap_annotated",
]


class ElementType:
    """One ONNX element type, usable directly as the annotation of a scalar tensor.

    ``FLOAT`` alone is a rank-0 tensor (as in onnxscript); subscripting gives a shaped
    tensor type: ``FLOAT[2, "N"]`` (named symbolic axis), ``FLOAT[None, 3]`` (unnamed
    axis), ``FLOAT[...]`` (any rank).  The result is a plain :class:`dsl.ir.TensorType`.
    """

    __slots__ = ("_dtype_name", "enum", "name")

    def __init__(self, name: str, enum: int, dtype_name: str | None) -> None:
        self.name = name
        self.enum = enum
        self._dtype_name = dtype_name

    def __getitem__(self, dims: Any) -> TensorType:
        if dims is Ellipsis:
            return TensorType(self.enum, None)
        if not isinstance(dims, tuple):
            dims = (dims,)
        shape: list[int | str | None] = []
        for dim in dims:
            if dim is None or isinstance(dim, str) or (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0):
                shape.append(dim)
            else:
                raise AnnotationError(
                    f"{self.name}[...]: each dimension must be a non-negative int, a str (a named "
                    f"dimension) or None, not {dim!r}",
                    hint=f"write {self.name}[...] for any rank, None for a dimension of unknown size",
                )
        return TensorType(self.enum, tuple(shape))

    @property
    def tensor_type(self) -> TensorType:
        """The rank-0 tensor type this bare name stands for in an annotation."""
        return TensorType(self.enum, ())

    @property
    def dtype(self) -> int:
        """The ONNX ``TensorProto.DataType`` number, as onnxscript's ``FLOAT.dtype`` is, so
        ``op.Cast(x, to=FLOAT.dtype)`` reads the same in both (see :attr:`numpy_dtype`)."""
        return self.enum

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype holding values of this type (ml_dtypes for bfloat16, float8, ...)."""
        return numpy_dtype(self.enum)

    def to_type_proto(self) -> Any:
        """This bare type as an ``onnx.TypeProto`` (a rank-0 tensor), as in onnxscript."""
        import onnx.helper

        return onnx.helper.make_tensor_type_proto(self.enum, [])

    def __repr__(self) -> str:
        return self.name

    def __or__(self, other: Any) -> Any:  # FLOAT | DOUBLE, FLOAT | None: a typing.Union
        return typing.Union[self, other]

    def __ror__(self, other: Any) -> Any:
        return typing.Union[other, self]

    def __reduce__(self) -> str:
        return self.name


# numpy dtype names (ml_dtypes for the narrow floats and ints), in ONNX's numbering
# (the names are ``ir.ELEMENT_TYPE_NAMES``).
_NUMPY_NAMES: tuple[str, ...] = (
    "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "object", "bool", "float16",
    "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "uint4", "int4", "float4_e2m1fn",
    "float8_e8m0fnu", "uint2", "int2", "float6_e2m3fn", "float6_e3m2fn",
)
_TABLE: list[tuple[str, int, str | None]] = [
    (name, number, dtype) for number, (name, dtype) in enumerate(zip(ELEMENT_TYPE_NAMES, _NUMPY_NAMES), start=1)
]

ELEMENT_TYPES: dict[str, ElementType] = {name: ElementType(name, num, dt) for name, num, dt in _TABLE}
_BY_ENUM: dict[int, ElementType] = {t.enum: t for t in ELEMENT_TYPES.values()}
_NUMPY_BUILTIN = {"float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "object", "bool",
                  "float16", "float64", "uint32", "uint64", "complex64", "complex128"}
_DTYPE_CACHE: dict[int, np.dtype] = {}
_ENUM_BY_DTYPE: dict[np.dtype, int] = {}

FLOAT = ELEMENT_TYPES["FLOAT"]
UINT8 = ELEMENT_TYPES["UINT8"]
INT8 = ELEMENT_TYPES["INT8"]
UINT16 = ELEMENT_TYPES["UINT16"]
INT16 = ELEMENT_TYPES["INT16"]
INT32 = ELEMENT_TYPES["INT32"]
INT64 = ELEMENT_TYPES["INT64"]
STRING = ELEMENT_TYPES["STRING"]
BOOL = ELEMENT_TYPES["BOOL"]
FLOAT16 = ELEMENT_TYPES["FLOAT16"]
DOUBLE = ELEMENT_TYPES["DOUBLE"]
UINT32 = ELEMENT_TYPES["UINT32"]
UINT64 = ELEMENT_TYPES["UINT64"]
COMPLEX64 = ELEMENT_TYPES["COMPLEX64"]
COMPLEX128 = ELEMENT_TYPES["COMPLEX128"]
BFLOAT16 = ELEMENT_TYPES["BFLOAT16"]
FLOAT8E4M3FN = ELEMENT_TYPES["FLOAT8E4M3FN"]
FLOAT8E4M3FNUZ = ELEMENT_TYPES["FLOAT8E4M3FNUZ"]
FLOAT8E5M2 = ELEMENT_TYPES["FLOAT8E5M2"]
FLOAT8E5M2FNUZ = ELEMENT_TYPES["FLOAT8E5M2FNUZ"]
UINT4 = ELEMENT_TYPES["UINT4"]
INT4 = ELEMENT_TYPES["INT4"]
FLOAT4E2M1 = ELEMENT_TYPES["FLOAT4E2M1"]
FLOAT8E8M0 = ELEMENT_TYPES["FLOAT8E8M0"]
UINT2 = ELEMENT_TYPES["UINT2"]
INT2 = ELEMENT_TYPES["INT2"]
FLOAT6E2M3 = ELEMENT_TYPES["FLOAT6E2M3"]
FLOAT6E3M2 = ELEMENT_TYPES["FLOAT6E3M2"]

__all__ += list(ELEMENT_TYPES)

if TYPE_CHECKING:
    # To a type checker a tensor is any value: a parameter takes numpy arrays, torch
    # tensors and Python numbers in eager calls, and graph values when compiled.
    Tensor: typing.TypeAlias = Any
else:
    # ``Annotated[Tensor, FLOAT["B", 3]]``: the spelling both mypy and pyright accept (the
    # metadata is the type @script reads); bare ``Tensor`` is a tensor of any type.
    Tensor = TensorType


def element_type_from_name(name: str) -> ElementType:
    """``"float"``/``"FLOAT"``/``"float32"`` -> the ElementType; ``KeyError`` if unknown."""
    key = name.upper()
    if key in ELEMENT_TYPES:
        return ELEMENT_TYPES[key]
    for t in ELEMENT_TYPES.values():
        if t._dtype_name == name.lower():
            return t
    raise KeyError(name)


def element_type(enum: int) -> ElementType:
    """The ElementType of a DataType number; ``KeyError`` if onnx defines no such number."""
    return _BY_ENUM[enum]


def numpy_dtype(enum: int) -> np.dtype:
    """The numpy dtype that holds values of an ONNX element type (ml_dtypes for the new ones)."""
    cached = _DTYPE_CACHE.get(enum)
    if cached is not None:
        return cached
    dtype_name = _BY_ENUM[enum]._dtype_name
    if dtype_name in _NUMPY_BUILTIN:
        dtype = np.dtype(dtype_name)
    else:
        import ml_dtypes  # imported on first use: it costs import time most users never need

        dtype = np.dtype(getattr(ml_dtypes, str(dtype_name)))
    _DTYPE_CACHE[enum] = dtype
    return dtype


def element_type_of_dtype(dtype: Any) -> int:
    """The ONNX element type of a numpy dtype (strings map to STRING); ``KeyError`` if none."""
    dtype = np.dtype(dtype)
    if not _ENUM_BY_DTYPE:
        for num, _ in ((t.enum, t) for t in ELEMENT_TYPES.values()):
            try:
                _ENUM_BY_DTYPE.setdefault(numpy_dtype(num), num)
            except (AttributeError, ImportError):  # an ml_dtypes too old for the newest types
                continue
    if dtype.kind in "US":
        return STRING.enum
    return _ENUM_BY_DTYPE[dtype]


def element_type_of_python(value: Any) -> int | None:
    """The element type a Python literal becomes when nothing else decides it.

    bool -> BOOL, int -> INT64, float -> FLOAT, str -> STRING (as in onnxscript); a
    non-empty list/tuple takes the type of its widest element; anything else -> None.
    """
    if isinstance(value, bool):
        return BOOL.enum
    if isinstance(value, int):
        return INT64.enum
    if isinstance(value, float):
        return FLOAT.enum
    if isinstance(value, str):
        return STRING.enum
    if isinstance(value, (list, tuple)) and value:
        kinds = {element_type_of_python(v) for v in value}
        if None in kinds:
            return None
        for wider in (STRING.enum, FLOAT.enum, INT64.enum, BOOL.enum):
            if wider in kinds:
                if len(kinds) > 1 and (STRING.enum in kinds):
                    return None
                return wider
    return None


class _Container:
    """``Sequence[FLOAT[...]]`` / ``Optional[FLOAT[2]]`` annotations."""

    __slots__ = ("_make", "_name")

    def __init__(self, name: str, make: Any) -> None:
        self._name = name
        self._make = make

    def __getitem__(self, elem: Any) -> Any:
        if isinstance(elem, ElementType):
            elem = elem.tensor_type
        return self._make(elem)

    def __repr__(self) -> str:
        return self._name


Sequence = _Container("Sequence", SequenceType)
Optional = _Container("Optional", OptionalType)


class _MapAnnotation:
    """``Map[INT64, FLOAT[...]]``: an ONNX map (ai.onnx.ml: ZipMap's outputs, skl2onnx's
    classifiers) from an element type to a value type."""

    __slots__ = ()

    def __getitem__(self, key_and_value: Any) -> MapType:
        if not isinstance(key_and_value, tuple) or len(key_and_value) != 2 or not isinstance(
            key_and_value[0], ElementType
        ):
            raise AnnotationError(
                f"Map[...] takes a key element type and a value type, not {key_and_value!r}",
                hint="write Map[INT64, FLOAT[...]] or Map[STRING, FLOAT[...]]",
            )
        key, value = key_and_value
        value_type = to_ir_type(value)
        if value_type is None:
            raise AnnotationError(f"the value type of Map[...] is {value!r}, not a type",
                                  hint="write Map[INT64, FLOAT[...]]")
        return MapType(key.enum, value_type)

    def __repr__(self) -> str:
        return "Map"


Map = _MapAnnotation()


def to_ir_type(annotation: Any) -> Any:
    """An annotation object (``FLOAT``, ``FLOAT[2]``, ``Sequence[...]``) -> an IR type, else None."""
    if isinstance(annotation, ElementType):
        return annotation.tensor_type
    if isinstance(annotation, (TensorType, SequenceType, OptionalType, MapType)):
        return annotation
    return None


# The forms onnxscript code annotates tensors with besides FLOAT[...]: a TypeVar bound
# to a Union of types (torch_lib's ``TFloat``), ``Union``/``A | B``, ``typing.Optional``
# (an input that may be omitted) and ``typing.Sequence``/``list`` of tensors.
_UNION_ORIGINS: tuple[Any, ...] = (typing.Union, python_types.UnionType)
_SEQUENCE_ORIGINS: tuple[Any, ...] = (collections.abc.Sequence, list)


def unwrap_annotated(annotation: Any) -> Any:
    """What ``typing.Annotated[T, *metadata]`` means to @script: the one dsl type among the
    metadata (``Annotated[Tensor, FLOAT["B", 3]]``), else ``T`` (other metadata is kept
    for other tools and ignored here); anything else is returned unchanged.

    >>> unwrap_annotated(typing.Annotated[Tensor, FLOAT["N", 3]])
    FLOAT['N', 3]
    >>> unwrap_annotated(typing.Annotated[float, "must be 1"])
    <class 'float'>
    """
    while typing.get_origin(annotation) is typing.Annotated:
        markers = [m for m in annotation.__metadata__ if to_ir_type(m) is not None]
        if len(markers) > 1:
            raise AnnotationError(
                f"{annotation!r} names {len(markers)} tensor types; which one is meant?",
                hint='give one: Annotated[Tensor, FLOAT["B", 3]]',
            )
        annotation = markers[0] if markers else annotation.__origin__
    return annotation


def read_annotation(annotation: Any) -> tuple[bool, Any]:
    """``(understood, IR type)`` of a tensor annotation; the type is None for "any tensor".

    Beyond :func:`to_ir_type`: ``TypeVar("T", bound=Union[FLOAT, DOUBLE])`` and
    ``Union[FLOAT, DOUBLE]`` (``FLOAT | DOUBLE``) are any of their types, so the value
    has no single type (None) unless all agree; ``typing.Optional[X]`` is ``X`` (None may
    be passed, as for any input); ``typing.Sequence[X]`` and ``list[X]`` are
    ``Sequence[X]``; the bare class ``TensorType`` (onnxscript's "any tensor") is None.

    >>> read_annotation(typing.Optional[FLOAT[2]])
    (True, FLOAT[2])
    """
    annotation = unwrap_annotated(annotation)
    found = to_ir_type(annotation)
    if found is not None:
        return True, found
    if annotation is TensorType:
        return True, None
    if isinstance(annotation, typing.TypeVar):
        if annotation.__bound__ is not None:
            return read_annotation(annotation.__bound__)
        if annotation.__constraints__:
            return _read_union(list(annotation.__constraints__))
        return True, None
    origin = typing.get_origin(annotation)
    if origin in _UNION_ORIGINS:
        return _read_union([a for a in typing.get_args(annotation) if a is not type(None)])
    if origin in _SEQUENCE_ORIGINS:
        items = typing.get_args(annotation)
        if len(items) == 1:
            understood, elem = read_annotation(items[0])
            if understood:
                return True, SequenceType(elem)
    return False, None


def _read_union(members: list[Any]) -> tuple[bool, Any]:
    read = [read_annotation(member) for member in members]
    if not read or not all(understood for understood, _ in read):
        return False, None
    found = {ir_type for _, ir_type in read}
    return True, found.pop() if len(found) == 1 else None
