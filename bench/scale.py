"""Speed and memory where models are big: weights read once, eager.run at one session's speed.

Run ``python bench/scale.py`` from the repository root (``--weights-gb 2.1`` by default;
``--no-large`` or ``--no-eager`` to run one half).  Two tables:

1. A model with >= 2 GB of external-data weights is built in a temporary folder (one
   layer at a time; removed at the end) and taken through ``converter.load_model``,
   ``converter.write_python`` (source + ``.npz`` weights), ``onnxquill compile`` of that
   source back to ONNX, ``eager.run`` and (when torch and ``converter.to_torch`` are
   there) ``converter.to_torch``.  Each step runs in its own Python process, so its
   peak resident memory (``ru_maxrss``) is its own; the table gives the time and the
   peak as a ratio to the weights' size (goal: <= 1.3x for load_model, to_python and
   compile), and the peak over the process's baseline after its imports.
2. ``eager.run(path, feeds)`` and ``eager.run(path, feeds, capture=True)`` against one
   onnxruntime session (``InferenceSession(path)`` with default options) on a CNN, a
   transformer encoder and an LSTM built with onnx.helper, torch's own
   ``nn.TransformerEncoder`` and ``nn.LSTM`` exported by ``torch.onnx.export``, and a
   model shaped like silero-vad's (weights in Constant nodes inside If branches; see
   :mod:`bench.scale_models`): first call, each side in a fresh process (session
   creation plus first run; best of 3 processes a side, the sides alternated; goal <=
   3x with capture), and warm run, the three sides in one process, interleaved (best of
   at least 15 runs and 2 s; goal <= 2x with capture).

Figures taken on a busy machine vary between runs; ratios measured in the same run are
what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

LARGE_STEPS = ("load_model", "to_python", "compile", "eager.run", "to_torch")
WARM_RUNS = 15
WARM_BUDGET_S = 2.0
FIRST_ROUNDS = 3


# ------------------------------------------------------------------ one step, one process


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # (kilobytes on Linux)


def _large_step(step: str, folder: str) -> dict[str, Any]:
    import numpy as np

    import converter
    import eager

    model_path = os.path.join(folder, "model.onnx")
    source_path = os.path.join(folder, "generated", "model.py")
    if step == "to_torch":
        if not hasattr(converter, "to_torch"):
            return {"skipped": "converter.to_torch is not in this tree"}
        try:
            import torch  # noqa: F401
        except ImportError:
            return {"skipped": "torch is not installed"}
    baseline = _peak_bytes()
    start = time.perf_counter()
    if step == "load_model":
        model = converter.load_model(model_path)
        assert model.graph.initializers
    elif step == "to_python":
        os.makedirs(os.path.dirname(source_path), exist_ok=True)
        converter.write_python(model_path, source_path)
    elif step == "compile":
        from converter.cli import main

        main(["compile", source_path, "-o", os.path.join(folder, "compiled", "model.onnx")])
    elif step == "eager.run":
        width = 4096
        (output,) = eager.run(model_path, [np.ones((1, width), np.float32)])
        assert output.shape == (1, width)
    elif step == "to_torch":
        module = converter.to_torch(model_path)  # type: ignore[attr-defined]
        assert module is not None
    return {"seconds": time.perf_counter() - start, "peak": _peak_bytes(), "baseline": baseline}


def _eager_step(side: str, model_path: str, feeds_path: str) -> dict[str, Any]:
    """``side`` "onnxruntime", "eager" or "capture": the first call in this fresh process;
    "warm": the three sides' warm runs, interleaved so that bursts of load hit all alike."""
    import numpy as np
    import onnxruntime

    import eager

    with np.load(feeds_path) as stored:
        feeds = {name: stored[name] for name in stored.files}
    start = time.perf_counter()
    if side in ("onnxruntime", "warm"):
        session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    if side in ("eager", "warm"):
        eager.run(model_path, feeds)
    if side in ("capture", "warm"):
        eager.run(model_path, feeds, capture=True)
    if side != "warm":
        return {"first": time.perf_counter() - start}
    calls = {"onnxruntime": lambda: session.run(None, feeds), "eager": lambda: eager.run(model_path, feeds),
             "capture": lambda: eager.run(model_path, feeds, capture=True)}
    best = dict.fromkeys(calls, float("inf"))
    runs = 0
    began = time.perf_counter()
    while runs < WARM_RUNS or time.perf_counter() - began < WARM_BUDGET_S:  # best of many: load comes in bursts
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
        runs += 1
    return best


def _in_subprocess(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *args], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------- tables


def large_table(weights_gb: float) -> None:
    from bench.scale_models import large_model

    folder = tempfile.mkdtemp(prefix="onnxquill-scale-")
    try:
        start = time.perf_counter()
        _, weights = large_model(folder, int(weights_gb * 1e9))
        print(f"built a model with {weights / 1e9:.2f} GB of external-data weights in "
              f"{time.perf_counter() - start:.0f} s")
        print(f"{'step':<12} {'seconds':>8} {'s per GB':>9} {'peak RSS / weights':>19} {'(over baseline)':>16}")
        for step in LARGE_STEPS:
            found = _in_subprocess("--large-step", step, folder)
            if "seconds" not in found:
                print(f"{step:<12} {found.get('skipped') or 'FAILED: ' + found.get('failed', '?')}")
                continue
            over = (found["peak"] - found["baseline"]) / weights
            print(f"{step:<12} {found['seconds']:>8.1f} {found['seconds'] / (weights / 1e9):>9.2f} "
                  f"{found['peak'] / weights:>18.2f}x {over:>15.2f}x")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


FIRST_SIDES = ("onnxruntime", "eager", "capture")


def _first_calls(model_path: str, feeds_path: str) -> dict[str, float] | str:
    """Best first call of each side over ``FIRST_ROUNDS`` fresh processes, the sides alternated."""
    best = dict.fromkeys(FIRST_SIDES, float("inf"))
    for _ in range(FIRST_ROUNDS):
        for side in FIRST_SIDES:
            found = _in_subprocess("--eager-step", side, model_path, feeds_path)
            if "first" not in found:
                return str(found.get("failed"))
            best[side] = min(best[side], found["first"])
    return best


def eager_table() -> None:
    import numpy as np
    import onnx

    from bench.scale_models import SMALL_MODELS

    folder = tempfile.mkdtemp(prefix="onnxquill-eager-")
    try:
        print("ms, and the ratio to one onnxruntime session; eager: eager.run(path, feeds), capture: with capture=True")
        print(f"{'model':<26} {'nodes':>5} | {'first: ort':>10} {'eager':>13} {'capture':>13} | "
              f"{'warm: ort':>9} {'eager':>13} {'capture':>13} | goal (capture: warm <= 2x, first <= 3x)")
        for label, build in SMALL_MODELS.items():
            built = build()
            if built is None:
                print(f"{label:<26} skipped: torch is not installed")
                continue
            model, feeds = built
            model_path = os.path.join(folder, "model.onnx")
            feeds_path = os.path.join(folder, "feeds.npz")
            onnx.save_model(model, model_path)
            np.savez(feeds_path, **feeds)
            first = _first_calls(model_path, feeds_path)
            warm = _in_subprocess("--eager-step", "warm", model_path, feeds_path)
            if isinstance(first, str) or "capture" not in warm:
                print(f"{label:<26} FAILED: {first if isinstance(first, str) else warm.get('failed')}")
                continue
            first_ratio = first["capture"] / first["onnxruntime"]
            warm_ratio = warm["capture"] / warm["onnxruntime"]
            met = "met" if warm_ratio <= 2 and first_ratio <= 3 else "NOT met"
            print(f"{label:<26} {_node_count(model.graph):>5} | {first['onnxruntime'] * 1e3:>10.1f} "
                  f"{_with_ratio(first['eager'], first['onnxruntime'], 1)} "
                  f"{_with_ratio(first['capture'], first['onnxruntime'], 1)} | {warm['onnxruntime'] * 1e3:>9.2f} "
                  f"{_with_ratio(warm['eager'], warm['onnxruntime'], 2)} "
                  f"{_with_ratio(warm['capture'], warm['onnxruntime'], 2)} | {met}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _with_ratio(seconds: float, peer: float, digits: int) -> str:
    return f"{seconds * 1e3:>6.{digits}f} {seconds / peer:>5.2f}x"


def _node_count(graph: Any) -> int:
    """Nodes of the graph and of every subgraph in it."""
    count = 0
    for node in graph.node:
        count += 1
        for attribute in node.attribute:
            count += sum(_node_count(g) for g in ([attribute.g] if attribute.HasField("g") else attribute.graphs))
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights-gb", type=float, default=2.1, help="size of the large model's weights")
    parser.add_argument("--no-large", action="store_true", help="skip the large-model table")
    parser.add_argument("--no-eager", action="store_true", help="skip the eager.run table")
    parser.add_argument("--large-step", nargs=2, metavar=("STEP", "FOLDER"), help=argparse.SUPPRESS)
    parser.add_argument("--eager-step", nargs=3, metavar=("SIDE", "MODEL", "FEEDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.large_step:
        print(json.dumps(_large_step(*args.large_step)))
        return
    if args.eager_step:
        print(json.dumps(_eager_step(*args.eager_step)))
        return
    if not args.no_eager:
        eager_table()
    if not args.no_large:
        print()
        large_table(args.weights_gb)


if __name__ == "__main__":
    main()
