"""onnxquill: write ONNX models and functions as ordinary Python.

>>> from dsl import script, FLOAT, opset18 as op
>>> @script()
... def gelu(x: FLOAT[...]) -> FLOAT[...]:
...     return 0.5 * x * (1.0 + op.Erf(x / 1.4142135))
>>> model = gelu.to_model_proto()          # doctest: +SKIP

This module only re-exports the public API; opsets (``opset18``, ``opset``,
``ai_onnx_ml3``, ...) are created on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsl import ir
from dsl.errors import (
    ConversionError,
    DslError,
    DslNameError,
    DslSyntaxError,
    DslTypeError,
    EagerError,
    MarkupError,
    ModelLoadError,
    OpAttributeError,
    OpCallError,
    SourceUnavailableError,
    UnknownOpError,
    UnsupportedSyntaxError,
)
from dsl.frontend.weights import Initializer, initializer, load_weights, sparse_initializer, sparse_tensor
from dsl.opsets import Op, Opset
from dsl.script import GraphFunction, ScriptFunction, graph, script
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
    Optional,
    Sequence,
)

if TYPE_CHECKING:
    from dsl.op_signatures import *  # noqa: F403  (opset1 ... opsetN: Opset, for editors)
    from dsl.op_signatures import opset as opset

__version__ = "0.1.0"

__all__ = [
    "ir", "script", "graph", "ScriptFunction", "GraphFunction", "Op", "Opset",
    "Initializer", "initializer", "load_weights", "sparse_initializer", "sparse_tensor",
    "DslError", "DslSyntaxError", "UnsupportedSyntaxError", "DslNameError", "DslTypeError",
    "UnknownOpError", "OpCallError", "OpAttributeError", "SourceUnavailableError",
    "MarkupError", "ModelLoadError", "EagerError", "ConversionError",
    "BFLOAT16", "BOOL", "COMPLEX64", "COMPLEX128", "DOUBLE", "FLOAT", "FLOAT4E2M1",
    "FLOAT6E2M3", "FLOAT6E3M2", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT16", "INT2", "INT4", "INT8", "INT16", "INT32",
    "INT64", "STRING", "UINT2", "UINT4", "UINT8", "UINT16", "UINT32", "UINT64",
    "Optional", "Sequence", "opset",
]


def __getattr__(name: str) -> Any:
    # opset18, opset, ai_onnx_ml3, ... are made on first access (see dsl.opsets).
    from dsl import opsets

    try:
        return getattr(opsets, name)
    except AttributeError:
        raise AttributeError(f"module 'dsl' has no attribute {name!r}") from None
