"""Structural damage to ONNX models, for the round-trip robustness tests.

Each mutation takes a model and a ``random.Random`` and returns a damaged copy (or the
model unchanged where it finds nothing to damage).  They mimic what corrupt files,
buggy exporters and hand-edited protos contain: dangling and duplicated names, dropped
nodes, attributes of the wrong type, tensors whose bytes do not match their shape,
subgraphs reading names nothing defines, recursive or missing local functions, names
that are Python keywords, builtins, non-ASCII or empty.
"""

from __future__ import annotations

import keyword
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, TensorProto, helper, numpy_helper

Mutation = Callable[[onnx.ModelProto, random.Random], onnx.ModelProto]

# Names a generated module must not shadow, and names that collide once cleaned.
AWKWARD_NAMES = [
    *keyword.kwlist, "match", "case", "_", "type", "print", "len", "list", "np", "op", "script", "graph",
    "initializer", "weights", "FLOAT", "INT64", "Opset", "load_weights", "ml_dtypes", "Sequence", "Optional",
    "", " ", "0", "1x", "a.b", "a-b", "a b", "a__b", "a/b", "a//b", "/a/", "__", "é", "变量", "x\u00e9",
    "naïve", "\ufb01", "\u2028", "a\nb", "'", '"', "\\", "x_1", "x_", "None", "True", "self", "__class__",
]


def copy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    copied = onnx.ModelProto()
    copied.CopyFrom(model)
    return copied


def graphs_of(model: onnx.ModelProto) -> list[Any]:
    """The main graph, every subgraph and every function body (all have .node)."""
    found: list[Any] = []
    stack: list[Any] = [model.graph, *model.functions]
    while stack:
        graph = stack.pop()
        found.append(graph)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    stack.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    stack.extend(attr.graphs)
    return found


def _nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for graph in graphs_of(model) for node in graph.node]


def _tensors(model: onnx.ModelProto) -> list[TensorProto]:
    found: list[TensorProto] = []
    for graph in graphs_of(model):
        if isinstance(graph, onnx.GraphProto):
            found.extend(graph.initializer)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    found.append(attr.t)
                elif attr.type == AttributeProto.TENSORS:
                    found.extend(attr.tensors)
    return found


def _all_names(model: onnx.ModelProto) -> list[str]:
    names: list[str] = []
    for graph in graphs_of(model):
        if isinstance(graph, onnx.GraphProto):
            names += [v.name for v in graph.input] + [v.name for v in graph.output]
            names += [t.name for t in graph.initializer]
        else:
            names += list(graph.input) + list(graph.output)
        for node in graph.node:
            names += list(node.input) + list(node.output)
    return sorted({n for n in names if n})


def rename_everywhere(model: onnx.ModelProto, old: str, new: str) -> None:
    """Rename a value in every place it occurs (a consistent rename keeps the model valid)."""
    for graph in graphs_of(model):
        if isinstance(graph, onnx.GraphProto):
            for value in [*graph.input, *graph.output, *graph.value_info]:
                if value.name == old:
                    value.name = new
            for tensor in graph.initializer:
                if tensor.name == old:
                    tensor.name = new
        else:
            for field in (graph.input, graph.output):
                for index, name in enumerate(field):
                    if name == old:
                        field[index] = new
        for node in graph.node:
            for field in (node.input, node.output):
                for index, name in enumerate(field):
                    if name == old:
                        field[index] = new


# ---------------------------------------------------------------------- mutations


def delete_node_input(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = [n for n in _nodes(model) if n.input]
    if nodes:
        node = rng.choice(nodes)
        index = rng.randrange(len(node.input))
        if rng.random() < 0.5:
            node.input[index] = ""
        else:
            del node.input[index]
    return model


def dangle_node_input(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = [n for n in _nodes(model) if n.input]
    if nodes:
        node = rng.choice(nodes)
        node.input[rng.randrange(len(node.input))] = rng.choice(["nowhere", "x y", "", "if", "é"])
    return model


def rename_graph_output(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    if model.graph.output:
        output = rng.choice(model.graph.output)
        choice = rng.randrange(4)
        if choice == 0:
            output.name = "undefined_output"
        elif choice == 1:
            output.name = ""
        elif choice == 2 and model.graph.input:
            output.name = model.graph.input[0].name  # an input passed straight through
        else:
            model.graph.output.add().CopyFrom(output)  # the same output listed twice
    return model


def delete_graph_input(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    if model.graph.input:
        del model.graph.input[rng.randrange(len(model.graph.input))]
    return model


def drop_node(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    graphs = [g for g in graphs_of(model) if g.node]
    if graphs:
        graph = rng.choice(graphs)
        del graph.node[rng.randrange(len(graph.node))]
    return model


def duplicate_output_name(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = [n for n in _nodes(model) if n.output]
    names = _all_names(model)
    if nodes and names:
        node = rng.choice(nodes)
        node.output[rng.randrange(len(node.output))] = rng.choice(names)
    return model


def clear_node_outputs(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = _nodes(model)
    if nodes:
        node = rng.choice(nodes)
        for index in range(len(node.output)):
            node.output[index] = ""
    return model


def _set_field(attr: AttributeProto, kind: int, rng: random.Random) -> None:
    if kind == AttributeProto.FLOAT:
        attr.f = rng.choice([0.5, float("nan"), float("inf"), -0.0])
    elif kind == AttributeProto.INT:
        attr.i = rng.choice([0, -1, 2**62, 7])
    elif kind == AttributeProto.STRING:
        attr.s = rng.choice([b"abc", b"\xff\xfe", b"", b"'\"\\"])
    elif kind == AttributeProto.TENSOR:
        attr.t.CopyFrom(numpy_helper.from_array(np.array([1, 2], np.int64)))
    elif kind == AttributeProto.FLOATS:
        attr.floats.extend([1.0, float("nan")])
    elif kind == AttributeProto.INTS:
        attr.ints.extend([1, -2])
    elif kind == AttributeProto.STRINGS:
        attr.strings.extend([b"a", b"\x80"])
    elif kind == AttributeProto.TENSORS:
        attr.tensors.extend([numpy_helper.from_array(np.array(v, np.float32)) for v in ([1.5], 2.0)])
    elif kind == AttributeProto.GRAPHS:
        attr.graphs.add().name = "empty"
    elif kind == AttributeProto.SPARSE_TENSOR:
        attr.sparse_tensor.CopyFrom(helper.make_sparse_tensor(
            numpy_helper.from_array(np.array([2.0], np.float32), "v"),
            numpy_helper.from_array(np.array([rng.choice([1, 7, -1])], np.int64), "i"), [3]))
    elif kind == AttributeProto.TYPE_PROTO:
        attr.tp.CopyFrom(helper.make_tensor_type_proto(rng.choice([1, 7, 0]), rng.choice([None, [2, "N"]])))
    elif kind == AttributeProto.TYPE_PROTOS:
        attr.type_protos.extend([helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, None))])


def wrong_attribute_type(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    attrs = [a for n in _nodes(model) for a in n.attribute]
    if not attrs:
        nodes = _nodes(model)
        if not nodes:
            return model
        attrs = [rng.choice(nodes).attribute.add()]
        attrs[0].name = "axis"
        attrs[0].type = AttributeProto.INT
    attr = rng.choice(attrs)
    choice = rng.randrange(4)
    if choice == 0:  # UNDEFINED, the value fields left as they are
        attr.type = AttributeProto.UNDEFINED
    elif choice == 1:  # UNDEFINED and no value at all
        name = attr.name
        attr.Clear()
        attr.name = name
    elif choice == 2:  # another type, its field unset
        attr.type = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
    else:  # another type with a value of that type
        kind = rng.choice([1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 13, 14])
        attr.Clear()
        attr.name = rng.choice(["axis", "value", "to", "", "class", "x y", "alpha", "\ufb01"])
        attr.type = kind
        _set_field(attr, kind, rng)
    return model


def odd_op_type(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = _nodes(model)
    if nodes:
        node = rng.choice(nodes)
        choice = rng.randrange(4)
        if choice == 0:
            node.op_type = ""
        elif choice == 1:
            node.op_type = rng.choice(["class", "Not A Name", "Relu2", "é", "__import__", "\ufb01"])
        elif choice == 2:
            node.domain = rng.choice(["unknown.domain", "com.x-y", "1bad", "ai.onnx.ml", "from"])
        else:
            node.domain = "ai.onnx"  # the default domain spelt out
    return model


def corrupt_tensor(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    tensors = _tensors(model)
    if not tensors:
        return model
    tensor = rng.choice(tensors)
    choice = rng.randrange(8)
    if choice == 0:
        tensor.raw_data = rng.randbytes(rng.randrange(0, 13))
    elif choice == 1:
        tensor.dims.append(rng.choice([0, 3, 7]))
    elif choice == 2:
        del tensor.dims[:]
        tensor.dims.extend([rng.choice([-1, -5, 2**40])])
    elif choice == 3:
        tensor.data_type = rng.choice([0, 99, 8, 16, 17, 21, 23, 25])
    elif choice == 4:  # typed field of the wrong length
        tensor.ClearField("raw_data")
        tensor.int64_data.extend([1, 2, 3])
        tensor.float_data.extend([1.0])
    elif choice == 5:  # data said to be elsewhere
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", rng.choice(["missing.bin", "../../etc/passwd", "/dev/zero", ""])
    elif choice == 6:  # a string tensor with bytes that are not UTF-8
        tensor.Clear()
        tensor.name = "strings"
        tensor.data_type = TensorProto.STRING
        tensor.dims.extend([2])
        tensor.string_data.extend([b"\xff\x00", b"ok"][: rng.randrange(1, 3)])
    else:
        tensor.data_type = TensorProto.FLOAT16
        tensor.ClearField("raw_data")
        tensor.int32_data.extend([70000, -3])
    return model


def odd_type(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    values = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    if not values:
        return model
    value = rng.choice(values)
    choice = rng.randrange(5)
    if choice == 0:
        value.ClearField("type")
    elif choice == 1:
        value.type.tensor_type.elem_type = rng.choice([0, 99, 8, 16, 23])
    elif choice == 2:
        dims = value.type.tensor_type.shape.dim
        dims.add().dim_value = rng.choice([-1, 2**62, 0])
        dims.add().dim_param = rng.choice(["", "N M", "é", "if", "'"])
        dims.add()
    elif choice == 3:
        value.type.sequence_type.elem_type.map_type.key_type = TensorProto.STRING
    else:
        value.type.optional_type.elem_type.sparse_tensor_type.elem_type = TensorProto.FLOAT
    return model


def subgraph_reads_undefined(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    subgraphs = [g for g in graphs_of(model)[1:] if isinstance(g, onnx.GraphProto)]
    if subgraphs:
        graph = rng.choice(subgraphs)
        if graph.node and rng.random() < 0.7:
            node = rng.choice(graph.node)
            node.input.append("outer_nowhere")
        elif graph.output:
            graph.output[0].name = "outer_nowhere"
    return model


def awkward_names(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """A consistent renaming to keywords, builtins, module names and names that clash once
    cleaned: the model stays valid, so the round trip must stay exact."""
    model = copy_model(model)
    names = _all_names(model)
    taken = set(names)
    pool = [n for n in AWKWARD_NAMES if n and n not in taken]
    rng.shuffle(pool)
    for old, new in zip(names, pool):
        rename_everywhere(model, old, new)
    for graph in graphs_of(model):
        if isinstance(graph, onnx.GraphProto):
            graph.name = rng.choice(AWKWARD_NAMES)
        for node in graph.node:
            node.name = rng.choice(AWKWARD_NAMES)
    return model


def add_local_functions(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """Route one node through a model-local function, then damage the call at random:
    a function calling itself, a call to a function the model lacks, a function whose
    name or domain is awkward."""
    model = copy_model(model)
    nodes = [n for n in model.graph.node if n.domain in ("", "ai.onnx") and not n.attribute]
    if not nodes:
        return model
    node = rng.choice(nodes)
    inner = helper.make_node(node.op_type, [f"i{k}" for k in range(len(node.input))],
                             [f"o{k}" for k in range(len(node.output))])
    name = rng.choice(["Wrapped", "class", "print", "np", "op", "script", "a.b", "é", "main_graph"])
    domain = rng.choice(["local", "local.x", "ai.onnx.local"])
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
    function = helper.make_function(domain, name, list(inner.input), list(inner.output), [inner],
                                    [helper.make_opsetid("", version)])
    choice = rng.randrange(4)
    if choice == 1:  # the function calls itself
        function.node.append(helper.make_node(name, ["i0"] if inner.input else [], ["again"], domain=domain))
    elif choice == 2:  # the call names a function the model does not have
        function.name = name + "_other"
    elif choice == 3:  # two functions, the first calling the second
        callee = onnx.FunctionProto()
        callee.CopyFrom(function)
        callee.name = name + "_inner"
        function.ClearField("node")
        function.node.append(helper.make_node(callee.name, list(inner.input), list(inner.output), domain=domain))
        model.functions.append(callee)
    model.functions.append(function)
    node.op_type, node.domain = name, domain
    if not any(o.domain == domain for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return model


def ref_attr_outside_function(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    nodes = _nodes(model)
    if nodes:
        attr = rng.choice(nodes).attribute.add()
        attr.name = rng.choice(["axis", "alpha"])
        attr.type = rng.choice([AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.GRAPH])
        attr.ref_attr_name = rng.choice(["outer", "", "class"])
    return model


def odd_metadata(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    texts = ['"""', "\\", "'''\"", "\x00", "é\n\n", "a\r\nb", "\\N{x}", "{x}", "\ud7ff"]
    model.doc_string = rng.choice(texts)
    model.graph.doc_string = rng.choice(texts)
    model.producer_name = rng.choice(texts)
    entry = model.metadata_props.add()
    entry.key, entry.value = rng.choice(texts), rng.choice(texts)
    if model.graph.node:
        model.graph.node[0].doc_string = rng.choice(texts)
    return model


def odd_opsets(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    model = copy_model(model)
    choice = rng.randrange(4)
    if choice == 0:
        del model.opset_import[:]
    elif choice == 1:
        for entry in model.opset_import:
            entry.version = rng.choice([0, 1, 5, 999, -3])
    elif choice == 2:
        model.opset_import.add().CopyFrom(model.opset_import[0]) if model.opset_import else None
    else:
        model.ir_version = rng.choice([0, 1, 3, 99, -1])
    return model


def sparse_initializer(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """Store a dense initializer (or a new one) as a sparse initializer, indices sometimes out of range."""
    model = copy_model(model)
    graph = model.graph
    dense = [t for t in graph.initializer if t.data_type == TensorProto.FLOAT and 0 < len(t.dims) <= 2]
    if dense and rng.random() < 0.7:
        tensor = rng.choice(dense)
        array = numpy_helper.to_array(tensor).reshape(-1)
        name, dims = tensor.name, list(tensor.dims)
        graph.initializer.remove(tensor)
    else:
        array = np.array([0.0, 1.5, 0.0, -2.0], np.float32)
        name, dims = rng.choice(["sparse", "class", "a.b", "é"]), [4]
    positions = np.flatnonzero(array) if rng.random() < 0.8 else np.array([array.size + 3])
    values = array[positions] if positions.max(initial=-1) < array.size else np.ones(len(positions), np.float32)
    graph.sparse_initializer.append(helper.make_sparse_tensor(
        numpy_helper.from_array(values.astype(np.float32), name),
        numpy_helper.from_array(positions.astype(np.int64), name + "_indices"), dims))
    return model


def function_attributes(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """A local function with attribute parameters (with and without defaults, odd names),
    references to them (some to parameters that do not exist), and calls that set them."""
    model = copy_model(model)
    nodes = [n for n in model.graph.node if n.op_type in ("Relu", "Conv", "LayerNormalization", "Add", "Neg",
                                                           "StringNormalizer", "Dropout", "TopK")]
    if not nodes:
        return model
    node = rng.choice(nodes)
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
    param = rng.choice(["alpha", "class", "x y", "op", "é"])
    inner = helper.make_node("LeakyRelu", ["a"], ["b"])
    reference = inner.attribute.add()
    reference.name, reference.type = "alpha", AttributeProto.FLOAT
    reference.ref_attr_name = param if rng.random() < 0.8 else "missing"
    function = helper.make_function("fa", "Leaky", ["a"], ["b"], [inner], [helper.make_opsetid("", version)],
                                    attributes=[param] if rng.random() < 0.5 else [])
    if not function.attribute:
        function.attribute_proto.append(helper.make_attribute(param, rng.choice([0.25, 1, "s", [1, 2]])))
    call = helper.make_node("Leaky", [node.output[0]], ["leaky_out"], domain="fa")
    if rng.random() < 0.7:
        call.attribute.append(helper.make_attribute(param, rng.choice([0.5, 3, "t"])))
    for value in model.graph.output:
        if value.name == node.output[0]:
            value.name = "leaky_out"
            break
    model.graph.node.append(call)
    model.functions.append(function)
    model.opset_import.append(helper.make_opsetid("fa", 1))
    return model


def invalid_utf8_text(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """Some text field (a name, the producer, a domain, metadata, a doc string) made bytes that
    are not UTF-8, as a bit flip in a file does: proto2 parsing then hands out ``bytes``.
    Not in MUTATIONS: the others expect text, so this one comes last."""
    model = copy_model(model)
    model.metadata_props.add().key = "meta_key"
    model.producer_name = model.producer_name or "producer"
    model.graph.doc_string = "graph doc"
    texts = [model.producer_name, "meta_key", "graph doc", *_all_names(model)]
    texts += [f.name for f in model.functions] + [f.domain for f in model.functions]
    texts += [o.domain for o in model.opset_import] + [n.op_type for n in _nodes(model)]
    chosen = rng.choice([t for t in texts if len(t.encode()) >= 2] or ["producer"]).encode()
    payload = model.SerializeToString().replace(chosen, b"\xff" * len(chosen))
    damaged = onnx.ModelProto()
    try:
        damaged.ParseFromString(payload)
    except DecodeError:  # (the text was also part of a length or a number: no model)
        return model
    return damaged


MUTATIONS: dict[str, Mutation] = {
    mutation.__name__: mutation
    for mutation in (
        delete_node_input, dangle_node_input, rename_graph_output, delete_graph_input, drop_node,
        duplicate_output_name, clear_node_outputs, wrong_attribute_type, odd_op_type, corrupt_tensor,
        odd_type, subgraph_reads_undefined, awkward_names, add_local_functions, ref_attr_outside_function,
        odd_metadata, odd_opsets, sparse_initializer, function_attributes,
    )
}


def byte_damage(payload: bytes, rng: random.Random) -> Iterator[bytes]:
    """Truncations, bit flips, spliced garbage and random bytes made from ``payload``."""
    yield payload[: rng.randrange(len(payload) + 1)]
    flipped = bytearray(payload)
    for _ in range(rng.randrange(1, 8)):
        position = rng.randrange(len(flipped))
        flipped[position] ^= 1 << rng.randrange(8)
    yield bytes(flipped)
    cut = rng.randrange(len(payload) + 1)
    yield payload[:cut] + rng.randbytes(rng.randrange(1, 64)) + payload[cut:]
    yield rng.randbytes(rng.randrange(0, 200))
