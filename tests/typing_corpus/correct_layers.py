"""Correct code in the spellings the README teaches: mypy and pyright report nothing."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from dsl import BOOL, FLOAT, INT64, Opset, Tensor, graph, initializer, opset, script
from dsl import opset18 as op

Rows = Annotated[Tensor, FLOAT["B", "D"]]  # a named size per axis
Features = Annotated[Tensor, FLOAT["D"]]
Anything = Annotated[Tensor, FLOAT[...]]
Count = Annotated[Tensor, INT64]


@script()
def layer_norm(x: Rows, scale: Features, bias: Features, epsilon: float = 1e-5) -> Rows:
    mean = op.ReduceMean(x, [-1])
    centered = x - mean
    variance = op.ReduceMean(centered * centered, [-1])
    return centered / op.Sqrt(variance + epsilon) * scale + bias


@script()
def mixed_sizes(x: Annotated[Tensor, FLOAT["N", 3]], k: Count) -> Anything:
    steps = op.Cast(k, to=INT64)
    return op.Relu(x) + op.Cast(steps, to=FLOAT) + op.Cast(steps, to=FLOAT.dtype)


@script()
def clipped_tail(x: Anything, k: Count, alpha: float = 0.5, axes: list[int] | None = None) -> Anything:
    if k > 0:
        y = x[k:]
    else:
        return x[::-1]
    return op.LeakyRelu(y, alpha=alpha) @ op.Transpose(y, perm=[1, 0])


@script(default_opset=op)
def attention_heads(x: Rows, heads: int = 4) -> Anything:
    split = op.Reshape(x, [0, 0, heads, -1])
    first, second = op.Split(split, num_outputs=2, axis=-1)
    values, _indices = op.TopK(first, [1])
    return op.Concat(values, second, axis=-1)


weight = initializer(np.ones((3, 3), np.float32), name="weight")


@script()
def with_weight(x: Annotated[Tensor, FLOAT["N", 3]]) -> Anything:
    return op.MatMul(x, weight)


@script()
def loop_sum(x: Anything, n: Count) -> Anything:
    @graph()
    def body(i: Count, keep_going: Annotated[Tensor, BOOL], total: Anything) -> tuple[
        Annotated[Tensor, BOOL], Anything
    ]:
        return keep_going, total + x

    return op.Loop(n, None, x, body=body)


@script()
def with_annotated_attribute(x: Anything, scale: Annotated[float, "must be positive"] = 1.0) -> Anything:
    return x * scale


@script
def bare_decorator(x: Anything) -> Anything:
    return op.Neg(x)


@script(op, ir_version=9, producer_name="corpus")
def pinned_opset(x: Anything) -> Anything:
    return bare_decorator(x) * 2.0


print(bare_decorator.function.name, pinned_opset.to_model_proto().ir_version)
newest = opset.Relu
custom = Opset("com.example", 1)
custom_op = custom.Anything

model = layer_norm.to_model_proto(io_types={"x": FLOAT[8, 16]})
function = layer_norm.to_function_proto()
print(model.graph.name, function.name, layer_norm.function.name)

x = np.random.rand(2, 8).astype(np.float32)
y = layer_norm(x, np.ones(8, np.float32), np.zeros(8, np.float32), epsilon=1e-6)
print(y.shape, float(np.abs(y).max()))
np.testing.assert_allclose(y, y)
z = op.Add(x, 1)
conv = op.Conv(np.ones((1, 1, 5, 5), np.float32), np.ones((1, 1, 3, 3), np.float32), pads=[1, 1, 1, 1])
print(z + 1, conv.shape, mixed_sizes(np.ones((2, 3), np.float32), np.array(2)))
ints = np.array([1, 2, 3])
print(op.BitwiseAnd(ints, np.arange(3)), op.Where(x > 0, x, 0.0), op.Gather(x, np.arange(2), axis=1))
print(op.BitwiseAnd(np.int64(3), 5), op.GatherElements(x, np.zeros((2, 8), np.int64)))
