"""converter.from_onnx: ONNX protos -> IR, checked against the protos themselves.

The widest check goes through the TO_ONNX back end: every backend node case and data
model converted to IR and written back must be isomorphic to the original.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import converter
from converter.compare import first_difference
from converter.from_onnx import function_from_proto, graph_from_proto, load_model, model_from_proto
from dsl import ir
from dsl.errors import ModelLoadError
from tests.proto_edits import node_case_models
from tests.work_count import assert_linear

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _to_onnx(model: ir.Model) -> onnx.ModelProto:
    from converter.to_onnx import model_to_proto

    return model_to_proto(model, infer_output_types=False)


def test_every_node_case_converts_back_isomorphic() -> None:
    failures = []
    for name, case in node_case_models().items():
        difference = first_difference(case.model, _to_onnx(model_from_proto(case.model)))
        if difference is not None:
            failures.append(f"{name}: {difference}")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize(
    "path",
    sorted(glob.glob(os.path.join(DATA, "*", "*", "model.onnx")) + glob.glob(os.path.join(DATA, "light", "*.onnx"))),
    ids=lambda p: os.path.relpath(p, DATA),
)
def test_backend_data_models_convert_back_isomorphic(path: str) -> None:
    original = onnx.load(path)
    assert first_difference(original, _to_onnx(load_model(path))) is None


def _tiny_model() -> onnx.ModelProto:
    then_graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["then_out"])], "then", [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["else_out"])], "else", [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2])],
    )
    function = helper.make_function(
        "custom", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])], [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0, doc_string="sum it"),
            helper.make_node("Greater", ["total", "zero"], ["positive"]),
            helper.make_node("If", ["positive"], ["chosen"], then_branch=then_graph, else_branch=else_graph),
            helper.make_node("Twice", ["chosen"], ["y"], domain="custom", name="call"),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([1, 2], np.float32), "w"),
                     numpy_helper.from_array(np.array(0, np.float32), "zero")],
        value_info=[helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
        doc_string="a graph",
    )
    model = helper.make_model(
        graph, functions=[function],
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)],
        doc_string="a model", producer_name="tests",
    )
    helper.set_model_props(model, {"author": "me"})
    return model


def test_structure_scopes_callees_and_initializer_inputs() -> None:
    model = model_from_proto(_tiny_model())
    graph = model.graph
    x, w = graph.inputs
    assert x.type == ir.TensorType(TensorProto.FLOAT, ("N",))
    # "w" is both an input and an initializer (the IR < 4 style): one Value in both lists.
    assert w in graph.initializers and w.initializer is not None
    np.testing.assert_array_equal(w.initializer.array, [1, 2])
    zero = next(v for v in graph.initializers if v.name == "zero")
    assert zero not in graph.inputs
    reduce_sum, greater, if_node, call = graph.nodes
    assert reduce_sum.attributes["keepdims"].value == 0 and reduce_sum.doc_string == "sum it"
    assert greater.inputs == [reduce_sum.outputs[0], zero]
    then_branch = if_node.attributes["then_branch"].value
    # Outer-scope reads are the very Value objects of the enclosing graph.
    assert then_branch.nodes[0].inputs[0] is x and then_branch.nodes[0].inputs[1] is w
    assert call.callee is model.functions[0] and call.name == "call"
    assert model.functions[0].domain == "custom" and model.functions[0].opset_imports == {"": 18}
    assert model.metadata_props == {"author": "me"} and model.doc_string == "a model"
    assert graph.doc_string == "a graph"
    assert graph.value_info[0] is reduce_sum.outputs[0]
    assert reduce_sum.outputs[0].type == ir.TensorType(TensorProto.FLOAT, ())


_ARRAYS = {
    TensorProto.FLOAT: np.array([1.5, -2, np.nan], np.float32),
    TensorProto.UINT8: np.array([0, 255], np.uint8),
    TensorProto.INT8: np.array([-128, 127], np.int8),
    TensorProto.UINT16: np.array([65535], np.uint16),
    TensorProto.INT16: np.array([-3], np.int16),
    TensorProto.INT32: np.array([2**31 - 1], np.int32),
    TensorProto.INT64: np.array([[-(2**62)]], np.int64),
    TensorProto.STRING: np.array([b"abc", "é".encode(), b"\xff"], dtype=object),
    TensorProto.BOOL: np.array([True, False]),
    TensorProto.FLOAT16: np.array([0.1], np.float16),
    TensorProto.DOUBLE: np.array([1e300], np.float64),
    TensorProto.UINT32: np.array([4_000_000_000], np.uint32),
    TensorProto.UINT64: np.array([2**64 - 1], np.uint64),
    TensorProto.COMPLEX64: np.array([1 + 2j], np.complex64),
    TensorProto.COMPLEX128: np.array([3 - 4j], np.complex128),
    TensorProto.BFLOAT16: np.array([1.5, -0.25], ml_dtypes.bfloat16),
    TensorProto.FLOAT8E4M3FN: np.array([0.5, 448], ml_dtypes.float8_e4m3fn),
    TensorProto.FLOAT8E4M3FNUZ: np.array([0.5], ml_dtypes.float8_e4m3fnuz),
    TensorProto.FLOAT8E5M2: np.array([-2.0], ml_dtypes.float8_e5m2),
    TensorProto.FLOAT8E5M2FNUZ: np.array([4.0], ml_dtypes.float8_e5m2fnuz),
    TensorProto.UINT4: np.array([0, 15, 7], ml_dtypes.uint4),
    TensorProto.INT4: np.array([-8, 7, 1], ml_dtypes.int4),
    TensorProto.FLOAT4E2M1: np.array([0.5, -6.0], ml_dtypes.float4_e2m1fn),
}


@pytest.mark.parametrize("elem_type", sorted(_ARRAYS), ids=lambda e: TensorProto.DataType.Name(e))
def test_tensors_of_every_element_type(elem_type: int) -> None:
    array = _ARRAYS[elem_type]
    tensor = numpy_helper.from_array(array, "t")
    assert tensor.data_type == elem_type
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=tensor)], "g", [],
        [helper.make_value_info("c", helper.make_tensor_type_proto(elem_type, list(array.shape)))],
    )
    converted = graph_from_proto(graph).nodes[0].attributes["value"].value
    assert converted.elem_type == elem_type and converted.name == "t"
    if array.dtype == object:
        assert converted.array.tolist() == ["abc", "é", b"\xff"]  # text where UTF-8, else bytes
    else:
        assert converted.array.dtype == array.dtype
        assert converted.array.tobytes() == array.tobytes()


def test_every_attribute_kind() -> None:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0], np.float32), "v"), numpy_helper.from_array(np.array([1], np.int64), "i"),
        [3],
    )
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "body",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    node = helper.make_node(
        "Everything", ["x"], ["y"], domain="com.example",
        f=0.25, i=-3, s="text", raw=b"\xff\xfe", t=numpy_helper.from_array(np.array([1, 2], np.int32)), g=body,
        floats=[0.5, 1.0], ints=[1, 2, 3], strings=["a", "b"],
        tensors=[numpy_helper.from_array(np.array([True]))], graphs=[body, body],
    )
    node.attribute.append(helper.make_attribute("sp", sparse))
    node.attribute.append(helper.make_attribute("sps", [sparse]))
    node.attribute.append(helper.make_attribute("tp", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.INT64, ["N", None]))))
    node.attribute.append(helper.make_attribute("tps", [helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, None))]))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    attrs = graph_from_proto(graph).nodes[0].attributes
    K = ir.AttrKind
    assert {name: a.kind for name, a in attrs.items()} == {
        "f": K.FLOAT, "i": K.INT, "s": K.STRING, "raw": K.STRING, "t": K.TENSOR, "g": K.GRAPH, "floats": K.FLOATS,
        "ints": K.INTS, "strings": K.STRINGS, "tensors": K.TENSORS, "graphs": K.GRAPHS, "sp": K.SPARSE_TENSOR,
        "sps": K.SPARSE_TENSORS, "tp": K.TYPE_PROTO, "tps": K.TYPE_PROTOS,
    }
    assert attrs["f"].value == 0.25 and attrs["i"].value == -3 and attrs["s"].value == "text"
    assert attrs["raw"].value == b"\xff\xfe"  # not UTF-8: stays bytes
    assert attrs["t"].value.array.dtype == np.int32 and attrs["ints"].value == [1, 2, 3]
    assert attrs["strings"].value == ["a", "b"] and attrs["floats"].value == [0.5, 1.0]
    assert attrs["g"].value.nodes[0].op_type == "Identity" and len(attrs["graphs"].value) == 2
    assert attrs["sp"].value.dims == (3,) and attrs["sp"].value.values.array.tolist() == [5.0]
    assert attrs["tp"].value == ir.SequenceType(ir.TensorType(TensorProto.INT64, ("N", None)))
    assert attrs["tps"].value == [ir.OptionalType(ir.TensorType(TensorProto.FLOAT, None))]


def test_function_attribute_parameters_and_references() -> None:
    function = helper.make_function(
        "lib", "Leaky", ["x"], ["y"],
        [helper.make_node("LeakyRelu", ["x"], ["y"])], [helper.make_opsetid("", 18)],
        attributes=["alpha"],
    )
    function.node[0].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    function.attribute_proto.append(helper.make_attribute("beta", 2))
    converted = function_from_proto(function)
    assert [(p.name, p.kind) for p in converted.attr_params] == [("alpha", ir.AttrKind.FLOAT), ("beta", ir.AttrKind.INT)]
    assert converted.attr_params[1].default is not None and converted.attr_params[1].default.value == 2
    attr = converted.nodes[0].attributes["alpha"]
    assert attr.ref_attr_name == "alpha" and attr.value is None
    assert converted.domain == "lib" and converted.inputs[0].name == "x"


def test_sparse_initializers() -> None:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
        numpy_helper.from_array(np.array([0, 3], np.int64), "s_indices"), [2, 2],
    )
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                              sparse_initializer=[sparse])
    converted = graph_from_proto(graph)
    assert converted.sparse_initializers["s"].dims == (2, 2)
    assert converted.nodes[0].inputs[0].name == "s"


def test_from_proto_dispatches_and_paths_work(tmp_path) -> None:
    model = _tiny_model()
    path = tmp_path / "tiny.onnx"
    onnx.save(model, path)
    assert isinstance(converter.from_proto(model), ir.Model)
    assert isinstance(converter.from_proto(model.graph), ir.Graph)
    assert isinstance(converter.from_proto(model.functions[0]), ir.Function)
    assert isinstance(converter.from_proto(str(path)), ir.Model)
    assert isinstance(converter.load_model(path), ir.Model)
    with pytest.raises(ModelLoadError, match="ModelProto, FunctionProto, GraphProto or a path"):
        converter.from_proto(42)


def test_external_data_is_read(tmp_path) -> None:
    weight = np.arange(4096, dtype=np.float32)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])],
                              initializer=[numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph)
    path = tmp_path / "big.onnx"
    onnx.save(model, path, save_as_external_data=True, location="big.data", size_threshold=0)
    assert (tmp_path / "big.data").exists()
    converted = load_model(path)
    np.testing.assert_array_equal(converted.graph.initializers[0].initializer.array, weight)
    (tmp_path / "big.data").unlink()
    with pytest.raises(ModelLoadError) as error:
        load_model(path)
    assert "big.onnx" in str(error.value) and "hint:" in str(error.value)


def test_corrupt_and_truncated_files_raise_model_load_error(tmp_path) -> None:
    path = os.path.join(DATA, "light", "light_squeezenet.onnx")
    with open(path, "rb") as stream:
        payload = stream.read()
    truncated = tmp_path / "truncated.onnx"
    garbage = tmp_path / "garbage.onnx"
    empty = tmp_path / "empty.onnx"
    truncated.write_bytes(payload[: len(payload) // 2])
    garbage.write_bytes(b"\x08\x07\xff\xff\xff not a model" * 10)
    empty.write_bytes(b"")
    for broken in (truncated, garbage, empty):
        with pytest.raises(ModelLoadError) as error:
            load_model(broken)
        text = str(error.value)
        assert broken.name in text and "hint:" in text, text
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model(tmp_path / "missing.onnx")


def test_undefined_names_are_reported() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    with pytest.raises(ModelLoadError, match=r"node Relu 'r'.*reads 'nowhere', which nothing defines"):
        graph_from_proto(graph)


@pytest.mark.parametrize("outputs", [["y"], ["z", "y"]], ids=["one output", "two outputs"])
@pytest.mark.parametrize("hold", [False, True])
def test_a_value_defined_twice_is_reported(outputs: list[str], hold: bool) -> None:
    """(a node of one output and one of several each take their own way through the reader)"""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"),
             helper.make_node("Split" if len(outputs) > 1 else "Neg", ["x"], outputs, name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelLoadError, match=r"value 'y' is defined twice \(second time by node \w+ 'second'"):
        model_from_proto(model, hold_attributes=hold)


def test_a_cut_reads_up_to_the_node_of_its_outputs() -> None:
    """A cut at a node of one output and at one of several reads the nodes up to it only
    (the last node, which reads a name nothing defines, is never read)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Split", ["a"], ["b", "c"], num_outputs=2),
             helper.make_node("Neg", ["b"], ["d"]), helper.make_node("Add", ["d", "nowhere"], ["e"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelLoadError, match="reads 'nowhere'"):  # (the last node, read whole)
        model_from_proto(model)
    assert [n.op_type for n in model_from_proto(model, until=["a"]).graph.nodes] == ["Relu"]
    assert [n.op_type for n in model_from_proto(model, until=["c"]).graph.nodes] == ["Relu", "Split"]
    assert [n.op_type for n in model_from_proto(model, until=["d", "b"]).graph.nodes] == ["Relu", "Split", "Neg"]


def test_unsorted_graph_and_subgraph_reading_a_later_value() -> None:
    """Inputs and subgraphs may name values that a node further down defines."""
    branch = helper.make_graph([helper.make_node("Neg", ["late"], ["b"])], "branch", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])])
    nodes = [
        helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),  # reads "late" in branches
        helper.make_node("Add", ["late", "x"], ["z"]),  # reads "late" before its node
        helper.make_node("Relu", ["x"], ["late"]),
        helper.make_node("Greater", ["x", "x"], ["c"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])],
    )
    if_node, add, relu, greater = graph_from_proto(graph).nodes
    late = relu.outputs[0]
    assert if_node.inputs == [greater.outputs[0]] and add.inputs[0] is late
    for attr_name in ("then_branch", "else_branch"):
        assert if_node.attributes[attr_name].value.nodes[0].inputs[0] is late


def test_conversion_work_is_linear() -> None:
    def reading(length: int) -> Any:
        nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(length)]
        proto = helper.make_model(helper.make_graph(
            nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info(f"v{length}", TensorProto.FLOAT, [1])],
        ))
        return lambda: model_from_proto(proto)

    assert len(reading(10)().graph.nodes) == 10
    assert_linear(reading, 500, 5_000)


def test_equal_tiny_attribute_tensors_share_one_read_only_array() -> None:
    value = helper.make_tensor("", TensorProto.FLOAT, [1], [0.25])
    other = helper.make_tensor("", TensorProto.INT64, [2], [3, 4])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["a"], value=value),
        helper.make_node("ConstantOfShape", ["shape"], ["b"], value=value),
        helper.make_node("Constant", [], ["c"], value=other),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("shape", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "ab"]
        + [helper.make_tensor_value_info("c", TensorProto.INT64, [2])],
    )
    model = model_from_proto(helper.make_model(graph))
    first, second, third = (node.attributes["value"].value for node in model.graph.nodes)
    assert first is not second and first.array is second.array  # distinct Tensors, one array
    assert not first.array.flags.writeable and not third.array.flags.writeable
    np.testing.assert_array_equal(first.array, numpy_helper.to_array(value))
    np.testing.assert_array_equal(third.array, numpy_helper.to_array(other))
    assert first.array.dtype == np.float32 and third.array.dtype == np.int64


def test_repeated_attributes_are_read_once_but_owned_by_each_node() -> None:
    value = helper.make_tensor("", TensorProto.FLOAT, [1], [0.5])

    def conv(output: str, **extra: object) -> onnx.NodeProto:
        return helper.make_node("Conv", ["x", "w"], [output], pads=[1, 1, 1, 1], strides=[1, 1], group=1, **extra)

    documented = conv("d")
    next(a for a in documented.attribute if a.name == "pads").doc_string = "padded"
    nodes = [
        conv("a"), conv("b"), documented,
        helper.make_node("LeakyRelu", ["a"], ["e"], alpha=0.25),
        helper.make_node("LeakyRelu", ["b"], ["f"], alpha=0.25),
        helper.make_node("ConstantOfShape", ["shape"], ["g"], value=value),
        helper.make_node("ConstantOfShape", ["shape"], ["h"], value=value),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 3, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "defgh"],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model = model_from_proto(proto)
    for node, node_proto in zip(model.graph.nodes, proto.graph.node):
        assert list(node.attributes) == [a.name for a in node_proto.attribute]
        for attribute_proto in node_proto.attribute:
            attr = node.attributes[attribute_proto.name]
            assert attr.kind == attribute_proto.type and attr.doc_string == attribute_proto.doc_string
            expected = helper.get_attribute_value(attribute_proto)
            if isinstance(expected, TensorProto):
                np.testing.assert_array_equal(attr.value.array, numpy_helper.to_array(expected))
            else:
                assert attr.value == pytest.approx(expected)
    first, second, third = (node.attributes["pads"] for node in model.graph.nodes[:3])
    assert first is not second and first.value is not second.value
    first.value[0] = 7  # a user editing one node's attribute edits that node only
    assert second.value == [1, 1, 1, 1] and third.value == [1, 1, 1, 1] and third.doc_string == "padded"
    again = model_from_proto(proto)  # and nothing is remembered from one conversion to the next
    assert again.graph.nodes[0].attributes["pads"].value == [1, 1, 1, 1]
    tensors = [node.attributes["value"].value for node in model.graph.nodes[5:]]
    assert tensors[0] is not tensors[1] and not tensors[0].array.flags.writeable
    assert converter.isomorphic(proto, _to_onnx(again))


def test_repeated_references_to_function_attributes_stay_references() -> None:
    body = [helper.make_node("Transpose", ["x"], ["t"]), helper.make_node("Transpose", ["t"], ["y"])]
    for node_proto in body:
        reference = onnx.AttributeProto(name="perm", ref_attr_name="order", type=onnx.AttributeProto.INTS)
        node_proto.attribute.append(reference)
    function = helper.make_function("local", "swap", ["x"], ["y"], body, [helper.make_opsetid("", 18)], ["order"])
    converted = function_from_proto(function)
    for node in converted.graph.nodes:
        attr = node.attributes["perm"]
        assert attr.ref_attr_name == "order" and attr.value is None and attr.kind == ir.AttrKind.INTS
