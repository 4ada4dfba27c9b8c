"""IR pieces -> ONNX protos: tensors, types, attributes, and the nodes and graphs that hold them.

The encoders every writer of protos shares: :mod:`converter.to_onnx` assembles
functions and models from them, and eager mode encodes the attributes of one op call
with :func:`attribute_to_proto`.  A graph attribute is a graph, so graphs (their
nodes, initializers and value names) are encoded here too; tensors and types, the
leaves, are :mod:`converter.value_encoding`'s.  Nodes and value_info entries are
encoded as wire-format bytes and merged into their graph in one call
(:mod:`converter.node_wire`); the rest is written field by field through the protobuf
API, never through ``onnx.helper`` (about twice as slow).
"""

from __future__ import annotations

from typing import Any

import onnx

from converter import node_wire
from converter.output_schemas import SCHEMA_DOMAINS, output_is_optional
from converter.value_encoding import (
    IR_FUNCTION_OVERLOAD,
    IR_METADATA_PROPS,
    Export,
    emit_initializer,
    emit_initializers,
    fill_metadata_props,
    fill_recorded_tensor,
    fill_sparse,
    fill_type,
    fill_type_shared,
    tensor_to_proto,
    type_to_proto,
)
from dsl import ir
from dsl.errors import ConversionError

# The fill_*/emit_* writers, Export and BodyContext are converter.to_onnx's building blocks.
__all__ = ["tensor_to_proto", "type_to_proto", "attribute_to_proto", "graph_to_proto", "SCHEMA_DOMAINS"]

K = ir.AttrKind


class BodyContext:
    """Names and attribute bindings of one function body and the subgraphs inside it.

    One namer covers the body and all its subgraphs because ONNX forbids a subgraph to
    reuse a name of its enclosing graph.  ``attr_values`` is None when attribute
    references stay references (a FunctionProto), or the values to substitute (a model).
    """

    __slots__ = ("attr_values", "export", "fresh_count", "function_names", "names", "omitted", "read_fields", "used")

    def __init__(
        self,
        export: Export,
        *,
        attr_values: dict[str, ir.Attr] | None,
        function_names: dict[int, tuple[str, str]],
    ) -> None:
        # (Keyed by the Value, which hashes by identity: spread better than its id() would be.)
        self.names: dict[ir.Value, str] = {}
        self.used: set[str] = set()
        # A value read as a node input, encoded (see converter.node_wire): made once a value.
        self.read_fields: dict[ir.Value, bytes] = {}
        # Unnamed node outputs, written as omitted (""), with where to name them if read later.
        self.omitted: dict[int, tuple[onnx.NodeProto, int]] = {}
        self.attr_values = attr_values
        self.function_names = function_names
        self.export = export
        self.fresh_count = 0

    def define(self, value: ir.Value) -> str:
        """The name of ``value``, chosen on first sight: its own, or with a suffix if taken."""
        found = self.names.get(value)
        if found is not None:
            return found
        name = value.name or "_v"
        if name in self.used:
            name = self._unused(name)
        self.used.add(name)
        self.names[value] = name
        # Encoded now so that every node reading it (a graph input, an initializer: most of
        # a model's weights) takes emit_nodes's quick way; a name protobuf cannot encode is
        # left to the protobuf path, which says what is wrong with it.
        try:
            self.read_fields[value] = node_wire.string_field(node_wire.NODE_INPUT, name)
        except UnicodeEncodeError:
            pass
        return name

    def define_output(self, value: ir.Value, node: ir.Node, index: int) -> str:
        # An unnamed optional output is omitted (""); an unnamed required one gets a name.
        if not value.name and value not in self.names and output_is_optional(node, index):
            self.names[value] = ""
            return ""
        return self.define(value)

    def define_outputs(self, node: ir.Node) -> list[str]:
        """The names of ``node``'s outputs (see :meth:`define_output`); naming a value
        again gives the name it has."""
        names, used = self.names, self.used
        outputs: list[str] = []
        for index, value in enumerate(node.outputs):
            name = value.name
            if name and name not in used and value not in names:  # (the usual case, inlined)
                used.add(name)
                names[value] = name
            else:
                name = self.define_output(value, node, index)
            outputs.append(name)
        return outputs

    def name_read_value(self, value: ir.Value) -> str:
        """The name of a value being read; an unnamed output read after all gets a name now."""
        found = self.names.get(value)
        if found is None:
            return self.define(value)
        if found == "":
            producer, index = self.omitted.pop(id(value))
            found = self.names[value] = self.fresh("_v")
            producer.output[index] = found
        return found

    def fresh(self, base: str) -> str:
        name = self._unused(base)
        self.used.add(name)
        return name

    def claim(self, wanted: str) -> str:
        """``wanted`` if no value has it yet, else ``wanted`` with a suffix; taken from now on."""
        name = wanted if wanted not in self.used else self._unused(wanted)
        self.used.add(name)
        return name

    def _unused(self, base: str) -> str:
        while True:
            self.fresh_count += 1
            candidate = f"{base}_{self.fresh_count}"
            if candidate not in self.used:
                return candidate


# ----------------------------------------------------------------------------- attributes


# ir.AttrKind numbers the kinds as ONNX does; the table gives them the proto's enum type.
_ATTRIBUTE_TYPES: dict[int, onnx.AttributeProto.AttributeType] = {
    kind: onnx.AttributeProto.AttributeType.Value(kind.name) for kind in ir.AttrKind
}


def fill_attribute(proto: onnx.AttributeProto, attr: ir.Attr, context: BodyContext) -> None:
    """Write ``attr`` into ``proto``; a reference is kept, or replaced by its bound value in a model."""
    if attr.ref_attr_name is not None:
        if context.attr_values is None:
            proto.name = attr.name
            proto.type = _ATTRIBUTE_TYPES[attr.kind]
            proto.ref_attr_name = attr.ref_attr_name
            return
        attr = _bound_attr(attr, context.attr_values)
    proto.name = attr.name
    kind = attr.kind
    proto.type = _ATTRIBUTE_TYPES[kind]
    if attr.doc_string:
        proto.doc_string = attr.doc_string
    value = attr.value
    if kind == K.INT:
        proto.i = int(value)
    elif kind == K.FLOAT:
        proto.f = float(value)
    elif kind == K.STRING:
        proto.s = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    elif kind == K.INTS:
        proto.ints.extend(int(v) for v in value)
    elif kind == K.FLOATS:
        proto.floats.extend(float(v) for v in value)
    elif kind == K.STRINGS:
        proto.strings.extend(v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in value)
    elif kind == K.TENSOR:
        fill_recorded_tensor(proto.t, value, context.export)
    elif kind == K.TENSORS:
        for tensor in value:
            fill_recorded_tensor(proto.tensors.add(), tensor, context.export)
    elif kind == K.GRAPH:
        fill_graph(proto.g, value, context)
    elif kind == K.GRAPHS:
        for graph in value:
            fill_graph(proto.graphs.add(), graph, context)
    elif kind == K.SPARSE_TENSOR:
        fill_sparse(proto.sparse_tensor, value, context.export)
    elif kind == K.SPARSE_TENSORS:
        for sparse in value:
            fill_sparse(proto.sparse_tensors.add(), sparse, context.export)
    elif kind == K.TYPE_PROTO:
        fill_type(proto.tp, value, context.export)
    elif kind == K.TYPE_PROTOS:
        for ir_type in value:
            fill_type(proto.type_protos.add(), ir_type, context.export)
    else:
        raise ConversionError(f"attribute {attr.name} has no value kind ({kind.name})", attr.location)


def _bound_attr(attr: ir.Attr, attr_values: dict[str, ir.Attr]) -> ir.Attr:
    """The attribute a reference ``attr`` stands for once the function's attributes are bound."""
    bound = attr_values.get(attr.ref_attr_name or "")
    if bound is None:
        raise ConversionError(
            f"attribute {attr.name} refers to the function attribute {attr.ref_attr_name!r}, which has no value",
            attr.location,
            hint="give the attribute parameter a default, pass attributes={...} to the export, "
            "or export this as a function (to_function_proto)",
        )
    kind, value = bound.kind, bound.value
    if attr.kind == K.FLOAT and kind == K.INT:
        kind, value = K.FLOAT, float(value)
    elif attr.kind == K.FLOATS and kind == K.INTS:
        kind, value = K.FLOATS, [float(v) for v in value]
    elif attr.kind not in (kind, K.UNDEFINED):
        raise ConversionError(
            f"attribute {attr.name} is {attr.kind.name}, but the attribute {attr.ref_attr_name!r} it refers to "
            f"is {kind.name}",
            attr.location,
            hint=f"give {attr.ref_attr_name!r} a value of kind {attr.kind.name}",
        )
    return ir.Attr(attr.name, kind, value, doc_string=bound.doc_string, location=attr.location)


def attribute_to_proto(attr: ir.Attr) -> onnx.AttributeProto:
    """An :class:`ir.Attr` with a value (not a reference) as an ``AttributeProto``.

    A GRAPH attribute's body is written as :func:`graph_to_proto` writes a graph.

    >>> from dsl import ir
    >>> attribute_to_proto(ir.Attr("axis", ir.AttrKind.INT, 1)).i
    1
    """
    proto = onnx.AttributeProto()
    fill_attribute(proto, attr, BodyContext(Export(), attr_values=None, function_names={}))
    return proto


# ---------------------------------------------------------------------------- nodes, graphs


def _input_name(value: ir.Value, context: BodyContext, nodes: Any, initializers: Any) -> str:
    if value in context.names:
        return context.name_read_value(value)
    name = context.define(value)
    if value.initializer is not None and value.producer is None:
        # A constant the front end attached to the value without listing it as an initializer.
        emit_initializer(value.initializer, name, context, nodes, initializers)
    return name


def emit_nodes(graph_nodes: Any, context: BodyContext, parent: Any, initializers: Any) -> None:
    """Append each of ``graph_nodes`` to the nodes of ``parent`` (a GraphProto or
    FunctionProto), in order, naming its inputs and outputs.

    Nodes are encoded as wire-format bytes and merged into ``parent`` in one call (see
    :mod:`converter.node_wire`); a node that needs a live NodeProto after it is written (an
    omitted output a later read may name, a subgraph) goes through the protobuf API, the
    bytes before it merged first so the order stays."""
    names, used, define_output = context.names, context.used, context.define_output
    reads = context.read_fields
    read_field = reads.get
    cache = context.export.wire
    held_fields = cache.held_attributes.get
    op_type_field, domain_field, op_type_fields = cache.op_type_field, cache.domain_field, cache.op_types
    node_tag = node_wire.FUNCTION_NODE if isinstance(parent, onnx.FunctionProto) else node_wire.GRAPH_NODE
    OUTPUT, INPUT, NAME = node_wire.NODE_OUTPUT, node_wire.NODE_INPUT, node_wire.NODE_NAME
    length_prefix, short_lengths = node_wire.length_prefix, node_wire.SHORT_LENGTHS
    pending: list[bytes] = []  # encoded nodes not merged into ``parent`` yet
    node_tag_heads = _NODE_TAG_HEADS[node_tag]  # (a node's tag and length, if short)
    for node in graph_nodes:
        # The common case, every input a value read or defined before, costs one dict
        # lookup each (an omitted input, None, is no key: it takes the slower way).
        parts: list[Any] = list(map(read_field, node.inputs))
        if not all(parts):
            if pending:  # (naming an input may add a Constant node for it)
                _merge_pending(parent, pending)
            parts = _input_fields(node, context, parent.node, initializers)
        try:
            for index, value in enumerate(node.outputs):
                # (BodyContext.define_outputs's usual case inlined: a new name, taken as it is)
                name = value.name
                if name and name not in used and value not in names:
                    used.add(name)
                    names[value] = name
                else:
                    name = define_output(value, node, index)
                    if not name:  # omitted: a later read may name it in the written proto
                        raise _NeedsProto
                raw = name.encode()
                sized = (short_lengths[len(raw)] if len(raw) < 128 else length_prefix(len(raw))) + raw
                reads[value] = INPUT + sized
                parts += (OUTPUT, sized)  # (joined below: a concatenation less)
            if node.callee is None:
                op_type = node.op_type
                parts.append(op_type_fields.get(op_type) or op_type_field(op_type))
                domain = node.domain
            else:
                domain, op_type = _written_op(node, context)
                parts.append(op_type_field(op_type))
            if domain:
                parts.append(domain_field(domain))
            name = node.name
            if name:
                raw = name.encode()
                parts += (NAME, short_lengths[len(raw)] if len(raw) < 128 else length_prefix(len(raw)), raw)
            held = node.unread_attributes
            if held is not None:
                # (read from a file and not looked at since: each distinct set is encoded once)
                parts.append(held_fields(held) or _held_attribute_fields(node, context))
                if node.overload or node.doc_string or node.metadata_props:
                    parts.append(_rare_fields(node, context, False))
            elif node.overload or node.doc_string or node.metadata_props or node.attributes:
                parts.append(_rare_fields(node, context))
        except (_NeedsProto, UnicodeEncodeError):
            if pending:
                _merge_pending(parent, pending)
            _emit_node_proto(node, context, parent.node, initializers)
            continue
        body = b"".join(parts)
        pending += (node_tag_heads[len(body)] if len(body) < 128 else node_tag + length_prefix(len(body)), body)
    if pending:
        _merge_pending(parent, pending)


class _NeedsProto(Exception):
    """This node is written through the protobuf API (see :func:`emit_nodes`)."""


def _merge_pending(parent: Any, pending: list[bytes]) -> None:
    """Append the encoded fields in ``pending`` (nodes, inputs, value_info entries) to ``parent``."""
    parent.MergeFromString(b"".join(pending))
    pending.clear()


def _input_names(node: ir.Node, context: BodyContext, nodes: Any, initializers: Any) -> list[str]:
    known = context.names.get
    inputs = [
        "" if value is None else known(value) or _input_name(value, context, nodes, initializers)
        for value in node.inputs
    ]
    # Trailing omitted inputs are dropped, as onnx.helper does; inner ones stay "".
    while inputs and inputs[-1] == "":
        inputs.pop()
    return inputs


def _input_fields(node: ir.Node, context: BodyContext, nodes: Any, initializers: Any) -> list[bytes]:
    """The encoded inputs of ``node``, naming those not named yet (and remembering the
    encoding of each value read)."""
    fields: list[bytes] = []
    reads = context.read_fields
    for value, name in zip(node.inputs, _input_names(node, context, nodes, initializers)):
        found = None if value is None else reads.get(value)
        if found is None:
            found = node_wire.string_field(node_wire.NODE_INPUT, name)
            if value is not None:
                reads[value] = found
        fields.append(found)
    return fields


def _held_attribute_fields(node: ir.Node, context: BodyContext) -> bytes:
    """The encoded attributes of a node that holds them unread, the first time the export
    meets their key (kept in ``export.wire.held_attributes`` for the next): the serialized
    AttributeProtos copied where the key is them (written as the file had them, as
    onnx.compose copies nodes), else decoded and encoded."""
    key = node.unread_attributes
    if type(key) is ir.SerializedAttributes:
        encoded = b"".join([node_wire.message_field(node_wire.NODE_ATTRIBUTE, field) for field in key])
        context.export.elem_types.update(key.elem_types)
    else:
        encoded = _attribute_fields(node, context)  # (decodes them)
    context.export.wire.held_attributes[key] = encoded
    return encoded


def _rare_fields(node: ir.Node, context: BodyContext, attributes: bool = True) -> bytes:
    """The encoded overload, doc string, metadata and (``attributes``) attributes of ``node``."""
    fields: list[bytes] = []
    if node.overload:
        context.export.need(IR_FUNCTION_OVERLOAD)
        fields.append(node_wire.string_field(node_wire.NODE_OVERLOAD, node.overload))
    if node.doc_string:
        fields.append(node_wire.string_field(node_wire.NODE_DOC_STRING, node.doc_string))
    if node.metadata_props:
        context.export.need(IR_METADATA_PROPS)
        fields.append(node_wire.metadata_field(node.metadata_props))
    if attributes:
        fields.append(_attribute_fields(node, context))
    return b"".join(fields)


def _attribute_fields(node: ir.Node, context: BodyContext) -> bytes:
    """The encoded attributes of ``node``."""
    fields: list[bytes] = []
    wire = context.export.wire
    for attr in node.attributes.values():
        key = None
        if attr.kind == K.TENSOR:
            key = node_wire.tensor_attribute_key(attr)
            encoded = None if key is None else wire.attributes.get(key)
        else:
            encoded = node_wire.plain_attribute_field(attr, wire)
        if encoded is None:
            if attr.kind in _SUBGRAPH_KINDS or (attr.ref_attr_name is not None and context.attr_values is not None):
                # (a subgraph's omitted outputs may be named after it is written; a bound
                # reference may stand for a subgraph)
                raise _NeedsProto
            proto = onnx.AttributeProto()
            fill_attribute(proto, attr, context)  # (records the element type: a cached one's is already)
            encoded = node_wire.message_field(node_wire.NODE_ATTRIBUTE, proto.SerializeToString())
            if key is not None:
                wire.attributes[key] = encoded
        fields.append(encoded)
    return b"".join(fields)


_SUBGRAPH_KINDS = frozenset((K.GRAPH, K.GRAPHS))


def _written_op(node: ir.Node, context: BodyContext) -> tuple[str, str]:
    """(domain, op type) as written: a call names the function as the export does."""
    if node.callee is not None:
        return context.function_names.get(id(node.callee), (node.domain, node.op_type))
    return node.domain, node.op_type


def _emit_node_proto(node: ir.Node, context: BodyContext, nodes: Any, initializers: Any) -> None:
    """Write ``node``, its inputs and outputs named already, through the protobuf API."""
    outputs = context.define_outputs(node)  # (named already: the same names again)
    domain, op_type = _written_op(node, context)
    proto = nodes.add()
    proto.op_type = op_type
    if domain:
        proto.domain = domain
    proto.input.extend(_input_names(node, context, nodes, initializers))
    proto.output.extend(outputs)
    for index, value in enumerate(node.outputs):
        if outputs[index] == "":
            context.omitted[id(value)] = (proto, index)
    if node.name:
        proto.name = node.name
    if node.overload:
        context.export.need(IR_FUNCTION_OVERLOAD)
        proto.overload = node.overload
    if node.doc_string:
        proto.doc_string = node.doc_string
    if node.metadata_props:
        fill_metadata_props(proto, node.metadata_props, context.export)
    if node.attributes:
        add_attribute = proto.attribute.add
        for attr in node.attributes.values():
            fill_attribute(add_attribute(), attr, context)


def fill_value_info(proto: onnx.ValueInfoProto, name: str, value: ir.Value, context: BodyContext) -> None:
    """Write ``value``'s name, type and doc string into ``proto``."""
    proto.name = name
    if value.type is not None:
        fill_type_shared(proto.type, value.type, context.export)
    if value.doc_string:
        proto.doc_string = value.doc_string


def fill_graph(proto: onnx.GraphProto, graph: ir.Graph, context: BodyContext) -> None:
    """Write ``graph`` (inputs, initializers, nodes, outputs, value_info) into ``proto``."""
    proto.name = graph.name or "graph"
    if graph.doc_string:
        proto.doc_string = graph.doc_string
    if graph.metadata_props:
        fill_metadata_props(proto, graph.metadata_props, context.export)
    emit_inputs(graph.inputs, context, proto)
    emit_initializers(graph.initializers, context, proto)
    for name, sparse in graph.sparse_initializers.items():
        # Nodes read a sparse initializer through a Value of the same name (named on first read).
        sparse_proto = proto.sparse_initializer.add()
        fill_sparse(sparse_proto, sparse, context.export)
        sparse_proto.values.name = name
    emit_nodes(graph.nodes, context, proto, proto.initializer)
    nodes = proto.node
    for name in output_names(graph, context, nodes):
        proto.output.add(name=name)
    for output, value in zip(proto.output, graph.outputs):
        if value.type is not None:
            fill_type_shared(output.type, value.type, context.export)
        if value.doc_string:
            output.doc_string = value.doc_string
    emit_value_info(graph.value_info, context, proto)


def emit_inputs(values: list[ir.Value], context: BodyContext, parent: onnx.GraphProto) -> None:
    """``values`` named (on first sight) and appended to the inputs of ``parent``: encoded
    and merged in one call, as value_info entries are (an IR-3 model lists every weight)."""
    reads, export = context.read_fields, context.export
    tag, length_prefix = node_wire.GRAPH_INPUT, node_wire.length_prefix
    entries: list[bytes] = []
    for value in values:
        name = context.define(value)
        name_field = reads.get(value) if _NAME_IS_INPUT_FIELD else None
        if name_field is None:  # (a name the encoder cannot take: protobuf says what is wrong with it)
            if entries:
                _merge_pending(parent, entries)
            fill_value_info(parent.input.add(), name, value, context)
            continue
        body = _value_info_body(name_field, value, export)
        entries.append(tag + length_prefix(len(body)) + body)
    if entries:
        _merge_pending(parent, entries)


def emit_value_info(values: list[ir.Value], context: BodyContext, parent: Any) -> int:
    """The value_info entries of ``values`` (those written, with a type) appended to
    ``parent`` (a GraphProto or FunctionProto): encoded and merged in one call, as nodes
    are (an exported model has an entry a value).  Returns how many were written."""
    names, reads, export = context.names, context.read_fields, context.export
    tag = node_wire.FUNCTION_VALUE_INFO if isinstance(parent, onnx.FunctionProto) else node_wire.GRAPH_VALUE_INFO
    length_prefix = node_wire.length_prefix
    tag_heads = _TAG_HEADS[tag]  # (an entry's tag and length, if short)
    # (ValueInfoProto.name and NodeProto.input are both field 1: a value read by a node has
    # its name field encoded already)
    read_field = reads.get if _NAME_IS_INPUT_FIELD else _no_field
    last_type: ir.IRType | None = None  # (an exported model spells one type many times in a row)
    type_field = b""
    entries: list[bytes] = []  # (an entry whole, or the three parts of a usual one)
    append, whole = entries.append, 0
    for value in values:
        value_type = value.type
        if value_type is None:
            continue
        name_field = read_field(value)
        if name_field is None or value.doc_string:
            if name_field is None:
                defined = names.get(value)
                if not defined:
                    continue  # (a value the graph does not hold)
                name_field = node_wire.string_field(node_wire.VALUE_INFO_NAME, defined)
            body = _value_info_body(name_field, value, export)
            append(tag + length_prefix(len(body)) + body)
            whole += 1
            continue
        # (the usual entry, a name read by a node and a type, as _value_info_body writes it)
        if value_type is not last_type:
            type_field = _type_field(value_type, export)
            last_type = value_type
        size = len(name_field) + len(type_field)
        entries += (tag_heads[size] if size < 128 else tag + length_prefix(size), name_field, type_field)
    written = whole + (len(entries) - whole) // 3
    if entries:
        _merge_pending(parent, entries)  # (which empties the list)
    return written


_NAME_IS_INPUT_FIELD = node_wire.VALUE_INFO_NAME == node_wire.NODE_INPUT
# a node's tag and short length, by length, in a graph and in a function
_NODE_TAG_HEADS = {tag: [tag + size for size in node_wire.SHORT_LENGTHS]
                   for tag in (node_wire.GRAPH_NODE, node_wire.FUNCTION_NODE)}
# a value_info entry's tag and short length, by length, for a graph's and a function's
_TAG_HEADS = {tag: [tag + size for size in node_wire.SHORT_LENGTHS]
              for tag in (node_wire.GRAPH_VALUE_INFO, node_wire.FUNCTION_VALUE_INFO)}


def _no_field(value: ir.Value) -> None:
    """No encoded name field (where the schema's ValueInfoProto.name is not NodeProto.input's field)."""
    return None


def _value_info_body(name_field: bytes, value: ir.Value, export: Export) -> bytes:
    """A ValueInfoProto's fields: its name (encoded by the caller), type and doc string."""
    body = name_field
    value_type = value.type
    if value_type is not None:
        body += _type_field(value_type, export)
    if value.doc_string:
        body += node_wire.string_field(node_wire.VALUE_INFO_DOC_STRING, value.doc_string)
    return body


def _type_field(ir_type: ir.IRType, export: Export) -> bytes:
    """A ValueInfoProto's encoded type field (made once an export: :func:`_new_type_field`)."""
    found = export.wire.types.get(id(ir_type))
    return found[1] if found is not None else _new_type_field(ir_type, export)


def _new_type_field(ir_type: ir.IRType, export: Export) -> bytes:
    """A ValueInfoProto's encoded type field, the first time an export meets this type
    object (kept in ``export.wire.types`` for the next)."""
    made = onnx.TypeProto()
    fill_type_shared(made, ir_type, export)  # (records the type's element types and IR needs once)
    field = node_wire.message_field(node_wire.VALUE_INFO_TYPE, made.SerializeToString())
    export.wire.types[id(ir_type)] = (ir_type, field)
    return field


def output_names(graph: ir.Graph, context: BodyContext, nodes: Any) -> list[str]:
    """Output names; a value returned twice is copied by an Identity so names stay unique."""
    names: list[str] = []
    seen: set[str] = set()
    for value in graph.outputs:
        name = context.name_read_value(value)
        if name in seen:
            copy = context.fresh(name)
            nodes.add(op_type="Identity", input=[name], output=[copy])
            name = copy
        seen.add(name)
        names.append(name)
    return names


def graph_to_proto(graph: ir.Graph) -> onnx.GraphProto:
    """One IR graph as a ``GraphProto``, as used for If/Loop/Scan body attributes.

    Attribute references are kept, outer-scope values are read by name.  Model export
    calls the same code with one namer for the whole model, so prefer ``model_to_proto``
    for anything that is not a standalone subgraph.

    >>> from dsl import ir, FLOAT
    >>> x = ir.Value("x", FLOAT[2])
    >>> y = ir.Value("y", FLOAT[2])
    >>> g = ir.Graph("g", [x], [y], [ir.Node("Relu", inputs=[x], outputs=[y])])
    >>> graph_to_proto(g).node[0].op_type
    'Relu'
    """
    proto = onnx.GraphProto()
    context = BodyContext(Export(), attr_values=None, function_names={})
    fill_graph(proto, graph, context)
    return proto


