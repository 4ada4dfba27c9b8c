"""Composition speed of onnxquill: ``converter.merge`` and ``converter.cut`` on long chains.

Run ``python bench/compose_speed.py`` from the repository root.  It builds, in memory
with ``onnx.helper``, two chain models of N nodes each (Add / Relu / Mul with a few
initializers; both use the same names, so the merge has to rename) and prints one table
per size:

- µs per node for ``converter.merge(first, second, io_map=[("y", "x")])`` (per node of
  the result), side by side with ``onnx.compose.merge_models`` on the same pair (it
  refuses clashing names, so it gets ``prefix2``) and the ratio of the two;
- µs per node for ``converter.cut(first, outputs=[the middle value])`` (per node of the
  model cut): once on the plain chain, where the new output's type is unknown and the
  writer runs ``onnx.shape_inference`` on the result, once on the same chain with a
  value_info entry for every value (no inference), side by side with
  ``onnx.utils.Extractor(...).extract_model`` on that typed chain (it cannot cut the
  untyped one: it needs every value typed) and the ratio of the two.  ``converter.cut``
  reads a sorted graph only up to the node that defines the last of its outputs, so the
  middle cut reads half the chain; the column "cut at the end" cuts the typed chain at
  its last inner value, reading (nearly) all of it;
- for reference, µs per node of ``onnx.shape_inference.infer_shapes`` alone on the plain
  chain: the floor under the untyped cut, whose writer has to infer the new output's type.

Goal: linear in the number of nodes and <= 5 µs per node.  Sizes up to 20 000 nodes
take the best of ``--repeats`` runs, larger ones a single run.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_OPS = ("Add", "Relu", "Mul")


def chain_model(nodes: int, typed: bool = False) -> Any:
    """A model ``y = f(x)`` of ``nodes`` nodes in a chain, with three initializers
    (``typed``: with a value_info entry for every intermediate value)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    initializers = [
        numpy_helper.from_array(np.full([16], value, dtype=np.float32), name=f"c{index}")
        for index, value in enumerate((0.5, 1.5, -0.25))
    ]
    graph_nodes = []
    previous = "x"
    for index in range(nodes):
        op = _OPS[index % len(_OPS)]
        output = "y" if index == nodes - 1 else f"v{index}"
        inputs = [previous] if op == "Relu" else [previous, f"c{index % len(initializers)}"]
        graph_nodes.append(helper.make_node(op, inputs, [output], name=f"n{index}"))
        previous = output
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])],
        initializers,
        value_info=[
            helper.make_tensor_value_info(f"v{index}", TensorProto.FLOAT, [16]) for index in range(nodes - 1)
        ] if typed else None,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def best_seconds(action: Callable[[], Any], repeats: int) -> float:
    """The shortest of ``repeats`` runs of ``action``, each starting from a collected heap
    (so no run pays for collecting the garbage of the one before)."""
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return min(samples)


def measure(nodes: int, repeats: int) -> dict[str, float]:
    """µs per node of each operation on chains of ``nodes`` nodes."""
    import onnx.compose
    import onnx.shape_inference
    import onnx.utils

    import converter

    first, second, typed = chain_model(nodes), chain_model(nodes), chain_model(nodes, typed=True)
    middle = f"v{nodes // 2}"
    results = {
        "merge": best_seconds(lambda: converter.merge(first, second, io_map=[("y", "x")]), repeats) / (2 * nodes),
        "onnx.compose": best_seconds(
            lambda: onnx.compose.merge_models(first, second, io_map=[("y", "x")], prefix2="b_"), repeats
        ) / (2 * nodes),
        "cut": best_seconds(lambda: converter.cut(first, outputs=[middle]), repeats) / nodes,
        "cut typed": best_seconds(lambda: converter.cut(typed, outputs=[middle]), repeats) / nodes,
        "cut at the end": best_seconds(lambda: converter.cut(typed, outputs=[f"v{nodes - 2}"]), repeats) / nodes,
        "extract": best_seconds(
            lambda: onnx.utils.Extractor(typed).extract_model(["x"], [middle]), repeats
        ) / nodes,
        "inference": best_seconds(
            lambda: onnx.shape_inference.infer_shapes(first, check_type=False, strict_mode=False, data_prop=True),
            repeats,
        ) / nodes,
    }
    return {key: seconds * 1e6 for key, seconds in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2000, 20000, 200000], help="nodes per model")
    parser.add_argument("--repeats", type=int, default=3, help="runs per size up to 20 000 nodes (best taken)")
    args = parser.parse_args(argv)

    rows = {size: measure(size, args.repeats if size <= 20000 else 1) for size in args.sizes}
    print()
    print(
        "| nodes per model | merge (µs/node) | onnx.compose.merge_models (µs/node) | ratio "
        "| cut (µs/node) | cut, types known (µs/node) | onnx.utils.Extractor, types known (µs/node) | ratio "
        "| cut at the end, types known (µs/node) | onnx.shape_inference alone (µs/node) | goal |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for size, row in rows.items():
        merge_ratio = row["merge"] / row["onnx.compose"] if row["onnx.compose"] else float("nan")
        cut_ratio = row["cut typed"] / row["extract"] if row["extract"] else float("nan")
        print(
            f"| {size} | {row['merge']:.2f} | {row['onnx.compose']:.2f} | {merge_ratio:.2f}x | {row['cut']:.2f} "
            f"| {row['cut typed']:.2f} | {row['extract']:.2f} | {cut_ratio:.2f}x | {row['cut at the end']:.2f} "
            f"| {row['inference']:.2f} "
            "| <= 5, linear |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
