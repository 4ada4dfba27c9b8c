"""Attributes of ONNX nodes as IR attributes: decoded, remembered, or held unread.

The proto reader (:mod:`converter.from_onnx`) reads every node's attributes through
:class:`ProtoAttributeReader`.  Models repeat a few attribute values (Conv's pads, an
epsilon, ConstantOfShape's value): the serialized AttributeProto is the key under which
each distinct one is decoded once and made again for every node that carries it.

A reader told to hold attributes (``hold_attributes``, for a caller that will rewire a
model and write it back, such as ``converter.merge``) does not even make them: a node
whose attributes are all small values, none a graph, a reference or external data, keeps
the tuple of its serialized attributes as the key of :meth:`ir.Node.hold_unread_attributes`
and is decoded only if something reads ``node.attributes``.  Every key held was decoded
once when first met, so a malformed attribute fails while reading, as it does unheld.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from converter.proto_values import ProtoValueReader, field_size, text
from dsl import ir
from dsl.errors import ModelLoadError

if TYPE_CHECKING:
    import onnx

__all__ = ["ProtoAttributeReader", "NodeTail", "fields_in_number_order", "encoded_strings_size"]

_PLAIN_ATTRIBUTE_BYTES = 256  # serialized attributes up to this size are remembered (see remember_plain)
# FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS: the kinds remembered and held
PLAIN_KINDS = frozenset((1, 2, 3, 4, 6, 7, 8))
_LISTS = (ir.AttrKind.INTS, ir.AttrKind.FLOATS, ir.AttrKind.STRINGS)
_ATTR_KINDS = {int(kind): kind for kind in ir.AttrKind if kind}
_EXTERNAL = 1  # TensorProto.EXTERNAL

# (name, kind, value, doc string) of an attribute; a list value is copied for each node,
# a TENSOR's value is its Tensor's fields, the array read-only and shared
Template = tuple[str, ir.AttrKind, Any, str]
# (op_type, domain, overload, doc string, metadata_props, serialized attributes) of a node
# whose attributes are held unread: see ProtoAttributeReader.held_tail
NodeTail = tuple[str, str, str, str, "dict[str, str] | None", tuple[bytes, ...]]


@functools.cache
def fields_in_number_order() -> bool:
    """Whether the installed protobuf writes a NodeProto's inputs, outputs and name first,
    in that order, whatever order they were set in (what :meth:`ProtoAttributeReader.held_tail`
    relies on; where not, nodes are read field by field)."""
    import onnx

    node = onnx.NodeProto()
    node.metadata_props.add(key="k", value="v")
    node.overload, node.domain, node.doc_string = "o", "d", "s"
    node.attribute.add(name="a", type=onnx.AttributeProto.INT, i=1)
    node.op_type, node.name = "Op", "n"
    node.output.append("y")
    node.input.append("x")
    return node.SerializeToString().startswith(b"\n\x01x\x12\x01y\x1a\x01n\"\x02Op")


def encoded_strings_size(strings: list[str]) -> int:
    """The bytes that ``strings`` take as length-delimited fields of numbers below 16."""
    return sum(field_size(len(text_.encode("utf-8"))) for text_ in strings)


def made(template: Template) -> ir.Attr:
    """A node's own attribute made from a remembered one."""
    name, kind, value, doc_string = template
    if kind in _LISTS:
        value = value[:]
    elif kind is ir.AttrKind.TENSOR:
        value = ir.Tensor(*value)
    return ir.Attr(name, kind, value, None, doc_string)


class ProtoAttributeReader(ProtoValueReader):
    """The attributes of one conversion (its tensors and types: :class:`ProtoValueReader`)."""

    def __init__(self, source: str, folder: str | None = None, hold_attributes: bool = False,
                 after: ProtoAttributeReader | None = None) -> None:
        super().__init__(source, folder, after)
        self.hold_attributes = hold_attributes
        # serialized AttributeProto (small plain kinds) -> its Template (see remember_plain())
        self.plain_attributes: dict[bytes, Template]
        # serialized AttributeProto -> its Template where a node may hold it unread, False where not
        self.held: dict[bytes, Template | bool]
        # the tuples of serialized attributes a node may hold unread (one lookup a node)
        self.holdable: set[tuple[bytes, ...]]
        # a serialized node's fields after its names -> what they say, or False (see held_tail)
        self.node_tails: dict[bytes, NodeTail | bool]
        if after is not None:
            # (models read to become one share what the reader before, of the same folder and
            # hold_attributes, learnt: see ProtoValueReader; a tail names no callee)
            self.plain_attributes, self.held, self.holdable = after.plain_attributes, after.held, after.holdable
            self.node_tails = after.node_tails
        else:
            self.plain_attributes, self.held, self.holdable, self.node_tails = {}, {}, set(), {}

    def graph(self, proto: onnx.GraphProto, parent: Any) -> ir.Graph:
        raise NotImplementedError  # (the proto reader reads graphs, with its scopes)

    def attribute(self, proto: onnx.AttributeProto, scope: Any,
                  subgraphs: list[tuple[ir.Attr, Any]] | None = None) -> ir.Attr:
        """The IR attribute; with ``subgraphs``, graph values are left to the caller: the
        Attr (value ``None`` for now) and its proto are appended there."""
        type_number = proto.type
        kind = _ATTR_KINDS.get(type_number) if type_number else _guess_kind(proto)
        if kind is None:
            raise ModelLoadError(
                f"{self.source}: attribute {proto.name!r} has unknown type {type_number}",
                hint="the model is malformed or newer than this onnx; run onnx.checker.check_model on it",
            )
        if proto.ref_attr_name:
            return ir.Attr(proto.name, kind, None, ref_attr_name=proto.ref_attr_name, doc_string=proto.doc_string)
        value: Any
        # Dispatch on the plain int (enum attribute lookups cost more), most frequent kinds
        # first; protobuf already hands out Python ints, floats and (sliced) lists.
        number = type_number or int(kind)
        if number == 7:  # INTS
            value = proto.ints[:]
        elif number == 2:  # INT
            value = proto.i
        elif number == 1:  # FLOAT
            value = proto.f
        elif number == 4:  # TENSOR
            value = self.attribute_tensor(proto.t)
        elif number == 3:  # STRING
            value = text(proto.s)
        elif number == 5 or number == 10:  # GRAPH, GRAPHS
            if subgraphs is not None:
                attr = ir.Attr(proto.name, kind, None, None, proto.doc_string)
                subgraphs.append((attr, proto))
                return attr
            value = self.graph(proto.g, scope) if number == 5 else [self.graph(g, scope) for g in proto.graphs]
        elif number == 6:  # FLOATS
            value = proto.floats[:]
        elif number == 11:  # SPARSE_TENSOR
            value = self.sparse_tensor(proto.sparse_tensor)
        elif number == 13:  # TYPE_PROTO
            value = self.type(proto.tp)
        elif number == 8:  # STRINGS
            value = [text(s) for s in proto.strings]
        elif number == 9:  # TENSORS
            value = [self.tensor(t) for t in proto.tensors]
        elif number == 12:  # SPARSE_TENSORS
            value = [self.sparse_tensor(s) for s in proto.sparse_tensors]
        elif number == 14:  # TYPE_PROTOS
            value = [self.type(t) for t in proto.type_protos]
        else:
            raise ModelLoadError(
                f"{self.source}: attribute {proto.name!r} has no value (kind {kind.name})",
                hint="the model is malformed; run onnx.checker.check_model on it",
            )
        return ir.Attr(proto.name, kind, value, None, proto.doc_string)

    def remember_plain(self, key: bytes, attr: ir.Attr) -> None:
        """Keep what the node reader needs to make ``attr`` again from its serialized
        ``key``: small values only, and a tensor only when its array is the shared read-only one."""
        template = _template(key, attr)
        if template is not None:
            if attr.kind in _LISTS:  # (a private copy: the first node's list is its own)
                template = (template[0], template[1], list(template[2]), template[3])
            self.plain_attributes[key] = template

    def learn_held(self, keys: tuple[bytes, ...], protos: Any, scope: Any) -> bool:
        """Whether a node whose serialized attributes are ``keys`` (of ``protos``) may hold
        them unread; each key not met before is decoded now (a malformed one raises here)."""
        held = self.held
        for key, proto in zip(keys, protos):
            if key in held:
                continue
            if proto.type not in PLAIN_KINDS or (proto.type == 4 and proto.t.data_location == _EXTERNAL):
                held[key] = False  # (external data is read relative to this reader's folder)
                continue
            held[key] = _template(key, self.attribute(proto, scope)) or False
        if all(map(held.__getitem__, keys)):
            self.holdable.add(keys)
            return True
        return False

    def held_tail(self, wire: bytes, start: int, proto: onnx.NodeProto, scope: Any) -> NodeTail | bool:
        """What the fields of the serialized node ``wire`` after its names (from ``start``)
        say, remembered under those bytes for the next node that has them; False where the
        node's attributes cannot be held (see :meth:`learn_held`) or the names do not take
        ``start`` bytes.

        The reader hands every node with attributes here: a model's nodes repeat a few such
        tails (a Conv's op type and attributes), so one serialization and one lookup a node
        replace reading six fields and serializing each attribute.  Protobuf writes a node's
        fields in field-number order (:func:`fields_in_number_order` checks this once), and
        inputs, outputs and name are fields 1-3: what follows them is the rest of the node."""
        import onnx

        names = onnx.NodeProto()
        names.input.extend(proto.input)
        names.output.extend(proto.output)
        if proto.HasField("name"):
            names.name = proto.name
        tail: NodeTail | bool = False
        if names.SerializeToString() == wire[:start]:
            attributes = proto.attribute
            keys = tuple(map(onnx.AttributeProto.SerializeToString, attributes))
            if keys in self.holdable or self.learn_held(keys, attributes, scope):
                domain = proto.domain
                metadata_props = {p.key: p.value for p in proto.metadata_props} or None
                # (a writer copies these bytes: the element types of their tensors go with them)
                templates = [self.held[key] for key in keys]
                elem_types = frozenset(t[2][1] for t in templates if t[1] is ir.AttrKind.TENSOR)  # type: ignore[index]
                tail = (proto.op_type, "" if domain == "ai.onnx" else domain, proto.overload, proto.doc_string,
                        metadata_props, ir.SerializedAttributes(keys, elem_types))
        self.node_tails[wire[start:]] = tail
        return tail

    def decode_held(self, keys: tuple[bytes, ...]) -> dict[str, ir.Attr]:
        """The attributes a node held unread under ``keys`` (see :meth:`learn_held`)."""
        held = self.held
        attributes = {}
        for key in keys:
            attr = made(held[key])  # type: ignore[arg-type]  # (a held key's entry is its Template)
            attributes[attr.name] = attr
        return attributes


def _template(key: bytes, attr: ir.Attr) -> Template | None:
    """What makes ``attr`` again, for a small value of a plain kind with no reference."""
    if attr.ref_attr_name is not None or len(key) > _PLAIN_ATTRIBUTE_BYTES or attr.kind not in PLAIN_KINDS:
        return None
    value = attr.value
    if attr.kind == ir.AttrKind.TENSOR:
        if value.array.flags.writeable:  # (not one of attribute_tensor()'s shared arrays)
            return None
        value = (value.array, value.elem_type, value.name, value.doc_string)
    return (attr.name, attr.kind, value, attr.doc_string)


def _guess_kind(proto: Any) -> ir.AttrKind:
    """Attributes written before the ``type`` field existed: the set field says the kind."""
    K = ir.AttrKind
    for field_name, kind in (
        ("floats", K.FLOATS), ("ints", K.INTS), ("strings", K.STRINGS), ("tensors", K.TENSORS),
        ("graphs", K.GRAPHS), ("sparse_tensors", K.SPARSE_TENSORS), ("type_protos", K.TYPE_PROTOS),
    ):
        if len(getattr(proto, field_name)):
            return kind
    for field_name, kind in (
        ("t", K.TENSOR), ("g", K.GRAPH), ("sparse_tensor", K.SPARSE_TENSOR), ("tp", K.TYPE_PROTO),
    ):
        if proto.HasField(field_name):
            return kind
    if proto.HasField("s"):
        return K.STRING
    if proto.HasField("f"):
        return K.FLOAT
    if proto.HasField("i"):
        return K.INT
    return K.UNDEFINED
