"""BatchNormalization in ``train()`` where the running statistics are not plain buffers.

Two cases beside tests/test_torch_module.py's: the graph computes the mean and variance
(nothing is stored, so nothing is updated: batch statistics alone, and the computed
values stay what the graph computed), and a BatchNorm inside a model-local function
whose statistics are the caller's initializers (updated like ``torch.nn.BatchNorm2d``'s).
Oracles: ``torch.nn.functional.batch_norm`` / ``torch.nn.BatchNorm2d``, and onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import converter
from converter.torch_module.names import onnx_name
from tests.roundtrip import run

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

RNG = np.random.default_rng(3)
CHANNELS = 3


def _weights() -> list[onnx.TensorProto]:
    return [
        onnx.numpy_helper.from_array((RNG.random(CHANNELS) + 0.5).astype(np.float32), "scale"),
        onnx.numpy_helper.from_array(RNG.standard_normal(CHANNELS).astype(np.float32), "bias"),
    ]


def computed_statistics_model() -> onnx.ModelProto:
    """Mean and variance cast from integer initializers (buffers, no gradient): values the
    graph computes, also returned as outputs."""
    counts = [onnx.numpy_helper.from_array(np.array([1, -2, 3], np.int64), "mean_counts"),
              onnx.numpy_helper.from_array(np.array([2, 1, 4], np.int64), "var_counts")]
    nodes = [oh.make_node("Cast", ["mean_counts"], ["mean"], to=1), oh.make_node("Cast", ["var_counts"], ["var"], to=1),
             oh.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)]
    graph = oh.make_graph(nodes, "bn", [oh.make_tensor_value_info("x", 1, ["N", CHANNELS, "L"])],
                          [oh.make_tensor_value_info(name, 1, None) for name in ("y", "mean", "var")],
                          _weights() + counts)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 15)])


def test_computed_statistics_train_on_the_batch_and_update_nothing() -> None:
    model = computed_statistics_model()
    module = converter.to_torch(model).train()
    before = {name: value.clone() for name, value in module.state_dict().items()}
    state = {onnx_name(k): v for k, v in module.state_dict().items()}
    for step in range(2):
        x = torch.from_numpy(RNG.standard_normal((4, CHANNELS, 5)).astype(np.float32) * (step + 2))
        y, mean, var = module(x)
        expected = torch.nn.functional.batch_norm(x, None, None, state["scale"], state["bias"], training=True, eps=1e-3)
        torch.testing.assert_close(y, expected)
        torch.testing.assert_close(mean, torch.tensor([1.0, -2.0, 3.0]))  # (not overwritten in place)
        torch.testing.assert_close(var, torch.tensor([2.0, 1.0, 4.0]))
    for name, value in module.state_dict().items():
        torch.testing.assert_close(value, before[name])
    module.eval()
    x = RNG.standard_normal((2, CHANNELS, 5)).astype(np.float32)
    for got, want in zip(module(torch.from_numpy(x)), run(model, [x])):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-5)


def function_batch_norm_model(momentum: float) -> onnx.ModelProto:
    """``main`` calls ``my.nn::norm(x, scale, bias, mean, var)``, whose body is the BatchNorm."""
    norm = oh.make_function(
        "my.nn", "norm", ["x", "s", "b", "m", "v"], ["y"],
        [oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3, momentum=momentum)],
        [oh.make_opsetid("", 15)])
    stats = [onnx.numpy_helper.from_array(RNG.standard_normal(CHANNELS).astype(np.float32), "running_mean"),
             onnx.numpy_helper.from_array((RNG.random(CHANNELS) + 0.5).astype(np.float32), "running_var")]
    graph = oh.make_graph(
        [oh.make_node("norm", ["x", "scale", "bias", "running_mean", "running_var"], ["y"], domain="my.nn")], "main",
        [oh.make_tensor_value_info("x", 1, ["N", CHANNELS, "H", "W"])], [oh.make_tensor_value_info("y", 1, None)],
        _weights() + stats)
    return oh.make_model(graph, functions=[norm], opset_imports=[oh.make_opsetid("", 15), oh.make_opsetid("my.nn", 1)])


def test_batch_norm_inside_a_function_updates_the_callers_running_statistics() -> None:
    model = function_batch_norm_model(momentum=0.8)
    module = converter.to_torch(model).train()
    assert {onnx_name(name) for name, _ in module.named_buffers()} == {"running_mean", "running_var"}
    reference = torch.nn.BatchNorm2d(CHANNELS, eps=1e-3, momentum=0.2)
    state = {onnx_name(k): v for k, v in module.state_dict().items()}
    with torch.no_grad():
        for mine, theirs in (("scale", "weight"), ("bias", "bias"), ("running_mean", "running_mean"),
                             ("running_var", "running_var")):
            getattr(reference, theirs).copy_(state[mine])
    for step in range(3):
        x = torch.from_numpy(RNG.standard_normal((4, CHANNELS, 3, 3)).astype(np.float32) * (step + 1))
        torch.testing.assert_close(module(x), reference(x))
    state = {onnx_name(k): v for k, v in module.state_dict().items()}
    torch.testing.assert_close(state["running_mean"], reference.running_mean)
    torch.testing.assert_close(state["running_var"], reference.running_var)
    module.eval()
    x = RNG.standard_normal((2, CHANNELS, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(run(module.to_onnx(), [x])[0], module(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
