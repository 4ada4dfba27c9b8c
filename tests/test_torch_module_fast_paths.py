"""The converted module's fast paths compute what ONNX defines.

Shape arithmetic followed as Python ints (``converter/torch_module/shape_values.py``),
``MatMul`` + ``Add`` fused into one ``addmm`` (``fusion.py``), LayerNormalization on
torch's fused kernel: each checked against onnxruntime on the same model, numpy, or the
unfused kernels, and by ``torch.autograd.gradcheck`` where gradients flow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto

import converter
from tests.roundtrip import run, runnable

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")

pytestmark = pytest.mark.torch

RNG = np.random.default_rng(20261124)
INT64 = TensorProto.INT64


def _ints(name: str, values: Any) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def shape_arithmetic_model() -> onnx.ModelProto:
    """``x[N, T, C]``: the exporter idioms that compute shapes from the runtime shape.

    ``flat`` reshapes to ``[N * T, C]`` from gathered sizes; ``heads`` to ``[N, T, 2, C / 2]``
    through Slice and Concat of the whole shape; ``scaled`` divides by ``sqrt(C)`` read as a
    float; ``offsets`` is ``(T - 7) / 2`` (integer Div truncates toward zero); ``shape``
    is the Shape of the last two axes itself (a shape value read as a tensor).
    """
    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        oh.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        oh.make_node("Gather", ["s", "i2"], ["c"], axis=0),
        oh.make_node("Mul", ["n", "t"], ["rows"]),
        oh.make_node("Unsqueeze", ["rows", "axis0"], ["rows1"]),
        oh.make_node("Unsqueeze", ["c", "axis0"], ["c1"]),
        oh.make_node("Concat", ["rows1", "c1"], ["flat_shape"], axis=0),
        oh.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        oh.make_node("Slice", ["s", "start0", "end2"], ["nt"]),
        oh.make_node("Div", ["c", "two"], ["half"]),
        oh.make_node("Unsqueeze", ["half", "axis0"], ["half1"]),
        oh.make_node("Concat", ["nt", "two1", "half1"], ["heads_shape"], axis=0),
        oh.make_node("Reshape", ["x", "heads_shape"], ["heads"]),
        oh.make_node("Cast", ["c"], ["c_float"], to=TensorProto.FLOAT),
        oh.make_node("Sqrt", ["c_float"], ["root"]),
        oh.make_node("Div", ["x", "root"], ["scaled"]),
        oh.make_node("Sub", ["t", "seven"], ["t_less"]),
        oh.make_node("Div", ["t_less", "two"], ["offsets"]),
        oh.make_node("Shape", ["x"], ["shape"], start=-2),
    ]
    outputs = [("flat", TensorProto.FLOAT), ("heads", TensorProto.FLOAT), ("scaled", TensorProto.FLOAT),
               ("offsets", INT64), ("shape", INT64)]
    graph = oh.make_graph(
        nodes, "shape_arithmetic", [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", "C"])],
        [oh.make_tensor_value_info(name, elem, None) for name, elem in outputs],
        [_ints("i0", 0), _ints("i1", 1), _ints("i2", -1), _ints("axis0", [0]), _ints("start0", [0]),
         _ints("end2", [2]), _ints("two", 2), _ints("two1", [2]), _ints("seven", 7)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 12, 6), (1, 1, 2)])
def test_shape_arithmetic_matches_onnxruntime(shape: tuple[int, ...]) -> None:
    model = shape_arithmetic_model()
    module = converter.to_torch(model)
    x = RNG.standard_normal(shape).astype(np.float32)
    expected = run(model, [x])
    got = module(torch.from_numpy(x))
    for name, value, want in zip(["flat", "heads", "scaled", "offsets", "shape"], got, expected):
        assert value.dtype == torch.from_numpy(want).dtype, name
        np.testing.assert_allclose(value.detach().numpy(), want, rtol=1e-6, err_msg=name)


def random_shape_chain(draw: Any, rank: int) -> onnx.ModelProto:
    """``Cast(f(Shape(x)), FLOAT)`` for a random chain ``f`` of the ops shape arithmetic
    follows, with bounds beyond the shape and negative steps and indices."""
    start, end = draw.choice([0, -2, 1, -rank - 3]), draw.choice([None, -1, rank + 5, 1])
    attributes = {key: value for key, value in (("start", start), ("end", end)) if value}
    nodes, constants, current = [oh.make_node("Shape", ["x"], ["s0"], **attributes)], [], "s0"
    for step in range(draw.randint(1, 4)):
        op, out = draw.choice(["Slice", "Gather", "Concat", "Add", "Sub", "Mul", "Div"]), f"s{step + 1}"
        if op == "Slice":
            bounds = [draw.choice([0, 1, -1, -9, 9]), draw.choice([-1, 2, 9, -9, 2**62, -(2**62)]), 0,
                      draw.choice([1, -1, 2, -2])]
            names = [f"{key}{step}" for key in ("start", "end", "axis", "step")]
            constants += [_ints(name, [bound]) for name, bound in zip(names, bounds)]
            nodes.append(oh.make_node("Slice", [current, *names], [out]))
        elif op == "Gather":
            constants.append(_ints(f"index{step}", draw.choice([[0], [-1], [0, 0], [-1, 0]])))
            nodes.append(oh.make_node("Gather", [current, f"index{step}"], [out], axis=0))
        elif op == "Concat":
            constants.append(_ints(f"more{step}", [draw.randint(-1, 4)]))
            nodes.append(oh.make_node("Concat", [current, f"more{step}"], [out], axis=0))
        else:
            constants.append(_ints(f"by{step}", draw.choice([1, 2, 3, -2])))
            nodes.append(oh.make_node(op, [current, f"by{step}"], [out]))
        current = out
    nodes.append(oh.make_node("Cast", [current], ["y"], to=TensorProto.FLOAT))
    graph = oh.make_graph(nodes, "chain", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [None] * rank)],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], constants)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def test_random_shape_chains_match_onnxruntime() -> None:
    """Seeded chains (the oracle is onnxruntime; chains it refuses, an index out of range,
    are left out): clamping of Shape's start/end and of Slice's bounds, negative steps
    from before the first element included, truncating Div, negative Gather indices."""
    import random

    import onnxruntime

    draw, compared = random.Random(20261124), 0
    for _ in range(150):
        rank = draw.randint(1, 4)
        model = random_shape_chain(draw, rank)
        x = np.zeros([draw.randint(1, 5) for _ in range(rank)], np.float32)
        quiet = onnxruntime.SessionOptions()
        quiet.log_severity_level = 4  # (the refused chains would print errors)
        session = onnxruntime.InferenceSession(runnable(model).SerializeToString(), quiet,
                                               providers=["CPUExecutionProvider"])
        try:
            expected = session.run(None, {"x": x})[0]
        except onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument:
            continue
        got = converter.to_torch(model)(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(got, expected, err_msg=str([(n.op_type, n.attribute) for n in model.graph.node]))
        compared += 1
    assert compared > 100


def test_shape_arithmetic_reaches_reshape_as_python_sizes() -> None:
    """Reshape's target is a list of sizes read from ``x.shape``, not a tensor read back."""
    code = converter.to_torch(shape_arithmetic_model()).code
    reshapes = [line for line in code.splitlines() if "kernels_shapes_reshape(" in line]
    assert len(reshapes) == 2 and all("shape_tensor" not in line for line in reshapes)
    assert "x.shape" in code


def test_shape_values_read_as_tensors_go_on_the_input_device() -> None:
    from converter.torch_module.kernels.shapes import shape_tensor

    like = torch.zeros(2, dtype=torch.float64)
    assert shape_tensor([3, 4], like, False).tolist() == [3, 4]
    scalar = shape_tensor(5, like, True)
    assert scalar.dim() == 0 and scalar.dtype == torch.int64 and int(scalar) == 5


@pytest.mark.parametrize(("a", "b"), [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (0, -5), (-1, 3)])
def test_truncated_division_rounds_toward_zero(a: int, b: int) -> None:
    from converter.torch_module.kernels.shapes import truncated_division

    want = int(np.trunc(np.float64(a) / np.float64(b)))
    assert truncated_division(a, b) == want
    assert truncated_division(a, b) == int(torch.div(torch.tensor(a), torch.tensor(b), rounding_mode="trunc"))


# ----------------------------------------------------------------- MatMul + Add


def linear_model(bias_first: bool, also_product: bool) -> onnx.ModelProto:
    """``y = Add(b, MatMul(x, Transpose(W)))`` as torch.onnx.export writes a Linear layer;
    ``also_product`` makes the product a graph output too (so it must not be fused away)."""
    add_inputs = ["b", "product"] if bias_first else ["product", "b"]
    nodes = [oh.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]), oh.make_node("MatMul", ["x", "Wt"], ["product"]),
             oh.make_node("Add", add_inputs, ["y"])]
    outputs = [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if also_product:
        outputs.append(oh.make_tensor_value_info("product", TensorProto.FLOAT, None))
    weights = [onnx.numpy_helper.from_array(RNG.standard_normal((5, 4)).astype(np.float32), "W"),
               onnx.numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), "b")]
    graph = oh.make_graph(nodes, "linear", [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 4])],
                          outputs, weights)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize("bias_first", [True, False])
@pytest.mark.parametrize("also_product", [True, False])
def test_linear_pattern_matches_onnxruntime(bias_first: bool, also_product: bool) -> None:
    model = linear_model(bias_first, also_product)
    module = converter.to_torch(model)
    assert ("matmul_add" in module.code) == (not also_product)
    x = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    got = module(torch.from_numpy(x))
    got = got if isinstance(got, tuple) else (got,)
    for value, want in zip(got, run(model, [x])):
        np.testing.assert_allclose(value.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    got[0].sum().backward()
    assert module.get_parameter("W").grad is not None and module.get_parameter("b").grad is not None


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "c_shape", "dtype"),
    [((3, 4), (4, 5), (5,), np.float64), ((2, 3, 4), (4, 5), (5,), np.float32), ((4,), (4, 5), (5,), np.float32),
     ((3, 4), (4, 5), (1, 5), np.float32), ((2, 3, 4), (2, 4, 5), (5,), np.float32),
     ((3, 4), (4, 5), (5,), np.int32), ((3, 4), (4, 5), (), np.float32)],
)
def test_matmul_add_equals_numpy(a_shape: tuple[int, ...], b_shape: tuple[int, ...], c_shape: tuple[int, ...],
                                 dtype: Any) -> None:
    """The addmm form (float matrix, bias vector) and every other form (the two ops)."""
    from converter.torch_module.kernels.linear import matmul_add

    a, b, c = (RNG.integers(-5, 5, shape).astype(dtype) for shape in (a_shape, b_shape, c_shape))
    got = matmul_add(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(np.asarray(c)))
    want = np.matmul(a, b) + c
    assert got.dtype == torch.from_numpy(want).dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_matmul_add_gradients() -> None:
    from converter.torch_module.kernels.linear import matmul_add

    args = tuple(torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in ((2, 3, 4), (4, 5), (5,)))
    assert torch.autograd.gradcheck(matmul_add, args)


# ----------------------------------------------------------------- LayerNormalization


def _layer_norm_inputs(shape: tuple[int, ...], axis: int, scale_shape: tuple[int, ...] | None = None,
                       dtype: Any = torch.float32) -> tuple[Any, Any, Any]:
    normalised = scale_shape or shape[axis:]
    return (torch.randn(*shape, dtype=dtype), torch.randn(*normalised, dtype=dtype),
            torch.randn(*normalised, dtype=dtype))


@pytest.mark.parametrize(("shape", "axis", "scale_shape"),
                         [((2, 3, 8), -1, None), ((2, 3, 8), 1, None), ((4, 6), 0, None), ((2, 3, 8), 1, (8,))])
def test_layer_norm_binding_only_y_equals_the_full_form(shape: tuple[int, ...], axis: int,
                                                         scale_shape: tuple[int, ...] | None) -> None:
    """``output_count=1`` (fused, or the full form when the scale only broadcasts) gives
    the Y the three-output form gives, and its Mean and InvStdDev where it returns them."""
    from converter.torch_module.kernels.normalization import layer_normalization

    x, scale, bias = _layer_norm_inputs(shape, axis, scale_shape)
    full = layer_normalization(x, scale, bias, axis=axis)
    only_y = layer_normalization(x, scale, bias, axis=axis, output_count=1)
    for got, want in zip(only_y, full):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_layer_norm_single_output_node_matches_onnxruntime() -> None:
    node = oh.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-3)
    graph = oh.make_graph(
        [node], "layer_norm",
        [oh.make_tensor_value_info(name, TensorProto.FLOAT, shape)
         for name, shape in (("x", ["N", 3, 8]), ("scale", [8]), ("bias", [8]))],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    module = converter.to_torch(model)
    assert "output_count = 1" in module.code
    inputs = [RNG.standard_normal(shape).astype(np.float32) for shape in ((2, 3, 8), (8,), (8,))]
    np.testing.assert_allclose(module(*map(torch.from_numpy, inputs)).numpy(), run(model, inputs)[0],
                               rtol=1e-5, atol=1e-5)


def test_layer_norm_fused_gradients() -> None:
    from converter.torch_module.kernels.normalization import layer_normalization

    x, scale, bias = (value.requires_grad_() for value in _layer_norm_inputs((2, 3, 4), 1, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda *args: layer_normalization(*args, axis=1, output_count=1)[0],
                                    (x, scale, bias))


# ----------------------------------------------------------------- weights not copied twice


def _large_weight_model(folder: Any) -> tuple[str, np.ndarray]:
    """A model file whose weight (256 KiB, external data) is large enough to be shared."""
    weight = RNG.standard_normal((256, 256)).astype(np.float32)
    graph = oh.make_graph([oh.make_node("MatMul", ["x", "W"], ["y"])], "large",
                          [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(weight, "W")])
    path = str(folder / "model.onnx")
    onnx.save_model(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), path,
                    save_as_external_data=True, location="model.data", size_threshold=0)
    return path, weight


def _train_step(module: Any) -> None:
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    module(torch.ones(2, 256)).square().sum().backward()
    optimizer.step()


def test_a_model_read_from_a_path_lends_its_weights_to_the_parameters(tmp_path: Any) -> None:
    """The module reads the file itself, so its parameters use the model's arrays (no
    second copy); training writes there, and ``to_onnx`` still gives the trained values."""
    path, weight = _large_weight_model(tmp_path)
    module = converter.to_torch(path)
    array = module.onnx_model.graph.initializers[0].initializer.array
    parameter = module.get_parameter("W")
    assert parameter.data_ptr() == array.__array_interface__["data"][0]
    _train_step(module)
    assert not np.array_equal(parameter.detach().numpy(), weight)
    trained = onnx.numpy_helper.to_array(module.to_onnx().graph.initializer[0])
    np.testing.assert_array_equal(trained, parameter.detach().numpy())
    fresh = converter.to_torch(path)  # a second conversion reads the file again: untouched by training
    np.testing.assert_array_equal(fresh.get_parameter("W").detach().numpy(), weight)


def test_a_model_passed_in_is_never_written_by_training(tmp_path: Any) -> None:
    path, weight = _large_weight_model(tmp_path)
    model_ir = converter.load_model(path)
    proto = onnx.load(path)
    for given in (model_ir, proto):
        _train_step(converter.to_torch(given))
    np.testing.assert_array_equal(model_ir.graph.initializers[0].initializer.array, weight)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(proto.graph.initializer[0]), weight)
