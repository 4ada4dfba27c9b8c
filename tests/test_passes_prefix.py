"""dsl.passes.prefix: names given a prefix, or renamed apart from taken ones, without changing
what the model computes (onnxruntime on the model before and after is the oracle), and
subgraph reads of outer values, subgraph inputs/outputs and function call sites stay
consistent."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from converter.from_onnx import model_from_proto
from converter.to_onnx import model_to_proto
from dsl import ir
from dsl.passes.prefix import PrefixPass, same_function

F = TensorProto.FLOAT


def vi(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, F, [1, 4])


def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


def loop_model() -> onnx.ModelProto:
    """x -> h = Relu(x); a Loop of 3 steps whose body reads h (outer) and carries acc; plus h_1."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Add", ["acc", "h"], ["acc_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []), vi("acc")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), vi("acc_out")],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["h"], name="relu"),
            helper.make_node("Neg", ["h"], ["h_1"], name="neg"),
            helper.make_node("Loop", ["n", "", "h_1"], ["y"], name="loop", body=body),
        ],
        "g", [vi("x")], [vi("y")], [helper.make_tensor("n", TensorProto.INT64, [], [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def check_same_results(before: onnx.ModelProto, after: ir.Model) -> onnx.ModelProto:
    proto = model_to_proto(after)
    onnx.checker.check_model(proto, full_check=True)
    x = np.array([[-1, 2, -3, 4]], np.float32)
    np.testing.assert_allclose(run(proto, x)[0], run(before, x)[0])
    return proto


def test_prefix_reaches_subgraphs() -> None:
    before = loop_model()
    model = model_from_proto(before)
    assert PrefixPass("p/")(model).modified
    proto = check_same_results(before, model)
    body = proto.graph.node[2].attribute[0].g
    assert [n.name for n in proto.graph.node] == ["p/relu", "p/neg", "p/loop"]
    assert [i.name for i in body.input] == ["p/i", "p/cond", "p/acc"]
    assert list(body.node[1].input) == ["p/acc", "p/h"]  # the outer read is the renamed value
    assert [o.name for o in body.output] == ["p/cond_out", "p/acc_out"]
    assert [i.name for i in proto.graph.initializer] == ["p/n"]


def test_only_clashing_names_are_renamed_and_fresh_names_avoid_the_models_own() -> None:
    before = loop_model()
    model = model_from_proto(before)
    assert PrefixPass(taken_values={"h", "acc"}, taken_nodes={"neg"})(model).modified
    proto = check_same_results(before, model)
    relu, neg, loop = proto.graph.node
    assert relu.output[0] == "h_2" and neg.output[0] == "h_1"  # h_1 is the model's own: h becomes h_2
    assert [n.name for n in proto.graph.node] == ["relu", "neg_1", "loop"]
    assert list(loop.attribute[0].g.node[1].input) == ["acc_1", "h_2"]


def test_nothing_taken_changes_nothing() -> None:
    model = model_from_proto(loop_model())
    assert not PrefixPass()(model).modified


def function_model(op: str, name: str = "act") -> ir.Model:
    function = helper.make_function("local", name, ["i"], ["o"], [helper.make_node(op, ["i"], ["o"])],
                                    [helper.make_opsetid("", 18)])
    outer = helper.make_function("local", "twice", ["i"], ["o"], [
        helper.make_node(name, ["i"], ["t"], domain="local"), helper.make_node(name, ["t"], ["o"], domain="local"),
    ], [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    graph = helper.make_graph([helper.make_node("twice", ["x"], ["y"], domain="local")], "g", [vi("x")], [vi("y")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
                              functions=[function, outer], ir_version=8)
    return model_from_proto(proto)


def test_a_function_with_a_different_body_is_renamed_with_its_call_sites() -> None:
    taken = function_model("Relu")
    model = function_model("Neg")
    before = model_to_proto(model)
    assert PrefixPass(taken_functions=taken.functions)(model).modified
    names = sorted(f.name for f in model.functions)
    assert names == ["act_1", "twice_1"]  # twice calls a different act, so it differs too
    proto = check_same_results(before, model)
    assert [n.op_type for n in proto.functions[-1].node] == ["act_1", "act_1"]


def test_a_function_with_the_same_body_keeps_its_name() -> None:
    taken = function_model("Relu")
    model = function_model("Relu")
    assert same_function(taken.functions[0], model.functions[0])
    assert not PrefixPass(taken_functions=taken.functions)(model).modified
    assert not same_function(taken.functions[0], function_model("Neg").functions[0])


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.sampled_from(["", "a", "b", "a_1", "a_2", "c"]), max_size=8),
    taken=st.sets(st.sampled_from(["a", "b", "a_1", "a_2", "a_3"])),
)
def test_node_names_are_renamed_apart_from_taken_ones_and_from_each_other(names: list[str], taken: set[str]) -> None:
    # ONNX lets node names repeat (and be empty); a name repeated in the model, or taken,
    # is renamed; the first free occurrence keeps its own; empty names stay empty.
    nodes = [ir.Node("Relu", name=name) for name in names]
    PrefixPass(taken_nodes=taken)(ir.Model(ir.Graph(nodes=nodes)))
    renamed = [node.name for node in nodes]
    given = [name for name in renamed if name]
    assert len(set(given)) == len(given) and not set(given) & taken
    for index, (old, new) in enumerate(zip(names, renamed)):
        if not old:
            assert new == ""
        elif old not in taken and old not in names[:index]:
            assert new == old
        else:
            assert new.startswith(old + "_") and new[len(old) + 1:].isdigit() and new not in names


def _first_free_names(names: list[str], taken: set[str]) -> list[str]:
    """The naming rule spelled out one name at a time: a name is kept where it is the first
    free occurrence; every other (non-empty) one takes the smallest free ``name_N``."""
    kept: set[str] = set()
    clashing: list[int] = []
    for index, name in enumerate(names):
        if name and (name in taken or name in kept):
            clashing.append(index)
        elif name:
            kept.add(name)
    blocked = set(taken) | kept
    result = list(names)
    for index in clashing:
        suffix = 1
        while f"{names[index]}_{suffix}" in blocked:
            suffix += 1
        result[index] = f"{names[index]}_{suffix}"
        blocked.add(result[index])
    return result


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.sampled_from(["", "a", "b", "a_1", "b_1", "a_1_1", "c"]), max_size=7),
    taken=st.sets(st.sampled_from(["a", "b", "c", "a_1", "a_2", "b_1", "a_1_1"])),
    every_name_taken=st.booleans(),
)
def test_a_clashing_name_takes_the_smallest_free_suffix(names: list[str], taken: set[str], every_name_taken: bool) -> None:
    # (every_name_taken: the whole model clashes, as when a model is merged with a copy of itself)
    taken = taken | set(names) - {""} if every_name_taken else taken
    nodes = [ir.Node("Relu", name=name) for name in names]
    PrefixPass(taken_nodes=taken)(ir.Model(ir.Graph(nodes=nodes)))
    assert [node.name for node in nodes] == _first_free_names(names, taken)
