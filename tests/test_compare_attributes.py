"""converter.compare on attribute values (every attribute kind that differs is a difference)
and on the position of graph inputs.

``isomorphic`` is the only judge of the backend cases whose outputs are not run, so a
comparison that skipped a kind of attribute, or rounded floats, would let a wrong round
trip pass silently.  Each case builds two one-node protos by hand that differ in one
attribute value only, and onnxruntime shows, where it can, that the two really compute
different things (the oracle that the difference matters is independent of compare).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import converter
from converter.compare import first_difference
from tests.helpers import run_model


def _custom_node_model(attribute: AttributeProto) -> onnx.ModelProto:
    """x -> com.example::Op(attribute) -> y: compare reads the attribute, no schema checks it."""
    node = helper.make_node("Op", ["x"], ["y"], domain="com.example")
    node.attribute.append(attribute)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])


def _graph(op_type: str) -> onnx.GraphProto:
    return helper.make_graph(
        [helper.make_node(op_type, ["a"], ["b"])], "body",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
    )


def _sparse(values: list[float]) -> onnx.SparseTensorProto:
    return helper.make_sparse_tensor(
        numpy_helper.from_array(np.array(values, np.float32), "v"),
        numpy_helper.from_array(np.array([0, 2], np.int64), "i"), [4],
    )


def _type(elem: int) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem, [2])


_F32 = np.float32
# kind -> (a value, a value that differs minimally from it)
_PAIRS: dict[str, tuple[Any, Any]] = {
    "INT": (1, 2),
    "INT sign": (1, -1),
    "INTS order": ([1, 0], [0, 1]),
    "INTS length": ([1], [1, 1]),
    "FLOAT": (0.25, 0.5),
    "FLOAT 1% apart": (1.0, 1.01),
    "FLOAT one float32 step apart": (1.0, float(np.nextafter(_F32(1.0), _F32(2.0)))),
    "FLOAT sign of zero": (0.0, -0.0),
    "FLOATS": ([1.0, 2.0], [1.0, 2.02]),
    "FLOATS length": ([1.0], [1.0, 1.0]),
    "STRING": (b"constant", b"reflect"),
    "STRINGS": ([b"a", b"b"], [b"a", b"c"]),
    "TENSOR values": (numpy_helper.from_array(np.arange(4, dtype=np.int64)),
                      numpy_helper.from_array(np.array([0, 1, 2, 4], np.int64))),
    "TENSOR shape": (numpy_helper.from_array(np.arange(4, dtype=np.int64)),
                     numpy_helper.from_array(np.arange(4, dtype=np.int64).reshape(2, 2))),
    "TENSOR element type": (numpy_helper.from_array(np.arange(4, dtype=np.int64)),
                            numpy_helper.from_array(np.arange(4, dtype=np.int32))),
    "TENSOR float 1% apart": (numpy_helper.from_array(np.array([1.0], _F32)),
                              numpy_helper.from_array(np.array([1.01], _F32))),
    "TENSOR sign of zero": (numpy_helper.from_array(np.array([0.0], _F32)),
                            numpy_helper.from_array(np.array([-0.0], _F32))),
    "TENSORS": ([numpy_helper.from_array(np.zeros(2, _F32))], [numpy_helper.from_array(np.ones(2, _F32))]),
    "GRAPH": (_graph("Relu"), _graph("Neg")),
    "GRAPHS": ([_graph("Relu")], [_graph("Abs")]),
    "SPARSE_TENSOR": (_sparse([1.0, 2.0]), _sparse([1.0, 3.0])),
    "SPARSE_TENSORS": ([_sparse([1.0, 2.0])], [_sparse([2.0, 2.0])]),
    "TYPE_PROTO": (_type(TensorProto.FLOAT), _type(TensorProto.DOUBLE)),
    "TYPE_PROTOS": ([_type(TensorProto.FLOAT)], [_type(TensorProto.INT64)]),
}


@pytest.mark.parametrize("kind", sorted(_PAIRS))
def test_each_attribute_kind_that_differs_is_a_difference(kind: str) -> None:
    first_value, second_value = _PAIRS[kind]
    first = _custom_node_model(helper.make_attribute("a", first_value))
    second = _custom_node_model(helper.make_attribute("a", second_value))
    same = _custom_node_model(helper.make_attribute("a", first_value))
    assert first.graph.node[0].attribute[0].type == second.graph.node[0].attribute[0].type, "the kinds must agree"
    assert converter.isomorphic(first, same), first_difference(first, same)
    difference = first_difference(first, second)
    assert difference is not None and ("attribute a" in difference or "subgraph a" in difference), difference
    assert first_difference(second, first) is not None


def test_the_same_attribute_of_another_kind_is_a_difference() -> None:
    first = _custom_node_model(helper.make_attribute("a", 1))
    second = _custom_node_model(helper.make_attribute("a", 1.0))
    assert "kind INT vs FLOAT" in (first_difference(first, second) or "")


def _transpose_pad(perm: list[int], mode: str) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=perm),
        helper.make_node("Pad", ["t", "pads"], ["y"], mode=mode),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.mark.parametrize(("perm", "mode"), [([0, 1], "constant"), ([1, 0], "reflect"), ([0, 1], "reflect")])
def test_models_that_compute_different_things_are_not_isomorphic(perm: list[int], mode: str) -> None:
    """The review's example: Transpose perm=[1,0] + Pad "constant" against other perms and modes,
    with onnxruntime as the oracle that they compute different values."""
    x = np.arange(9, dtype=_F32).reshape(3, 3)
    original = _transpose_pad([1, 0], "constant")
    other = _transpose_pad(perm, mode)
    assert not np.array_equal(run_model(original, [x])[0], run_model(other, [x])[0])
    assert not converter.isomorphic(original, other)
    assert converter.isomorphic(original, _transpose_pad([1, 0], "constant"))


@pytest.mark.parametrize("alpha", [0.0101, 0.0100001, -0.01])
def test_near_equal_float_attributes_that_compute_differently_differ(alpha: float) -> None:
    def leaky(value: float) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("LeakyRelu", ["x"], ["y"], alpha=value)], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)

    x = np.array([-1000.0], _F32)
    assert run_model(leaky(0.01), [x])[0][0] != run_model(leaky(alpha), [x])[0][0]
    assert not converter.isomorphic(leaky(0.01), leaky(alpha))


def test_graph_inputs_are_paired_by_position() -> None:
    """``Sub(x, y)`` with inputs declared (x, y) and (y, x): the same nodes, another function."""

    def sub(order: list[str]) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("Sub", ["x", "y"], ["z"])], "g",
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in order],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)

    a, b = np.array([1.0, 2.0], _F32), np.array([5.0, 3.0], _F32)
    assert not np.array_equal(run_model(sub(["x", "y"]), [a, b])[0], run_model(sub(["y", "x"]), [a, b])[0])
    assert not converter.isomorphic(sub(["x", "y"]), sub(["y", "x"]))
    assert converter.isomorphic(sub(["x", "y"]), sub(["x", "y"]))


def test_a_node_with_one_more_input_is_a_difference() -> None:
    """Variadic ``Sum(x, y)`` against ``Sum(x, y, y)``: the pairs agree as far as they go."""

    def total(inputs: list[str]) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("Sum", inputs, ["z"])], "g",
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ("x", "y")],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)

    a, b = np.array([1.0, 2.0], _F32), np.array([5.0, 3.0], _F32)
    assert not np.array_equal(run_model(total(["x", "y"]), [a, b])[0], run_model(total(["x", "y", "y"]), [a, b])[0])
    assert "2 inputs vs 3" in (first_difference(total(["x", "y"]), total(["x", "y", "y"])) or "")
