"""converter.compare: equal up to renaming and node order, and real differences found."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.compare import first_difference
from tests.proto_edits import node_case_models, rename_values, shuffle_nodes
from tests.work_count import assert_linear


def _diamond() -> onnx.ModelProto:
    """x -> (Relu, Neg) -> Sub -> MatMul(W) with an If that captures an outer value."""
    then_graph = helper.make_graph(
        [helper.make_node("Add", ["s", "w_bias"], ["then_out"])], "then",
        [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2, 2])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Mul", ["s", "s"], ["else_out"])], "else",
        [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2, 2])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Sub", ["r", "n"], ["s"], name="sub"),
        helper.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["branch"], then_branch=then_graph, else_branch=else_graph),
        helper.make_node("MatMul", ["branch", "w"], ["y"], name="matmul"),
        helper.make_node("LeakyRelu", ["y"], ["z"], alpha=0.25),
    ]
    graph = helper.make_graph(
        nodes, "diamond",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 2])],
        initializer=[
            numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float32), "w"),
            numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "w_bias"),
            numpy_helper.from_array(np.array(0, np.float32), "zero"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _with_function() -> onnx.ModelProto:
    function = helper.make_function(
        "custom", "Scale", ["a"], ["b"],
        [helper.make_node("Constant", [], ["k"], value_float=2.0),
         helper.make_node("Mul", ["a", "k"], ["m"]),
         helper.make_node("LeakyRelu", ["m"], ["b"], alpha=0.1)],
        [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [helper.make_node("Scale", ["x"], ["h"], domain="custom"),
         helper.make_node("Scale", ["h"], ["y"], domain="custom")],
        "calls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
    )
    return helper.make_model(
        graph, functions=[function],
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)],
    )


_CASE_NAMES = [
    "test_loop11", "test_scan9_sum", "test_if_seq", "test_layer_normalization_4d_axis0_expanded",
    "test_range_float_type_positive_delta_expanded", "test_lstm_defaults", "test_gelu_tanh_1_expanded",
    "test_affine_grid_2d_expanded", "test_sequence_map_identity_1_sequence_expanded",
]


def _models() -> list[onnx.ModelProto]:
    cases = node_case_models()
    return [_diamond(), _with_function(), *(cases[name].model for name in _CASE_NAMES if name in cases)]


_MODELS = _models()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(_MODELS) - 1), seed=st.integers(0, 2**32 - 1))
def test_renamed_and_reordered_models_are_isomorphic(index: int, seed: int) -> None:
    model = _MODELS[index]
    rng = random.Random(seed)
    edited = shuffle_nodes(rename_values(model, rng), rng)
    assert first_difference(model, edited) is None
    assert first_difference(edited, model) is None
    onnx.checker.check_model(edited)


def test_every_node_case_equals_itself_renamed() -> None:
    rng = random.Random(0)
    for case in list(node_case_models().values())[::7]:
        assert converter.isomorphic(case.model, rename_values(case.model, rng)), case.name


def _edited(model: onnx.ModelProto, edit) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    edit(copy)
    return copy


def _node(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.name == name)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: setattr(_node(m, "sub"), "op_type", "Add"), "node Sub 'sub' vs Add 'sub'"),
        (lambda m: _node(m, "sub").input.reverse(), "node Neg 'neg' vs Relu 'relu'"),
        (lambda m: setattr(m.graph.node[7].attribute[0], "f", 0.5), "attribute alpha: 0.25 vs 0.5"),
        (lambda m: m.graph.initializer[0].CopyFrom(
            numpy_helper.from_array(np.array([[1, 2], [3, 5]], np.float32), "w")), "values differ at flat index 3"),
        (lambda m: m.graph.initializer[0].CopyFrom(
            numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float64), "w")), "element type"),
        (lambda m: m.graph.input[0].type.tensor_type.shape.dim[0].__setattr__("dim_value", 3), "type"),
        (lambda m: m.graph.node[5].attribute[1].g.node[0].__setattr__("op_type", "Sub"), "node Add vs Sub"),
        (lambda m: m.graph.node[5].attribute[1].g.node[0].input.__setitem__(1, "w"), "correspond to 'w'"),
        (lambda m: m.graph.node[5].attribute[0].g.node[0].input.__setitem__(1, "r"),
         "'s' of the first corresponds to two different values of the second ('s' and 'r')"),
    ],
)
def test_real_differences_are_found_and_described(edit, expected) -> None:
    model = _diamond()
    changed = _edited(model, edit)
    difference = first_difference(model, changed)
    assert difference is not None
    assert expected in difference, difference
    assert not converter.isomorphic(changed, model)
    with pytest.raises(AssertionError, match="not isomorphic"):
        converter.assert_isomorphic(model, changed)


def test_merged_duplicate_nodes_are_a_difference() -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["y"])],
        "dup", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    merged = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "a"], ["y"])],
        "dup", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    difference = first_difference(graph, merged)
    assert difference is not None and "correspond" in difference


def test_dead_code_is_compared() -> None:
    def make(dead_op: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node(dead_op, ["x"], ["unused"]), helper.make_node("Relu", ["x"], ["y"])],
            "dead", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )

    assert converter.isomorphic(make("Neg"), make("Neg"))
    difference = first_difference(make("Neg"), make("Abs"))
    assert difference is not None and "Neg vs Abs" in difference


def test_functions_are_compared_by_name_and_body() -> None:
    model = _with_function()
    body_changed = _edited(model, lambda m: m.functions[0].node[2].attribute[0].__setattr__("f", 0.2))
    difference = first_difference(model, body_changed)
    assert difference is not None and "function custom::Scale" in difference and "alpha" in difference
    renamed = _edited(model, lambda m: setattr(m.functions[0], "name", "Other"))
    difference = first_difference(model, renamed)
    assert difference is not None and "model-local functions differ" in difference
    assert first_difference(model.functions[0], model.functions[0]) is None


def test_trailing_omitted_inputs_are_the_same_as_absent_ones() -> None:
    def make(inputs: list[str]) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Clip", inputs, ["y"])], "clip",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )

    assert converter.isomorphic(make(["x"]), make(["x", "", ""]))


def test_opset_versions_of_used_domains_matter() -> None:
    model = _diamond()
    other = _edited(model, lambda m: m.opset_import[0].__setattr__("version", 17))
    difference = first_difference(model, other)
    assert difference is not None and "opset" in difference


def test_metadata_is_compared_only_when_asked() -> None:
    model = _diamond()
    other = _edited(model, lambda m: helper.set_model_props(m, {"author": "someone"}))
    assert converter.isomorphic(model, other)
    assert not converter.isomorphic(model, other, check_metadata=True)


def test_comparing_different_kinds_of_protos_says_so() -> None:
    model = _diamond()
    assert first_difference(model, model.graph) == "a ModelProto vs a GraphProto"


def test_work_is_linear_in_the_number_of_nodes() -> None:
    def chain(length: int) -> onnx.GraphProto:
        # Attributes, tensors and plain ops: every kind of per-node work the walk does.
        nodes = []
        for i in range(length):
            if i % 3 == 0:
                nodes.append(helper.make_node("LeakyRelu", [f"v{i}"], [f"v{i + 1}"], alpha=0.1))
            elif i % 3 == 1:
                nodes.append(helper.make_node("Add", [f"v{i}", "w"], [f"v{i + 1}"]))
            else:
                nodes.append(helper.make_node("Pad", [f"v{i}", "pads"], [f"v{i + 1}"], mode="edge"))
        return helper.make_graph(
            nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info(f"v{length}", TensorProto.FLOAT, [1])],
            initializer=[numpy_helper.from_array(np.array([0.5], np.float32), "w"),
                         numpy_helper.from_array(np.array([0, 0], np.int64), "pads")],
        )

    def comparing(length: int) -> Any:
        graph = chain(length)
        return lambda: first_difference(graph, graph)

    assert first_difference(chain(30), chain(30)) is None
    assert_linear(comparing, 300, 3_000)


def test_a_call_without_a_defaulted_attribute_means_the_default() -> None:
    model = _with_function()
    model.functions[0].attribute_proto.append(helper.make_attribute("scale", 2.0))
    explicit = _edited(model, lambda m: m.graph.node[0].attribute.append(helper.make_attribute("scale", 2.0)))
    assert converter.isomorphic(model, explicit)
    other = _edited(model, lambda m: m.graph.node[0].attribute.append(helper.make_attribute("scale", 3.0)))
    difference = first_difference(model, other)
    assert difference is not None and "attribute scale: 2.0 vs 3.0" in difference


def test_what_is_not_a_proto_is_a_dsl_error() -> None:
    from dsl.errors import DslTypeError

    with pytest.raises(DslTypeError, match="not str") as raised:
        converter.isomorphic("a.onnx", "b.onnx")
    assert "hint:" in str(raised.value)
