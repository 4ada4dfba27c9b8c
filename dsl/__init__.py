"""onnxquill: write ONNX models and functions as ordinary Python.

>>> from dsl import script, FLOAT, opset18 as op
>>> @script()
... def gelu(x: FLOAT[...]) -> FLOAT[...]:
...     return 0.5 * x * (1.0 + op.Erf(x / 1.4142135))
>>> model = gelu.to_model_proto()          # doctest: +SKIP

This module re-exports the public API, each name loaded on first access (so
``import dsl.ir`` loads the core only, and ``import dsl`` neither onnx's schemas nor
onnxruntime); opsets (``opset18``, ``opset``, ``ai_onnx_ml3``, ...) are created on
first access too.  It installs the eager runner that ``Op.__call__`` uses
(``dsl.hooks``), importing ``eager`` on the first eager call.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dsl import hooks, ir
from dsl.errors import (
    ConversionError,
    DslError,
    DslNameError,
    DslSyntaxError,
    DslTypeError,
    EagerError,
    LimitExceededError,
    MarkupError,
    ModelLoadError,
    OpAttributeError,
    OpCallError,
    SourceUnavailableError,
    StaticAssertionError,
    UnknownOpError,
    UnsafePathError,
    UnsupportedSyntaxError,
)

if TYPE_CHECKING:
    from dsl import op_signatures
    from dsl.frontend.weights import Initializer, initializer, sparse_initializer, sparse_tensor
    from dsl.limits import raised_limits
    from dsl.loaded_model import LoadedModel, load
    from dsl.model_weights import WeightsLoadError, initializers, load_weights
    from dsl.op_signatures import *  # noqa: F403  (opset1 ... opsetN, typed per version, for editors)
    from dsl.op_signatures import opset as opset
    from dsl.opsets import Op, Opset
    from dsl.script_function import GraphFunction, ScriptFunction, export_onnx_lib, graph, script
    from dsl.types import (
        BFLOAT16,
        BOOL,
        COMPLEX64,
        COMPLEX128,
        DOUBLE,
        FLOAT,
        FLOAT4E2M1,
        FLOAT6E2M3,
        FLOAT6E3M2,
        FLOAT8E4M3FN,
        FLOAT8E4M3FNUZ,
        FLOAT8E5M2,
        FLOAT8E5M2FNUZ,
        FLOAT8E8M0,
        FLOAT16,
        INT2,
        INT4,
        INT8,
        INT16,
        INT32,
        INT64,
        STRING,
        UINT2,
        UINT4,
        UINT8,
        UINT16,
        UINT32,
        UINT64,
        Map,
        Optional,
        Sequence,
        Tensor,
        TensorType,
    )

__version__ = "0.1.0"

_ELEMENT_TYPES = ir.ELEMENT_TYPE_NAMES

# Public name -> the module that defines it; loaded on first access by __getattr__.
_LAZY: dict[str, str] = {
    "script": "dsl.script_function",
    "graph": "dsl.script_function",
    "ScriptFunction": "dsl.script_function",
    "GraphFunction": "dsl.script_function",
    "export_onnx_lib": "dsl.script_function",
    "Op": "dsl.opsets",
    "Opset": "dsl.opsets",
    "Initializer": "dsl.frontend.weights",
    "initializer": "dsl.frontend.weights",
    "load_weights": "dsl.model_weights",
    "initializers": "dsl.model_weights",
    "WeightsLoadError": "dsl.model_weights",
    "sparse_initializer": "dsl.frontend.weights",
    "sparse_tensor": "dsl.frontend.weights",
    "load": "dsl.loaded_model",
    "LoadedModel": "dsl.loaded_model",
    "raised_limits": "dsl.limits",
}
# Element types, the Optional/Sequence/Map annotations and TensorType ("any tensor", as
# onnxscript's) come from dsl.types.
_LAZY.update((name, "dsl.types") for name in ("Optional", "Sequence", "Map", "Tensor", "TensorType", *_ELEMENT_TYPES))

__all__ = [
    "ir", "script", "graph", "ScriptFunction", "GraphFunction", "export_onnx_lib", "Op", "Opset",
    "Initializer", "initializer", "initializers", "WeightsLoadError", "load_weights", "sparse_initializer", "sparse_tensor", "load", "LoadedModel",
    "BFLOAT16", "BOOL", "COMPLEX64", "COMPLEX128", "DOUBLE", "FLOAT", "FLOAT4E2M1",
    "FLOAT6E2M3", "FLOAT6E3M2", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT16", "INT2", "INT4", "INT8", "INT16", "INT32",
    "INT64", "STRING", "UINT2", "UINT4", "UINT8", "UINT16", "UINT32", "UINT64",
    "Optional", "Sequence", "Map", "Tensor", "TensorType",
    "DslError", "DslSyntaxError", "UnsupportedSyntaxError", "DslNameError", "DslTypeError",
    "UnknownOpError", "OpCallError", "OpAttributeError", "SourceUnavailableError",
    "MarkupError", "ModelLoadError", "EagerError", "ConversionError", "opset",
    "LimitExceededError", "UnsafePathError", "raised_limits", "StaticAssertionError",
]
if TYPE_CHECKING:  # opset1 ... opsetN, ai_onnx_ml1 ...: made on first access at run time
    __all__ += op_signatures.__all__


def _run_op_eagerly(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # The first eager call loads eager (and onnxruntime); later calls go to it directly.
    from eager import call_op

    hooks.run_op_eagerly = call_op
    return call_op(op, args, kwargs)


hooks.run_op_eagerly = _run_op_eagerly


def _eager_tensor(array: Any) -> Any:
    from eager.tensor import EagerTensor

    return EagerTensor(array)


hooks.eager_tensor = _eager_tensor


def _call_as_eager_body(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], opset: Any) -> Any:
    # Loads eager on the first such call, as the first eager op does.
    from eager.script_context import call_as_body

    hooks.call_as_eager_body = call_as_body
    return call_as_body(function, args, kwargs, opset)


hooks.call_as_eager_body = _call_as_eager_body


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(import_module(module), name)
        globals()[name] = value
        return value
    # opset18, opset, ai_onnx_ml3, ... are made on first access (see dsl.opsets).
    opsets = import_module("dsl.opsets")
    try:
        return getattr(opsets, name)
    except AttributeError:
        raise AttributeError(f"module 'dsl' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
