"""The one intermediate representation every front end produces and every back end reads.

It is deliberately independent of protobuf: front ends (Python ``ast``, XML markup, ONNX
protos) build these plain objects, and back ends (ONNX protos, Python source, the eager
evaluator) read them.  Values are objects, not names, so renaming or moving a value
never leaves a dangling reference; names are only resolved when a back end writes text.

Element types are stored as ONNX ``TensorProto.DataType`` integers so that this module
needs no import of onnx; their names are here (for reprs), ``dsl.types`` adds numpy
dtypes and annotation objects.  :func:`walk` is the one way to visit every node of a
graph and of the subgraphs in its attributes; :func:`use_counts` counts readers.
"""

from __future__ import annotations

import enum
import operator
import typing
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any, Union

import numpy as np

__all__ = [
    "outer_values", "needed_nodes", "bound_attributes", "resolve_attribute", "SourceLocation", "TensorType",
    "SequenceType", "OptionalType", "MapType", "SparseTensorType", "IRType", "Tensor", "SparseTensor", "AttrKind",
    "Attr", "AttrParam", "Value", "Node", "held_node", "SerializedAttributes", "Graph", "Function", "Model",
    "ELEMENT_TYPE_NAMES", "element_type_name", "subgraphs", "walk", "holds_subgraphs", "may_hold_subgraphs",
    "use_counts",
]

# ONNX ``TensorProto.DataType`` names, index = number - 1 (ONNX's own numbering).
ELEMENT_TYPE_NAMES: tuple[str, ...] = (
    "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16",
    "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0",
    "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2",
)


def element_type_name(enum: int) -> str:
    """``1 -> "FLOAT"``; unknown numbers render as ``"DataType(N)"`` rather than failing."""
    if 1 <= enum <= len(ELEMENT_TYPE_NAMES):
        return ELEMENT_TYPE_NAMES[enum - 1]
    return f"DataType({enum})"


@dataclass(slots=True, frozen=True)
class SourceLocation:
    """Where an IR object came from in the user's text, so errors can point at it.

    ``line`` is 1-based and ``column`` 0-based (as in Python's ``ast``); ``source_line``
    is the text of that line, kept so an error can be rendered long after the file
    changed or when the text came from a notebook cell that no longer exists.
    """

    file: str
    line: int
    column: int = 0
    source_line: str = ""
    end_column: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column + 1}"


# ----------------------------------------------------------------------------- types


@dataclass(slots=True, frozen=True)
class TensorType:
    """A tensor of ``elem_type`` (an ONNX DataType integer).

    ``shape`` is ``None`` for unknown rank; otherwise one entry per axis: an ``int`` for a
    fixed size, a ``str`` for a named symbolic size, ``None`` for an unnamed unknown size.
    """

    elem_type: int
    shape: tuple[int | str | None, ...] | None = ()

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __or__(self, other: Any) -> Any:  # FLOAT[2] | None in an annotation: a typing.Union
        return typing.Union[self, other]

    def __ror__(self, other: Any) -> Any:
        return typing.Union[other, self]

    def __repr__(self) -> str:
        name = element_type_name(self.elem_type)
        if self.shape is None:
            return f"{name}[...]"
        if not self.shape:
            return name
        return f"{name}[{', '.join(repr(d) for d in self.shape)}]"


@dataclass(slots=True, frozen=True)
class SparseTensorType:
    """A sparse tensor (only seen in models read from ONNX)."""

    elem_type: int
    shape: tuple[int | str | None, ...] | None = None


@dataclass(slots=True, frozen=True)
class SequenceType:
    """An ONNX sequence whose elements are all of ``elem``."""

    elem: IRType | None


@dataclass(slots=True, frozen=True)
class OptionalType:
    """An ONNX optional holding ``elem`` or nothing."""

    elem: IRType | None


@dataclass(slots=True, frozen=True)
class MapType:
    """An ONNX map (ai.onnx.ml) from ``key_type`` (a DataType integer) to ``value``."""

    key_type: int
    value: IRType | None


IRType = Union[TensorType, SparseTensorType, SequenceType, OptionalType, MapType]


# ---------------------------------------------------------------------------- tensors


@dataclass(slots=True, eq=False)
class Tensor:
    """Constant tensor data: attribute values, initializers and Constant payloads.

    ``array`` is a numpy array whose dtype matches ``elem_type`` (``ml_dtypes`` dtypes for
    bfloat16, float8 and 4-bit types; ``object`` of ``bytes``/``str`` for STRING).
    ``external`` keeps the external-data location of a weight read lazily from disk.
    """

    array: np.ndarray
    elem_type: int
    name: str = ""
    doc_string: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    def __repr__(self) -> str:
        return f"Tensor({element_type_name(self.elem_type)}{list(self.shape)}, name={self.name!r})"


@dataclass(slots=True, eq=False)
class SparseTensor:
    """COO sparse tensor: ``values`` at ``indices`` of a tensor of shape ``dims``."""

    values: Tensor
    indices: Tensor
    dims: tuple[int, ...]


# ------------------------------------------------------------------------- attributes


class AttrKind(enum.IntEnum):
    """Attribute kinds, numbered as ONNX's ``AttributeProto.AttributeType``."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14


@dataclass(slots=True, eq=False)
class Attr:
    """An attribute on a node.

    ``value`` holds, by kind: float, int, str (STRING values are text; bytes that are not
    UTF-8 stay bytes), :class:`Tensor`, :class:`Graph`, :class:`SparseTensor`, an
    :data:`IRType`, or a list of those.  Inside a function body an attribute may instead
    forward one of the function's own attribute parameters: then ``ref_attr_name`` names
    it and ``value`` is ``None``.
    """

    name: str
    kind: AttrKind
    value: Any
    ref_attr_name: str | None = None
    doc_string: str = ""
    location: SourceLocation | None = None

    def __repr__(self) -> str:
        if self.ref_attr_name is not None:
            return f"Attr({self.name}=@{self.ref_attr_name})"
        return f"Attr({self.name}={self.value!r}: {self.kind.name})"


@dataclass(slots=True, eq=False)
class AttrParam:
    """An attribute parameter of a :class:`Function`, with its kind and optional default."""

    name: str
    kind: AttrKind
    default: Attr | None = None
    location: SourceLocation | None = None


# --------------------------------------------------------------- values, nodes, graphs


@dataclass(slots=True, eq=False)
class Value:
    """One SSA value: a graph input, an initializer, or the output of exactly one node.

    ``producer`` is the node that computes it (``None`` for inputs and initializers);
    ``initializer`` holds the data when the value is a graph initializer.
    """

    name: str
    type: IRType | None = None
    producer: Node | None = field(default=None, repr=False)
    initializer: Tensor | None = field(default=None, repr=False)
    doc_string: str = field(default="", repr=False)
    location: SourceLocation | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"%{self.name}" + (f": {self.type!r}" if self.type is not None else "")


@dataclass(slots=True, eq=False)
class Node:
    """One operator application.

    ``inputs`` may contain ``None`` for an omitted optional input; ``outputs`` may hold
    values never used (an optional output is omitted by giving it the name ``""``).
    ``callee`` points at the IR function when the node calls a model-local function, so
    back ends can collect callees transitively.

    ``unread_attributes``: see :meth:`hold_unread_attributes` (a held node has no subgraph).
    """

    op_type: str
    domain: str = ""
    inputs: list[Value | None] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    attributes: dict[str, Attr] = field(default_factory=dict)
    name: str = ""
    overload: str = ""
    doc_string: str = ""
    callee: Function | None = field(default=None, repr=False)
    location: SourceLocation | None = field(default=None, repr=False)
    # An exporter's stack traces and module names; None, not {}, when there are none
    # (most nodes: an empty dict each would cost 72 bytes a node).
    metadata_props: dict[str, str] | None = field(default=None, repr=False)
    unread_attributes: Hashable | None = field(default=None, init=False, repr=False)
    # (while attributes are held: what makes them from unread_attributes; the attributes slot is unset)
    _decode_attributes: Callable[[Any], dict[str, Attr]] | None = field(default=None, init=False, repr=False)

    def hold_unread_attributes(self, key: Hashable, decode: Callable[[Any], dict[str, Attr]]) -> None:
        """Hold the attributes undecoded: the first read of ``attributes`` makes them with
        ``decode(key)``; until then ``unread_attributes`` is ``key``, so a back end writing
        many nodes encodes each distinct set once.  For a front end reading a file whose
        attributes a pass may never look at (a merge renames values, not attributes):
        equal keys must decode to equal attributes, none of them a graph.  Code replacing
        the attributes reads them first (an assignment alone would leave the key of the old).

        >>> node = Node("Relu")
        >>> node.hold_unread_attributes(("alpha",), lambda key: {})
        >>> node.attributes, node.unread_attributes
        ({}, None)
        """
        del self.attributes
        self.unread_attributes = key
        self._decode_attributes = decode
        self.__class__ = _HeldNode

    def __repr__(self) -> str:
        ins = ", ".join("None" if v is None else f"%{v.name}" for v in self.inputs)
        outs = ", ".join(f"%{v.name}" for v in self.outputs)
        op = f"{self.domain}::{self.op_type}" if self.domain else self.op_type
        attrs = "".join(f", {a!r}" for a in self.attributes.values())
        return f"{outs} = {op}({ins}{attrs})"


class _HeldNode(Node):
    """A Node holding its attributes unread until their first read, which makes it a Node
    again (only these pay for ``__getattr__``, which slows every attribute read)."""

    __slots__ = ()

    if not TYPE_CHECKING:  # (hidden from mypy, which would take any misspelt attribute for a held one)

        def __getattr__(self, name: str) -> Any:
            decode = self._decode_attributes if name == "attributes" else None  # (or a half-built copy)
            if decode is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            attributes = self.attributes = decode(self.unread_attributes)
            self.unread_attributes = self._decode_attributes = None
            self.__class__ = Node
            return attributes


class SerializedAttributes(tuple):  # (of bytes)
    """A key of :meth:`Node.hold_unread_attributes` that is the node's attributes as
    protobuf serialized them (one ``AttributeProto`` each): a writer may copy them as they
    are, recording ``elem_types`` (the element types of their tensors) as if it had encoded
    them, instead of decoding and encoding them again.

    >>> key = SerializedAttributes([b"\\n\\x04axis\\x18\\x01\\xa0\\x01\\x02"], frozenset())
    >>> key == (b"\\n\\x04axis\\x18\\x01\\xa0\\x01\\x02",), key.elem_types
    (True, frozenset())
    """

    elem_types: frozenset[int]

    def __new__(cls, fields: Iterable[bytes], elem_types: frozenset[int]) -> SerializedAttributes:
        key = super().__new__(cls, fields)
        key.elem_types = elem_types
        return key


def held_node(op_type: str, domain: str, inputs: list[Value | None], name: str, overload: str, doc_string: str,
              key: Hashable, decode: Callable[[Any], dict[str, Attr]]) -> Node:
    """``Node(op_type, domain, inputs, [], {}, name, overload, doc_string)`` holding its
    attributes unread under ``key`` (:meth:`Node.hold_unread_attributes`), made at half the
    cost, for a reader making one a node of a large model: every slot but ``attributes`` set."""
    node = object.__new__(_HeldNode)
    node.op_type, node.domain, node.inputs, node.outputs, node.name = op_type, domain, inputs, [], name
    node.overload, node.doc_string, node.callee, node.location, node.metadata_props = overload, doc_string, None, None, None
    node.unread_attributes, node._decode_attributes = key, decode
    return node


@dataclass(slots=True, eq=False)
class Graph:
    """A list of nodes in topological order, with inputs, outputs and initializers.

    Subgraphs (If/Loop/Scan bodies) are Graphs too; their nodes may read values of an
    enclosing graph directly (outer-scope capture), exactly as ONNX allows.
    ``value_info`` lists intermediate values whose types are worth keeping.
    """

    name: str = ""
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    initializers: list[Value] = field(default_factory=list)
    sparse_initializers: dict[str, SparseTensor] = field(default_factory=dict)
    value_info: list[Value] = field(default_factory=list)
    doc_string: str = ""
    location: SourceLocation | None = field(default=None, repr=False)
    metadata_props: dict[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        lines = [f"graph {self.name}({', '.join(map(repr, self.inputs))}):"]
        lines += [f"    {init!r} = initializer" for init in self.initializers]
        lines += [f"    {node!r}" for node in self.nodes]
        lines.append(f"    return {', '.join(f'%{v.name}' for v in self.outputs)}")
        return "\n".join(lines)


@dataclass(slots=True, eq=False)
class Function:
    """A function: a graph with a name, a domain, attribute parameters and opset imports.

    Both a model's main graph and its model-local functions are built as Functions by
    the front ends; the back end decides whether one becomes a ``FunctionProto`` or the
    graph of a ``ModelProto``.  ``opset_imports`` maps each domain used to its version.
    """

    name: str
    graph: Graph
    domain: str = ""
    attr_params: list[AttrParam] = field(default_factory=list)
    opset_imports: dict[str, int] = field(default_factory=dict)
    doc_string: str = ""
    overload: str = ""
    location: SourceLocation | None = field(default=None, repr=False)

    @property
    def inputs(self) -> list[Value]:
        return self.graph.inputs

    @property
    def outputs(self) -> list[Value]:
        return self.graph.outputs

    @property
    def nodes(self) -> list[Node]:
        return self.graph.nodes

    def callees(self) -> list[Function]:
        """Every function called from this one (transitively, subgraphs included), callees first."""
        seen: set[int] = set()
        order: list[Function] = []

        def visit(graph: Graph) -> None:
            for node, _ in walk(graph):
                if node.callee is not None and id(node.callee) not in seen:
                    seen.add(id(node.callee))
                    visit(node.callee.graph)
                    order.append(node.callee)

        visit(self.graph)
        return order

    def __repr__(self) -> str:
        head = f"function {self.domain + '::' if self.domain else ''}{self.name}"
        params = ", ".join(p.name for p in self.attr_params)
        return f"{head}<{params}>\n{self.graph!r}"


@dataclass(slots=True, eq=False)
class Model:
    """A main graph plus model-local functions and the metadata a ModelProto carries."""

    graph: Graph
    functions: list[Function] = field(default_factory=list)
    opset_imports: dict[str, int] = field(default_factory=dict)
    ir_version: int | None = None
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    metadata_props: dict[str, str] = field(default_factory=dict)
    location: SourceLocation | None = field(default=None, repr=False)


# ------------------------------------------------------------------------- walking


def subgraphs(node: Node) -> Iterator[Graph]:
    """The graphs held by ``node``'s GRAPH and GRAPHS attributes (If branches, Loop bodies).

    Attributes held unread hold no graph: they are not decoded to tell."""
    if node.unread_attributes is not None:
        return
    for attr in node.attributes.values():
        if attr.value is None:
            continue
        if attr.kind == AttrKind.GRAPH:
            yield attr.value
        elif attr.kind == AttrKind.GRAPHS:
            yield from attr.value


def walk(graph: Graph) -> Iterator[tuple[Node, Graph]]:
    """Every node of ``graph`` and of its nested subgraphs, each with the graph it is in.

    A node comes before the nodes of its own subgraphs (pre-order), so a reader meets a
    value's outer-scope producer before any subgraph node that captures it.  Function
    bodies of callees are not entered: a callee is its own graph (walk ``node.callee.graph``).
    Graphs a caller replaces while walking are seen as they are when reached.
    """
    # A node's own iterator waits on the stack while its subgraphs are walked; a subgraph's
    # iterator is made when it is reached.  Most nodes hold no graph: one pass over their
    # attributes, with no generator, decides that.
    stack: list[tuple[Graph, Iterator[Node] | None]] = [(graph, None)]
    while stack:
        current, nodes = stack.pop()
        if nodes is None:
            nodes = iter(current.nodes)
        for node in nodes:
            yield node, current
            if node.unread_attributes is not None:
                continue  # (held unread: no graph among them)
            for attr in node.attributes.values():
                if attr.kind in _GRAPH_KINDS and attr.value is not None:
                    stack.append((current, nodes))
                    stack.extend((sub, None) for sub in reversed(list(subgraphs(node))))
                    break
            else:
                continue
            break


_GRAPH_KINDS = (AttrKind.GRAPH, AttrKind.GRAPHS)
_ATTRIBUTE_VALUES = operator.methodcaller("values")
_ATTRIBUTE_DICT = operator.attrgetter("attributes")
_UNREAD = operator.attrgetter("unread_attributes")
_KIND = operator.attrgetter("kind")


def holds_subgraphs(nodes: Sequence[Node]) -> bool:
    """Whether any of ``nodes`` has a GRAPH or GRAPHS attribute (If, Loop, Scan), its own
    subgraphs not looked into.

    Passes and the writer ask it before walking a graph: a real model's nodes mostly carry
    attributes (Conv's pads and strides), none of them a graph, and this loops in C over
    every attribute's kind where a walk costs a generator step a node.

    >>> holds_subgraphs([Node("Relu", inputs=[], outputs=[])])
    False
    """
    if _HeldNode in map(type, nodes):  # (attributes held unread hold no graph, and are not decoded)
        nodes = list(compress(nodes, map(operator.is_not, map(type, nodes), repeat(_HeldNode))))
    if not any(map(_ATTRIBUTE_DICT, nodes)):  # (a chain of Add/Relu: no attribute at all)
        return False
    kinds = set(map(_KIND, chain.from_iterable(map(_ATTRIBUTE_VALUES, map(_ATTRIBUTE_DICT, nodes)))))
    return not kinds.isdisjoint(_GRAPH_KINDS)


def may_hold_subgraphs(node: Node) -> bool:
    """False where ``node`` surely holds no subgraph: it has no attribute, or holds them
    unread (never graphs: :meth:`Node.hold_unread_attributes`; not decoded to tell).

    >>> may_hold_subgraphs(Node("Relu"))
    False
    """
    return node.unread_attributes is None and bool(node.attributes)


def outer_values(graphs: list[Graph]) -> list[Value]:
    """Values the graphs (and their own subgraphs) read but do not define, in first-read
    order: what a node holding them as bodies reads from its enclosing graphs; a body's
    initializers count as read from outside (they are root weights)."""
    found: dict[Value, None] = {}
    for graph in graphs:
        inner = [graph, *(sub for node, _ in walk(graph) for sub in subgraphs(node))]
        defined = {value for each in inner for value in each.inputs}
        defined.update(value for node, _ in walk(graph) for value in node.outputs)
        for node, _ in walk(graph):
            found.update((value, None) for value in node.inputs if value is not None and value not in defined)
        for each in inner:
            found.update((value, None) for value in each.outputs if value not in defined)
    return list(found)


def needed_nodes(graph: Graph, outputs: list[Value]) -> list[Node]:
    """The nodes of ``graph`` (in its order) that computing ``outputs`` runs: their
    producers, transitively, a node's subgraphs' reads of enclosing values included."""
    own = {id(node) for node in graph.nodes}
    needed: set[int] = set()
    pending = list(outputs)
    seen: set[Value] = set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        node = value.producer
        if node is None or id(node) not in own or id(node) in needed:
            continue
        needed.add(id(node))
        pending.extend(read for read in node.inputs if read is not None)
        pending.extend(outer_values(list(subgraphs(node))))
    return [node for node in graph.nodes if id(node) in needed]


def bound_attributes(callee: Function, given: dict[str, Attr]) -> dict[str, Attr]:
    """What a call binds to the callee's attribute parameters: the call's own attributes,
    then the callee's defaults for those it does not give.  Every back end or pass that
    expands a call (inlining, the torch back end) reads the body's references from it."""
    bound = dict(given)
    for param in callee.attr_params:
        if param.name not in bound and param.default is not None:
            bound[param.name] = param.default
    return bound


def resolve_attribute(attr: Attr, bound: dict[str, Attr]) -> Attr | None:
    """``attr`` as it reads under ``bound`` (see :func:`bound_attributes`): a reference to a
    function attribute takes the bound value, under ``attr``'s own name; a reference to an
    attribute neither given nor defaulted is None (ONNX drops the attribute).  A bound value
    may itself be a reference, of the caller's own function."""
    if attr.ref_attr_name is None:
        return attr
    found = bound.get(attr.ref_attr_name)
    if found is None:
        return None
    return Attr(attr.name, found.kind, found.value, ref_attr_name=found.ref_attr_name,
                doc_string=attr.doc_string, location=attr.location)


def use_counts(graph: Graph) -> dict[Value, int]:
    """How often each value is read: as a node input anywhere in ``graph`` and its
    subgraphs (outer-scope captures included), or as an output of ``graph`` or a subgraph.
    Values nobody reads are absent."""
    counts: dict[Value, int] = {}
    for value in graph.outputs:
        counts[value] = counts.get(value, 0) + 1
    for node, _ in walk(graph):
        for read in node.inputs:
            if read is not None:
                counts[read] = counts.get(read, 0) + 1
        for sub in subgraphs(node):
            for value in sub.outputs:
                counts[value] = counts.get(value, 0) + 1
    return counts
