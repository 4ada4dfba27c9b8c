"""``onnxquill demo``: the whole path in one command, so a new user sees that it works.

It compiles two small scripted functions (a layer normalisation and an MLP that calls
it), prints the ONNX text of the exported model, runs it in onnxruntime and eagerly on
random input, and compares both with numpy, printing the error and the time each step took.
"""

from __future__ import annotations

import time

import numpy as np

from dsl import FLOAT, ScriptFunction, script
from dsl import opset18 as op

__all__ = ["main", "layer_norm", "mlp_block"]

# Named sizes: B rows of D features, H hidden units.  These annotations are read by the
# @script compiler, not by mypy, to which FLOAT["B", "D"] is no type (hence the ignores).
Rows = FLOAT["B", "D"]
Features = FLOAT["D"]
WeightIn = FLOAT["D", "H"]
Hidden = FLOAT["H"]
WeightOut = FLOAT["H", "D"]


@script()
def layer_norm(x: Rows, scale: Features, bias: Features, epsilon: float = 1e-5) -> Rows:  # type: ignore[valid-type]
    mean = op.ReduceMean(x, [-1])
    centered = x - mean
    variance = op.ReduceMean(centered * centered, [-1])
    return centered / op.Sqrt(variance + epsilon) * scale + bias


@script()
def mlp_block(
    x: Rows, scale: Features, bias: Features, w1: WeightIn, b1: Hidden, w2: WeightOut, b2: Features  # type: ignore[valid-type]
) -> Rows:  # type: ignore[valid-type]
    hidden = op.Relu(op.MatMul(layer_norm(x, scale, bias), w1) + b1)
    return x + op.MatMul(hidden, w2) + b2


def _numpy_layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * scale + bias


def _numpy_mlp_block(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> np.ndarray:
    hidden = np.maximum(_numpy_layer_norm(x, scale, bias) @ w1 + b1, 0)
    return x + hidden @ w2 + b2


def _milliseconds(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1e3:.2f} ms"


def _show(title: str, function: ScriptFunction, inputs: list[np.ndarray], expected: np.ndarray) -> float:
    import onnx
    import onnx.printer
    import onnxruntime

    print(f"== {title}")
    start = time.perf_counter()
    compiled = function.function  # the first access parses and compiles the Python source
    print(f"compiled @script {function.name} to IR ({len(compiled.nodes)} nodes) in {_milliseconds(start)}"
          " (the first compile also loads the opset schemas)")
    start = time.perf_counter()
    model = function.to_model_proto()
    print(f"exported a model (IR version {model.ir_version}, {len(model.graph.node)} nodes in the main graph, "
          f"{len(model.functions)} model-local functions) in {_milliseconds(start)}")
    onnx.checker.check_model(model, full_check=True)
    print(onnx.printer.to_text(model))
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    (got,) = session.run(None, dict(zip(names, inputs)))
    runtime_error = float(np.max(np.abs(got - expected)))
    print(f"onnxruntime: loaded and ran in {_milliseconds(start)}, max abs error vs numpy {runtime_error:.2e}")
    start = time.perf_counter()
    eager = np.asarray(function(*inputs))
    eager_error = float(np.max(np.abs(eager - expected)))
    print(f"eager call : ran in {_milliseconds(start)}, max abs error vs numpy {eager_error:.2e}\n")
    return max(runtime_error, eager_error)


def main() -> int:
    """Run the demo; returns 0 when both models match numpy, 1 otherwise (the exit status)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    scale = rng.standard_normal(8).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    w1 = rng.standard_normal((8, 16)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 8)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(8).astype(np.float32)

    worst = _show("layer_norm", layer_norm, [x, scale, bias], _numpy_layer_norm(x, scale, bias))
    mlp_inputs = [x, scale, bias, w1, b1, w2, b2]
    worst = max(worst, _show("mlp_block (calls layer_norm: a model-local function)", mlp_block, mlp_inputs,
                             _numpy_mlp_block(*mlp_inputs)))
    tolerance = 1e-4
    if worst > tolerance:
        print(f"FAILED: an output differs from numpy by {worst:.2e} (> {tolerance})")
        return 1
    print(f"OK: onnxruntime and eager results match numpy within {tolerance}")
    return 0
