"""``converter.to_python`` on models as exporters write them: short source without a
weights path, metadata kept, ai.onnx.ml map types spelled."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

import converter
from converter.compare import first_difference
from converter.script_module import load_script_function, model_options
from dsl.onnxruntime_limits import max_ir_version
from tests.roundtrip import round_trip, run


def _dense_model() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((8, 12)).astype(np.float32)
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "w"], ["h"]), oh.make_node("Relu", ["h"], ["y"])], "dense",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=8, producer_name="exporter")


def _compile(path) -> onnx.ModelProto:
    function = load_script_function(path)
    return function.to_model_proto(**model_options(function))


def test_without_weights_path_large_tensors_are_referenced_and_save_writes_them(tmp_path) -> None:
    model = _dense_model()
    source = converter.to_python(model)
    assert "weights['w']" in source and "np.array" not in source  # (nothing large inline)
    assert source.weights_path is None and list(source.weights) == ["w"]
    np.testing.assert_array_equal(source.weights["w"], onnx.numpy_helper.to_array(model.graph.initializer[0]))
    assert source.source == str(source)
    saved = source.save(tmp_path / "dense.py")
    assert saved.weights_path == str(tmp_path / "dense.npz")
    assert "load_weights(__file__, 'dense.npz')\n" in (tmp_path / "dense.py").read_text()
    saved.save(tmp_path / "again.py")  # (a saved source saves again under another name)
    assert (tmp_path / "again.py").read_text() == (tmp_path / "dense.py").read_text().replace("dense.npz", "again.npz")
    rebuilt = _compile(tmp_path / "dense.py")
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_array_equal(run(rebuilt, [x])[0], run(model, [x])[0])


def test_save_names_a_weights_file_in_another_folder_relative_to_the_source(tmp_path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "data").mkdir()
    saved = converter.to_python(_dense_model()).save(tmp_path / "code" / "dense.py", tmp_path / "data" / "w.npz")
    assert "load_weights(__file__, '../data/w.npz')\n" in (tmp_path / "code" / "dense.py").read_text()
    assert saved.weights_path == str(tmp_path / "data" / "w.npz")
    converter.assert_isomorphic(_dense_model(), _compile(tmp_path / "code" / "dense.py"))


def test_inline_limit_infinity_writes_every_tensor_inline() -> None:
    source = converter.to_python(_dense_model(), inline_limit=math.inf)
    assert "load_weights" not in source and not source.weights
    assert source.count("np.array([") == 1


# ------------------------------------------------------------------------ metadata


def _annotated_model() -> onnx.ModelProto:
    """What the dynamo exporter writes, by hand: node metadata, value_info, IR 10."""
    relu = oh.make_node("Relu", ["x"], ["h"], name="relu")
    relu.metadata_props.add(key="pkg.torch.onnx.stack_trace", value='File "net.py", line 3, in forward')
    add = oh.make_node("Add", ["h", "x"], ["y"], name="add")
    add.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'fc']")
    graph = oh.make_graph(
        [relu, add], "net", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        value_info=[oh.make_tensor_value_info("h", TensorProto.FLOAT, [2, 3])],
    )
    graph.metadata_props.add(key="graph_note", value="kept")
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=min(10, max_ir_version()),
                          producer_name="pytorch")
    model.metadata_props.add(key="license", value="MIT")
    return model


def test_node_metadata_value_info_and_ir_version_survive_the_round_trip(tmp_path) -> None:
    model = _annotated_model()
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "'node_metadata': {" in source and "'value_info': {" in source
    assert source.index("def net(") < source.index("'node_metadata'")  # (the code reads first)
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    assert rebuilt.ir_version == model.ir_version
    assert [(p.key, p.value) for p in rebuilt.graph.metadata_props] == [("graph_note", "kept")]
    assert [[p.value for p in n.metadata_props] for n in rebuilt.graph.node] == [
        [p.value for p in n.metadata_props] for n in model.graph.node]
    assert [v.name for v in rebuilt.graph.value_info] == ["h"]


def _lose_node_metadata(model: onnx.ModelProto) -> None:
    del model.graph.node[0].metadata_props[:]


def _change_value_info_shape(model: onnx.ModelProto) -> None:
    model.graph.value_info[0].type.tensor_type.shape.dim[0].dim_value = 5


def _lose_value_info(model: onnx.ModelProto) -> None:
    del model.graph.value_info[:]


def _change_graph_metadata(model: onnx.ModelProto) -> None:
    model.graph.metadata_props[0].value = "changed"


def _lower_ir_version(model: onnx.ModelProto) -> None:
    model.ir_version -= 1


@pytest.mark.parametrize("mutate", [_lose_node_metadata, _change_value_info_shape, _lose_value_info,
                                    _change_graph_metadata, _lower_ir_version])
def test_check_metadata_finds_each_kind_of_metadata_lost(mutate) -> None:
    model = _annotated_model()
    other = onnx.ModelProto()
    other.CopyFrom(model)
    mutate(other)
    assert first_difference(model, other) is None  # (structure is unchanged)
    assert first_difference(model, other, check_metadata=True) is not None


def test_check_metadata_pairs_renamed_values() -> None:
    model = _annotated_model()
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    renamed.graph.node[0].output[0] = "hidden"
    renamed.graph.node[1].input[0] = "hidden"
    renamed.graph.value_info[0].name = "hidden"
    assert first_difference(model, renamed, check_metadata=True) is None


# ------------------------------------------------------------------- ai.onnx.ml maps


def _zipmap_classifier() -> onnx.ModelProto:
    """The tail of an skl2onnx classifier: probabilities -> ZipMap -> seq(map(int64, tensor(float)))."""
    probabilities = oh.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3])
    zip_map = oh.make_node("ZipMap", ["probabilities"], ["output_probability"], domain="ai.onnx.ml",
                           classlabels_int64s=[10, 20, 30])
    label = oh.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0)
    out_type = oh.make_sequence_type_proto(oh.make_map_type_proto(TensorProto.INT64,
                                                                  oh.make_tensor_type_proto(TensorProto.FLOAT, None)))
    graph = oh.make_graph([label, zip_map], "classifier", [probabilities],
                          [oh.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
                           oh.make_value_info("output_probability", out_type)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("ai.onnx.ml", 1)],
                         ir_version=8, producer_name="skl2onnx")


def test_zipmap_output_type_round_trips_unchanged(tmp_path) -> None:
    model = _zipmap_classifier()
    onnx.checker.check_model(model, full_check=True)
    source, rebuilt = round_trip(model, str(tmp_path))
    assert "Sequence[Map[INT64, FLOAT[...]]]" in source
    assert rebuilt.graph.output[1].type == model.graph.output[1].type
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    compiled = _compile(tmp_path / "model.py")  # (and with output shape inference, as onnxquill compile)
    converter.assert_isomorphic(model, compiled)
    probabilities = np.array([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]], np.float32)
    expected_label, expected_maps = run(model, [probabilities])
    label, maps = run(rebuilt, [probabilities])
    np.testing.assert_array_equal(label, expected_label)
    assert maps == expected_maps and sorted(maps[0]) == [10, 20, 30]


def test_map_annotation_refuses_what_is_not_a_key_and_a_value() -> None:
    from dsl import FLOAT, INT64, Map, ir
    from dsl.errors import AnnotationError

    assert Map[INT64, FLOAT[...]] == ir.MapType(INT64.enum, ir.TensorType(FLOAT.enum, None))
    with pytest.raises(AnnotationError, match="key element type and a value type"):
        Map[INT64]
    with pytest.raises(AnnotationError, match="not a type"):
        Map[INT64, 3]


def test_skl2onnx_pipeline_round_trips(tmp_path) -> None:
    skl2onnx = pytest.importorskip("skl2onnx", reason="skl2onnx is not installed")
    sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    features = rng.standard_normal((40, 4)).astype(np.float32)
    labels = (features[:, 0] + features[:, 1] > 0).astype(np.int64)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression()).fit(features, labels)
    model = skl2onnx.to_onnx(pipeline, features[:1])
    assert sklearn is not None
    _, rebuilt = round_trip(model, str(tmp_path))
    converter.assert_isomorphic(model, rebuilt, check_metadata=True)
    for got, expected in zip(run(rebuilt, [features]), run(model, [features])):
        assert got == expected if isinstance(expected, list) else np.array_equal(got, expected)


def test_cut_and_merge_keep_node_metadata() -> None:
    model = _annotated_model()
    stack_trace = 'File "net.py", line 3, in forward'
    part = converter.cut(model, outputs=["h"])
    assert [p.value for n in part.graph.node for p in n.metadata_props] == [stack_trace]
    both = converter.merge(model, _annotated_model(), io_map=[("y", "x")])
    kept = [p.value for n in both.graph.node for p in n.metadata_props]
    assert kept.count(stack_trace) == 2 and len(kept) == 4


def _tag(node: onnx.NodeProto, where: str) -> onnx.NodeProto:
    node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=f"File model.py, in {where}")
    return node


def _control_flow_and_function_model() -> onnx.ModelProto:
    """Metadata on nodes of an If's branches, a Loop body and a local function's body, and
    value_info inside a branch."""
    then = oh.make_graph([_tag(oh.make_node("Relu", ["x"], ["t0"]), "then relu"),
                          _tag(oh.make_node("Sqrt", ["t0"], ["t"]), "then sqrt")],
                         "then", [], [oh.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
                         value_info=[oh.make_tensor_value_info("t0", TensorProto.FLOAT, [2])])
    other = oh.make_graph([_tag(oh.make_node("Neg", ["x"], ["e"]), "else neg")],
                          "else", [], [oh.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    body = oh.make_graph(
        [_tag(oh.make_node("Add", ["acc", "x"], ["acc_out"]), "loop add"), oh.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [oh.make_tensor_value_info("i", TensorProto.INT64, []), oh.make_tensor_value_info("cond", TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc", TensorProto.FLOAT, [2])],
        [oh.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         oh.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])],
    )
    function = oh.make_function(
        "local", "scaled", ["a"], ["b"],
        [_tag(oh.make_node("Mul", ["a", "a"], ["m"]), "function mul"), _tag(oh.make_node("Tanh", ["m"], ["b"]), "function tanh")],
        [oh.make_opsetid("", 18)],
    )
    graph = oh.make_graph(
        [_tag(oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0), "sum"), oh.make_node("Greater", ["s", "z"], ["c"]),
         _tag(oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other), "if"),
         _tag(oh.make_node("Loop", ["n", "", "y"], ["looped"], body=body), "loop"),
         _tag(oh.make_node("scaled", ["looped"], ["out"], domain="local"), "call")],
        "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [oh.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.array(0, np.float32), "z"), onnx.numpy_helper.from_array(np.array(3), "n")],
    )
    model = oh.make_model(graph, functions=[function], producer_name="exporter",
                          opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("local", 1)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def test_metadata_of_subgraph_and_function_nodes_survives_the_round_trip(tmp_path) -> None:
    original = _control_flow_and_function_model()
    source, rebuilt = round_trip(original, str(tmp_path))
    assert first_difference(original, rebuilt, check_metadata=True) is None, source
    traces = sorted(p.value for graph_nodes in _every_node_list(rebuilt) for p in graph_nodes.metadata_props)
    assert traces == sorted(p.value for node in _every_node_list(original) for p in node.metadata_props)
    x = np.array([0.5, -2.0], np.float32)
    np.testing.assert_allclose(run(rebuilt, [x])[0], run(original, [x])[0], rtol=1e-6)
    # Losing one of them is seen: the comparison reaches into bodies and functions.
    branch = onnx.ModelProto()
    branch.CopyFrom(rebuilt)
    del branch.graph.node[2].attribute[0].g.node[1].metadata_props[:]
    assert "metadata_props of the Sqrt node" in str(first_difference(original, branch, check_metadata=True))
    del rebuilt.functions[0].node[1].metadata_props[:]
    assert "metadata_props of the Tanh node" in str(first_difference(original, rebuilt, check_metadata=True))
    del branch.graph.node[2].attribute[0].g.value_info[:]
    assert "value_info" in str(first_difference(original, branch, check_metadata=True))


def _every_node_list(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    found: list[onnx.NodeProto] = []
    pending = [list(model.graph.node), *(list(f.node) for f in model.functions)]
    while pending:
        for node in pending.pop():
            found.append(node)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    pending.append(list(attribute.g.node))
    return found
