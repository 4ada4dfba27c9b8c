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


def round_trip(model: onnx.ModelProto, folder: str, name: str = "model") -> tuple[str, onnx.ModelProto]:
    """(the generated source, the model compiled back from it)."""
    source_path = os.path.join(folder, f"{name}.py")
    weights_path = os.path.join(folder, f"{name}.npz")
    source = converter.to_python(model, weights_path, source_path=source_path)
    with open(source_path, "w", encoding="utf-8") as stream:
        stream.write(source)
    function = load_script_function(source_path)
    # Output types exactly as written (no shape inference refining them), as in the original.
    rebuilt = function.to_model_proto(infer_output_types=False, **model_options(function))
    return source, rebuilt


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
    return session.run(None, dict(zip(feeds, inputs)))


def assert_outputs_close(expected: list[Any], got: list[Any], rtol: float, atol: float) -> None:
    """The ONNX backend runner's own comparison (sequences, optionals, strings, bfloat16)."""
    from onnx.backend.test.runner import Runner

    Runner.assert_similar_outputs([_normal(e) for e in expected], [_normal(g) for g in got], rtol, atol)


def _normal(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    return np.asarray(value) if value is not None and not isinstance(value, np.ndarray) else value
