"""Oracles shared by the test modules: run a scripted function exported and eagerly.

Every front-end construct test goes through :func:`check_script`, which exports the
function, validates the model with ``onnx.checker`` (full check), runs it in
onnxruntime, runs the same function eagerly, and compares both with a numpy oracle, so a
construct cannot work one way and not the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime

from dsl import ScriptFunction


def run_model(model: onnx.ModelProto, inputs: list[Any]) -> list[Any]:
    """Run a model in onnxruntime with positional inputs; returns the outputs as a list."""
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(inputs), f"model takes {names}, got {len(inputs)} inputs"
    return session.run(None, dict(zip(names, inputs)))


def ranked_io_types(function: ScriptFunction, inputs: list[Any]) -> dict[str, Any] | None:
    """Ranks for inputs annotated ``FLOAT[...]``, taken from the example inputs (every axis dynamic).

    ONNX's checker rejects a model input without a rank, and ``FLOAT[...]`` says nothing
    about the rank; the test inputs do, so the exported model gets that rank and no size.
    """
    from dsl import ir

    found: dict[str, Any] = {}
    for value, example in zip(function.function.inputs, inputs):
        if isinstance(value.type, ir.TensorType) and value.type.shape is None:
            found[value.name] = ir.TensorType(value.type.elem_type, (None,) * np.ndim(example))
    return found or None


def export_and_run(function: ScriptFunction, inputs: list[Any], **model_options: Any) -> list[Any]:
    """Export ``function`` to a model, check it fully, run it in onnxruntime."""
    if "io_types" not in model_options:
        model_options["io_types"] = ranked_io_types(function, inputs)
    model = function.to_model_proto(**model_options)
    onnx.checker.check_model(model, full_check=True)
    return run_model(model, inputs)


def run_eager(function: ScriptFunction, inputs: list[Any], attributes: dict[str, Any] | None = None) -> list[Any]:
    """Call ``function`` eagerly; returns its outputs as a list of numpy arrays."""
    result = function(*inputs, **(attributes or {}))
    outputs = list(result) if isinstance(result, tuple) else [result]
    return [np.asarray(o) for o in outputs]


def _assert_close(kind: str, got: list[Any], expected: list[Any], rtol: float, atol: float) -> None:
    assert len(got) == len(expected), f"{kind}: {len(got)} outputs, expected {len(expected)}"
    for index, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        e = np.asarray(e)
        assert g.shape == e.shape, f"{kind} output {index}: shape {g.shape}, expected {e.shape}"
        if e.dtype.kind in "OUS":
            assert g.tolist() == e.tolist(), f"{kind} output {index}: {g!r} != {e!r}"
        else:
            assert g.dtype == e.dtype, f"{kind} output {index}: dtype {g.dtype}, expected {e.dtype}"
            if e.dtype.kind in "biu":  # integers and bools exactly, whatever the tolerances
                np.testing.assert_array_equal(g, e, err_msg=f"{kind} output {index}")
            else:
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{kind} output {index}")


def check_script(
    function: ScriptFunction,
    inputs: list[Any],
    expected: Any,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    eager: bool = True,
    attributes: dict[str, Any] | None = None,
    **model_options: Any,
) -> None:
    """Assert that the exported model and eager execution both give ``expected``.

    ``expected`` is one array or a tuple/list of arrays (several outputs).  Attributes
    given here are passed eagerly, and to the export as ``to_model_proto(attributes=...)``
    (which fixes the values of the function's attribute parameters in the model).
    """
    expected_list = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if attributes and "attributes" not in model_options:
        model_options["attributes"] = attributes
    _assert_close("exported", export_and_run(function, inputs, **model_options), expected_list, rtol, atol)
    if eager:
        _assert_close("eager", run_eager(function, inputs, attributes), expected_list, rtol, atol)
