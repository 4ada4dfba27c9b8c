"""What the installed onnxruntime can load: the newest ai.onnx opset and IR version.

Both are needed at import time (``dsl.opset``) and on every export (the ``ir_version``
of a model), so they are answered from the installed version number first, without
importing onnxruntime (which would double ``import dsl``); an onnxruntime release not in
the table is probed once by loading tiny models.
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any

__all__ = ["max_opset", "max_ir_version", "onnxruntime_version", "loadable", "loads_ir_version"]

# onnxruntime (major, minor) -> (newest ai.onnx opset it loads, newest IR version it loads),
# measured by loading a one-node model at each opset and IR version.
_KNOWN: dict[tuple[int, int], tuple[int, int]] = {
    (1, 31): (26, 13),
    (1, 32): (28, 14),
}


def onnxruntime_version() -> tuple[int, int] | None:
    """(major, minor) of the installed onnxruntime, or None when it is not installed."""
    for dist in ("onnxruntime", "onnxruntime-gpu", "ort-nightly"):
        try:
            parts = metadata.version(dist).split(".")
            return int(parts[0]), int(parts[1])
        except (metadata.PackageNotFoundError, ValueError, IndexError):
            continue
    return None


@functools.cache
def _limits() -> tuple[int, int]:
    import onnx.defs

    onnx_opset = onnx.defs.onnx_opset_version()
    onnx_ir = _onnx_ir_version()
    version = onnxruntime_version()
    if version is None:
        return onnx_opset, onnx_ir
    if version in _KNOWN:
        opset, ir = _KNOWN[version]
        return min(opset, onnx_opset), min(ir, onnx_ir)
    return _probe(onnx_opset, onnx_ir)


def _onnx_ir_version() -> int:
    import onnx

    return int(onnx.IR_VERSION)


def _loads(opset: int, ir_version: int) -> bool:
    """Whether onnxruntime loads a one-node model importing ai.onnx ``opset`` at ``ir_version``."""
    import onnx.helper as oh
    import onnxruntime

    graph = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "probe",
                          [oh.make_tensor_value_info("x", 1, [1])], [oh.make_tensor_value_info("y", 1, [1])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=ir_version)
    try:
        onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # any refusal means "not this pair"
        return False
    return True


def _probe(onnx_opset: int, onnx_ir: int) -> tuple[int, int]:
    ir = next((v for v in range(onnx_ir, 6, -1) if _loads(13, v)), 8)
    opset = next((v for v in range(onnx_opset, 6, -1) if _loads(v, ir)), 13)
    return opset, ir


def max_opset() -> int:
    """The newest ai.onnx opset that both onnx and the installed onnxruntime know."""
    return _limits()[0]


def max_ir_version() -> int:
    """The newest IR version that both onnx and the installed onnxruntime accept."""
    return _limits()[1]


def loadable(model: Any) -> Any:
    """``model`` (a ModelProto) with its IR version lowered to what the installed
    onnxruntime loads, or ``model`` itself when it already loads.

    onnx stamps its newest IR version on every model it makes, and an older onnxruntime
    refuses that number even when the model uses nothing of it.
    """
    if model.ir_version <= max_ir_version():
        return model
    lowered = type(model)()
    lowered.CopyFrom(model)
    lowered.ir_version = max_ir_version()
    return lowered


@functools.cache
def loads_ir_version(ir_version: int, opset: int) -> bool:
    """Whether the installed onnxruntime loads a model stamped ``ir_version`` that imports
    ai.onnx ``opset`` (probed once per pair on a one-node model).  onnxruntime loads IR
    versions older than onnx's table pairs with an opset (onnxscript writes such models);
    an explicit ``ir_version=`` is honoured where it does.  Without onnxruntime: False.

    >>> loads_ir_version(7, 15)   # doctest: +SKIP
    True
    """
    if onnxruntime_version() is None or ir_version > max_ir_version() or ir_version < 3:
        return False
    return _loads(opset, ir_version)
