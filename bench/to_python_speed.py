"""How fast a model becomes Python, and Python a model again, per node.

For the light resnet50 and densenet121 models of onnx's backend tests and for synthetic
chains of 2 000, 20 000 and 200 000 nodes, prints microseconds per node for

* ``from_onnx``: ModelProto -> IR,
* ``to_python``: IR -> source (weights to an .npz),
* ``total``: ModelProto -> source file and weights file (``converter.write_python``:
  what ``onnxquill to-python`` costs after ``onnx.load``; run again over the same files),
* ``rebuild``: source -> ``@script`` compile -> ``to_model_proto``,

and the peak memory of ``converter.to_python`` measured with tracemalloc (a separate
run, since tracing slows everything down).  The goal is linear time and at most
10 µs per node for ``total``; ``--onnxscript`` also times onnxscript's exporter.

With torch installed, a ResNet-18 (11.7 M weights, built here: torchvision is no
dependency) exported by ``torch.onnx.export`` is printed as the README's example does,
``converter.to_python(model)`` without a weights path, against the same call writing
every tensor inline (``inline_limit=math.inf``, what it did before) in the same run:
the source must stay under 64 KiB with no line over 400 characters, and take under a
tenth of the inline time; the script exits 1 when it does not.

    python bench/to_python_speed.py [--sizes 2000 20000 200000] [--no-rebuild] [--onnxscript] [--no-zoo]
"""

from __future__ import annotations

import argparse
import gc
import io
import math
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import converter
from converter.from_onnx import model_from_proto
from converter.python_source import model_to_python
from converter.script_module import load_script_function

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def chain(length: int) -> onnx.ModelProto:
    """A chain of ``length`` nodes cycling through Add, Relu, LeakyRelu(alpha), Mul."""
    nodes = []
    for index in range(length):
        source, target = f"v{index}", f"v{index + 1}"
        kind = index % 4
        if kind == 0:
            nodes.append(helper.make_node("Add", [source, "x"], [target]))
        elif kind == 1:
            nodes.append(helper.make_node("Relu", [source], [target]))
        elif kind == 2:
            nodes.append(helper.make_node("LeakyRelu", [source], [target], alpha=0.1))
        else:
            nodes.append(helper.make_node("Mul", [source, "x"], [target]))
    nodes[0].input[0] = "x"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info(f"v{length}", TensorProto.FLOAT, ["N"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _count_nodes(model: onnx.ModelProto) -> int:
    return len(model.graph.node)


def _timed(function, *args, repeats: int = 1, budget: float = 0.0, **kwargs):
    """(result, best time of ``repeats`` runs, more while ``budget`` seconds last, up to 200):
    the machine is shared, so the minimum is the signal, and more runs find it better."""
    result, times = _runs(function, *args, repeats=repeats, budget=budget, **kwargs)
    return result, min(times)


def _runs(function, *args, repeats: int = 1, budget: float = 0.0, **kwargs):
    """(result, the time of each run) for :func:`_timed`."""
    times: list[float] = []
    spent = 0.0
    while len(times) < repeats or (spent < budget and len(times) < 200):
        gc.collect()
        start = time.perf_counter()
        result = function(*args, **kwargs)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        spent += elapsed
    return result, times


def convert(model: onnx.ModelProto, weights_path: str, source_path: str) -> str:
    """What a user pays: proto -> IR -> source, the weights written, the source written
    (``converter.write_python``, which ``onnxquill to-python -o`` calls)."""
    return converter.write_python(model, source_path, weights_path)


def measure(name: str, model: onnx.ModelProto, rebuild: bool, with_onnxscript: bool) -> None:
    nodes = _count_nodes(model)
    repeats = 5 if nodes <= 20_000 else 1
    budget = 1.0 if nodes <= 20_000 else 0.0  # (seconds of runs per figure, beyond the first repeats)
    with tempfile.TemporaryDirectory() as folder:
        source_path = os.path.join(folder, "model.py")
        weights_path = os.path.join(folder, "model.npz")
        ir_model, read_time = _timed(model_from_proto, model, repeats=repeats, budget=budget)
        _, write_time = _timed(model_to_python, ir_model, weights_path, source_path=source_path, repeats=repeats, budget=budget)
        _, total_times = _runs(convert, model, weights_path, source_path, repeats=repeats, budget=budget)
        total_time, total_median = min(total_times), statistics.median(total_times)
        line = (f"{name:>14} {nodes:>7} nodes | from_onnx {read_time / nodes * 1e6:6.2f} | to_python "
                f"{write_time / nodes * 1e6:6.2f} | total {total_time / nodes * 1e6:6.2f} µs/node "
                f"(median {total_median / nodes * 1e6:6.2f})")
        if rebuild:
            def compile_back() -> onnx.ModelProto:
                return load_script_function(source_path).to_model_proto()

            rebuilt, rebuild_time = _timed(compile_back)
            same = converter.isomorphic(model, rebuilt)
            line += f" | rebuild {rebuild_time / nodes * 1e6:7.2f} µs/node (isomorphic: {same})"
        gc.collect()
        tracemalloc.start()
        convert(model, weights_path, source_path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        line += f" | peak {peak / 2**20:7.1f} MiB ({peak / nodes / 1024:5.2f} KiB/node)"
        if with_onnxscript:
            line += f" | onnxscript {_onnxscript_time(model) / nodes * 1e6:7.2f} µs/node"
    print(line, flush=True)


def _onnxscript_time(model: onnx.ModelProto) -> float:
    from onnxscript.backend.onnx_export import export2python

    _, elapsed = _timed(export2python, model)
    return elapsed


def resnet18() -> onnx.ModelProto:
    """A torchvision-style ResNet-18 (random weights) exported by torch's TorchScript exporter."""
    import torch
    from torch import nn

    def block(inputs: int, outputs: int, stride: int) -> nn.Module:
        class Basic(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.body = nn.Sequential(
                    nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU(),
                    nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False), nn.BatchNorm2d(outputs))
                self.skip = (nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))
                             if stride != 1 or inputs != outputs else nn.Identity())

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return torch.relu(self.body(x) + self.skip(x))

        return Basic()

    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    width = 64
    for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [block(width, outputs, stride), block(outputs, outputs, 1)]
        width = outputs
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    torch.manual_seed(0)
    net = nn.Sequential(*layers).eval()
    buffer = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(1, 3, 224, 224),), buffer, dynamo=False, opset_version=18)
    return onnx.load_from_string(buffer.getvalue())


def measure_zoo() -> bool:
    """The README's example on a ResNet-18: source size, longest line and time, against
    writing every tensor inline; True when within the bounds."""
    try:
        model = resnet18()
    except ImportError as error:
        print(f"zoo model skipped: torch is not installed ({error})")
        return True
    nodes = len(model.graph.node)
    source, referenced = _timed(converter.to_python, model, repeats=3)
    inline, inline_time = _timed(converter.to_python, model, inline_limit=math.inf)
    size, longest = len(source.encode()), max(map(len, source.splitlines()))
    within = size < 64 * 1024 and longest <= 400 and referenced < inline_time / 10
    print(f"{'resnet18':>14} {nodes:>7} nodes | to_python(model) {referenced * 1e3:7.1f} ms, {size / 1024:6.1f} KiB, "
          f"longest line {longest} | inline: {inline_time * 1e3:7.1f} ms, {len(inline) / 2**20:6.1f} MiB, longest line "
          f"{max(map(len, inline.splitlines()))} | {inline_time / referenced:5.0f}x faster | "
          f"bounds (< 64 KiB, lines <= 400, < 1/10 of inline): {'met' if within else 'NOT MET'}")
    return within


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[2_000, 20_000, 200_000])
    parser.add_argument("--no-rebuild", action="store_true", help="skip compiling the source back")
    parser.add_argument("--onnxscript", action="store_true", help="also time onnxscript's export2python")
    parser.add_argument("--no-zoo", action="store_true", help="skip the torch-exported ResNet-18")
    args = parser.parse_args(argv)
    within = True if args.no_zoo else measure_zoo()
    # Warm up: the first compile imports the front end and reads op schemas (~50 ms),
    # which is not a per-node cost.
    warm_model = chain(8)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "warm.py")
        converter.write_python(warm_model, path)
        load_script_function(path).to_model_proto()
    print("columns: µs per node (best of at least 5 runs, as many as fit in 1 s, and for total also their median; 1 run for 200 000 nodes); peak = tracemalloc peak of converter.to_python (weights to .npz)")
    for model_name in ("resnet50", "densenet121"):
        model = onnx.load(os.path.join(DATA, f"light_{model_name}.onnx"))
        measure(model_name, model, not args.no_rebuild, args.onnxscript)
    for size in args.sizes:
        measure(f"chain {size}", chain(size), not args.no_rebuild, args.onnxscript)
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
