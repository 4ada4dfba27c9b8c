"""Forms that models shipped in real packages take, each on a small model built here.

Exporters write things ONNX forbids or leaves open and onnxruntime runs anyway: a
batch declared ``dim_value: -1``; an output declared with a shape and again, without
one, in ``value_info``; float initializers that are exponents or epsilons rather than
weights; interface names Python cannot spell (``input``, ``sigmoid_0.tmp_0``, ``387``)
and no producer name.  Every path must read them as onnxruntime does and give them
back as they were.  Oracles: onnxruntime on the original, numpy, the original protos.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import converter
import eager
from dsl.errors import ModelWarning
from tests.roundtrip import round_trip, run

RNG = np.random.default_rng(29)


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], initializers: list[Any] = (),
           value_info: list[Any] = (), opset: int = 17) -> onnx.ModelProto:
    graph = oh.make_graph(nodes, "shipped", inputs, outputs, list(initializers), value_info=list(value_info))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


# ---------------------------------------------------------------- negative sizes


def _negative_batch() -> onnx.ModelProto:
    shape = [-1, 3, "H", None]
    return _model([oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Neg", ["r"], ["y"])],
                  [oh.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                  [oh.make_tensor_value_info("y", TensorProto.FLOAT, shape)])


def test_a_negative_size_is_read_as_unknown_with_a_warning_everywhere(tmp_path: Any) -> None:
    model = _negative_batch()
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    expected = run(model, [x])[0]  # onnxruntime runs the model as it is
    with pytest.warns(ModelWarning, match="size -1 on axis 0"):
        source, rebuilt = round_trip(model, str(tmp_path))
    assert "FLOAT[None, 3, 'H', None]" in source
    assert not rebuilt.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    np.testing.assert_array_equal(run(rebuilt, [x])[0], expected)
    with pytest.warns(ModelWarning, match="size -1 on axis 0"):
        np.testing.assert_array_equal(eager.run(model, [x])[0], expected)
    with pytest.warns(ModelWarning, match="size -1 on axis 0"):
        np.testing.assert_array_equal(eager.run(model, [x], node_by_node=True)[0], expected)
    with pytest.warns(ModelWarning):
        part = converter.cut(model, outputs=["r"], inputs=["x"])
    np.testing.assert_array_equal(run(part, [x])[0], np.maximum(x, 0))
    onnx.checker.check_model(part, full_check=True)


# ------------------------------------------------ declared outputs and value_info


def test_a_declared_output_type_wins_over_a_conflicting_value_info(tmp_path: Any) -> None:
    model = _model([oh.make_node("Relu", ["x"], ["y"]), oh.make_node("Neg", ["y"], ["z"])],
                   [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                    oh.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                   value_info=[oh.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "-> tuple[FLOAT[2, 3], FLOAT[2, 3]]" in source
    assert rebuilt.graph.output[0].type == model.graph.output[0].type
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)


# ------------------------------------------------------ which float tensors train


def _normalised_power() -> onnx.ModelProto:
    """``sqrt((x @ w) ** p + eps)`` clipped to [lo, hi]: one weight and four float
    initializers that are not weights (an exponent, an epsilon, two bounds)."""
    initializers = [
        numpy_helper.from_array(RNG.standard_normal((3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([2.0], np.float32), "exponent"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(3.0, np.float32), "hi"),
    ]
    nodes = [oh.make_node("MatMul", ["x", "w"], ["m"]), oh.make_node("Pow", ["m", "exponent"], ["p"]),
             oh.make_node("Add", ["p", "eps"], ["s"]), oh.make_node("Sqrt", ["s"], ["r"]),
             oh.make_node("Clip", ["r", "lo", "hi"], ["y"])]
    return _model(nodes, [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                  [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], initializers)


def test_exponents_epsilons_and_bounds_do_not_train() -> None:
    torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")
    model = _normalised_power()
    module = converter.to_torch(model).train()
    assert {name for name, _ in module.named_parameters()} == {"w"}
    assert set(module.state_dict()) == {"w", "exponent", "eps", "lo", "hi"}  # buffers, still written back
    x = RNG.standard_normal((8, 3)).astype(np.float32)  # negative bases: d(m**p)/dp is NaN there
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    module(torch.from_numpy(x)).sum().backward()
    optimizer.step()
    trained = module.to_onnx()
    got = run(trained, [x])[0]
    assert np.isfinite(got).all()
    weights = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    for name in ("exponent", "eps", "lo", "hi"):
        np.testing.assert_array_equal(weights[name], numpy_helper.to_array(
            next(t for t in model.graph.initializer if t.name == name)))
    asked = converter.to_torch(model, trainable=["exponent"])
    assert {name for name, _ in asked.named_parameters()} == {"w", "exponent"}


def test_an_addend_that_is_not_an_epsilon_trains() -> None:
    pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")
    model = _model([oh.make_node("Add", ["x", "bias"], ["y"])],
                   [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                   [numpy_helper.from_array(np.array([0.5], np.float32), "bias")])
    assert {name for name, _ in converter.to_torch(model).named_parameters()} == {"bias"}


# --------------------------------------------------- interface names and producer


def _awkward_names() -> onnx.ModelProto:
    model = _model([oh.make_node("Sigmoid", ["input"], ["sigmoid_0.tmp_0"]),
                    oh.make_node("Neg", ["sigmoid_0.tmp_0"], ["387"]),
                    oh.make_node("Identity", ["bytes"], ["class"])],
                   [oh.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3]),
                    oh.make_tensor_value_info("bytes", TensorProto.INT64, [4])],
                   [oh.make_tensor_value_info("sigmoid_0.tmp_0", TensorProto.FLOAT, [2, 3]),
                    oh.make_tensor_value_info("387", TensorProto.FLOAT, [2, 3]),
                    oh.make_tensor_value_info("class", TensorProto.INT64, [4])])
    model.ClearField("producer_name")
    return model


def test_the_round_trip_keeps_interface_names_and_no_producer(tmp_path: Any) -> None:
    model = _awkward_names()
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "def shipped(input_: FLOAT[2, 3], bytes_: INT64[4])" in source  # Python spells them its way
    assert [v.name for v in rebuilt.graph.input] == ["input", "bytes"]
    assert [v.name for v in rebuilt.graph.output] == ["sigmoid_0.tmp_0", "387", "class"]
    assert rebuilt.producer_name == ""
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    onnx.checker.check_model(rebuilt, full_check=True)
    import onnxruntime

    x = RNG.standard_normal((2, 3)).astype(np.float32)
    session = onnxruntime.InferenceSession(rebuilt.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(["387"], {"input": x, "bytes": np.arange(4)})[0]  # fed and fetched by name
    np.testing.assert_allclose(got, -1 / (1 + np.exp(-x)), rtol=1e-6)


def _renamed_input(model: onnx.ModelProto) -> None:
    model.graph.input[1].name = "bytes_"
    for node in model.graph.node:
        node.input[:] = ["bytes_" if name == "bytes" else name for name in node.input]


def test_the_comparison_notices_an_interface_name_or_a_producer() -> None:
    model = _awkward_names()
    for edit, message in ((_renamed_input, "input 1 is named 'bytes' vs 'bytes_'"),
                          (lambda m: setattr(m, "producer_name", "onnxquill"), "producer_name")):
        other = copy.deepcopy(model)
        edit(other)
        assert converter.isomorphic(model, other)  # structure alone: names may differ
        with pytest.raises(AssertionError, match=message):
            converter.assert_isomorphic(model, other, check_metadata=True)


def test_a_model_read_and_written_keeps_its_producer() -> None:
    model = _awkward_names()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        part = converter.cut(model, outputs=["387"])
    assert part.producer_name == ""
    model.producer_name, model.producer_version = "spox", "0.1"
    part = converter.cut(model, outputs=["387"])
    assert (part.producer_name, part.producer_version) == ("spox", "0.1")


# ------------------------------------------------------------- readable source


def test_a_call_with_long_exporter_names_is_written_one_argument_a_line(tmp_path: Any) -> None:
    stem = "F0_If_0_then_branch__Inline_0___stft_padding_"  # (a spox-inlined torch export's names)
    names = [f"{stem}{part}_output_0" for part in ("Reshape", "Constant_4", "Constant_5", "Constant_6")]
    model = _model([oh.make_node("Slice", names, ["y"])],
                   [oh.make_tensor_value_info(names[0], TensorProto.FLOAT, [8])]
                   + [oh.make_tensor_value_info(name, TensorProto.INT64, [1]) for name in names[1:]],
                   [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    source, rebuilt = round_trip(model, str(tmp_path))
    assert max(map(len, source.splitlines())) <= 120
    assert "y = op.Slice(\n" in source
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)


def test_value_info_of_a_weight_nothing_reads_survives(tmp_path: Any) -> None:
    unread = numpy_helper.from_array(np.arange(20, dtype=np.float32), "folded")
    model = _model([oh.make_node("Relu", ["x"], ["y"])], [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [unread],
                   value_info=[oh.make_tensor_value_info("folded", TensorProto.FLOAT, [20])])
    _, rebuilt = round_trip(model, str(tmp_path))
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    del rebuilt.graph.value_info[:]
    with pytest.raises(AssertionError, match="value_info"):
        converter.assert_isomorphic(model, rebuilt, check_metadata=True)
