"""dsl.passes.cut and converter.cut: the sub-model that computes some values.

The oracle runs the original model in onnxruntime with the cut's values exposed as extra
outputs; the cut model (checked with ``onnx.checker`` full_check) must give the same
arrays from the same inputs (or, for a middle slice, from the oracle's intermediate).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.from_onnx import model_and_values_from_proto, model_from_proto
from converter.to_onnx import model_to_proto
from dsl import ir
from dsl.errors import ConversionError, DslError, DslNameError
from dsl.passes.cut import CutPass, cut_model, layers

F = TensorProto.FLOAT
RESNET = Path(os.path.dirname(onnx.__file__)) / "backend/test/data/light/light_resnet50.onnx"


def make(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Sequence[Any] = (), opset: int = 18,
         functions: Sequence[Any] = (), ir_version: int = 8) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=imports, functions=list(functions))
    model.ir_version = ir_version
    return model


def vi(name: str, shape: list[Any] | None, elem: int = F) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def const(name: str, values: list[float]) -> Any:
    return helper.make_tensor(name, F, [len(values)], values)


def session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # IR-3 models warn about every initializer listed as an input
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def feeds_of(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def oracle(model: onnx.ModelProto, feeds: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """The values ``names`` as the original model computes them (exposed as extra outputs)."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(vi(name, None) for name in names if name not in present)
    results = session(exposed).run(names, feeds)
    return dict(zip(names, results))


def check_cut(original: onnx.ModelProto, part: onnx.ModelProto, feeds: dict[str, np.ndarray],
              outputs: list[str], inputs: list[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``part`` on ``feeds`` (or on the oracle's values of ``inputs``) and compare with the oracle."""
    onnx.checker.check_model(part, full_check=True)
    assert [o.name for o in part.graph.output] == outputs
    expected = oracle(original, feeds, [*outputs, *(inputs or [])])
    part_feeds = {name: expected[name] for name in inputs} if inputs is not None else feeds
    assert sorted(feeds_of(part)) == sorted(part_feeds)
    got = session(part).run(outputs, part_feeds)
    for name, array in zip(outputs, got):
        np.testing.assert_allclose(array, expected[name], rtol=1e-5, atol=1e-5)
    return expected


def chain() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Mul", ["a", "w"], ["b"]),
        helper.make_node("Add", ["b", "c"], ["y"]),
        helper.make_node("Neg", ["y"], ["out"]),
    ]
    inits = [const("w", [2, 3, 4]), const("c", [1, 1, 1]), const("unused", [9])]
    return make(nodes, [vi("x", [3])], [vi("out", [3])], inits)


X3 = {"x": np.array([-1.0, 0.5, 2.0], np.float32)}


def test_chain_cut_in_the_middle() -> None:
    original = chain()
    part = converter.cut(original, outputs=["b"])
    check_cut(original, part, X3, ["b"])
    assert [n.op_type for n in part.graph.node] == ["Relu", "Mul"]
    assert [t.name for t in part.graph.initializer] == ["w"]


def test_outputs_and_inputs_give_a_middle_slice() -> None:
    original = chain()
    part = converter.cut(original, outputs=["y"], inputs=["a"])
    check_cut(original, part, X3, ["y"], inputs=["a"])
    assert [n.op_type for n in part.graph.node] == ["Mul", "Add"]
    assert part.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3  # typed by shape inference


def test_inputs_alone_keep_the_outputs() -> None:
    original = chain()
    part = converter.cut(original, inputs=["b"])
    check_cut(original, part, X3, ["out"], inputs=["b"])
    assert [n.op_type for n in part.graph.node] == ["Add", "Neg"]


def if_model() -> onnx.ModelProto:
    then_branch = helper.make_graph([helper.make_node("Add", ["r", "k"], ["t"])], "then", [], [vi("t", [2])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["r"], ["e"])], "else", [], [vi("e", [2])])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Sigmoid", ["y"], ["z"]),
    ]
    return make(nodes, [vi("x", [2]), vi("cond", [], TensorProto.BOOL)], [vi("z", [2])], [const("k", [10, 20])])


@pytest.mark.parametrize("flag", [True, False])
def test_if_branches_keep_the_outer_values_they_read(flag: bool) -> None:
    original = if_model()
    feeds = {"x": np.array([-3.0, 4.0], np.float32), "cond": np.array(flag)}
    part = converter.cut(original, outputs=["y"])
    check_cut(original, part, feeds, ["y"])
    assert [n.op_type for n in part.graph.node] == ["Relu", "If"]  # Relu is read only inside the branches
    sliced = converter.cut(original, outputs=["y"], inputs=["r", "cond"])  # a branch now reads a graph input
    check_cut(original, sliced, feeds, ["y"], inputs=["r", "cond"])
    assert [n.op_type for n in sliced.graph.node] == ["If"]


def functions_model() -> onnx.ModelProto:
    square = helper.make_function("local", "Square", ["v"], ["s"], [helper.make_node("Mul", ["v", "v"], ["s"])],
                                  [helper.make_opsetid("", 18)])
    double = helper.make_function("local", "Double", ["v"], ["d"], [helper.make_node("Add", ["v", "v"], ["d"])],
                                  [helper.make_opsetid("", 18)])
    nodes = [
        helper.make_node("Square", ["x"], ["sq"], domain="local"),
        helper.make_node("Relu", ["sq"], ["h"]),
        helper.make_node("Double", ["h"], ["y"], domain="local"),
    ]
    return make(nodes, [vi("x", [2])], [vi("y", [2])], functions=[square, double])


def test_unused_local_functions_are_dropped() -> None:
    original = functions_model()
    feeds = {"x": np.array([-3.0, 4.0], np.float32)}
    part = converter.cut(original, outputs=["h"])
    check_cut(original, part, feeds, ["h"])
    assert [f.name for f in part.functions] == ["Square"]
    tail = converter.cut(original, inputs=["h"])
    check_cut(original, tail, feeds, ["y"], inputs=["h"])
    assert [f.name for f in tail.functions] == ["Double"]


def ir3_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Mul", ["a", "v"], ["y"])]
    inits = [const("w", [1, 2]), const("v", [3, 4])]
    return make(nodes, [vi("x", [2]), vi("w", [2]), vi("v", [2])], [vi("y", [2])], inits, opset=8, ir_version=3)


def test_ir3_initializers_listed_as_inputs() -> None:
    original = ir3_model()
    part = converter.cut(original, outputs=["a"])
    check_cut(original, part, {"x": np.array([5.0, 6.0], np.float32)}, ["a"])
    assert [i.name for i in part.graph.input] == ["x", "w"]  # still listed, as IR 3 wants
    assert [t.name for t in part.graph.initializer] == ["w"]


def test_resnet50_cut_before_the_classifier() -> None:
    original = onnx.load(RESNET)
    gemm = [n for n in original.graph.node if n.op_type == "Gemm"][-1]
    before = gemm.input[0]
    counted = layers(model_from_proto(original).graph)
    k = len(counted) - next(i for i, n in enumerate(counted) if n.outputs[0].name == before)
    feeds = {"gpu_0/data_0": np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)}
    by_layers = converter.cut(str(RESNET), last_layers=-k)
    check_cut(original, by_layers, feeds, [before])
    assert "Gemm" not in {n.op_type for n in by_layers.graph.node}
    assert "gpu_0/pred_w_0" not in {t.name for t in by_layers.graph.initializer}
    by_name = converter.cut(str(RESNET), outputs=[before])
    assert by_name.graph.node == by_layers.graph.node
    whole = converter.cut(str(RESNET), last_layers=-1)
    check_cut(original, whole, feeds, ["gpu_0/softmax_1"])


def test_external_data_is_carried(tmp_path: Path) -> None:
    original = chain()
    onnx.save_model(original, tmp_path / "chain.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="chain.data", size_threshold=0)
    part = converter.cut(tmp_path / "chain.onnx", outputs=["y"])
    check_cut(original, part, X3, ["y"])


def test_the_pass_leaves_its_input_alone_and_cuts_functions() -> None:
    model = model_from_proto(chain())
    result = CutPass(outputs=["b"])(model)
    assert result.modified and len(model.graph.nodes) == 4 and len(result.target.graph.nodes) == 2
    function = ir.Function("f", model.graph)
    cut = CutPass(last_layers=-2)(function).target
    assert [v.name for v in cut.outputs] == ["y"] and isinstance(cut, ir.Function)
    assert [n.op_type for n in cut.nodes] == ["Relu", "Mul", "Add"]


def typed_chain() -> onnx.ModelProto:
    """The chain with a value_info entry for every inner value, and one for a name nothing defines."""
    model = chain()
    model.graph.value_info.extend([vi("a", [3]), vi("b", [3]), vi("y", [3]), vi("ghost", [7])])
    return model


@pytest.mark.parametrize(
    ("build", "cut"),
    [
        (chain, {"outputs": ["b"]}),
        (typed_chain, {"outputs": ["y"]}),
        (typed_chain, {"outputs": ["y"], "inputs": ["a"]}),  # a given input a node computes: copied
        (typed_chain, {"last_layers": -3}),
        (if_model, {"outputs": ["y"]}),
        (functions_model, {"outputs": ["h"]}),
        (ir3_model, {"outputs": ["a"]}),
    ],
    ids=["chain", "typed", "typed-slice", "last-layers", "if", "functions", "ir3"],
)
def test_a_shared_cut_writes_what_a_copied_cut_writes(build: Any, cut: dict[str, Any]) -> None:
    # share=True (what converter.cut runs) must write the very proto the copying pass
    # writes, and leave the input's graph holding what it held.
    proto = build()
    if "inputs" in cut:
        proto = onnx.shape_inference.infer_shapes(proto)
    copied = model_to_proto(cut_model(model_from_proto(proto), **cut))
    model = model_from_proto(proto)
    graph = model.graph
    before = [list(graph.inputs), list(graph.nodes), list(graph.initializers), list(graph.outputs),
              list(graph.value_info)]
    shared = cut_model(model, **cut, share=True)
    assert model_to_proto(shared) == copied
    assert [graph.inputs, graph.nodes, graph.initializers, graph.outputs, graph.value_info] == before
    if "inputs" not in cut:  # (not copied: the result holds the input's own nodes)
        assert all(any(node is kept for kept in graph.nodes) for node in shared.graph.nodes)
    if build is typed_chain and cut == {"outputs": ["y"]}:  # kept values keep their entries, "ghost" is dropped
        assert [v.name for v in shared.graph.value_info] == ["a", "b", "y"]


def test_a_cut_reads_the_nodes_up_to_its_outputs_only() -> None:
    typed = typed_chain()
    head = model_from_proto(typed, until=["b"])
    assert [n.op_type for n in head.graph.nodes] == ["Relu", "Mul"]
    assert head.graph.outputs == [] and [v.name for v in head.graph.value_info] == ["a", "b"]
    assert model_from_proto(typed, until=["x", "w"]).graph.nodes == []  # (an input and an initializer)
    assert len(model_from_proto(typed, until=["b", "nothing"]).graph.nodes) == 4  # an unknown name: read whole
    for build, outputs in [(typed_chain, ["b"]), (typed_chain, ["y", "a"]), (if_model, ["y"]),
                           (functions_model, ["h"]), (ir3_model, ["a"])]:
        whole = model_to_proto(cut_model(model_from_proto(build()), outputs))
        assert converter.cut(build(), outputs=outputs) == whole


def test_the_reader_hands_over_the_values_it_read() -> None:
    # The main graph's inputs, initializers and node outputs by name, as far as it read.
    model, values = model_and_values_from_proto(chain())
    assert values is not None
    graph = model.graph
    assert values["x"] is graph.inputs[0] and [values[n] for n in ("w", "c", "unused")] == graph.initializers
    assert [values[n] for n in ("a", "b", "y", "out")] == [node.outputs[0] for node in graph.nodes]
    head, head_values = model_and_values_from_proto(typed_chain(), until=["b"])
    assert [n.op_type for n in head.graph.nodes] == ["Relu", "Mul"]
    assert head_values is not None and head_values["b"] is head.graph.nodes[-1].outputs[0] and "y" not in head_values


def test_a_cut_given_the_names_follows_what_branches_read() -> None:
    # (the reader hands no table over where a node holds a subgraph; a caller may build one)
    proto = if_model()
    model = model_from_proto(proto)
    graph = model.graph
    names = {v.name: v for v in (*graph.inputs, *graph.initializers, *(o for n in graph.nodes for o in n.outputs))}
    expected = model_to_proto(cut_model(model_from_proto(proto), ["y"]))
    assert [n.op_type for n in expected.graph.node] == ["Relu", "If"]  # (Relu read only inside the branches)
    assert model_to_proto(cut_model(model, ["y"], share=True, names=names)) == expected


def sparse_and_twice_model() -> onnx.ModelProto:
    """A sparse initializer ``s`` read by a node, and two initializers named ``w`` (the
    reader binds the last, which the node reads; a cut at ``w`` finds the first)."""
    model = make([helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Mul", ["a", "s"], ["y"])],
                 [vi("x", [3])], [vi("y", [3])], [const("w", [1, 2, 3]), const("w", [4, 5, 6])])
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(
        const("s", [7.0]), helper.make_tensor("s_at", TensorProto.INT64, [1], [1]), [3]))
    return model


@pytest.mark.parametrize("outputs", [["a"], ["y"], ["w"], ["x"], ["y", "w"]])
def test_a_cut_with_the_readers_names_cuts_what_one_without_them_cuts(outputs: list[str]) -> None:
    # The pass takes the reader's table (converter.cut) or builds its own: the same
    # values by name, so the same model.
    proto = sparse_and_twice_model()
    model, names = model_and_values_from_proto(proto)
    expected = model_to_proto(cut_model(model_from_proto(proto), outputs))
    assert model_to_proto(cut_model(model, outputs, share=True, names=names)) == expected
    if outputs == ["w"]:  # the first of the two, as the graph lists them
        assert numpy_helper.to_array(expected.graph.initializer[0]).tolist() == [1, 2, 3]


def test_no_cut_finds_a_sparse_initializer_by_name() -> None:
    # (its Value is in no list of the graph; the reader's table binds it, the cut drops it)
    proto = sparse_and_twice_model()
    with pytest.raises(DslNameError, match="no value named 's'") as without_names:
        cut_model(model_from_proto(proto), ["s"])
    model, names = model_and_values_from_proto(proto)
    with pytest.raises(DslNameError, match="no value named 's'") as with_names:
        cut_model(model, ["s"], share=True, names=names)
    assert str(with_names.value) == str(without_names.value)


def unsorted_model() -> onnx.ModelProto:
    """``b = Mul(a, w)`` listed before ``a = Relu(x)``; an If branch reading ``late``, defined after it."""
    then_branch = helper.make_graph([helper.make_node("Neg", ["late"], ["t"])], "then", [], [vi("t", [3])])
    else_branch = helper.make_graph([helper.make_node("Abs", ["late"], ["e"])], "else", [], [vi("e", [3])])
    nodes = [
        helper.make_node("Mul", ["a", "w"], ["b"]),
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("If", ["cond"], ["z"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Sigmoid", ["x"], ["late"]),
    ]
    return make(nodes, [vi("x", [3]), vi("cond", [], TensorProto.BOOL)], [vi("b", [3]), vi("z", [3])],
                [const("w", [2, 3, 4])])


@pytest.mark.parametrize("output", ["b", "z"])
def test_an_unsorted_graph_is_read_whole_for_a_cut(output: str) -> None:
    # Reading stops at the node defining the output; a node read before it takes a value
    # defined further down: the cut reads the whole graph again and cuts what it needs.
    original = unsorted_model()
    whole = model_to_proto(cut_model(model_from_proto(original), [output], share=True))
    part = converter.cut(original, outputs=[output])
    assert part == whole
    assert model_to_proto(cut_model(model_from_proto(original), [output])) == whole  # the copying pass too
    expected = {"b": [("Mul", ["a", "w"]), ("Relu", ["x"])], "z": [("If", ["cond"]), ("Sigmoid", ["x"])]}[output]
    assert [(n.op_type, list(n.input)) for n in part.graph.node] == expected
    assert [o.name for o in part.graph.output] == [output]


def test_an_unsorted_graph_without_branches_is_cut_whole() -> None:
    # (the reader hands its table over here: the backward pass over the nodes misses Relu,
    # listed after the Mul reading it, and the walk over node inputs finds it)
    nodes = [helper.make_node("Mul", ["a", "w"], ["b"]), helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Neg", ["b"], ["y"])]
    original = make(nodes, [vi("x", [3])], [vi("y", [3])], [const("w", [2, 3, 4])])
    original.graph.value_info.extend([vi("a", [3]), vi("b", [3])])  # (inference refuses the unsorted graph)
    part = converter.cut(original, outputs=["b"])
    assert part == model_to_proto(cut_model(model_from_proto(original), ["b"]))
    assert [(n.op_type, list(n.input)) for n in part.graph.node] == [("Mul", ["a", "w"]), ("Relu", ["x"])]


# ---------------------------------------------------------------------------- mistakes


def test_unknown_names_are_named_with_close_matches() -> None:
    with pytest.raises(DslNameError, match=r"'bb' \(did you mean 'b'") as caught:
        cut_model(model_from_proto(chain()), outputs=["bb"])
    assert isinstance(caught.value, DslError)
    with pytest.raises(DslNameError, match="'nothing_like_it'"):
        converter.cut(chain(), outputs=["y"], inputs=["nothing_like_it"])


def test_a_needed_input_not_given_is_named() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x2"], ["y"])]
    original = make(nodes, [vi("x", [2]), vi("x2", [2])], [vi("y", [2])])
    with pytest.raises(ConversionError, match=r"'y' need the input\(s\) 'x2', which are not given"):
        converter.cut(original, outputs=["y"], inputs=["r"])


def test_a_given_input_nothing_needs_is_named() -> None:
    with pytest.raises(ConversionError, match=r"'c' are not needed to compute 'b'"):
        converter.cut(chain(), outputs=["b"], inputs=["x", "c"])


@pytest.mark.parametrize("last_layers", [0, 1, -5, -100])
def test_last_layers_out_of_range(last_layers: int) -> None:
    with pytest.raises(ConversionError, match=rf"last_layers={last_layers} is out of range: the graph has 4 layers"):
        converter.cut(chain(), last_layers=last_layers)


def test_outputs_and_last_layers_together_are_refused() -> None:
    with pytest.raises(ConversionError, match="not both"):
        converter.cut(chain(), outputs=["y"], last_layers=-2)


def test_cut_takes_protos_or_paths() -> None:
    with pytest.raises(DslError, match="not int"):
        converter.cut(3, outputs=["y"])


def test_cut_work_is_linear_in_the_size_of_the_model() -> None:
    """Reading up to the cut, keeping what computes it and writing (types known, and
    inferred): the work per node stays flat from 300 to 3 000 nodes (counted, not timed)."""
    from tests.test_passes_merge import chain_of
    from tests.work_count import assert_linear

    def cutting(typed: bool) -> Any:
        def at(length: int) -> Any:
            model = chain_of(length, typed=typed)
            return lambda: converter.cut(model, outputs=[f"v{length // 2}"])

        return at

    for typed in (True, False):
        part = cutting(typed)(30)()
        assert len(part.graph.node) == 16 and part.graph.output[0].type.tensor_type.elem_type == F
        assert_linear(cutting(typed), 300, 3_000)
