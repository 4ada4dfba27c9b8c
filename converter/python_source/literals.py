"""Python literals for what a model holds: arrays, floats, types and text.

Every literal is exact (a float32 reads back as the same float32, an ml_dtypes array as
the same bits) and safe (a model's doc string cannot end its docstring early).  What a
literal needs at module level (``import numpy as np``, ``FLOAT``, a weights-file entry)
is recorded on the :class:`~converter.python_source.generated_module.GeneratedModule`.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir, types
from dsl.errors import ConversionError, ModelLoadError

if TYPE_CHECKING:
    from converter.python_source.generated_module import GeneratedModule

__all__ = ["ENUM_NAMES", "type_text", "float_text", "array_text", "docstring", "utf8", "dict_text"]

# ONNX element type number -> its annotation name ("FLOAT").
ENUM_NAMES = {t.enum: name for name, t in types.ELEMENT_TYPES.items()}

_NUMPY_NAMES = {
    "float32": "np.float32", "float64": "np.float64", "float16": "np.float16", "int8": "np.int8",
    "int16": "np.int16", "int32": "np.int32", "int64": "np.int64", "uint8": "np.uint8",
    "uint16": "np.uint16", "uint32": "np.uint32", "uint64": "np.uint64", "bool": "np.bool_",
    "complex64": "np.complex64", "complex128": "np.complex128", "object": "object",
}
_NUMPY_BY_DTYPE = {np.dtype(name): text for name, text in _NUMPY_NAMES.items()}
_CLOSING_QUOTE = re.compile(r'"(?="|$)')


def type_text(ir_type: Any, module: GeneratedModule) -> str:
    """``FLOAT[2, "N"]``, ``Sequence[INT64]``...; "" for a type Python cannot annotate."""
    # Models share a few type objects among many values (converter.from_onnx does): their
    # text is made once.  The cache holds the type, so its id stays unique meanwhile.
    cached = module.type_texts.get(id(ir_type))
    if cached is not None and cached[0] is ir_type:
        return cached[1]
    if isinstance(ir_type, ir.TensorType):
        name = ENUM_NAMES.get(ir_type.elem_type)
        if name is None:
            return ""
        module.type_names.add(name)
        if ir_type.shape is None:
            text = f"{name}[...]"
        elif not ir_type.shape:
            text = name
        else:
            text = f"{name}[{', '.join('None' if d is None else repr(d) for d in ir_type.shape)}]"
            if any(type(d) is int and d < 0 for d in ir_type.shape):
                raise ConversionError(
                    f"the type {text} has a negative dimension",
                    hint="ONNX dimensions are sizes (>= 0); clear that dim_value (an unknown size) in the model",
                )
        module.type_texts[id(ir_type)] = (ir_type, text)
        return text
    if isinstance(ir_type, (ir.SequenceType, ir.OptionalType)):
        inner = type_text(ir_type.elem, module)
        if not inner:
            return ""
        wrapper = "Sequence" if isinstance(ir_type, ir.SequenceType) else "Optional"
        module.type_names.add(wrapper)
        return f"{wrapper}[{inner}]"
    if isinstance(ir_type, ir.MapType) and ir_type.value is not None:
        key, value = ENUM_NAMES.get(ir_type.key_type), type_text(ir_type.value, module)
        if key is None or not value:
            return ""
        module.type_names.update(("Map", key))
        return f"Map[{key}, {value}]"
    return ""


def float_text(value: float, dtype: Any) -> str:
    """The shortest text that reads back as ``dtype(value)``; NaN and infinities spelled out."""
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "-float('inf')"
    return str(dtype(value)) if dtype is not float else repr(value)


def array_text(array: np.ndarray, module: GeneratedModule, name: str) -> str:
    """``np.array([...], dtype=...)``, or (for a large ``name``\\ d array, when there is a
    weights file) the weights-file entry it is stored under."""
    if name and array.size > module.inline_limit and module.weights_file and array.dtype != object:
        module.large_arrays[name] = array
        return f"weights[{name!r}]"
    module.uses_np = True
    dtype = array.dtype
    # Exported models repeat small constants (ConstantOfShape's 0, Unsqueeze axes): write each once.
    key = (dtype, array.shape, array.tobytes()) if dtype.kind != "O" and array.size <= 64 else None
    if key is not None:
        cached = module.literal_cache.get(key)
        if cached is not None:
            return cached
    dtype_text = _NUMPY_BY_DTYPE.get(dtype)
    if dtype_text is None:
        module.uses_ml_dtypes = True
        dtype_text = f"ml_dtypes.{dtype.name}"
    text = _literal(array, dtype, dtype_text)
    if key is not None:
        module.literal_cache[key] = text
    return text


def _literal(array: np.ndarray, dtype: np.dtype, dtype_text: str) -> str:
    """The ``np.array(...)`` text of ``array``, exact for every element type."""
    if dtype.kind == "V":  # ml_dtypes: write the values through float32 (exact for these types)
        as_float = array.astype(np.float32)
        items = [float_text(float(v), np.float32) for v in as_float.reshape(-1)]
        if dtype.name.startswith(("int", "uint")):
            items = [str(int(v)) for v in as_float.reshape(-1)]
    elif dtype.kind == "f":
        scalar = dtype.type
        items = [float_text(float(v), scalar) for v in array.reshape(-1).tolist()]
    elif dtype.kind == "c":
        items = [_complex_text(complex(v)) for v in array.reshape(-1).tolist()]
    else:
        items = [repr(v) for v in array.reshape(-1).tolist()]
    if array.ndim == 0:
        return f"np.array({items[0]}, dtype={dtype_text})"
    body = "[" + ", ".join(items) + "]"
    if array.ndim == 1:
        return f"np.array({body}, dtype={dtype_text})"
    if array.size == 0:
        return f"np.zeros({tuple(int(d) for d in array.shape)!r}, dtype={dtype_text})"
    return f"np.array({body}, dtype={dtype_text}).reshape({tuple(int(d) for d in array.shape)!r})"


def _complex_text(value: complex) -> str:
    return f"complex({float_text(value.real, float)}, {float_text(value.imag, float)})"


def docstring(text: str, indent: str) -> str:
    """A docstring literal of ``text``: the text is the model's, so nothing in it may end the
    literal early (a quote, a backslash) or make the file unreadable (NUL, lone surrogates)."""
    text = text.strip().replace("\\", "\\\\").replace("\r", "\\r").replace("\0", "\\x00")
    if '"' in text:  # a quote before another or at the end could close the literal
        text = _CLOSING_QUOTE.sub('\\\\"', text)
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return f'{indent}"""{text}\n{indent}"""' if "\n" in text else f'{indent}"""{text}"""'


def utf8(text: Any, what: str) -> Any:
    """``text``, refused where a corrupt file holds bytes that are not UTF-8 (proto2 parsing
    hands those out as bytes; written as a bytes literal, the file would not compile back).
    Dicts (metadata_props) are checked key by key."""
    if isinstance(text, dict):
        for key, value in text.items():
            utf8(key, what)
            utf8(value, what)
    elif isinstance(text, bytes):
        raise ModelLoadError(
            f"the model's {what} is not UTF-8 text: {text!r}",
            hint="the file is corrupt (ONNX text fields are UTF-8); re-export or re-download it",
        )
    return text


_SHORT_LINE = 100  # metadata dicts up to this long stay on one line
_TEXT_PIECE = 80  # characters of a long string per line (exporters record stack traces, fx nodes)


def dict_text(props: dict[str, str], indent: int) -> str:
    """A str -> str dict as Python text that keeps lines short: on one line when it is
    short, else one entry a line, a long value as adjacent literals, one piece a line
    (the torch exporter records a module path, a class hierarchy and an fx node per node)."""
    one_line = repr(props)
    if len(one_line) + indent <= _SHORT_LINE:
        return one_line
    inner = " " * (indent + 4)
    entries = "".join(f"{inner}{key!r}: {_string_text(value, inner + '    ')},\n" for key, value in props.items())
    return "{\n" + entries + " " * indent + "}"


def _string_text(text: str, indent: str) -> str:
    if len(text) <= _TEXT_PIECE:
        return repr(text)
    pieces = [repr(text[start:start + _TEXT_PIECE]) for start in range(0, len(text), _TEXT_PIECE)]
    return "(\n" + "".join(f"{indent}{piece}\n" for piece in pieces) + indent[:-4] + ")"
