"""Converted modules under torch's tracers: torch.export with control flow and dynamic
sizes, and torch.compile with inductor.

Oracles: onnxruntime on the same model (every branch, every size), the module run
eagerly (compiled outputs and gradients).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto

import converter
from dsl.errors import ConversionError
from tests import torch_models
from tests.roundtrip import run
from tests.test_torch_module_fast_paths import shape_arithmetic_model

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

RNG = np.random.default_rng(20261124)


def _numpy(value: Any) -> np.ndarray:
    return value.detach().numpy()


def _with_input_trip_count(model: onnx.ModelProto) -> onnx.ModelProto:
    """The control-flow model with the Loop's trip count fed by the caller."""
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    trips = next(init for init in edited.graph.initializer if init.name == "trips")
    edited.graph.initializer.remove(trips)
    edited.graph.input.append(onnx.helper.make_tensor_value_info("trips", onnx.TensorProto.INT64, []))
    return edited


# ------------------------------------------------------------------------- torch.export


def test_export_of_an_if_runs_both_branches() -> None:
    """One exported program holds both branches (``torch.cond``): a positive and a
    negative input each take theirs, at batch sizes other than the traced one."""
    model = torch_models.control_flow()
    module = converter.to_torch(model, outputs=["y"]).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    example = torch.from_numpy(np.abs(RNG.standard_normal((3, 4))).astype(np.float32))
    exported = torch.export.export(module, (example,), dynamic_shapes={"x": {0: batch}}).module()
    for sign, rows in ((1.0, 3), (-1.0, 5), (1.0, 7)):
        x = (sign * np.abs(RNG.standard_normal((rows, 4)))).astype(np.float32)
        expected = run(model, [x])[0]  # y is the model's first output
        np.testing.assert_allclose(_numpy(exported(torch.from_numpy(x))), expected, rtol=1e-6)


def if_of_unlike_branches() -> onnx.ModelProto:
    """``y = x if sum(x) > 0 else ReduceSum(x, keepdims=1)``: one branch hands an outer
    value through unchanged, the two give different shapes."""
    then_branch = oh.make_graph([oh.make_node("Identity", ["x"], ["same"])], "then", [],
                                [oh.make_tensor_value_info("same", TensorProto.FLOAT, None)])
    else_branch = oh.make_graph([oh.make_node("ReduceSum", ["x"], ["total"], keepdims=1)], "else", [],
                                [oh.make_tensor_value_info("total", TensorProto.FLOAT, None)])
    graph = oh.make_graph(
        [oh.make_node("ReduceSum", ["x"], ["sum"], keepdims=0), oh.make_node("Greater", ["sum", "zero"], ["positive"]),
         oh.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        "unlike_branches", [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def test_export_of_an_if_whose_branches_differ_in_shape_and_alias_an_input() -> None:
    model = if_of_unlike_branches()
    module = converter.to_torch(model)
    example = torch.from_numpy(np.abs(RNG.standard_normal((3, 4))).astype(np.float32))
    exported = torch.export.export(module, (example,)).module()
    for sign in (1.0, -1.0):
        x = (sign * np.abs(RNG.standard_normal((3, 4)))).astype(np.float32)
        got = _numpy(exported(torch.from_numpy(x)))
        expected = run(model, [x])[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_export_unrolls_a_loop_with_a_constant_trip_count() -> None:
    model = torch_models.control_flow()
    module = converter.to_torch(model, outputs=["z", "z_steps"]).eval()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    exported = torch.export.export(module, (torch.from_numpy(x),)).module()
    _, z, z_steps, _ = run(model, [x])
    got_z, got_steps = exported(torch.from_numpy(x))
    np.testing.assert_allclose(_numpy(got_z), z, rtol=1e-6)
    np.testing.assert_allclose(_numpy(got_steps), z_steps, rtol=1e-6)


def test_export_unrolls_a_scan_over_a_fixed_axis() -> None:
    model = torch_models.control_flow()
    module = converter.to_torch(model, outputs=["s"]).eval()
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    exported = torch.export.export(module, (torch.from_numpy(x),)).module()
    np.testing.assert_allclose(_numpy(exported(torch.from_numpy(x))), run(model, [x])[3], rtol=1e-6)


def test_export_of_a_loop_counted_by_data_says_why_it_cannot() -> None:
    module = converter.to_torch(_with_input_trip_count(torch_models.control_flow()), outputs=["z"]).eval()
    x = torch.from_numpy(RNG.standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(ConversionError, match="Loop whose trip count or condition is computed") as raised:
        torch.export.export(module, (x, torch.tensor(3)))
    assert "constant trip count" in raised.value.hint


def test_export_keeps_sizes_computed_by_shape_arithmetic_dynamic() -> None:
    """Shape -> Gather -> Concat -> Reshape with two dynamic axes: the exported program
    reshapes correctly at sizes it was not traced with."""
    model = shape_arithmetic_model()
    module = converter.to_torch(model)
    rows, tokens = torch.export.Dim("rows", min=2, max=32), torch.export.Dim("tokens", min=2, max=32)
    example = torch.from_numpy(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    exported = torch.export.export(module, (example,), dynamic_shapes={"x": {0: rows, 1: tokens}}).module()
    for shape in ((5, 9, 4), (3, 2, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        got = exported(torch.from_numpy(x))
        for value, want in zip(got, run(model, [x])):
            np.testing.assert_allclose(_numpy(value), want, rtol=1e-6)


# ------------------------------------------------------------------------ torch.compile


@functools.cache
def inductor_problem() -> str | None:
    """Why inductor cannot compile here (no C++ compiler, an unsupported platform), asked
    of torch on a plain function; None when it can."""
    try:
        compiled = torch.compile(lambda x: torch.relu(x) * 2.0, backend="inductor")
        result = compiled(torch.tensor([-1.0, 3.0]))
    except Exception as error:  # (whatever stops inductor itself is the skip reason)
        return f"inductor cannot compile a plain torch function here: {type(error).__name__}: {error}"[:300]
    if result.tolist() != [0.0, 6.0]:
        return f"inductor compiled a plain torch function wrongly: {result.tolist()}"
    return None


def test_inductor_compiles_a_converted_module_for_inference_and_training() -> None:
    problem = inductor_problem()
    if problem is not None:
        pytest.skip(problem)
    module = converter.to_torch(torch_models.cnn()).eval()
    x = torch.from_numpy(RNG.standard_normal((2, 3, 8, 8)).astype(np.float32))
    compiled = torch.compile(module, backend="inductor")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), rtol=1e-5, atol=1e-5)
    compiled(x).square().sum().backward()
    compiled_grads = {name: param.grad.clone() for name, param in module.named_parameters()}
    module.zero_grad()
    module(x).square().sum().backward()
    for name, param in module.named_parameters():
        torch.testing.assert_close(compiled_grads[name], param.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_takes_either_branch_of_an_if(backend: str) -> None:
    model = torch_models.control_flow()
    module = converter.to_torch(model, outputs=["y"]).eval()
    compiled = torch.compile(module, backend=backend)
    for sign in (1.0, -1.0):
        x = (sign * np.abs(RNG.standard_normal((3, 4)))).astype(np.float32)
        np.testing.assert_allclose(_numpy(compiled(torch.from_numpy(x))), run(model, [x])[0], rtol=1e-6)
