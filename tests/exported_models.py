"""Small models nobody here wrote, exported by torch inside the test run.

A CNN (convolutions, batch norm, pooling, a linear head), a transformer encoder block
(attention with a key padding mask) and an LSTM, each exported by the exporters of
``torch.onnx`` that run here: the TorchScript one (``dynamo=False``) and the
``torch.export`` one (``dynamo=True``, which needs onnxscript).  :func:`exporters`
probes each once and says why one cannot run, so tests skip with that reason.
"""

from __future__ import annotations

import functools
import io
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

__all__ = ["MODELS", "EXPORTERS", "exporter_problem", "export", "example_inputs"]

EXPORTERS = ("torchscript", "dynamo")


def _cnn() -> Any:
    import torch

    class SmallCnn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.norm = torch.nn.BatchNorm2d(8)
            self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.head = torch.nn.Linear(16, 10)

        def forward(self, image: Any) -> Any:
            hidden = torch.relu(self.norm(self.conv1(image)))
            hidden = torch.nn.functional.max_pool2d(torch.relu(self.conv2(hidden)), 2)
            return self.head(hidden.mean(dim=(2, 3)))

    return SmallCnn()


def _transformer() -> Any:
    import torch

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)

        def forward(self, tokens: Any, padding: Any) -> Any:
            return self.layer(tokens, src_key_padding_mask=padding)

    return Block()


def _lstm() -> Any:
    import torch

    class Recurrent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 12, batch_first=True)
            self.head = torch.nn.Linear(12, 3)

        def forward(self, sequence: Any) -> Any:
            output, _ = self.lstm(sequence)
            return self.head(output[:, -1])

    return Recurrent()


MODELS: dict[str, Callable[[], Any]] = {"cnn": _cnn, "transformer": _transformer, "lstm": _lstm}


def example_inputs(name: str) -> list[np.ndarray]:
    """Inputs the model named ``name`` runs on (seeded: the same every run)."""
    rng = np.random.default_rng(0)
    if name == "cnn":
        return [rng.standard_normal((2, 3, 16, 16)).astype(np.float32)]
    if name == "transformer":
        padding = np.zeros((2, 5), dtype=bool)
        padding[1, 3:] = True
        return [rng.standard_normal((2, 5, 16)).astype(np.float32), padding]
    return [rng.standard_normal((2, 6, 8)).astype(np.float32)]


@functools.cache
def exporter_problem(exporter: str) -> str | None:
    """Why ``exporter`` cannot export here (None when it can), asked of torch itself."""
    try:
        export("cnn", exporter)
    except ImportError as error:  # (torch missing, or the dynamo exporter's onnxscript)
        return f"torch.onnx.export({exporter}) cannot run here: {type(error).__name__}: {error}"
    return None


@functools.cache
def export(name: str, exporter: str) -> bytes:
    """The serialized ModelProto of the model ``name``, exported by ``exporter`` (eval mode, seeded)."""
    import torch

    torch.manual_seed(0)
    module = MODELS[name]().eval()
    arguments = tuple(torch.from_numpy(array) for array in example_inputs(name))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the TorchScript exporter's deprecation notice)
        torch.onnx.export(module, arguments, buffer, dynamo=exporter == "dynamo", opset_version=18)
    return buffer.getvalue()


def torch_outputs(name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """What torch itself computes: the oracle for every exported model."""
    import torch

    torch.manual_seed(0)
    module = MODELS[name]().eval()
    with torch.no_grad():
        result = module(*[torch.from_numpy(array) for array in inputs])
    return [result.numpy()]


def load(name: str, exporter: str) -> onnx.ModelProto:
    return onnx.load_from_string(export(name, exporter))
