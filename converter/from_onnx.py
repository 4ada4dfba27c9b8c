"""ONNX protos -> IR: the front end for models nobody wrote as Python.

A model exported from PyTorch or downloaded from a model zoo is read into the same
:mod:`dsl.ir` objects that ``@script`` produces, so every back end (Python source,
protos, eager execution) works on it unchanged.

What is kept, and how:

* names are resolved into :class:`ir.Value` objects once; a subgraph's reference to an
  enclosing graph's value (outer-scope capture) is the very same object;
* a node calling a model-local function gets ``Node.callee`` set to that
  :class:`ir.Function` (looked up by domain, name and overload);
* an initializer that is also listed as a graph input (the IR < 4 style) is one Value that
  appears both in ``graph.inputs`` and in ``graph.initializers``, so a back end can tell
  "overridable weight" from "constant weight";
* tensors are numpy arrays: plain numeric ones are views of ``raw_data`` (or built from
  the typed field), the rest come from ``onnx.numpy_helper.to_array`` (ml_dtypes arrays
  for the new element types); external data is read straight into its arrays
  (:mod:`converter.external_data`), never held in protos, and only from the model
  file's own folder (:mod:`dsl.tensor_protos`);
* types are shared: equal TypeProtos become one immutable IR type object.

Not kept: ``training_info``, ``quantization_annotation`` and function
``metadata_props`` (the IR has no slot for them); node and graph ``metadata_props``
(an exporter's stack traces and module names) are kept.  Conversion is one pass over nodes
(plus one over the few inputs and subgraphs that name values defined further down),
linear in the size of the model.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from converter.proto_attributes import PLAIN_KINDS, ProtoAttributeReader, encoded_strings_size, fields_in_number_order
from dsl import ir
from dsl.collection_pause import collection_paused
from dsl.errors import ModelLoadError
from dsl.held_tensor import HeldTensor

if TYPE_CHECKING:
    import onnx

__all__ = [
    "load_model", "from_proto", "model_from_proto", "model_and_values_from_proto", "models_and_values_from_protos",
    "function_from_proto", "graph_from_proto",
]

_UNSEEN: Any = object()
_LISTS = (ir.AttrKind.INTS, ir.AttrKind.FLOATS, ir.AttrKind.STRINGS)
_LOAD_HINT = "check that the file is a complete ONNX model (re-export or re-download it)"

FunctionKey = tuple[str, str, str]


def load_model(path: str | os.PathLike[str], *, load_external_data: bool = True) -> ir.Model:
    """Read an ONNX file (and its external data) into an :class:`ir.Model`.

    Corrupt, truncated or unreadable files raise :class:`dsl.errors.ModelLoadError`
    naming the file, never a protobuf traceback.

    >>> model = load_model("resnet50.onnx")        # doctest: +SKIP
    >>> len(model.graph.nodes)                      # doctest: +SKIP
    176
    """
    # External data is read below, straight into the arrays the IR keeps (converter.external_data),
    # from the model's own folder whichever ``load_external_data`` says (never from the working
    # directory); the flag is kept for onnx.load's callers.
    proto = read_model_proto(path, load_external_data=False)
    return model_from_proto(proto, source=os.fspath(path), folder=os.path.dirname(os.path.abspath(os.fspath(path))))


def read_model_proto(path: str | os.PathLike[str], *, load_external_data: bool = True) -> onnx.ModelProto:
    """``onnx.load`` with every failure turned into a :class:`ModelLoadError` naming the file."""
    import onnx
    from google.protobuf.message import DecodeError

    file_name = os.fspath(path)
    if not os.path.exists(file_name):
        raise ModelLoadError(f"{file_name}: no such file", hint="check the path")
    try:
        proto = onnx.load(file_name, load_external_data=load_external_data)
    except DecodeError as error:
        raise ModelLoadError(f"{file_name}: not a valid ONNX model ({error})", hint=_LOAD_HINT) from None
    except (OSError, onnx.checker.ValidationError) as error:
        raise ModelLoadError(
            f"{file_name}: could not read the model or its external data ({error})",
            hint="external data files must lie where the model says, relative to the model file",
        ) from None
    except (ValueError, RuntimeError, TypeError) as error:
        raise ModelLoadError(f"{file_name}: could not be parsed ({error})", hint=_LOAD_HINT) from None
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{file_name}: the file holds no graph (empty or not an ONNX model)", hint=_LOAD_HINT)
    return proto


def from_proto(proto: Any) -> ir.Model | ir.Function | ir.Graph:
    """A ModelProto, FunctionProto or GraphProto (or a path to a model file) -> IR.

    >>> import onnx
    >>> from converter.from_onnx import from_proto
    >>> model = from_proto(onnx.load("model.onnx"))   # doctest: +SKIP
    """
    import onnx

    if isinstance(proto, (str, os.PathLike)):
        return load_model(proto)
    if isinstance(proto, onnx.ModelProto):
        return model_from_proto(proto)
    if isinstance(proto, onnx.FunctionProto):
        return function_from_proto(proto)
    if isinstance(proto, onnx.GraphProto):
        return graph_from_proto(proto)
    raise ModelLoadError(
        f"from_proto takes a ModelProto, FunctionProto, GraphProto or a path, not {type(proto).__name__}",
        hint="load the file with onnx.load, or pass its path",
    )




def model_from_proto(
    proto: onnx.ModelProto, *, source: str = "<model>", folder: str | None = None, until: Iterable[str] | None = None,
    hold_attributes: bool = False,
) -> ir.Model:
    """Convert a ModelProto: its graph, its model-local functions and its metadata.

    External data not loaded yet is read from ``folder`` (the model file's), and refused
    when there is none: never relative to the working directory.

    ``until`` (names of main-graph values) stops reading the main graph's nodes at the
    first node by which all of them are defined: in a topologically sorted graph nothing
    after it computes them, so a cut that keeps only what computes them (``converter.cut``)
    reads that much.  The nodes after are neither read nor checked, and graph outputs and
    value_info entries naming values they define are left out.  A node read that takes a
    value only defined further down (an unsorted graph) raises ModelLoadError as an
    undefined read: read again without ``until``.

    ``hold_attributes=True`` leaves the attributes of most nodes undecoded until something
    reads them (see :mod:`converter.proto_attributes`), and keeps small initializers as
    their protos' bytes until something reads their arrays (:mod:`dsl.held_tensor`): for a
    caller that rewires the model and writes it back, which then encodes each distinct set
    of attributes once and copies the initializers' bytes."""
    with collection_paused():
        return _model_from_proto(proto, source, folder, until, hold_attributes)[0]


def model_and_values_from_proto(
    proto: onnx.ModelProto, *, source: str = "<model>", folder: str | None = None,
    until: Iterable[str] | None = None, hold_attributes: bool = False,
) -> tuple[ir.Model, dict[str, ir.Value] | None]:
    """:func:`model_from_proto`, and the main graph's values by name as read, where those are
    every value of the graph (None where not: a node holds a subgraph, or a value_info entry
    names a value nothing defines).  The reader binds each name once while it reads, so a
    pass that needs every value of a model it has just been handed (the merge renames them,
    the cut looks them up by name) takes this map instead of walking the graph; it is valid
    until a name changes.  ``until`` as :func:`model_from_proto` reads (the map holds the
    values of the nodes read).

    >>> model, values = model_and_values_from_proto(onnx.load("model.onnx"))   # doctest: +SKIP
    >>> values["x"] is model.graph.inputs[0]                                   # doctest: +SKIP
    True
    """
    with collection_paused():
        return _model_from_proto(proto, source, folder, until, hold_attributes)


def models_and_values_from_protos(
    protos: list[tuple[onnx.ModelProto, str]], *, hold_attributes: bool = False
) -> list[tuple[ir.Model, dict[str, ir.Value] | None]]:
    """Several ModelProtos (each with the name its errors give it) read to become one model
    (``converter.merge``, ``split``, ``join``): as :func:`model_and_values_from_proto` reads
    each, except that each reader starts from what the one before learnt (types, attributes,
    tiny tensors read once for all: two copies of a model are a common merge).

    >>> (first, _), (second, _) = models_and_values_from_protos([(a, "a.onnx"), (b, "b.onnx")])  # doctest: +SKIP
    """
    read = []
    reader = None
    with collection_paused():
        for proto, source in protos:
            reader = _Reader(source, None, hold_attributes, reader)
            read.append(_read_model(reader, proto))
    return read


def _model_from_proto(
    proto: onnx.ModelProto, source: str, folder: str | None = None, until: Iterable[str] | None = None,
    hold_attributes: bool = False,
) -> tuple[ir.Model, dict[str, ir.Value] | None]:
    reader = _Reader(source, folder, hold_attributes)
    reader.until = None if until is None else set(until)
    return _read_model(reader, proto)


def _read_model(reader: _Reader, proto: onnx.ModelProto) -> tuple[ir.Model, dict[str, ir.Value] | None]:
    function_protos = proto.functions
    functions = reader.declare_functions(list(function_protos)) if function_protos else []
    graph = reader.graph(proto.graph, None)
    if functions:
        reader.fill_functions()
    return _model(proto, graph, functions), reader.main_values


def _model(proto: onnx.ModelProto, graph: ir.Graph, functions: list[ir.Function]) -> ir.Model:
    metadata_props = proto.metadata_props
    return ir.Model(
        graph=graph,
        functions=functions,
        opset_imports=_opset_dict(proto.opset_import),
        ir_version=int(proto.ir_version) if proto.ir_version else None,
        producer_name=proto.producer_name,
        producer_version=proto.producer_version,
        domain=proto.domain,
        model_version=int(proto.model_version),
        doc_string=proto.doc_string,
        metadata_props={p.key: p.value for p in metadata_props} if metadata_props else {},
    )


def function_from_proto(
    proto: onnx.FunctionProto, functions: list[onnx.FunctionProto] | None = None, *, source: str = "<function>"
) -> ir.Function:
    """Convert one FunctionProto; ``functions`` are the others it may call (model-local functions)."""
    reader = _Reader(source)
    others = [f for f in (functions or []) if f is not proto]
    declared = reader.declare_functions([proto, *others])
    reader.fill_functions()
    return declared[0]


def graph_from_proto(proto: onnx.GraphProto, *, source: str = "<graph>") -> ir.Graph:
    """Convert a GraphProto on its own (it must not read values of an enclosing graph)."""
    with collection_paused():
        return _Reader(source).graph(proto, None)


def _opset_dict(opset_imports: Any) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in opset_imports}


class _Scope:
    """Names visible in one graph; lookups fall through to the enclosing graph's scope."""

    __slots__ = ("parent", "values")

    def __init__(self, parent: _Scope | None) -> None:
        self.values: dict[str, ir.Value] = {}
        self.parent = parent

    def lookup(self, name: str) -> ir.Value | None:
        scope: _Scope | None = self
        while scope is not None:
            found = scope.values.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None


class _Reader(ProtoAttributeReader):
    """One conversion: the function table, and the file name for error messages."""

    def __init__(self, source: str, folder: str | None = None, hold_attributes: bool = False,
                 after: _Reader | None = None) -> None:
        super().__init__(source, folder, hold_attributes, after)
        self.functions: dict[FunctionKey, ir.Function] = {}
        self._pending: list[tuple[Any, ir.Function]] = []
        self.until: set[str] | None = None  # the main graph's: see model_from_proto
        # the main graph's values by name, where they are all of its values (see model_and_values_from_proto)
        self.main_values: dict[str, ir.Value] | None = None
        self._whole = True  # (false once a graph being read holds a subgraph or an undefined value_info name)

    # ------------------------------------------------------------------ functions

    def declare_functions(self, protos: list[onnx.FunctionProto]) -> list[ir.Function]:
        """Make empty Functions first, so bodies can call each other in any order."""
        declared = []
        for proto in protos:
            function = ir.Function(
                name=proto.name,
                graph=ir.Graph(name=proto.name),
                domain=proto.domain,
                opset_imports=_opset_dict(proto.opset_import),
                doc_string=proto.doc_string,
                overload=getattr(proto, "overload", ""),
            )
            self.functions[(function.domain, function.name, function.overload)] = function
            self._pending.append((proto, function))
            declared.append(function)
        return declared

    def fill_functions(self) -> None:
        for proto, function in self._pending:
            self._function_body(proto, function)
        self._pending.clear()

    def _function_body(self, proto: onnx.FunctionProto, function: ir.Function) -> None:
        scope = _Scope(None)
        graph = function.graph
        graph.doc_string = proto.doc_string
        for name in proto.input:
            graph.inputs.append(self._define(scope, ir.Value(name)))
        params: list[ir.AttrParam] = []
        for name in proto.attribute:
            params.append(ir.AttrParam(name, ir.AttrKind.UNDEFINED))
        for default in proto.attribute_proto:
            attr = self.attribute(default, scope)
            params.append(ir.AttrParam(default.name, attr.kind, attr))
        self._nodes(proto.node, graph, scope, f"function {proto.domain}::{proto.name}")
        for name in proto.output:
            graph.outputs.append(self._use(scope, name, f"output of function {proto.name}"))
        self._value_info(getattr(proto, "value_info", ()), graph, scope)
        # A parameter declared without a default has no kind in the proto; its uses say it.
        kinds = _referenced_kinds(graph)
        for param in params:
            if param.kind == ir.AttrKind.UNDEFINED and param.name in kinds:
                param.kind = kinds[param.name]
        function.attr_params = params

    # --------------------------------------------------------------------- graphs

    def graph(self, proto: onnx.GraphProto, parent: _Scope | None) -> ir.Graph:
        until, self.until = self.until, None  # (the first graph read is the main one; subgraphs are read whole)
        scope = _Scope(parent)
        graph = ir.Graph(name=proto.name, doc_string=proto.doc_string)
        if proto.metadata_props:
            graph.metadata_props = {p.key: p.value for p in proto.metadata_props}
        where = f"graph {proto.name!r}" if proto.name else "the graph"
        initializers: dict[str, ir.Value] = {}
        tensor_type = self.tensor_type
        Value = ir.Value
        add_initializer = graph.initializers.append
        # (held as their protos' bytes when read for composition, which writes them back)
        for tensor in self.initializers(proto.initializer, self.hold_attributes):
            # Typed below: by its graph-input declaration if it has one, else by its data.
            value = Value(tensor.name, None, None, tensor)
            initializers[tensor.name] = value
            add_initializer(value)
        for sparse_proto in proto.sparse_initializer:
            sparse = self.sparse_tensor(sparse_proto)
            name = sparse_proto.values.name
            graph.sparse_initializers[name] = sparse
            value = ir.Value(name, type=ir.SparseTensorType(sparse.values.elem_type, sparse.dims))
            initializers.setdefault(name, value)
        # Inputs shadow initializers of the same name (the initializer-backed ones are the
        # very same Value).
        values = scope.values
        values.update(initializers)
        read_type, add_input, initializer_of = self.type, graph.inputs.append, initializers.get
        known_types = self.types
        for value_proto in proto.input:
            name = value_proto.name
            value = initializer_of(name) or Value(name)
            type_proto = value_proto.type
            declared = known_types.get(type_proto.SerializeToString(), _UNSEEN)  # (type(), without the call)
            if declared is _UNSEEN:
                declared = read_type(type_proto)
            value.type = declared or value.type
            doc_string = value_proto.doc_string
            if doc_string:  # (a new or initializer Value has "" already)
                value.doc_string = doc_string
            add_input(value)
            values[name] = value
        for value in graph.initializers:
            if value.type is None:
                data = value.initializer
                if data is not None:
                    shape = data.shape if type(data) is HeldTensor else data.array.shape  # (not decoded to tell)
                    value.type = tensor_type(data.elem_type, shape)
        waiting = None if until is None else {name for name in until if name not in values}
        self._nodes(proto.node, graph, scope, where, waiting)
        for value_proto in proto.output:
            if until is not None and value_proto.name not in values:
                continue  # (defined by a node not read)
            value = self._use(scope, value_proto.name, f"output of {where}")
            declared = self.type(value_proto.type)
            if declared is not None:
                value.type = declared
            if value_proto.doc_string:
                value.doc_string = value_proto.doc_string
            graph.outputs.append(value)
        self._value_info(proto.value_info, graph, scope, until is not None)
        if parent is None:
            self.main_values = values if self._whole else None
        return graph

    def _value_info(self, value_infos: Any, graph: ir.Graph, scope: _Scope, bound_only: bool = False) -> None:
        # (A typed model has an entry a value: the lookups are hoisted, type() is inlined.)
        bound, known_types, add = scope.values.get, self.types, graph.value_info.append
        # a graph input's or output's own declaration wins over a value_info entry for it
        interface = {*graph.inputs, *graph.outputs} if value_infos else set()
        for value_proto in value_infos:
            name = value_proto.name
            value = bound(name)
            if value is None:  # describes a name nothing defines: keep it, detached
                if bound_only:
                    continue  # (or a value of a node not read)
                value = ir.Value(name)
                self._whole = False
            type_proto = value_proto.type
            declared = known_types.get(type_proto.SerializeToString(), _UNSEEN)
            if declared is _UNSEEN:
                declared = self.type(type_proto)
            if declared is not None and value not in interface:
                value.type = declared
            doc_string = value_proto.doc_string
            if doc_string:
                value.doc_string = doc_string
            add(value)

    def _nodes(
        self, node_protos: Any, graph: ir.Graph, scope: _Scope, where: str, waiting: set[str] | None = None
    ) -> None:
        # One pass in graph order.  What may name a value defined further down (an input in
        # an unsorted but acyclic graph; a subgraph reading this graph's values) waits until
        # every name of this graph is bound.  ``waiting``: the pass stops once these names are
        # bound (see model_from_proto's ``until``).
        if waiting is not None and not waiting:
            node_protos = ()
        made: list[ir.Node] = []
        unresolved: list[tuple[ir.Node, list[str], Any]] = []
        subgraphs: list[tuple[ir.Attr, Any]] = []
        values = scope.values
        setdefault = values.setdefault
        get: Callable[[str], ir.Value | None] = values.get
        if "" in values:  # (a malformed input named ""; "" as a node input means "omitted")
            get = functools.partial(_bound_unless_omitted, values)
        Node, Value, Attr, TENSOR, held_node = ir.Node, ir.Value, ir.Attr, ir.AttrKind.TENSOR, ir.held_node
        attribute, plain_attributes, remember_plain = self.attribute, self.plain_attributes, self.remember_plain
        hold, holdable, learn_held, decode_held = self.hold_attributes, self.holdable, self.learn_held, self.decode_held
        serialized = _serialized_attribute()
        Tensor = ir.Tensor
        functions = self.functions
        node_tails, held_tail = self.node_tails, self.held_tail
        wire_node, has_field = _wire_node(), _has_field()
        tails_readable = hold and fields_in_number_order()
        for node_proto in node_protos:
            attribute_field = node_proto.attribute
            names = node_proto.input[:]  # (slicing a repeated field beats iterating it)
            output_field = node_proto.output
            # (one output, the usual case, is read by index: cheaper than slicing the field)
            single = output_field[0] if len(output_field) == 1 else ""
            output_names = [single] if single else output_field[:]
            # ("" is never bound, so an omitted input reads None like an unresolved one)
            inputs: list[ir.Value | None] = list(map(get, names))
            node_name = node_proto.name
            tail = None
            if attribute_field and tails_readable:
                # Held unread: everything after the names is one key (see held_tail), read once.
                raw = wire_node(node_proto)
                strings = names + output_names
                if node_name or has_field(node_proto, "name"):
                    strings.append(node_name)
                joined = "".join(strings)
                if joined.isascii() and (len(joined) < 128 or max(map(len, strings)) < 128):
                    start = len(joined) + 2 * len(strings)  # (a tag byte and a length byte a name)
                else:
                    start = encoded_strings_size(strings)
                tail = node_tails.get(raw[start:]) or held_tail(raw, start, node_proto, scope)
            if tail:
                op_type, domain, overload, doc_string, metadata_props, keys = tail  # type: ignore[misc]  # (truthy: a NodeTail)
                node = held_node(op_type, domain, inputs, node_name, overload, doc_string, keys, decode_held)
                if metadata_props is not None:
                    node.metadata_props = dict(metadata_props)
                attribute_field = ()
            else:
                domain = node_proto.domain
                node = Node(
                    node_proto.op_type, "" if domain == "ai.onnx" else domain, inputs, [], {},
                    node_name, node_proto.overload, node_proto.doc_string,
                )
                if node_proto.metadata_props:  # (exporters' stack traces and module names)
                    node.metadata_props = {p.key: p.value for p in node_proto.metadata_props}
            if None in inputs:  # omitted optional inputs, values defined later or outside
                unresolved.append((node, names, node_proto))
            if single:  # (the usual node: one output, named)
                value = Value(single, None, node)
                node.outputs = [value]
                if setdefault(single, value) is not value:  # (one lookup: binds the name unless taken)
                    raise self._defined_twice(single, node_proto, where)
            else:
                outputs = node.outputs
                for name in output_names:
                    value = Value(name, None, node)
                    outputs.append(value)
                    if name and setdefault(name, value) is not value:
                        raise self._defined_twice(name, node_proto, where)
            if attribute_field and hold:
                # (held unread where every attribute may be: see converter.proto_attributes)
                keys = tuple(map(serialized, attribute_field))
                if keys in holdable or learn_held(keys, attribute_field, scope):
                    node.hold_unread_attributes(keys, decode_held)
                    attribute_field = ()
            if attribute_field:
                attrs = node.attributes
                for attribute_proto in attribute_field[:]:
                    if attribute_proto.type in PLAIN_KINDS:
                        # Models repeat a few attribute values (Conv's pads, epsilon, the
                        # ConstantOfShape value): the whole serialized attribute is the key,
                        # so its name, kind, doc string and ref_attr_name are read once.
                        key = attribute_proto.SerializeToString()
                        seen_attribute = plain_attributes.get(key)
                        if seen_attribute is not None:
                            name, kind, attr_value, doc_string = seen_attribute
                            if kind in _LISTS:
                                attr_value = attr_value[:]  # (each node its own list)
                            elif kind is TENSOR:
                                attr_value = Tensor(*attr_value)  # (each node its own Tensor; the array is read-only)
                            attrs[name] = Attr(name, kind, attr_value, None, doc_string)
                            continue
                        attr = attribute(attribute_proto, scope)
                        remember_plain(key, attr)
                    else:
                        attr = attribute(attribute_proto, scope, subgraphs)
                    attrs[attr.name] = attr
            if functions:
                node.callee = functions.get((node.domain, node.op_type, node.overload))
            made.append(node)
            if waiting is not None and (single in waiting if single else not waiting.isdisjoint(output_names)):
                waiting.difference_update(output_names)
                if not waiting:
                    break
        self._resolve_later(unresolved, subgraphs, scope, where)
        graph.nodes.extend(made)

    def _resolve_later(
        self, unresolved: list[tuple[ir.Node, list[str], Any]], subgraphs: list[tuple[ir.Attr, Any]], scope: _Scope,
        where: str,
    ) -> None:
        """What :meth:`_nodes` left until every name of the graph is bound: inputs it could
        not find yet (defined further down, or outside, or missing) and subgraphs."""
        for node, names, node_proto in unresolved:
            inputs = node.inputs
            for index, name in enumerate(names):
                if name and inputs[index] is None:
                    inputs[index] = self._use(scope, name, functools.partial(_describe_input, node_proto, where))
        if subgraphs:
            self._whole = False
        for attr, attr_proto in subgraphs:
            if attr.kind == ir.AttrKind.GRAPH:
                attr.value = self.graph(attr_proto.g, scope)
            else:
                attr.value = [self.graph(g, scope) for g in attr_proto.graphs]

    def _defined_twice(self, name: str, node_proto: Any, where: str) -> ModelLoadError:
        return ModelLoadError(
            f"{self.source}: {where}: value {name!r} is defined twice (second time by {_describe_node(node_proto)})",
            hint="ONNX values are assigned once; the model is malformed",
        )

    def _define(self, scope: _Scope, value: ir.Value) -> ir.Value:
        scope.values[value.name] = value
        return value

    def _use(self, scope: _Scope, name: str, where: str | Callable[[], str]) -> ir.Value:
        found = scope.values.get(name)
        if found is None:
            found = scope.lookup(name)
        if found is None:
            described = where if isinstance(where, str) else where()
            raise ModelLoadError(
                f"{self.source}: {described} reads {name!r}, which nothing defines",
                hint="the model is malformed or truncated; run onnx.checker.check_model on it",
            )
        return found


@functools.cache
def _serialized_attribute() -> Callable[[Any], bytes]:
    import onnx

    return onnx.AttributeProto.SerializeToString


@functools.cache
def _wire_node() -> Callable[[Any], bytes]:
    import onnx

    return onnx.NodeProto.SerializeToString


@functools.cache
def _has_field() -> Callable[[Any, str], bool]:
    import onnx

    return onnx.NodeProto.HasField


def _bound_unless_omitted(values: dict[str, ir.Value], name: str) -> ir.Value | None:
    return values.get(name) if name else None


def _describe_node(proto: Any) -> str:
    label = f"{proto.domain}::{proto.op_type}" if proto.domain else proto.op_type
    return f"node {label} {proto.name!r}" if proto.name else f"node {label}"


def _describe_input(proto: Any, where: str) -> str:
    return f"input of {_describe_node(proto)} in {where}"


def _referenced_kinds(graph: ir.Graph) -> dict[str, ir.AttrKind]:
    """Attribute parameter name -> the kind of the first attribute (in ``graph`` or its
    subgraphs) that refers to it."""
    found: dict[str, ir.AttrKind] = {}
    for node, _ in ir.walk(graph):
        for attr in node.attributes.values():
            if attr.ref_attr_name is not None:
                found.setdefault(attr.ref_attr_name, attr.kind)
    return found

