"""Candidate example arguments for a torch_lib function, from its signature alone.

``bench/torch_lib_sample.py`` gives each sampled function the first of these candidates
that onnxscript's eager evaluator runs.  The first candidate is the old rule (every
tensor (3, 3)); the others apply layout conventions read from names, annotations and
the torch schema that torch_lib's docstrings open with: the rank a ``2d`` suffix names,
(N, C, spatial...) lists of the spatial rank, 8-bit data for quantization, a trailing
(real, imaginary) axis for complex overloads, (K, 4|5) boxes, rank-0 tensors where torch
says ``Scalar``/``SymInt``.  Nothing here names a particular function.  Pure: numpy and
the standard library (onnx only to number an element type), no onnxscript.
"""

from __future__ import annotations

import inspect
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

_INT_TYPES = ("INT64", "TInt", "IntType", "INT32", "INT8", "INT16", "UINT8")


def example_argument(name: str, annotation: str, shape: tuple[int, ...] = (3, 3)) -> Any:
    """The old rule's value for a required parameter, from its annotation and name: tensors
    are ``shape`` (square, so products and transposes fit), positive where they are floats."""
    text = annotation.replace(" ", "")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if text.startswith(("Sequence[", "List[", "list[")):
        inner = text[text.index("[") + 1:-1]
        if inner in ("int", "INT64") or name in ("size", "shape", "stride", "dims", "dim", "sizes"):
            return list(shape) if name in ("size", "shape", "sizes") else [1]
        if inner in ("float",):
            return [1.0]
        return [example_argument(name + "_0", inner, shape), example_argument(name + "_1", inner, shape)]
    if text.startswith("Optional["):
        return None
    scalars = {"int": 1, "float": 0.5, "bool": False, "str": "none"}
    if text in scalars:
        return scalars[text]
    if name in ("dim", "dims", "axis"):
        return np.array([1], dtype=np.int64)
    if name in ("size", "shape", "sizes", "output_size"):  # a shape as a 1-D INT64 tensor
        return np.array(shape[-2:] if name == "output_size" else shape, dtype=np.int64)
    if name == "vec":
        shape = shape[-1:]
    if text == "BOOL":
        return np.asarray(rng.random(shape) > 0.5)
    if text in _INT_TYPES or name in ("index", "indices"):
        return np.asarray(rng.integers(0, 2, size=shape).astype(np.int64))
    return np.asarray((rng.random(shape) + 0.1).astype(np.float32))  # (a rank-0 array stays an array)


def _required_parameters(python_function: Any) -> list[tuple[str, str]] | None:
    """(name, annotation text) of the parameters without a default; None for ``*args``."""
    found = []
    for parameter in inspect.signature(python_function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            return None
        if parameter.default is inspect.Parameter.empty:
            annotation = parameter.annotation
            found.append((parameter.name, annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")))
    return found


def examples_for(python_function: Any) -> list[tuple[str, Any]] | None:
    """The old rule (every candidate list's first): example arguments for the required
    parameters, every tensor (3, 3); a ``_complex`` function's end in a dimension of 2
    (real, imaginary), as torch_lib's do.  None for ``*args``."""
    shape = (3, 3, 2) if python_function.__name__.endswith("_complex") else (3, 3)
    parameters = _required_parameters(python_function)
    if parameters is None:
        return None
    return [(name, example_argument(name, annotation, shape)) for name, annotation in parameters]


@dataclass(frozen=True)
class Convention:
    """The layout rules of one candidate example set beyond the old rule, read from the
    function's name, its parameters' names and torch's schema: tensors of ``rank`` (all sizes 3, so NCHW data and OIHW weights fit each other),
    ``complex`` ones ending in (real, imaginary), the integer element type ``quantized``
    for a (de)quantize function's data, torchvision's (K, 5) boxes with a batch index
    in ``roi`` functions ((K, 4) elsewhere), and rank 0 for the tensor parameters whose
    torch schema type is a number (``Scalar start``, ``SymInt last_dim_size``; a list of
    tensors typed ``SymInt[]`` is ``rank`` Python ints)."""

    rank: int
    complex: bool = False
    quantized: str | None = None  # a numpy integer dtype name: "int8", "uint8"
    dequantize: bool = False  # the data tensors hold quantized values (else only zero points)
    roi: bool = False
    torch_numbers: frozenset[str] = frozenset()  # parameters torch's schema types as numbers

    @property
    def spatial(self) -> int:
        """Length of per-spatial-axis lists (kernel_size, stride...): rank - 2 of (N, C, ...),
        or 2 for a plain matrix (as the old rule's output_size)."""
        return self.rank - 2 if self.rank >= 3 else 2

    @property
    def label(self) -> str:
        return f"rank {self.rank}" + (f" {self.quantized}" if self.quantized else "")


@dataclass
class Candidate:
    """One example set: (parameter name, value) for the required parameters, in order."""

    label: str  # "old rule", or the convention's ("rank 4", "rank 2 int8")
    arguments: list[tuple[str, Any]]


_SPATIAL_LIST_VALUES = {"kernel_size": 2, "stride": 1, "padding": 0, "dilation": 1, "output_padding": 0,
                        "output_size": 2}
_VECTOR_NAMES = ("vec", "bias", "scores")  # a 1-D tensor of a channel's length
_QUANTIZATION_NAMES = ("scale", "scales", "zero_point", "zero_points")  # 1-D, per channel


def conventions_for(name: str, is_complex: bool, torch_numbers: frozenset[str] = frozenset()) -> list[Convention]:
    """The layouts tried after the old rule: the rank a ``1d``/``2d``/``3d`` suffix names
    (N, C and that many spatial axes) first, then ranks 2 to 5; both 8-bit types for a
    function whose name says it quantizes."""
    suffix = re.search(r"([123])d(?:_|$)", name)
    ranks = [int(suffix.group(1)) + 2] if suffix else []
    ranks += [rank for rank in (2, 3, 4, 5) if rank not in ranks]
    quantized: list[str | None] = ["int8", "uint8"] if "quantize" in name else [None]
    return [Convention(rank, is_complex, dtype, "dequantize" in name, "roi" in name, torch_numbers)
            for rank in ranks for dtype in quantized]


_TORCH_NUMBER_TYPE = re.compile(r"(Scalar|SymInt|int|float|bool)(\[\d*\])?\??")


def torch_number_parameters(python_function: Any) -> frozenset[str]:
    """The parameters torch's schema, which torch_lib's docstrings open with, types as a
    number or a list of numbers: ``arange.start_step(Scalar start, ...) -> Tensor`` gives
    ``{"start", ...}``, ``repeat(Tensor self, SymInt[] repeats)`` ``{"repeats"}``."""
    lines = (python_function.__doc__ or "").strip().splitlines()
    match = re.match(r"[\w.]+\((.*)\)\s*->", lines[0]) if lines else None
    if match is None:
        return frozenset()
    found = set()
    for declaration in _top_level_parts(match.group(1)):
        words = declaration.split("=", 1)[0].split()
        if len(words) == 2 and _TORCH_NUMBER_TYPE.fullmatch(words[0]):
            found.add(words[1])
    return frozenset(found)


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for index, character in enumerate(text):
        if character in "([":
            depth += 1
        elif character in ")]":
            depth -= 1
        if character == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def convention_argument(name: str, annotation: str, convention: Convention) -> Any:
    """A required parameter's value under ``convention``; what no convention names keeps
    the old rule's value (at the convention's tensor shape)."""
    text = annotation.replace(" ", "")
    sequence = text.startswith(("Sequence[", "List[", "list["))
    inner = text[text.index("[") + 1:-1] if sequence else text
    if name in _SPATIAL_LIST_VALUES and inner in ("int", "INT64"):
        values = [_SPATIAL_LIST_VALUES[name]] * convention.spatial
        return values if sequence else np.array(values, dtype=np.int64)
    if convention.quantized and text == "int" and name in ("dtype", "quant_min", "quant_max"):
        return _quantization_integer(name, np.dtype(convention.quantized))
    if sequence or text.startswith("Optional[") or text in ("int", "float", "bool", "str"):
        return _old_rule_under(name, annotation, convention)
    if name in ("dim", "dims", "axis", "size", "shape", "sizes"):
        return example_argument(name, annotation, _tensor_shape("", convention))
    shape = _tensor_shape(name, convention)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if convention.quantized and name.startswith("zero_point"):
        return rng.integers(0, 2, size=shape).astype(np.int64)  # as PyTorch passes them
    if convention.dequantize and name not in _QUANTIZATION_NAMES:
        return rng.integers(0, 8, size=shape).astype(convention.quantized)
    return example_argument(name, annotation, shape)


def _old_rule_under(name: str, annotation: str, convention: Convention) -> Any:
    """Scalars, lists and optional parameters as the old rule gives them; a list of tensors
    has two of the convention's shape."""
    text = annotation.replace(" ", "")
    if text.startswith(("Sequence[", "List[", "list[")):
        inner = text[text.index("[") + 1:-1]
        if inner not in ("int", "INT64", "float") and name not in ("size", "shape", "stride", "dims", "dim", "sizes"):
            if name in convention.torch_numbers:  # static SymInt[]: one Python int per axis, as torch.onnx gives
                rng = np.random.default_rng(zlib.crc32(name.encode()))
                return [int(value) for value in rng.integers(1, 3, size=convention.rank)]
            return [convention_argument(f"{name}_{i}", inner, convention) for i in range(2)]
    return example_argument(name, annotation, _tensor_shape("", convention))


def _tensor_shape(name: str, convention: Convention) -> tuple[int, ...]:
    tail = (2,) if convention.complex else ()
    if name in convention.torch_numbers:
        return ()
    if name in ("boxes", "rois"):
        return (3, 5 if convention.roi else 4)
    if convention.quantized and name in _QUANTIZATION_NAMES:
        return (3,)
    if name in _VECTOR_NAMES:
        return (3, *tail)
    return (3,) * convention.rank + tail


def _quantization_integer(name: str, dtype: np.dtype) -> int:
    """``dtype`` as the ONNX element type number torch_lib casts to; quant_min/quant_max
    the type's range."""
    import onnx

    if name == "dtype":
        return int(onnx.helper.np_dtype_to_tensor_dtype(dtype))
    limits = np.iinfo(dtype)
    return int(limits.min if name == "quant_min" else limits.max)


def einsum_equation(rank: int, operands: int) -> str:
    """A batched chain of matrix products over ``operands`` tensors of ``rank`` (>= 2):
    ``a ij, a jk -> a ik`` for rank 3 and two operands."""
    batch = "abc"[:rank - 2]
    chain = "ijklmnop"
    terms = [batch + chain[k] + chain[k + 1] for k in range(operands)]
    return ",".join(terms) + "->" + batch + chain[0] + chain[operands]


def candidates_for(python_function: Any, is_complex: bool = False) -> list[Candidate] | None:
    """The fixed, ordered candidate example sets of a function: the old rule, then one per
    convention.  None for ``*args``.

    >>> def aten_conv2d(input: "TFloat", weight: "TFloat", stride: "Sequence[int]" = (1, 1)): ...
    >>> [c.label for c in candidates_for(aten_conv2d)]
    ['old rule', 'rank 4', 'rank 2', 'rank 3', 'rank 5']
    """
    first = examples_for(python_function)
    parameters = _required_parameters(python_function)
    if first is None or parameters is None:
        return None
    found = [Candidate("old rule", first)]
    torch_numbers = torch_number_parameters(python_function)
    for convention in conventions_for(python_function.__name__, is_complex, torch_numbers):
        arguments = [(name, convention_argument(name, annotation, convention)) for name, annotation in parameters]
        found.append(Candidate(convention.label, _with_equation(arguments, convention.rank)))
    return found


def _with_equation(arguments: list[tuple[str, Any]], rank: int) -> list[tuple[str, Any]]:
    """An ``equation`` string argument that fits the tensors given beside it."""
    operands = sum(len(value) if isinstance(value, list) and is_tensor(value) else isinstance(value, np.ndarray)
                   for _, value in arguments)
    return [(name, einsum_equation(rank, operands) if name == "equation" and isinstance(value, str) else value)
            for name, value in arguments]


def is_tensor(value: Any) -> bool:
    """An array, or a non-empty list of arrays (a list of tensors)."""
    return isinstance(value, np.ndarray) or (isinstance(value, list) and bool(value) and all(isinstance(v, np.ndarray) for v in value))
