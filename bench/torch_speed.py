"""A converted module's speed against the torch module it was exported from.

Run ``python bench/torch_speed.py``.  Two models are written directly in torch here — a
ResNet-style CNN (stem, three residual stages with BatchNorm, pooling, linear head) and
a transformer block (multi-head self-attention, LayerNorm, GELU MLP) — exported with
``torch.onnx.export`` and converted back with ``converter.to_torch`` (same weights).
Columns: forward and forward+backward milliseconds of the original module and of the
converted one, their ratios (goal <= 1.1x), onnxruntime's forward on the exported model,
and conversion time per ONNX node.  onnx2torch runs side by side when it is installed.
Every figure is the best of several repeats measured in this one run, the original
and the converted module alternately (a burst of load hits both); on a shared machine
compare the ratios, not the absolute times.
"""

from __future__ import annotations

import io
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import onnx
import onnxruntime
import torch

import converter


class Residual(torch.nn.Module):
    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        inner = channels * stride if stride > 1 else channels
        self.conv1 = torch.nn.Conv2d(channels, inner, 3, stride=stride, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(inner)
        self.conv2 = torch.nn.Conv2d(inner, inner, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(inner)
        self.skip = (torch.nn.Sequential(torch.nn.Conv2d(channels, inner, 1, stride=stride, bias=False),
                                         torch.nn.BatchNorm2d(inner)) if stride > 1 else torch.nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ResNetStyle(torch.nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                        torch.nn.ReLU())
        self.stages = torch.nn.Sequential(Residual(16, 1), Residual(16, 2), Residual(32, 2), Residual(64, 1))
        self.head = torch.nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.stages(self.stem(x))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(features, 1), 1))


class TransformerBlock(torch.nn.Module):
    def __init__(self, width: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(batch, tokens, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5), dim=-1)
        mixed = (attention @ v).transpose(1, 2).reshape(batch, tokens, width)
        x = x + self.proj(mixed)
        return x + self.mlp(self.norm2(x))


def as_trained(module: torch.nn.Module) -> torch.nn.Module:
    """Distinct BatchNorm statistics, as a trained model has (fresh ones are all 0 and 1,
    which the exporter folds into one shared initializer)."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                layer.running_mean.uniform_(-0.1, 0.1)
                layer.running_var.uniform_(0.5, 1.5)
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.uniform_(-0.1, 0.1)
    return module


def best_ms(call: Callable[[], Any], repeats: int = 15) -> float:
    call()
    call()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def exported(module: torch.nn.Module, example: torch.Tensor) -> onnx.ModelProto:
    stream = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter announces its own deprecation
        torch.onnx.export(module, (example,), stream, dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}}, training=torch.onnx.TrainingMode.EVAL,
                          do_constant_folding=False)
    return onnx.load_from_string(stream.getvalue())


def best_of_both_ms(first: Callable[[], Any], second: Callable[[], Any], repeats: int = 30) -> tuple[float, float]:
    """Best times of two calls measured alternately, so a burst of load from other
    processes hits both alike and their ratio stays fair."""
    for call in (first, second, first, second):
        call()
    best = [float("inf"), float("inf")]
    for repeat in range(repeats):
        order = ((0, first), (1, second)) if repeat % 2 == 0 else ((1, second), (0, first))  # neither always goes first
        for index, call in order:
            start = time.perf_counter()
            call()
            best[index] = min(best[index], time.perf_counter() - start)
    return best[0] * 1e3, best[1] * 1e3


def steps(module: torch.nn.Module, x: torch.Tensor) -> tuple[Callable[[], None], Callable[[], None]]:
    def forward() -> None:
        with torch.no_grad():
            module(x)

    def forward_backward() -> None:
        module.zero_grad(set_to_none=True)
        module(x).sum().backward()

    return forward, forward_backward


def timings(original: torch.nn.Module, other: torch.nn.Module, x: torch.Tensor) -> tuple[float, ...]:
    """Forward and forward+backward ms of ``original`` and ``other``: (base_f, other_f, base_fb, other_fb)."""
    (base_forward, base_both), (other_forward, other_both) = steps(original, x), steps(other, x)
    return (*best_of_both_ms(base_forward, other_forward), *best_of_both_ms(base_both, other_both))


def row(name: str, original: torch.nn.Module, x: torch.Tensor) -> None:
    original.eval()
    model = exported(original, x)
    converter.to_torch(model)  # the first conversion also imports the kernels
    start = time.perf_counter()
    converted = converter.to_torch(model).eval()
    convert_ms = (time.perf_counter() - start) * 1e3
    with torch.no_grad():
        difference = float((converted(x) - original(x)).abs().max())
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_ms = best_ms(lambda: session.run(None, {"x": x.numpy()}))
    base_f, ours_f, base_fb, ours_fb = timings(original, converted, x)
    line = (f"{name:<18} {len(model.graph.node):>5} {base_f:>8.2f} {ours_f:>8.2f} {ours_f / base_f:>6.2f}x "
            f"{base_fb:>8.2f} {ours_fb:>8.2f} {ours_fb / base_fb:>6.2f}x {ort_ms:>8.2f} "
            f"{convert_ms / len(model.graph.node):>8.3f} {difference:>9.1e}")
    print(line)
    try:
        import onnx2torch
    except ImportError:
        return
    other = onnx2torch.convert(model).eval()
    base_f, other_f, base_fb, other_fb = timings(original, other, x)
    print(f"{'  onnx2torch':<18} {'':>5} {'':>8} {other_f:>8.2f} {other_f / base_f:>6.2f}x "
          f"{'':>8} {other_fb:>8.2f} {other_fb / base_fb:>6.2f}x")


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, one thread; times in ms")
    print(f"{'model':<18} {'nodes':>5} {'torch':>8} {'to_torch':>8} {'ratio':>7} "
          f"{'torch fb':>8} {'ours fb':>8} {'ratio':>7} {'ort':>8} {'ms/node':>8} {'max diff':>9}")
    row("resnet-style", as_trained(ResNetStyle()), torch.from_numpy(np.random.default_rng(0).standard_normal(
        (8, 3, 32, 32)).astype(np.float32)))
    row("transformer block", TransformerBlock(), torch.from_numpy(np.random.default_rng(1).standard_normal(
        (8, 64, 128)).astype(np.float32)))


if __name__ == "__main__":
    main()
