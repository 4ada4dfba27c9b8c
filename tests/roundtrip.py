"""The round trip the converter promises: model -> Python source -> @script -> model.

:func:`round_trip` writes the source (and its weights file) into a folder, imports it
like ``onnxquill compile`` does, exports the chosen function and returns the new model;
:func:`run` executes a model in onnxruntime, lowering the IR version where onnxruntime
refuses a newer one.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
import onnxruntime

import converter
from converter.script_module import load_script_function, model_options
from dsl.onnxruntime_limits import loadable
from tests.runtime_probes import onnxruntime_refusals


def round_trip(model: onnx.ModelProto, folder: str, name: str = "model") -> tuple[str, onnx.ModelProto]:
    """(the generated source, the model compiled back from it)."""
    source, _, rebuilt = round_trip_function(model, folder, name)
    return source, rebuilt


def round_trip_function(model: onnx.ModelProto, folder: str, name: str = "model") -> tuple[str, Any, onnx.ModelProto]:
    """(the generated source, its @script function, the model compiled back from it)."""
    source_path = os.path.join(folder, f"{name}.py")
    weights_path = os.path.join(folder, f"{name}.npz")
    source = converter.to_python(model, weights_path, source_path=source_path)
    with open(source_path, "w", encoding="utf-8") as stream:
        stream.write(source)
    function = load_script_function(source_path)
    # Output types exactly as written (no shape inference refining them), as in the original.
    rebuilt = function.to_model_proto(infer_output_types=False, **model_options(function))
    return source, function, rebuilt


def run_eagerly(function: Any, inputs: list[Any]) -> list[Any]:
    """``function`` (a @script function) called eagerly on ``inputs`` (protos read as arrays),
    given to its parameters without a default in order (a weight listed as a graph input,
    as IR 3 lists them, is a parameter defaulting to its initializer), its outputs as a list."""
    import inspect

    parameters = inspect.signature(function.python_function).parameters.values()
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    outputs = function(**dict(zip(required, [_normal(value) for value in inputs])))
    return list(outputs) if isinstance(outputs, tuple) else [outputs]


def runnable(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its IR version lowered to what the installed onnxruntime loads."""
    return loadable(model)


def run(model: onnx.ModelProto, inputs: list[Any]) -> list[Any]:
    """Run ``model`` in onnxruntime on positional inputs (the graph inputs that are not weights)."""
    session = onnxruntime.InferenceSession(runnable(model).SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    initializers = {t.name for t in model.graph.initializer}
    feeds = [n for n in (i.name for i in model.graph.input) if n not in initializers]
    feeds = [n for n in feeds if n in names][: len(inputs)]
    outputs = session.run(None, {name: _feed(value) for name, value in zip(feeds, inputs)})
    return [_as_declared(value, output.type) for value, output in zip(outputs, model.graph.output)]


def _as_declared(value: Any, type_proto: onnx.TypeProto) -> Any:
    """onnxruntime returns float8 tensors as their uint8 bits: view them as the declared type."""
    elem_type = type_proto.tensor_type.elem_type if type_proto.HasField("tensor_type") else 0
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and elem_type not in (0, onnx.TensorProto.UINT8):
        declared = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        if declared.itemsize == 1 and declared.name not in _PACKED:
            return value.view(declared)
    return value


# ml_dtypes types of 4 or 2 bits hold one element per byte, where onnxruntime expects them
# packed: fed as they are, onnxruntime refuses them (and the case is reported as not run).
_PACKED = {"int4", "uint4", "int2", "uint2", "float4_e2m1fn"}


def _feed(value: Any) -> Any:
    """A stored input (a TensorProto in the backend cases, an array, a list) as onnxruntime takes it."""
    value = _normal(value)
    if isinstance(value, list):
        return [_feed(item) for item in value]
    if isinstance(value, np.ndarray) and value.dtype.kind not in "biufcUO" and value.dtype.name not in _PACKED:
        # ml_dtypes arrays (bfloat16, float8): onnxruntime's numpy bridge refuses them.
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(value), elem_type)
    return value


def assert_outputs_close(expected: list[Any], got: list[Any], rtol: float, atol: float) -> None:
    """The ONNX backend runner's own comparison (strings, bfloat16, NaN) for each tensor,
    sequences and optionals walked here (the runner fails on a sequence whose first tensor
    has rank 0), integer and bool tensors compared exactly (the runner allows them ``rtol``)."""
    expected, got = [_normal(e) for e in expected], [_normal(g) for g in got]
    assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
    for want, have in zip(expected, got):
        _assert_value_close(want, have, rtol, atol)


def _assert_value_close(want: Any, have: Any, rtol: float, atol: float) -> None:
    from onnx.backend.test.runner import Runner

    if isinstance(want, list):
        assert isinstance(have, list), f"a {type(have).__name__}, expected a sequence"
        assert len(have) == len(want), f"a sequence of {len(have)}, expected {len(want)}"
        for want_item, have_item in zip(want, have):
            _assert_value_close(want_item, have_item, rtol, atol)
    elif want is None or have is None:
        assert want is None and have is None, f"{have!r}, expected {want!r}"
    elif isinstance(want, np.ndarray) and want.dtype.kind in "biu":
        np.testing.assert_array_equal(have, want, strict=True)
    else:
        Runner.assert_similar_outputs([want], [have], rtol, atol)


def output_oracle(model: onnx.ModelProto, data_sets: list[tuple[list[Any], list[Any]]],
                  rtol: float, atol: float) -> tuple[list[list[Any]] | None, str]:
    """The outputs a rebuilt ``model`` must give on each data set, or None and why there are
    none (in a few words that group equal reasons in pytest's skip summary).

    The expected outputs where onnxruntime runs the original to them; where onnxruntime
    runs it to other values (its kernel differs from the spec), onnxruntime's own outputs
    of the original, unless two runs of it differ (random draws)."""
    oracles = []
    for feeds, expected in data_sets:
        try:
            got = run(model, list(feeds))
        except onnxruntime_refusals() as error:
            words = str(error).replace("[ONNXRuntimeError] : ", "").splitlines()[0]
            # A message that quotes onnxruntime's source says what is wrong at its end.
            words = "..." + words[-90:] if "/onnxruntime_src/" in words else words[:90]
            return None, f"onnxruntime cannot run the original ({type(error).__name__}: {words})"
        try:
            assert_outputs_close(list(expected), got, rtol, atol)
            oracles.append(list(expected))
            continue
        except AssertionError:
            pass
        try:
            assert_outputs_close(got, run(model, list(feeds)), 0.0, 0.0)
        except AssertionError:
            return None, "onnxruntime's outputs of the original are random draws unlike the expected ones"
        oracles.append(got)
    return oracles, ""


def _normal(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    return np.asarray(value) if value is not None and not isinstance(value, np.ndarray) else value
