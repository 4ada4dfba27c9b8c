"""converter.node_wire: nodes and attributes encoded as bytes parse to what protobuf writes.

The oracle is protobuf's own encoder: attributes written field by field
(``attribute_to_proto``) and nodes made by ``onnx.helper.make_node``.  Names cover the
cases a hand-written encoder gets wrong: non-ASCII text, lengths of 128 bytes and more
(two-byte varints), empty strings; integers cover negatives and int64's ends; floats
signed zeros, subnormals and values float32 rounds.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter import node_wire
from converter.onnx_encoding import BodyContext, attribute_to_proto, emit_value_info, graph_to_proto
from converter.to_onnx import model_to_proto
from converter.value_encoding import Export
from dsl import FLOAT, ir

K = ir.AttrKind

texts = st.one_of(
    st.text(max_size=8),
    st.text(alphabet="aé漢😀", min_size=40, max_size=90),  # 128 bytes and more in UTF-8
    st.sampled_from(["", "x", "a" * 127, "a" * 128, "b" * 300]),
)
names = texts.filter(bool)
int64s = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 127, 128, -(2**63), 2**63 - 1]))
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(min_value=-3.4e38, max_value=3.4e38),  # doubles float32 rounds
    st.sampled_from([0.0, -0.0, 1e-45, -1e-40, 0.1, 3.4028234663852886e38]),
)


def plain_attributes() -> st.SearchStrategy[ir.Attr]:
    return st.one_of(
        st.builds(lambda n, v: ir.Attr(n, K.INT, v), names, int64s),
        st.builds(lambda n, v: ir.Attr(n, K.INTS, v), names, st.lists(int64s, max_size=70)),
        st.builds(lambda n, v: ir.Attr(n, K.FLOAT, v), names, floats),
        st.builds(lambda n, v: ir.Attr(n, K.FLOATS, v), names, st.lists(floats, max_size=40)),
        st.builds(lambda n, v: ir.Attr(n, K.STRING, v), names, st.one_of(texts, st.binary(max_size=200))),
        st.builds(lambda n, v: ir.Attr(n, K.STRINGS, v), names, st.lists(texts, max_size=5)),
    )


def parsed_attribute(field: bytes) -> onnx.AttributeProto:
    """The attribute a node field encodes (the field is NodeProto.attribute)."""
    node = onnx.NodeProto.FromString(field)
    assert len(node.attribute) == 1 and not node.input and not node.op_type
    return node.attribute[0]


@settings(max_examples=400)
@given(plain_attributes())
def test_plain_attributes_parse_to_what_protobuf_writes(attr: ir.Attr) -> None:
    field = node_wire.plain_attribute_field(attr, node_wire.WireCache())
    assert field is not None
    assert parsed_attribute(field) == attribute_to_proto(attr)


def test_cached_attributes_are_keyed_by_value_and_name() -> None:
    cache = node_wire.WireCache()
    first = node_wire.plain_attribute_field(ir.Attr("axis", K.INT, 1), cache)
    assert node_wire.plain_attribute_field(ir.Attr("axis", K.INT, np.int64(1)), cache) is first
    assert node_wire.plain_attribute_field(ir.Attr("axis", K.INT, 2), cache) != first
    assert node_wire.plain_attribute_field(ir.Attr("keepdims", K.INT, 1), cache) != first
    assert cache.size == 3
    cache.clear()
    assert cache.size == 0


def test_signed_zeros_are_not_confused() -> None:
    cache = node_wire.WireCache()
    for value in (0.0, -0.0, 0.0):
        field = node_wire.plain_attribute_field(ir.Attr("alpha", K.FLOAT, value), cache)
        assert field is not None
        assert parsed_attribute(field).SerializeToString() == attribute_to_proto(
            ir.Attr("alpha", K.FLOAT, value)
        ).SerializeToString()


@pytest.mark.parametrize(
    "attr",
    [
        ir.Attr("alpha", K.FLOAT, 1e39),  # past float32: protobuf's narrowing says what happens
        ir.Attr("alpha", K.FLOAT, float("inf")),
        ir.Attr("alpha", K.FLOAT, float("nan")),
        ir.Attr("scales", K.FLOATS, [1.0, float("-inf")]),
        ir.Attr("axis", K.INT, 2**63),  # out of int64: protobuf raises
        ir.Attr("axes", K.INTS, [0, -(2**63) - 1]),
        ir.Attr("axis", K.INT, 1, doc_string="why"),
        ir.Attr("alpha", K.FLOAT, None, ref_attr_name="alpha"),
        ir.Attr("value", K.TENSOR, ir.Tensor(np.zeros(2, np.float32), 1)),
    ],
    ids=lambda attr: f"{attr.kind.name}-{attr.value!r}-{attr.doc_string or attr.ref_attr_name}",
)
def test_what_is_not_encoded_here_is_left_to_protobuf(attr: ir.Attr) -> None:
    assert node_wire.plain_attribute_field(attr, node_wire.WireCache()) is None


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 16383, 16384, 2**21 + 5])
def test_length_prefix_is_a_varint(size: int) -> None:
    body = b"\x00" * size
    encoded = node_wire.message_field(node_wire.NODE_DOC_STRING, body)
    assert onnx.NodeProto.FromString(encoded).doc_string == body.decode()


# --------------------------------------------------------------------------- whole nodes

node_specs = st.lists(
    st.tuples(
        st.sampled_from(["Identity", "Relu", "Custom", ""]),
        texts,  # node name
        st.sampled_from(["", "com.example", "ai.onnx.ml"]),
        st.sampled_from(["", "v2"]),  # overload
        texts,  # doc string
        st.dictionaries(texts, texts, max_size=2),  # metadata_props
        st.lists(plain_attributes(), max_size=3, unique_by=lambda a: a.name),
        st.integers(0, 2),  # inputs read: an earlier value, an omitted one in between
    ),
    min_size=1,
    max_size=6,
)


@pytest.mark.invalid_export("the writer is compared with onnx.helper on arbitrary nodes and value infos (empty or "
                            "unregistered op types, types other than the producer's): encoding, not validity")
@settings(max_examples=150)
@given(node_specs, names)
def test_nodes_parse_to_what_make_node_writes(specs: list, base: str) -> None:
    x = ir.Value(f"{base}_in", FLOAT[2])
    values, nodes, expected = [x], [], []
    for index, (op_type, name, domain, overload, doc, props, attrs, reads) in enumerate(specs):
        out = ir.Value(f"{base}_{index}", FLOAT[2])
        inputs: list[ir.Value | None] = [values[-1]] + ([None, values[0]] if reads == 2 else [None] * reads)
        made = ir.Node(op_type, domain, inputs, [out], {a.name: a for a in attrs}, name, overload, doc)
        made.metadata_props = props or None
        out.producer = made
        nodes.append(made)
        values.append(out)
        input_names = ["" if v is None else v.name for v in inputs]
        while input_names and input_names[-1] == "":
            input_names.pop()
        oracle = onnx.helper.make_node(op_type, input_names, [out.name], name=name or None, doc_string=doc or None,
                                       domain=domain or None, overload=overload or None)
        oracle.attribute.extend(attribute_to_proto(a) for a in attrs)
        for key, text in props.items():
            oracle.metadata_props.add(key=key, value=text)
        expected.append(oracle)
    graph = ir.Graph("g", [x], [values[-1]], nodes)
    model = model_to_proto(ir.Model(graph, opset_imports={"": 18, "com.example": 1, "ai.onnx.ml": 3}),
                           infer_output_types=False)
    assert list(model.graph.node) == expected


def test_nodes_written_through_protobuf_keep_their_place_between_encoded_ones() -> None:
    """An If (a subgraph: written through the API) and a node with an omitted output that
    a later node reads (named after it is written) between encoded nodes: order, names
    and values stay right."""
    x = ir.Value("x", FLOAT[3])
    cond = ir.Value("cond", ir.TensorType(9, ()))
    a, b, c, d = (ir.Value(n, FLOAT[3]) for n in "abcd")
    branch_out = ir.Value("branch", FLOAT[3])
    then_graph = ir.Graph("then", [], [branch_out], [ir.Node("Neg", inputs=[a], outputs=[branch_out])])
    else_out = ir.Value("other", FLOAT[3])
    else_graph = ir.Graph("else", [], [else_out], [ir.Node("Abs", inputs=[a], outputs=[else_out])])
    mask = ir.Value("")  # Dropout's optional mask, unnamed but read below
    nodes = [
        ir.Node("Relu", inputs=[x], outputs=[a]),
        ir.Node("If", inputs=[cond], outputs=[b], attributes={
            "then_branch": ir.Attr("then_branch", K.GRAPH, then_graph),
            "else_branch": ir.Attr("else_branch", K.GRAPH, else_graph)}),
        ir.Node("Dropout", inputs=[b], outputs=[c, mask]),
        ir.Node("Where", inputs=[mask, c, x], outputs=[d]),
    ]
    for made in nodes:
        for value in made.outputs:
            value.producer = made
    model = model_to_proto(ir.Model(ir.Graph("g", [x, cond], [d], nodes), opset_imports={"": 18}),
                           infer_output_types=False)
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Relu", "If", "Dropout", "Where"]
    assert model.graph.node[2].output[1] == model.graph.node[3].input[0] != ""
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    values = np.array([-1.0, 0.5, 2.0], np.float32)
    for flag, expected in ((True, -np.maximum(values, 0)), (False, np.maximum(values, 0))):
        (result,) = session.run(None, {"x": values, "cond": np.array(flag)})
        np.testing.assert_array_equal(result, expected)


@settings(max_examples=60)
@given(st.lists(st.tuples(names, st.sampled_from([1, 7, 10]), st.lists(st.one_of(st.integers(0, 300), names), max_size=3),
                          texts), min_size=1, max_size=5, unique_by=lambda entry: entry[0]))
@pytest.mark.invalid_export("the writer is compared with onnx.helper on arbitrary nodes and value infos (empty or "
                            "unregistered op types, types other than the producer's): encoding, not validity")
def test_value_info_parses_to_what_make_tensor_value_info_writes(entries: list) -> None:
    x = ir.Value("input_x", FLOAT[2])
    values, nodes, expected = [x], [], []
    for index, (name, elem_type, dims, doc) in enumerate(entries):
        typed = ir.Value(f"{name}_{index}", ir.TensorType(elem_type, tuple(dims)), doc_string=doc)
        nodes.append(ir.Node("Identity", inputs=[values[-1]], outputs=[typed]))
        typed.producer = nodes[-1]
        values.append(typed)
        expected.append(onnx.helper.make_tensor_value_info(typed.name, elem_type, dims, doc_string=doc))
    untyped = ir.Value("nothing_known")
    graph = ir.Graph("g", [x], [values[-1]], nodes, value_info=[*values[1:], untyped])
    model = model_to_proto(ir.Model(graph, opset_imports={"": 18}), infer_output_types=False)
    assert list(model.graph.value_info) == expected  # (a value without a type gets no entry)


def test_emit_value_info_writes_and_counts_each_typed_entry() -> None:
    # Runs of one type, a type change, a doc string (written through the slow path), an
    # untyped value and one the graph does not hold (neither written).
    pair, triple = FLOAT[2], ir.TensorType(7, (3,))
    types = [pair, pair, triple, pair, FLOAT[2]]  # (the last an equal type, another object)
    values = [ir.Value(f"v{index}", value_type) for index, value_type in enumerate(types)]
    values[3].doc_string = "the fourth"
    context = BodyContext(Export(), attr_values=None, function_names={})
    for value in values:
        context.define(value)
    graph = onnx.GraphProto()
    untyped, elsewhere = ir.Value("untyped"), ir.Value("elsewhere", FLOAT[2])
    context.define(untyped)
    assert emit_value_info([*values, untyped, elsewhere], context, graph) == len(values)
    expected = [onnx.helper.make_tensor_value_info(v.name, 7 if v.type is triple else 1, [3] if v.type is triple else [2],
                                                   doc_string=v.doc_string) for v in values]
    assert list(graph.value_info) == expected


# ------------------------------------------------------------------ small tensor attributes

_TENSOR_VALUES = [
    (np.array([0.0], np.float32), 1), (np.array([-0.0], np.float32), 1), (np.array([np.nan], np.float32), 1),
    (np.array(0.0, np.float32), 1), (np.array([0, 0], np.int64), 7), (np.array([0], np.int64), 7),
    (np.array([1], np.int32), 6), (np.array([True]), 9), (np.array([1], np.float16), 10),
    (np.zeros((2, 1), np.float32), 1), (np.zeros((1, 2), np.float32), 1), (np.arange(70, dtype=np.float32), 1),
]
tensor_attributes = st.builds(
    lambda attr_name, value, tensor_name, tensor_doc, attr_doc: ir.Attr(
        attr_name, K.TENSOR, ir.Tensor(value[0].copy(), value[1], tensor_name, tensor_doc), doc_string=attr_doc
    ),
    st.sampled_from(["value", "other"]),
    st.sampled_from(_TENSOR_VALUES),
    st.sampled_from(["", "t"]),
    st.sampled_from(["", "why"]),
    st.sampled_from(["", "note"]),
)


@pytest.mark.invalid_export("the writer is compared with onnx.helper on arbitrary nodes and value infos (empty or "
                            "unregistered op types, types other than the producer's): encoding, not validity")
@settings(max_examples=100)
@given(st.lists(tensor_attributes, min_size=2, max_size=12))
def test_repeated_small_tensor_attributes_are_written_each_as_itself(attrs: list[ir.Attr]) -> None:
    """Exporters repeat tiny constants; the writer encodes each distinct one once (keyed by
    content: -0.0 is not 0.0, [0] is not [0, 0], a name or doc string tells two apart)."""
    x = ir.Value("x", FLOAT[2])
    values, nodes = [x], []
    for attr in attrs:
        out = ir.Value(f"v{len(values)}")
        nodes.append(ir.Node("Custom", "com.example", [values[-1]], [out], {attr.name: attr}))
        out.producer = nodes[-1]
        values.append(out)
    model = model_to_proto(ir.Model(ir.Graph("g", [x], [values[-1]], nodes), opset_imports={"": 18, "com.example": 1}),
                           infer_output_types=False)
    for written, attr in zip(model.graph.node, attrs):
        assert written.attribute[0].SerializeToString() == attribute_to_proto(attr).SerializeToString()
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(model.graph.node[-1].attribute[0].t), attrs[-1].value.array
    )


def test_a_large_tensor_attribute_is_not_cached() -> None:
    small = ir.Attr("value", K.TENSOR, ir.Tensor(np.zeros(node_wire.TINY_TENSOR_BYTES // 4, np.float32), 1))
    large = ir.Attr("value", K.TENSOR, ir.Tensor(np.zeros(node_wire.TINY_TENSOR_BYTES // 4 + 1, np.float32), 1))
    strings = ir.Attr("value", K.TENSOR, ir.Tensor(np.array(["a"], object), 8))
    reference = ir.Attr("value", K.TENSOR, None, ref_attr_name="v")
    assert node_wire.tensor_attribute_key(small) is not None
    assert [node_wire.tensor_attribute_key(a) for a in (large, strings, reference)] == [None, None, None]


def test_nodes_reading_inputs_and_initializers_are_merged_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph input or initializer is encoded once, when it is named: the nodes reading
    it (most of a model's) stay on the encoded way, merged into the graph in one call."""
    from converter import onnx_encoding

    merges: list[int] = []
    real = onnx_encoding._merge_pending
    def counted(parent: Any, pending: list[bytes]) -> None:  # (how many inputs and nodes each call merges)
        merged = onnx.GraphProto.FromString(b"".join(pending))
        merges.append(len(merged.input) + len(merged.node))
        real(parent, pending)

    monkeypatch.setattr(onnx_encoding, "_merge_pending", counted)
    x = ir.Value("x", FLOAT[2])
    weights = [ir.Value(f"w{i}", FLOAT[2], initializer=ir.Tensor(np.full(2, i, np.float32), 1, f"w{i}"))
               for i in range(5)]
    values, nodes = [x], []
    for weight in weights:
        out = ir.Value(f"h{len(values)}")
        nodes.append(ir.Node("Add", inputs=[values[-1], weight], outputs=[out]))
        out.producer = nodes[-1]
        values.append(out)
    graph = ir.Graph("g", [x, *weights], [values[-1]], nodes, initializers=weights)  # (IR 3: weights listed as inputs)
    model = model_to_proto(ir.Model(graph, opset_imports={"": 18}))
    assert merges == [len(graph.inputs), len(nodes)]  # (the inputs in one call, then every node in one)
    onnx.checker.check_model(model, full_check=True)
    assert [list(n.input) for n in model.graph.node] == [[values[i].name, f"w{i}"] for i in range(5)]


@settings(max_examples=60)
@given(st.lists(st.tuples(names, st.one_of(st.none(), st.sampled_from([1, 7, 10])),
                          st.lists(st.one_of(st.integers(0, 300), names), max_size=3), texts),
                min_size=1, max_size=5, unique_by=lambda entry: entry[0]))
def test_graph_inputs_parse_to_what_make_tensor_value_info_writes(entries: list) -> None:
    """Inputs are encoded as value_info entries are; an untyped one is a name alone."""
    inputs, expected = [], []
    for name, elem_type, dims, doc in entries:
        if elem_type is None:
            inputs.append(ir.Value(name, doc_string=doc))
            expected.append(onnx.ValueInfoProto(name=name, doc_string=doc or None))
        else:
            inputs.append(ir.Value(name, ir.TensorType(elem_type, tuple(dims)), doc_string=doc))
            expected.append(onnx.helper.make_tensor_value_info(name, elem_type, dims, doc_string=doc))
    out = ir.Value("out")
    node = ir.Node("Concat", inputs=list(inputs), outputs=[out], attributes={"axis": ir.Attr("axis", K.INT, 0)})
    out.producer = node
    graph = graph_to_proto(ir.Graph("g", inputs, [out], [node]))  # (a model refuses untyped inputs; a body takes them)
    assert list(graph.input) == expected
    assert list(graph.node[0].input) == [name for name, *_ in entries]
