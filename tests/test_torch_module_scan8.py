"""The opset-8 Scan through ``converter.to_torch``: a leading batch axis, ``sequence_lens``
and reversed inputs, built in torch (differentiable) rather than run eagerly.

Oracles: onnxruntime on the same model (on each batch entry's valid steps: ONNX leaves
the padded steps of a shorter sequence undefined), the backend node case
``test_scan_sum`` (through tests/test_torch_module_nodes.py), and ``gradcheck`` in float64.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import converter
from tests.roundtrip import run

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch


def scan8_model(elem_type: int, with_lengths: bool, directions: list[int]) -> onnx.ModelProto:
    """A running sum-of-tanh state over two scan inputs (``x`` forward or reversed, ``x``
    again), scan outputs ``state * w`` and ``x_t - y_t``; ``w`` is a main-graph weight."""
    body = oh.make_graph(
        [oh.make_node("Tanh", ["x_t"], ["t"]), oh.make_node("Add", ["total", "t"], ["total_out"]),
         oh.make_node("Mul", ["total_out", "w"], ["scaled"]), oh.make_node("Sub", ["x_t", "y_t"], ["diff"])],
        "body",
        [oh.make_tensor_value_info("total", elem_type, [3]), oh.make_tensor_value_info("x_t", elem_type, [3]),
         oh.make_tensor_value_info("y_t", elem_type, [3])],
        [oh.make_tensor_value_info(name, elem_type, [3]) for name in ("total_out", "scaled", "diff")],
    )
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    weight = onnx.numpy_helper.from_array(np.array([0.5, -1.0, 2.0], dtype), "w")
    inputs = [oh.make_tensor_value_info("start", elem_type, ["B", 3]),
              oh.make_tensor_value_info("x", elem_type, ["B", "T", 3])]
    if with_lengths:
        inputs.append(oh.make_tensor_value_info("lengths", onnx.TensorProto.INT64, ["B"]))
    node = oh.make_node("Scan", ["lengths" if with_lengths else "", "start", "x", "x"], ["final", "scaled", "diff"],
                        body=body, num_scan_inputs=2, directions=directions)
    graph = oh.make_graph([node], "scan8", inputs,
                          [oh.make_tensor_value_info(name, elem_type, None) for name in ("final", "scaled", "diff")],
                          [weight])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 8)], ir_version=7)


def feeds(dtype: type, lengths: list[int] | None) -> list[np.ndarray]:
    rng = np.random.default_rng(8)
    found = [rng.standard_normal((3, 3)).astype(dtype), rng.standard_normal((3, 5, 3)).astype(dtype)]
    return found + ([np.array(lengths, np.int64)] if lengths is not None else [])


@pytest.mark.parametrize("directions", [[0, 0], [1, 0], [0, 1]])
@pytest.mark.parametrize("lengths", [None, [5, 2, 1]])
def test_scan8_reproduces_onnxruntime(directions: list[int], lengths: list[int] | None) -> None:
    from converter.torch_module.eager_node import EagerNode

    model = scan8_model(onnx.TensorProto.FLOAT, lengths is not None, directions)
    module = converter.to_torch(model).eval()
    assert not any(isinstance(sub, EagerNode) for sub in module.modules())
    arrays = feeds(np.float32, lengths)
    expected = run(model, arrays)
    got = [value.detach().numpy() for value in module(*(torch.from_numpy(a) for a in arrays))]
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)
    for entry, length in enumerate(lengths or [5, 5, 5]):  # (past its length a step is undefined)
        for want, have in zip(expected[1:], got[1:]):
            assert have.shape == want.shape
            np.testing.assert_allclose(have[entry, :length], want[entry, :length], rtol=1e-5, atol=1e-6)


def test_scan8_gradients_pass_gradcheck() -> None:
    model = scan8_model(onnx.TensorProto.DOUBLE, True, [1, 0])
    module = converter.to_torch(model)
    start, x, lengths = (torch.from_numpy(a) for a in feeds(np.float64, [4, 1, 3]))

    def outputs(start: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(module(start, x, lengths))

    assert torch.autograd.gradcheck(outputs, (start.requires_grad_(), x.requires_grad_()))
    final, scaled, _ = module(start, x, lengths)
    (final.sum() + scaled.sum()).backward()
    weight = module.get_parameter("w")
    assert weight.grad is not None and float(weight.grad.abs().sum()) > 0
