"""``converter.with_weights(original, module.state_dict())`` is ``module.to_onnx()``.

For every ONNX backend node case and data model that ``converter.to_torch`` converts:
the module takes one SGD step on the case's own inputs (the sum of its float outputs
as the loss), then the weights written back from a plain ``state_dict`` — what a
checkpoint holds — must give the model the module itself writes: isomorphic, and every
initializer and weight Constant, in every graph, with the same values.  The
``state_dict`` holds the weights alone (the model's other constants are not saved), so
a checkpoint never carries a key ``with_weights`` cannot place.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
import pytest

import converter
from tests.roundtrip import output_oracle
from tests.test_backend_node_eager import _is_tensor_io, all_cases, to_array
from tests.test_roundtrip_models import _data_sets, _model_paths

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _held_weights(model: onnx.ModelProto) -> dict[tuple[int, str], np.ndarray]:
    """Every initializer and Constant ``value`` tensor of every graph, by (graph index, name)."""
    found: dict[tuple[int, str], np.ndarray] = {}
    graphs = [model.graph]
    index = 0
    while index < len(graphs):
        graph = graphs[index]
        for tensor in graph.initializer:
            found[(index, tensor.name)] = onnx.numpy_helper.to_array(tensor)
        for node in graph.node:
            for attribute in node.attribute:
                if node.op_type == "Constant" and attribute.name == "value":
                    found[(index, node.output[0])] = onnx.numpy_helper.to_array(attribute.t)
                graphs += [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
        index += 1
    return found


def _as_torch(value: Any) -> Any:
    from eager.values import numpy_to_torch

    value = np.asarray(value)
    return numpy_to_torch(value if value.flags.c_contiguous else value.copy(order="C"))


def _train_step(module: Any, feeds: list[Any]) -> None:
    """One SGD step on the sum of the float outputs that depend on a parameter."""
    parameters = list(module.parameters())
    if not parameters:
        return
    module.train()
    result = module(*(_as_torch(feed) for feed in feeds))
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    losses = [value.float().sum() for value in results
              if isinstance(value, torch.Tensor) and value.requires_grad and value.is_floating_point()]
    if not losses:
        return
    optimizer = torch.optim.SGD(parameters, lr=0.01)
    optimizer.zero_grad()
    torch.stack(losses).sum().backward()
    with torch.no_grad():  # a NaN gradient (a case at a singularity) must not hide what is compared
        for parameter in parameters:
            if parameter.grad is not None:
                parameter.grad.nan_to_num_(0.0, 0.0, 0.0)
    optimizer.step()
    module.eval()


def _assert_written_back(original: onnx.ModelProto, feeds: list[Any]) -> None:
    module = converter.to_torch(original)
    _train_step(module, feeds)
    state = module.state_dict()
    assert set(state) == set(module.onnx_names), "the state_dict holds more than the weights"
    written = module.to_onnx()
    restored = converter.with_weights(original, state)
    converter.assert_isomorphic(restored, written)
    want, got = _held_weights(written), _held_weights(restored)
    assert want.keys() == got.keys()
    for key, array in want.items():
        np.testing.assert_array_equal(got[key], array, err_msg=str(key))


def _node_cases() -> list[Any]:
    return [pytest.param(case, id=case.name) for case in all_cases() if _is_tensor_io(case.model)]


@pytest.mark.parametrize("case", _node_cases())
def test_node_case_weights_go_back_from_a_state_dict(case: Any) -> None:
    feeds = [to_array(value) for value in case.data_sets[0][0]] if case.data_sets else []
    if len(feeds) != len(case.model.graph.input):
        pytest.skip("the case has no data set for its inputs")
    _assert_written_back(case.model, feeds)


@pytest.mark.parametrize("path", [pytest.param(p, id=os.path.relpath(p, DATA)) for p in _model_paths()])
def test_data_model_weights_go_back_from_a_state_dict(path: str) -> None:
    original = onnx.load(path)
    data_sets, rtol, atol = _data_sets(path, original)
    oracles, reason = output_oracle(original, data_sets, rtol, atol)
    if oracles is None:  # (what the model computes is not defined: nothing to train)
        pytest.skip(reason)
    _assert_written_back(original, data_sets[0][0])
