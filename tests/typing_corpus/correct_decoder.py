"""A small LLaMA-style decoder (RMSNorm, rotary-free attention, SwiGLU, two layers) written
as the README teaches: mypy and pyright report nothing, and it runs."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import onnxruntime

from dsl import FLOAT, INT64, Initializer, Tensor, initializer, script
from dsl import opset18 as op

Hidden = Annotated[Tensor, FLOAT["B", "S", 16]]
Weight = Annotated[Tensor, FLOAT[16, 16]]
Scale = Annotated[Tensor, FLOAT[16]]

rng = np.random.default_rng(0)


def weight(name: str, size: int = 16) -> Initializer:
    return initializer(rng.standard_normal((size, 16)).astype(np.float32) * 0.1, name=name)


Q0, K0, V0, O0, GATE0, UP0, DOWN0 = (weight(f"{name}0") for name in ("q", "k", "v", "o", "gate", "up", "down"))
Q1, K1, V1, O1, GATE1, UP1, DOWN1 = (weight(f"{name}1") for name in ("q", "k", "v", "o", "gate", "up", "down"))
NORM = initializer(np.ones(16, np.float32), name="norm")


@script()
def rms_norm(x: Hidden, scale: Scale, epsilon: float = 1e-6) -> Hidden:
    variance = op.ReduceMean(x * x, [-1])
    return x / op.Sqrt(variance + epsilon) * scale


@script()
def attention(x: Hidden, wq: Weight, wk: Weight, wv: Weight, wo: Weight, heads: int = 2) -> Hidden:
    q = op.Transpose(op.Reshape(op.MatMul(x, wq), [0, 0, heads, -1]), perm=[0, 2, 1, 3])
    k = op.Transpose(op.Reshape(op.MatMul(x, wk), [0, 0, heads, -1]), perm=[0, 2, 3, 1])
    v = op.Transpose(op.Reshape(op.MatMul(x, wv), [0, 0, heads, -1]), perm=[0, 2, 1, 3])
    weights = op.Softmax(op.MatMul(q, k) / 2.8284271, axis=-1)
    mixed = op.Transpose(op.MatMul(weights, v), perm=[0, 2, 1, 3])
    shape = op.Shape(x)
    return op.MatMul(op.Reshape(mixed, shape), wo)


@script()
def swiglu(x: Hidden, gate: Weight, up: Weight, down: Weight) -> Hidden:
    g = op.MatMul(x, gate)
    return op.MatMul(g * op.Sigmoid(g) * op.MatMul(x, up), down)


@script()
def block(h: Hidden, q: Weight, k: Weight, v: Weight, o: Weight, gate: Weight, up: Weight, down: Weight) -> Hidden:
    h = h + attention(rms_norm(h, NORM), q, k, v, o)
    return h + swiglu(rms_norm(h, NORM), gate, up, down)


@script()
def decoder(x: Hidden, positions: Annotated[Tensor, INT64["S"]]) -> Hidden:
    h = x + op.Unsqueeze(op.Cast(positions, to=FLOAT), [0, 2]) * 0.0
    h = block(h, Q0, K0, V0, O0, GATE0, UP0, DOWN0)
    h = block(h, Q1, K1, V1, O1, GATE1, UP1, DOWN1)
    return rms_norm(h, NORM)


model = decoder.to_model_proto()
hidden = rng.standard_normal((1, 4, 16)).astype(np.float32)
eager = decoder(hidden, np.arange(4, dtype=np.int64))
print(model.graph.name, len(model.functions), eager.shape, float(np.abs(eager).mean()))

session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
compiled = np.asarray(session.run(None, {"x": hidden, "positions": np.arange(4, dtype=np.int64)})[0])
np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-5)  # what runs eagerly is what compiles
