"""Markup projects trained in torch: ``dsl.markup.save_weights`` and ``dsl.markup.find_params``.

A project is exported (weights initialised and stored), converted with
``converter.to_torch``, trained, and written back; the next export must compute what
the trained module computes (onnxruntime as the oracle), under the markup's own names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import converter
import dsl.markup
from converter.torch_module.names import onnx_name
from dsl.errors import MarkupError
from tests.roundtrip import run

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

DATA = Path(__file__).resolve().parent / "data" / "markup"
SIZES = {"batch": 4, "n_in": 3, "hidden": 5, "n_out": 2}


def project_copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target)
    return target


def train(module: torch.nn.Module, x: torch.Tensor, steps: int = 5) -> None:
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        module(x).square().mean().backward()
        optimizer.step()


def test_trained_mlp_weights_go_back_into_the_project(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "mlp")
    dsl.markup.export(project, tmp_path / "before.onnx", bindings=SIZES, seed=3, suppress=True)
    before = dsl.markup.find_params("", project)
    module = converter.to_torch(dsl.markup.to_model(project, bindings=SIZES))
    assert {onnx_name(name) for name, _ in module.named_parameters()} == set(before)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    train(module, x)
    written = dsl.markup.save_weights(project, module)
    assert written == project / "weights.npz"
    after = dsl.markup.find_params("", project)
    assert after.keys() == before.keys()
    for name, parameter in module.named_parameters():
        np.testing.assert_array_equal(after[onnx_name(name)], parameter.detach().numpy())
        assert not np.array_equal(after[onnx_name(name)], before[onnx_name(name)])
    assert set(dsl.markup.find_params("W", project)) == {name for name in before if "W" in name}
    exported = dsl.markup.export(project, tmp_path / "after.onnx", bindings=SIZES, suppress=True)
    with torch.no_grad():
        np.testing.assert_allclose(run(exported, [x.numpy()])[0], module(x).numpy(), rtol=1e-5, atol=1e-6)


def test_frozen_params_are_buffers_and_stay_as_written(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "frozen_shared")
    dsl.markup.export(project, tmp_path / "before.onnx", bindings={"n": 3}, seed=3, suppress=True)
    module = converter.to_torch(dsl.markup.to_model(project, bindings={"n": 3}))
    frozen = {onnx_name(name) for name, _ in module.named_buffers()}
    assert frozen and all("$constant" in name for name in frozen)
    assert not any("$constant" in onnx_name(name) for name, _ in module.named_parameters())
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32))
    train(module, x)
    dsl.markup.save_weights(project, module)
    exported = dsl.markup.export(project, tmp_path / "after.onnx", bindings={"n": 3}, suppress=True)
    with torch.no_grad():
        np.testing.assert_allclose(run(exported, [x.numpy()])[0], module(x).numpy(), rtol=1e-5, atol=1e-6)


def test_save_weights_refuses_a_module_that_is_not_converted(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "mlp")
    with pytest.raises(MarkupError, match=r"converter\.to_torch"):
        dsl.markup.save_weights(project, torch.nn.Linear(3, 2))
