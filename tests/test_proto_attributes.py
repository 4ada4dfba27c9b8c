"""Attributes held unread (converter.proto_attributes, ir.Node.hold_unread_attributes).

The oracle for the held path is the unheld one: the same model read with every
attribute decoded must give equal attributes, and merged, cut and written back, the very
same ModelProto (what ``converter.merge`` and ``converter.cut`` returned before they
held attributes).  A malformed attribute must still fail while reading.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper

import converter
from converter.from_onnx import model_from_proto
from converter.to_onnx import model_to_proto
from dsl import ir
from dsl.errors import ModelLoadError
from dsl.passes.cut import cut_model
from dsl.passes.merge import merge_models

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = [name for name in ("light_squeezenet.onnx", "light_resnet50.onnx", "light_inception_v2.onnx",
                            "light_densenet121.onnx") if os.path.exists(os.path.join(LIGHT, name))]


def _light(name: str) -> onnx.ModelProto:
    return onnx.load(os.path.join(LIGHT, name))


def _attribute_values(node: ir.Node) -> dict[str, tuple[int, str, object]]:
    """name -> (kind, doc string, value), a tensor as (elem type, name, dtype, shape, bytes)."""
    found: dict[str, tuple[int, str, object]] = {}
    for name, attr in node.attributes.items():
        value = attr.value
        if isinstance(value, ir.Tensor):
            value = (value.elem_type, value.name, str(value.array.dtype), value.array.shape, value.array.tobytes())
        found[name] = (int(attr.kind), attr.doc_string, value)
    return found


def _attributed_model() -> onnx.ModelProto:
    """A small model whose nodes carry every kind a node may hold unread, twice each."""
    value = helper.make_tensor("value", TensorProto.FLOAT, [1], [0.5])
    nodes = []
    for index in range(2):
        nodes += [
            helper.make_node("Unsqueeze", [f"x{index}", "axes"], [f"u{index}"]),
            helper.make_node("Shape", [f"u{index}"], [f"s{index}"], start=0, end=-1),
            helper.make_node("ConstantOfShape", [f"s{index}"], [f"c{index}"], value=value),
            helper.make_node("LeakyRelu", [f"c{index}"], [f"l{index}"], alpha=0.25, doc_string="leaky"),
            helper.make_node("Transpose", [f"l{index}"], [f"x{index + 1}"], perm=[0]),
        ]
    nodes.append(helper.make_node("Cast", ["x2"], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        nodes, "attributed", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_held_attributes_decode_to_the_unheld_ones():
    proto = _attributed_model()
    held = model_from_proto(proto, hold_attributes=True)
    plain = model_from_proto(proto)
    assert [node.unread_attributes is not None for node in held.graph.nodes] == [
        node.op_type != "Unsqueeze" for node in plain.graph.nodes]
    for held_node, plain_node in zip(held.graph.nodes, plain.graph.nodes):
        assert _attribute_values(held_node) == _attribute_values(plain_node)
        assert held_node.unread_attributes is None  # (read: no longer held)
    plain_nodes = plain.graph.nodes
    assert plain_nodes[4].attributes["perm"].value is not plain_nodes[9].attributes["perm"].value  # each its own list


def test_each_node_decodes_its_own_attributes():
    held = model_from_proto(_attributed_model(), hold_attributes=True)
    first, second = held.graph.nodes[4], held.graph.nodes[9]  # the two Transposes: equal attributes
    assert first.unread_attributes == second.unread_attributes
    first.attributes["perm"].value.append(1)
    assert second.attributes["perm"].value == [0]
    with pytest.raises(ValueError):  # (the shared tiny tensor is read-only)
        held.graph.nodes[2].attributes["value"].value.array[0] = 1.0


def test_a_changed_attribute_is_written_as_changed():
    held = model_from_proto(_attributed_model(), hold_attributes=True)
    held.graph.nodes[3].attributes["alpha"].value = 0.5  # the first LeakyRelu's; the second still held
    written = model_to_proto(held)
    alphas = [node.attribute[0].f for node in written.graph.node if node.op_type == "LeakyRelu"]
    assert alphas == [0.5, 0.25]
    assert [node.doc_string for node in written.graph.node if node.op_type == "LeakyRelu"] == ["leaky"] * 2


def _attribute_payloads(node: onnx.NodeProto) -> list[tuple[str, object]]:
    """A written node's attributes by value (a tensor as its dtype, shape and bytes), not
    by how their protos spell them (raw_data or float_data, an empty name set or not)."""
    found: list[tuple[str, object]] = []
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if isinstance(value, onnx.TensorProto):
            array = onnx.numpy_helper.to_array(value)
            value = (str(array.dtype), array.shape, array.tobytes())
        found.append((attribute.name, value))
    return found


def _without_attributes(model: onnx.ModelProto) -> onnx.ModelProto:
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    for node in bare.graph.node:
        node.ClearField("attribute")
    return bare


def assert_same_but_attribute_spelling(held: onnx.ModelProto, plain: onnx.ModelProto) -> None:
    """``held`` (written from attributes held unread: copied as read) is ``plain`` (written
    from decoded attributes), attributes compared by value."""
    assert _without_attributes(held) == _without_attributes(plain)
    assert [_attribute_payloads(node) for node in held.graph.node] == [
        _attribute_payloads(node) for node in plain.graph.node]


def test_a_held_model_is_written_with_its_attributes_as_read():
    # Attributes nothing read are copied as the file spells them (as onnx.compose copies
    # nodes); decoded ones are written from their values: the same values either way.
    proto = _attributed_model()
    held = model_to_proto(model_from_proto(proto, hold_attributes=True))
    assert [list(node.attribute) for node in held.graph.node] == [list(node.attribute) for node in proto.graph.node]
    assert_same_but_attribute_spelling(held, model_to_proto(model_from_proto(proto)))


@pytest.mark.skipif(not MODELS, reason="this onnx release ships none of the light models")
@pytest.mark.parametrize("name", MODELS)
def test_merge_and_cut_of_real_models_are_unchanged_by_holding(name):
    proto = _light(name)

    def merged(hold: bool) -> onnx.ModelProto:
        return model_to_proto(merge_models(model_from_proto(proto, hold_attributes=hold),
                                           model_from_proto(proto, hold_attributes=hold)))

    held = merged(True)
    assert_same_but_attribute_spelling(held, merged(False))
    copies = [*proto.graph.node, *proto.graph.node]
    assert [list(node.attribute) for node in held.graph.node] == [list(node.attribute) for node in copies]
    middle = proto.graph.node[len(proto.graph.node) // 2].output[0]
    cuts = [model_to_proto(cut_model(model_from_proto(proto, hold_attributes=hold), [middle], share=True))
            for hold in (True, False)]
    assert_same_but_attribute_spelling(cuts[0], cuts[1])
    assert converter.cut(proto, outputs=[middle]) == cuts[0]
    onnx.checker.check_model(cuts[0], full_check=True)


def test_a_malformed_attribute_fails_while_reading():
    proto = _attributed_model()
    proto.graph.node[7].attribute[0].t.dims[0] = 3  # (the second ConstantOfShape's value: 1 float for 3)
    with pytest.raises(ModelLoadError) as unheld:
        model_from_proto(proto)
    with pytest.raises(ModelLoadError) as held:
        model_from_proto(proto, hold_attributes=True)
    assert str(held.value) == str(unheld.value)


def test_graphs_references_and_external_data_are_not_held(tmp_path):
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "b", [],
                               [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])])
    external = helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0])
    external.data_location = TensorProto.EXTERNAL
    external.ClearField("float_data")
    external.external_data.add(key="location", value="value.bin")
    (tmp_path / "value.bin").write_bytes(np.float32(2.5).tobytes())
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),
         helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["z"], value=external)],
        "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])],
    )
    model = model_from_proto(helper.make_model(graph), hold_attributes=True, folder=str(tmp_path))
    if_node, shape, constant = model.graph.nodes
    assert if_node.unread_attributes is None and [sub.name for sub in ir.subgraphs(if_node)] == ["b", "b"]
    assert shape.unread_attributes is None and not shape.attributes  # (no attributes: nothing held)
    assert constant.unread_attributes is None
    assert constant.attributes["value"].value.array.tolist() == [2.5]


def test_held_nodes_hold_no_subgraphs_and_are_not_decoded_to_tell():
    held = model_from_proto(_attributed_model(), hold_attributes=True)
    nodes = held.graph.nodes
    assert not ir.holds_subgraphs(nodes)
    assert not any(map(ir.may_hold_subgraphs, nodes))
    assert [list(ir.subgraphs(node)) for node in nodes] == [[]] * len(nodes)
    assert len(list(ir.walk(held.graph))) == len(nodes)
    assert sum(node.unread_attributes is not None for node in nodes) == len(nodes) - 2  # (the Unsqueezes)


# ------------------------------------------------------------------------- node tails


def _awkwardly_named_model() -> onnx.ModelProto:
    """Nodes with attributes whose names make the bytes before a node's tail hard to
    count: non-ASCII, 200 bytes, a total past 127 of short names, a name set to "" and
    none at all, an omitted input; with doc strings, metadata, domains and overloads."""
    long_name = "n" * 200
    specs = [  # (inputs, output, node name or None for unset)
        (["x"], "é_out", "ünïcode"),
        (["é_out"], long_name, "long"),
        ([long_name], "a" * 60, "b" * 60),
        (["a" * 60], "p", ""),
        (["p"], "q", None),
        (["q", ""], "r", "omitted_input"),
    ]
    nodes = []
    for index, (inputs, output, name) in enumerate(specs):
        node = helper.make_node("LeakyRelu" if len(inputs) == 1 else "Clip", inputs, [output],
                                domain="ai.onnx" if index % 2 else "")
        if len(inputs) == 1:
            node.attribute.append(helper.make_attribute("alpha", 0.25 + index))
        else:
            node.attribute.append(helper.make_attribute("unused", 1))  # (Clip has no attributes: read, not run)
        if name is None:
            node.ClearField("name")
        else:
            node.name = name
        if index in (1, 4):
            node.doc_string = f"doc {index}"
            node.metadata_props.add(key="module", value=f"layer{index}")
        nodes.append(node)
    graph = helper.make_graph(nodes, "awkward", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _node_fields(node: ir.Node) -> tuple[object, ...]:
    return (node.op_type, node.domain, node.name, node.overload, node.doc_string, node.metadata_props,
            [None if v is None else v.name for v in node.inputs], [v.name for v in node.outputs],
            _attribute_values(node))


def test_nodes_read_through_their_tails_are_the_nodes_read_field_by_field():
    proto = _awkwardly_named_model()
    assert not proto.graph.node[4].HasField("name") and proto.graph.node[3].HasField("name")
    held = model_from_proto(proto, hold_attributes=True)
    plain = model_from_proto(proto)
    assert all(node.unread_attributes is not None for node in held.graph.nodes)
    assert [_node_fields(node) for node in held.graph.nodes] == [_node_fields(node) for node in plain.graph.nodes]
    assert_same_but_attribute_spelling(model_to_proto(model_from_proto(proto, hold_attributes=True)),
                                       model_to_proto(plain))


def test_every_node_of_real_models_is_read_through_its_tail():
    from converter.from_onnx import _Reader

    protos = [_awkwardly_named_model()] + [_light(name) for name in MODELS]
    for proto in protos:
        reader = _Reader("<model>", None, True)
        reader.graph(proto.graph, None)
        assert reader.node_tails and all(reader.node_tails.values())
        # (a model repeats a few tails: one entry a distinct op type and attribute set)
        assert len(reader.node_tails) <= sum(1 for node in proto.graph.node if node.attribute)


def test_equal_tails_give_each_node_its_own_metadata():
    proto = _awkwardly_named_model()
    proto.graph.node[1].metadata_props[0].value = proto.graph.node[4].metadata_props[0].value = "same"
    proto.graph.node[1].doc_string = proto.graph.node[4].doc_string = "same"
    proto.graph.node[4].attribute[0].f = proto.graph.node[1].attribute[0].f
    proto.graph.node[4].domain = proto.graph.node[1].domain
    nodes = model_from_proto(proto, hold_attributes=True).graph.nodes
    assert nodes[1].metadata_props == nodes[4].metadata_props == {"module": "same"}
    nodes[1].metadata_props["module"] = "changed"
    assert nodes[4].metadata_props == {"module": "same"}


def test_a_miscounted_tail_is_caught_and_read_field_by_field(monkeypatch):
    # The bytes before a tail are counted from the names; were they miscounted, the tail's
    # first reading compares them with the names' own encoding and reads the node field by field.
    import converter.from_onnx as from_onnx

    proto = _awkwardly_named_model()
    expected = [_node_fields(node) for node in model_from_proto(proto).graph.nodes]
    # (past the end: every node counted so has the empty tail, which must not make them one)
    monkeypatch.setattr(from_onnx, "encoded_strings_size", lambda strings: 1 << 20)
    held = model_from_proto(proto, hold_attributes=True)
    assert [_node_fields(node) for node in held.graph.nodes] == expected


def test_protobuf_writes_a_nodes_names_first():
    from converter.proto_attributes import encoded_strings_size, fields_in_number_order

    assert fields_in_number_order()  # (were it not, nodes would be read field by field: slower, not wrong)
    names = ["é" * 70, "x", ""]
    node = onnx.NodeProto(input=names[:2], name=names[2])
    assert encoded_strings_size(names) == len(node.SerializeToString())


def test_a_held_node_made_at_once_is_the_node_held_afterwards():
    def decode(key: object) -> dict[str, ir.Attr]:
        return {"alpha": ir.Attr("alpha", ir.AttrKind.FLOAT, 0.5)}

    inputs: list[ir.Value | None] = [ir.Value("x")]
    made = ir.held_node("LeakyRelu", "", inputs, "n", "o", "d", ("key",), decode)
    held = ir.Node("LeakyRelu", "", inputs, [], {}, "n", "o", "d")
    held.hold_unread_attributes(("key",), decode)
    assert type(made) is type(held)
    for slot in ir.Node.__slots__:  # (a slot added to Node and not set here would fail on read)
        if slot != "attributes":
            assert getattr(made, slot) == getattr(held, slot), slot
    assert made.outputs is not held.outputs
    assert _attribute_values(made) == _attribute_values(held) == {"alpha": (int(ir.AttrKind.FLOAT), "", 0.5)}
    assert type(made) is ir.Node and made.unread_attributes is None


def test_copied_attributes_count_for_the_ir_version_their_tensors_need(monkeypatch):
    # Copied unread, a tensor attribute's element type is recorded as the encoder records
    # it (what a newer element type needs of the IR version).  The tensors held unread are
    # of the old numeric types, so FLOAT16 is made to need IR 11 here to tell.
    import converter.value_encoding as value_encoding

    monkeypatch.setitem(value_encoding._ELEM_TYPE_IR_VERSION, TensorProto.FLOAT16, 11)
    value = helper.make_tensor("value", TensorProto.FLOAT16, [1], [0.5])
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
         helper.make_node("Cast", ["c"], ["t"], to=TensorProto.FLOAT)], "half",  # (no FLOAT16 value declared)
        [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    versions = []
    for hold in (True, False):
        model = model_from_proto(proto, hold_attributes=hold)
        if hold:
            assert [node.unread_attributes.elem_types for node in model.graph.nodes] == [
                frozenset({TensorProto.FLOAT16}), frozenset()]
        model.ir_version = None  # (the writer then gives what the content needs)
        versions.append(model_to_proto(model).ir_version)
    assert versions == [11, 11]


def test_writing_copies_held_attributes_without_decoding_them():
    model = model_from_proto(_attributed_model(), hold_attributes=True)
    held = [node for node in model.graph.nodes if node.unread_attributes is not None]
    model_to_proto(model)
    assert held and all(node.unread_attributes is not None for node in held)
