"""What the installed onnxruntime can run, asked of onnxruntime itself.

Tests whose expectation depends on the runtime's release (which backend eager mode picks,
whether an op falls back) derive it from these probes instead of naming a release: a new
onnxruntime that gains a kernel changes the expectation, not the verdict.  The probe is
independent of eager mode: a one-node model built with ``onnx.helper``, loaded and run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime

from dsl.onnxruntime_limits import max_ir_version

__all__ = ["onnxruntime_refusals", "onnxruntime_runs"]


def onnxruntime_refusals() -> tuple[type[BaseException], ...]:
    """What onnxruntime raises when it cannot load or run a model on given inputs: its own
    error classes, and the RuntimeError/ValueError/TypeError its Python binding raises for
    inputs it cannot convert.  Anything else is a bug of the test and propagates."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NotImplemented", "RuntimeException",
             "NoSuchFile", "NoModel", "EngineError", "EPFail", "NotFound", "ModelRequiresCompilation")
    return (*(getattr(state, name) for name in names if hasattr(state, name)), RuntimeError, ValueError, TypeError)


def _feed(array: np.ndarray, elem_type: int) -> Any:
    if array.dtype.kind in "biufcUO":
        return array
    # ml_dtypes arrays (bfloat16, float8): onnxruntime's numpy bridge refuses them.
    return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(array), elem_type)


def onnxruntime_runs(op_type: str, opset: int, inputs: list[np.ndarray], **attributes: Any) -> bool:
    """True when onnxruntime loads and runs one ``op_type`` node of ``opset`` on ``inputs``."""
    names = [f"x{i}" for i in range(len(inputs))]
    elem_types = [oh.np_dtype_to_tensor_dtype(array.dtype) for array in inputs]
    graph = oh.make_graph(
        [oh.make_node(op_type, names, ["y"], **attributes)],
        "probe",
        [oh.make_tensor_value_info(n, e, a.shape) for n, e, a in zip(names, elem_types, inputs)],
        [onnx.ValueInfoProto(name="y")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=max_ir_version())
    native = all(array.dtype.kind in "biufcUO" for array in inputs)
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        if native:
            session.run(None, dict(zip(names, inputs)))
        else:
            session.run_with_ort_values(["y"], {n: _feed(a, e) for n, e, a in zip(names, elem_types, inputs)})
    except onnxruntime_refusals():  # every refusal (load or run) answers "no": that is the probe's question
        return False
    return True
