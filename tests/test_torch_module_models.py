"""Every ONNX backend data model onnxruntime runs, converted with ``converter.to_torch``.

The models of ``onnx/backend/test/data/{light,simple,pytorch-converted,pytorch-operator}``:
in ``eval()`` the module reproduces the stored expected outputs (where onnxruntime
itself does); ``module.to_onnx()`` is isomorphic to the original; after perturbing every
parameter, onnxruntime on ``module.to_onnx()`` equals the module's output, and exactly
the parameters' initializers changed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
import pytest

import converter
from tests.roundtrip import assert_outputs_close, output_oracle, run
from tests.test_roundtrip_models import _data_sets, _model_paths

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")

# relative model path -> why the module cannot reproduce it (goal: empty).
EXCLUDED: dict[str, str] = {}


def as_torch(value: Any) -> Any:
    from eager.values import numpy_to_torch

    if isinstance(value, list):
        return [as_torch(item) for item in value]
    return numpy_to_torch(value if value.flags.c_contiguous else value.copy(order="C")) if isinstance(value, np.ndarray) else value


def as_numpy(value: Any) -> Any:
    from eager.values import torch_to_numpy

    if isinstance(value, (list, tuple)):
        return [as_numpy(item) for item in value]
    return torch_to_numpy(value) if isinstance(value, torch.Tensor) else value


def module_outputs(module: Any, feeds: list[Any]) -> list[Any]:
    with torch.no_grad():
        result = module(*(as_torch(feed) for feed in feeds))
    results = list(result) if isinstance(result, tuple) else [result]
    return [as_numpy(value) for value in results]


def _param(path: str) -> Any:
    key = os.path.relpath(path, DATA)
    if key in EXCLUDED:
        return pytest.param(path, id=key, marks=pytest.mark.xfail(reason=EXCLUDED[key], strict=True))
    return pytest.param(path, id=key)


PATHS = [_param(p) for p in _model_paths()]


@pytest.mark.parametrize("path", PATHS)
def test_module_reproduces_the_model_and_writes_weights_back(path: str) -> None:
    original = onnx.load(path)
    data_sets, rtol, atol = _data_sets(path, original)
    oracles, reason = output_oracle(original, data_sets, rtol, atol)
    if oracles is None:
        pytest.skip(reason)
    module = converter.to_torch(original).eval()
    for (feeds, _), expected in zip(data_sets, oracles):
        assert_outputs_close(expected, module_outputs(module, feeds), rtol, atol)
    converter.assert_isomorphic(original, module.to_onnx())
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.5 + torch.rand(parameter.shape, generator=generator, dtype=parameter.dtype))
    written = module.to_onnx()
    feeds = data_sets[0][0]
    assert_outputs_close(run(written, feeds), module_outputs(module, feeds), rtol, max(atol, 1e-5))
    before = _initializers(original)
    after = _initializers(written)
    assert after.keys() == before.keys()
    changed = {name for name in before if not np.array_equal(before[name], after[name])}
    trained = {converter_name(name) for name, _ in module.named_parameters()}
    assert changed == trained & before.keys()


def converter_name(torch_name: str) -> str:
    from converter.torch_module import onnx_name

    return onnx_name(torch_name)


def _initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
