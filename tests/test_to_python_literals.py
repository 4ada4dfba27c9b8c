"""Literals the Python back end writes read back as the very same bits.

A model holding values that need every digit (1/3 as float32, float64 and complex128,
-0.0, the largest float32) goes model -> Python -> @script -> model, and the result must
be isomorphic to the original: converter.compare compares tensors and float attributes
bit for bit (the sign of zero included), and numpy checks the rebuilt values directly.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import converter
from tests.roundtrip import round_trip

_VALUES = {
    "float32 third": np.array([1 / 3, -2 / 3, 0.1], np.float32),
    "float64 third": np.array([1 / 3, -2 / 3, 0.1], np.float64),
    "complex128 third": np.array([1 / 3 + 2j / 3, -0.1 - 1e-17j], np.complex128),
    "complex64 third": np.array([1 / 3 + 2j / 3], np.complex64),
    "signed zeros": np.array([0.0, -0.0], np.float32),
    "float32 extremes": np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45], np.float32),
    "float16 third": np.array([1 / 3], np.float16),
}


def _constant_model(array: np.ndarray) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(array.dtype)
    node = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(array))
    graph = helper.make_graph(
        [node, helper.make_node("Identity", ["c"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", elem, list(array.shape))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.mark.parametrize("name", sorted(_VALUES))
def test_tensor_literals_read_back_bit_for_bit(name: str, tmp_path) -> None:
    original = _constant_model(_VALUES[name])
    source, rebuilt = round_trip(original, str(tmp_path))
    assert converter.isomorphic(original, rebuilt), converter.compare.first_difference(original, rebuilt)
    constant = next(n for n in rebuilt.graph.node if n.op_type == "Constant")
    value = numpy_helper.to_array(constant.attribute[0].t)
    assert value.dtype == _VALUES[name].dtype
    assert value.tobytes() == _VALUES[name].tobytes(), source


@pytest.mark.parametrize("alpha", [float(np.float32(1 / 3)), -0.0, float(np.float32(0.123456789)), 1e-30])
def test_float_attributes_read_back_bit_for_bit(alpha: float, tmp_path) -> None:
    graph = helper.make_graph(
        [helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    source, rebuilt = round_trip(original, str(tmp_path))
    assert converter.isomorphic(original, rebuilt), source
    written = rebuilt.graph.node[0].attribute[0].f
    assert np.float32(written).tobytes() == np.float32(alpha).tobytes(), source
