"""What the installed onnxruntime can run, asked of onnxruntime itself.

Tests whose expectation depends on the runtime's release (which backend eager mode picks,
whether an op falls back) derive it from these probes instead of naming a release: a new
onnxruntime that gains a kernel changes the expectation, not the verdict.  The probe is
independent of eager mode: a one-node model built with ``onnx.helper``, loaded and run.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime

from dsl.onnxruntime_limits import max_ir_version

__all__ = ["onnxruntime_lacks", "onnxruntime_outputs", "onnxruntime_refusals", "onnxruntime_runs", "onnxruntime_verdict"]


def onnxruntime_refusals() -> tuple[type[BaseException], ...]:
    """What onnxruntime raises when it cannot load or run a model on given inputs: its own
    error classes, and the RuntimeError/ValueError/TypeError its Python binding raises for
    inputs it cannot convert.  Anything else is a bug of the test and propagates."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NotImplemented", "RuntimeException",
             "NoSuchFile", "NoModel", "EngineError", "EPFail", "NotFound", "ModelRequiresCompilation")
    return (*(getattr(state, name) for name in names if hasattr(state, name)), RuntimeError, ValueError, TypeError)


def _feed(array: np.ndarray, elem_type: int) -> Any:
    if _numpy_native(array):
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


# What onnxruntime says when it has no implementation at all of an op, an element type or
# an opset (whatever the call's values): status NOT_IMPLEMENTED, or these words under FAIL.
_LACKS_WORDS = re.compile(r"is not a registered function/op|MLDataType for: \S+ is not currently registered")


def onnxruntime_lacks(error: BaseException) -> bool:
    """Whether onnxruntime refused because it has no implementation of what the model needs
    (the only refusal eager mode answers by running onnx.reference instead)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return isinstance(error, state.NotImplemented) or (
        isinstance(error, state.Fail) and _LACKS_WORDS.search(str(error)) is not None)


def _numpy_native(value: Any) -> bool:
    """A tensor numpy's bridge to onnxruntime takes (ml_dtypes' bfloat16 and float8 it does not)."""
    return not isinstance(value, np.ndarray) or value.dtype.type.__module__ == "numpy"


def _ort_feeds(model: onnx.ModelProto, feeds: dict[str, Any]) -> dict[str, Any] | None:
    """The feeds as OrtValues where they are all numeric tensors (outputs then stay OrtValues,
    so no ml_dtypes output trips numpy's bridge); as given where strings, sequences or
    optionals are among them; None where an ml_dtypes tensor sits beside those (the binding
    takes neither way)."""
    if not all(isinstance(v, np.ndarray) and v.dtype.kind not in "OUS" for v in feeds.values()):
        return feeds if all(_numpy_native(v) for v in feeds.values()) else None
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    return {name: onnxruntime.OrtValue.ortvalue_from_numpy(value) if _numpy_native(value)
            else _feed(value, declared[name]) for name, value in feeds.items()}


def onnxruntime_verdict(model: onnx.ModelProto, feeds: dict[str, Any]) -> tuple[str, str]:
    """``("runs", "")``, ``("lacks", message)`` or ``("refuses", message)``: what onnxruntime
    does with ``model`` (its IR version lowered to what it loads) on ``feeds``
    (``("unasked", why)`` where its Python binding cannot take the feeds)."""
    verdict, message, _ = onnxruntime_outputs(model, feeds)
    return verdict, message


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, Any]) -> tuple[str, str, list[Any]]:
    """:func:`onnxruntime_verdict`, and the outputs where it runs (numpy arrays, lists of
    them for sequences; None for an output numpy cannot hold: bfloat16, float8, 2/4-bit)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = min(copy.ir_version, max_ir_version())
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    converted = _ort_feeds(copy, feeds)
    if converted is None:
        return "unasked", "onnxruntime's binding takes no sequence beside an ml_dtypes tensor", []
    declared = {v.name: v.type.tensor_type.elem_type for v in copy.graph.input}
    if any(declared.get(name) in _PACKED for name in feeds):
        return "unasked", "a 2- or 4-bit input: onnxruntime takes it packed, which this probe does not write", []
    try:
        session = onnxruntime.InferenceSession(copy.SerializeToString(), options, providers=["CPUExecutionProvider"])
        readable = [_numpy_holds(o.type) for o in session.get_outputs()]
        if converted is feeds or (all(readable) and all(_numpy_native(v) for v in feeds.values())):
            outputs = list(session.run(None, feeds))
        else:
            values = session.run_with_ort_values([o.name for o in session.get_outputs()], converted)
            outputs = [values[index].numpy() if ok else None for index, ok in enumerate(readable)]
    except onnxruntime_refusals() as error:  # the verdict is the question asked
        return ("lacks" if onnxruntime_lacks(error) else "refuses"), str(error), []
    return "runs", "", outputs


_PACKED = frozenset(getattr(onnx.TensorProto, name) for name in ("INT2", "UINT2", "INT4", "UINT4", "FLOAT4E2M1")
                    if hasattr(onnx.TensorProto, name))
_NUMPY_ELEMENTS = ("float", "double", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "bool", "string")


def _numpy_holds(type_text: str) -> bool:
    """Whether onnxruntime hands an output of this type (``tensor(float)``, ``seq(tensor(int64))``)
    to numpy as its own dtype."""
    inner = type_text.removeprefix("seq(").removeprefix("optional(").removeprefix("tensor(").rstrip(")")
    return inner in _NUMPY_ELEMENTS
