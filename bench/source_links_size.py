"""How much source links (``to_model_proto(source_links=True)``) grow a written model.

A transformer block written with ``@script`` (d_model 256, 4 heads, MLP 1024: 0.8 M float
weights) is written with and without source links; the table gives the file sizes, the
growth and the time to write each (best of 5).  The graph alone (weights as inputs) is the
worst case: every byte of growth is metadata.

    PYTHONPATH=$PWD python3 bench/source_links_size.py
"""

from __future__ import annotations

import time

import numpy as np

from dsl import FLOAT, initializer, script
from dsl import opset18 as op

D, HEADS, HIDDEN = 256, 4, 1024
rng = np.random.default_rng(0)


def weight(*shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


WQ, WK, WV, WO = (initializer(weight(D, D), name) for name in ("wq", "wk", "wv", "wo"))
W1, W2 = initializer(weight(D, HIDDEN), "w1"), initializer(weight(HIDDEN, D), "w2")
SCALE, BIAS = initializer(np.ones(D, np.float32), "ln.scale"), initializer(np.zeros(D, np.float32), "ln.bias")
Tokens = FLOAT["B", "T", 256]


@script()
def block_with_weights(x: Tokens) -> Tokens:
    mean = op.ReduceMean(x, [-1])
    centered = x - mean
    normed = centered / op.Sqrt(op.ReduceMean(centered * centered, [-1]) + 1e-5) * SCALE + BIAS
    q = op.Transpose(op.Reshape(normed @ WQ, [0, 0, 4, 64]), perm=[0, 2, 1, 3])
    k = op.Transpose(op.Reshape(normed @ WK, [0, 0, 4, 64]), perm=[0, 2, 3, 1])
    v = op.Transpose(op.Reshape(normed @ WV, [0, 0, 4, 64]), perm=[0, 2, 1, 3])
    attention = op.Softmax(q @ k / 8.0, axis=-1) @ v
    merged = op.Reshape(op.Transpose(attention, perm=[0, 2, 1, 3]), [0, 0, 256])
    h = x + merged @ WO
    return h + op.Relu(h @ W1) @ W2


@script()
def block_graph_only(x: Tokens, wq: FLOAT[256, 256], wk: FLOAT[256, 256], wv: FLOAT[256, 256],
                     wo: FLOAT[256, 256], w1: FLOAT[256, 1024], w2: FLOAT[1024, 256]) -> Tokens:
    mean = op.ReduceMean(x, [-1])
    centered = x - mean
    normed = centered / op.Sqrt(op.ReduceMean(centered * centered, [-1]) + 1e-5)
    q = op.Transpose(op.Reshape(normed @ wq, [0, 0, 4, 64]), perm=[0, 2, 1, 3])
    k = op.Transpose(op.Reshape(normed @ wk, [0, 0, 4, 64]), perm=[0, 2, 3, 1])
    v = op.Transpose(op.Reshape(normed @ wv, [0, 0, 4, 64]), perm=[0, 2, 1, 3])
    attention = op.Softmax(q @ k / 8.0, axis=-1) @ v
    merged = op.Reshape(op.Transpose(attention, perm=[0, 2, 1, 3]), [0, 0, 256])
    h = x + merged @ wo
    return h + op.Relu(h @ w1) @ w2


def best_write(function: object, links: bool) -> tuple[int, float, int]:
    best = float("inf")
    size = nodes = 0
    for _ in range(5):
        start = time.perf_counter()
        model = function.to_model_proto(source_links=links)  # type: ignore[attr-defined]
        best = min(best, time.perf_counter() - start)
        size, nodes = model.ByteSize(), len(model.graph.node)
    return size, best, nodes


def main() -> None:
    print(f"{'model':<22}{'nodes':>6}{'bytes, off':>12}{'bytes, on':>12}{'growth':>9}{'write off ms':>14}{'write on ms':>13}")
    for label, function in (("block with weights", block_with_weights), ("block, graph only", block_graph_only)):
        off, time_off, nodes = best_write(function, False)
        on, time_on, _ = best_write(function, True)
        print(f"{label:<22}{nodes:>6}{off:>12}{on:>12}{(on - off) / off:>9.2%}{time_off * 1e3:>14.2f}{time_on * 1e3:>13.2f}")


if __name__ == "__main__":
    main()
