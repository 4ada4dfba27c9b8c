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
  chain, without data propagation as the writer first runs it: the floor under the
  untyped cut, whose writer has to infer the new output's type.

A second table times the real models shipped with onnx (``backend/test/data/light``):
two copies merged side by side, against ``onnx.compose.merge_models`` in the same
rounds, and each cut at its middle node (see :func:`measure_light_models`); each of
these runs for at least half a second in all (more rounds for the small models).

Goal: linear in the number of nodes, merge <= 1.0x onnx.compose.merge_models and cut <= 1.0x
onnx.utils.Extractor where it cuts (the "goal" column says met or not).  The operations run in rounds,
each round timing every operation once (in a rotating order), so that a slow spell of a
shared machine falls on all of them alike; each figure is the best of at least ``--repeats``
rounds up to 20 000 nodes (more until each operation has run half a second in all) and of
``--large-repeats`` above.  Times are this process's
CPU time by default (``--clock cpu``): both sides are single-threaded Python and C++, and
on a shared machine the elapsed time also counts the slices the scheduler gives other
processes, which made single figures wander by tens of percent (``--clock wall`` for
elapsed time).  Compare ratios taken in the same run.
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


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
clock = time.process_time


def seconds(action: Callable[[], Any]) -> float:
    """One run of ``action``, started from a collected heap (so no run pays for
    collecting the garbage of the one before), on :data:`clock`."""
    gc.collect()
    start = clock()
    action()
    return clock() - start


def measure(nodes: int, rounds: int) -> dict[str, float]:
    """µs per node of each operation on chains of ``nodes`` nodes, the best of ``rounds``."""
    import onnx.compose
    import onnx.shape_inference
    import onnx.utils

    import converter

    first, second, typed = chain_model(nodes), chain_model(nodes), chain_model(nodes, typed=True)
    middle = f"v{nodes // 2}"
    actions: dict[str, tuple[Callable[[], Any], int]] = {  # (the action, the nodes its time is divided by)
        "merge": (lambda: converter.merge(first, second, io_map=[("y", "x")]), 2 * nodes),
        "onnx.compose": (
            lambda: onnx.compose.merge_models(first, second, io_map=[("y", "x")], prefix2="b_"), 2 * nodes
        ),
        "cut": (lambda: converter.cut(first, outputs=[middle]), nodes),
        "cut typed": (lambda: converter.cut(typed, outputs=[middle]), nodes),
        "cut at the end": (lambda: converter.cut(typed, outputs=[f"v{nodes - 2}"]), nodes),
        "extract": (lambda: onnx.utils.Extractor(typed).extract_model(["x"], [middle]), nodes),
        "inference": (lambda: onnx.shape_inference.infer_shapes(first, check_type=False, strict_mode=False), nodes),
    }
    best = best_of_rounds({name: action for name, (action, _) in actions.items()}, rounds,
                          MIN_SECONDS if nodes <= 20000 else 0.0)
    return {name: best[name] / count * 1e6 for name, (_, count) in actions.items()}


def best_of_rounds(actions: dict[str, Callable[[], Any]], rounds: int, min_seconds: float = 0.0) -> dict[str, float]:
    """The best seconds of each action over ``rounds`` rounds, each round running every
    action once in a rotating order (a slow spell of the machine falls on all alike); more
    rounds (up to 500) until every action has run ``min_seconds`` in all, so that a short
    action is timed as many times as it takes for its best to settle."""
    best = dict.fromkeys(actions, float("inf"))
    spent = dict.fromkeys(actions, 0.0)
    names = list(actions)
    round_number = 0
    while round_number < rounds or (min(spent.values()) < min_seconds and round_number < 500):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            taken = seconds(actions[name])
            best[name] = min(best[name], taken)
            spent[name] += taken
        round_number += 1
    return best


# Up to 20 000 nodes, each operation runs for at least this long in all (best of more rounds
# for the short ones, whose single runs wander most).
MIN_SECONDS = 0.5
LIGHT_MODELS = ("light_squeezenet.onnx", "light_resnet50.onnx", "light_inception_v2.onnx", "light_densenet121.onnx")


def measure_light_models(rounds: int) -> list[tuple[str, int, dict[str, float]]]:
    """Milliseconds for the real models shipped with onnx (``backend/test/data/light``):
    two copies merged side by side (``onnx.compose.merge_models`` with ``prefix2``, since
    every name clashes), and the model cut at its middle node's output (no peer:
    ``onnx.utils.Extractor`` refuses all of these IR-3 models, their values untyped).
    Unlike the chains, most of their nodes carry attributes (Conv's INTS, ConstantOfShape's
    TENSOR) and half their values are weights."""
    import os

    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    rows = []
    for file_name in LIGHT_MODELS:
        path = os.path.join(folder, file_name)
        if not os.path.exists(path):
            print(f"(skipped {file_name}: this onnx release does not ship it)")
            continue
        model = onnx.load(path)
        rows.append((file_name, len(model.graph.node), _time_light_model(model, rounds)))
    return rows


def _time_light_model(first: Any, rounds: int) -> dict[str, float]:
    """Milliseconds (best of ``rounds`` interleaved rounds) for one model of :func:`measure_light_models`."""
    import onnx
    import onnx.compose

    import converter

    second = onnx.ModelProto()
    second.CopyFrom(first)
    middle = first.graph.node[len(first.graph.node) // 2].output[0]
    actions: dict[str, Callable[[], Any]] = {
        "merge": lambda: converter.merge(first, second),
        "onnx.compose": lambda: onnx.compose.merge_models(first, second, io_map=[], prefix2="b_"),
        "cut": lambda: converter.cut(first, outputs=[middle]),
    }
    return {name: value * 1e3 for name, value in best_of_rounds(actions, rounds, MIN_SECONDS).items()}


def _met(*ratios: float) -> str:
    """Whether every ratio to the peer is within the goal (<= 1.0x)."""
    return "met" if all(ratio <= 1.0 for ratio in ratios) else "NOT met"


def main(argv: list[str] | None = None) -> int:
    global clock, MIN_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2000, 20000, 200000], help="nodes per model")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per size up to 20 000 nodes (best taken)")
    parser.add_argument("--large-repeats", type=int, default=2, help="rounds per size above 20 000 nodes")
    parser.add_argument("--min-seconds", type=float, default=MIN_SECONDS,
                        help="up to 20 000 nodes and on the real models, more rounds until each operation has run "
                        "this long in all (0: exactly --repeats rounds)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: this process's CPU time (default; both sides run on one thread, and time the "
                        "machine gives other processes is not counted); wall: elapsed time")
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]
    MIN_SECONDS = args.min_seconds
    print(f"clock: {args.clock}")

    rows = {size: measure(size, args.repeats if size <= 20000 else args.large_repeats) for size in args.sizes}
    print()
    print(
        "| nodes per model | merge (µs/node) | onnx.compose.merge_models (µs/node) | ratio "
        "| cut (µs/node) | cut, types known (µs/node) | onnx.utils.Extractor, types known (µs/node) | ratio "
        "| cut at the end, types known (µs/node) | onnx.shape_inference alone, no data propagation (µs/node) "
        "| goal |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for size, row in rows.items():
        merge_ratio = row["merge"] / row["onnx.compose"] if row["onnx.compose"] else float("nan")
        cut_ratio = row["cut typed"] / row["extract"] if row["extract"] else float("nan")
        print(
            f"| {size} | {row['merge']:.2f} | {row['onnx.compose']:.2f} | {merge_ratio:.2f}x | {row['cut']:.2f} "
            f"| {row['cut typed']:.2f} | {row['extract']:.2f} | {cut_ratio:.2f}x | {row['cut at the end']:.2f} "
            f"| {row['inference']:.2f} "
            f"| {_met(merge_ratio, cut_ratio)} |"
        )
    light = measure_light_models(args.repeats)
    if light:
        print()
        print(
            "| model (nodes) | merge, two copies (ms) | µs/node | onnx.compose.merge_models (ms) | ratio "
            "| cut at the middle (ms) | µs/node | goal |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for file_name, nodes, row in light:
            print(
                f"| {file_name} ({nodes}) | {row['merge']:.1f} | {row['merge'] * 1e3 / (2 * nodes):.2f} "
                f"| {row['onnx.compose']:.1f} | {row['merge'] / row['onnx.compose']:.2f}x "
                f"| {row['cut']:.1f} | {row['cut'] * 1e3 / nodes:.2f} "
                f"| {_met(row['merge'] / row['onnx.compose'])} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
