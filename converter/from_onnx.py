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
* tensors are numpy arrays from ``onnx.numpy_helper.to_array`` (ml_dtypes arrays for the
  new element types); external data is read by ``onnx.load``.

Not kept: ``training_info``, ``quantization_annotation`` and per-node/function
``metadata_props`` (the IR has no slot for them).  Conversion is one pass over nodes
(plus one to bind names), linear in the size of the model.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir
from dsl.errors import ModelLoadError

if TYPE_CHECKING:
    import onnx

__all__ = ["load_model", "from_proto", "model_from_proto", "function_from_proto", "graph_from_proto"]

_STRING = 8  # TensorProto.STRING
# Element types whose raw_data is plain little-endian numpy data.
_RAW_DTYPES = {
    enum: np.dtype(name).newbyteorder("<")
    for enum, name in ((1, "float32"), (2, "uint8"), (3, "int8"), (4, "uint16"), (5, "int16"), (6, "int32"),
                       (7, "int64"), (9, "bool"), (10, "float16"), (11, "float64"), (12, "uint32"),
                       (13, "uint64"), (14, "complex64"), (15, "complex128"))
}
# Element types stored one value per entry of a typed field (when not in raw_data).
_TYPED_FIELDS = {1: "float_data", 6: "int32_data", 7: "int64_data", 11: "double_data"}
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
    proto = read_model_proto(path, load_external_data=load_external_data)
    return model_from_proto(proto, source=os.fspath(path))


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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large IR is built.

    Building a model allocates millions of objects and frees none, so each automatic
    collection would rescan an ever larger heap for nothing: per-node cost would grow
    with model size.  The previous state is restored afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def model_from_proto(proto: onnx.ModelProto, *, source: str = "<model>") -> ir.Model:
    """Convert a ModelProto: its graph, its model-local functions and its metadata."""
    with gc_paused():
        return _model_from_proto(proto, source)


def _model_from_proto(proto: onnx.ModelProto, source: str) -> ir.Model:
    reader = _Reader(source)
    functions = reader.declare_functions(list(proto.functions))
    graph = reader.graph(proto.graph, None)
    reader.fill_functions()
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
        metadata_props={p.key: p.value for p in proto.metadata_props},
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
    with gc_paused():
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


class _Reader:
    """One conversion: the function table, and the file name for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.functions: dict[FunctionKey, ir.Function] = {}
        self._pending: list[tuple[Any, ir.Function]] = []

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
        scope = _Scope(parent)
        graph = ir.Graph(name=proto.name, doc_string=proto.doc_string)
        where = f"graph {proto.name!r}" if proto.name else "the graph"
        initializers: dict[str, ir.Value] = {}
        for tensor_proto in proto.initializer:
            tensor = self.tensor(tensor_proto)
            value = ir.Value(tensor_proto.name, ir.TensorType(tensor.elem_type, tensor.array.shape), initializer=tensor)
            initializers[tensor_proto.name] = value
            graph.initializers.append(value)
        for sparse_proto in proto.sparse_initializer:
            sparse = self.sparse_tensor(sparse_proto)
            name = sparse_proto.values.name
            graph.sparse_initializers[name] = sparse
            value = ir.Value(name, type=ir.SparseTensorType(sparse.values.elem_type, sparse.dims))
            initializers.setdefault(name, value)
        for value_proto in proto.input:
            value = initializers.get(value_proto.name) or ir.Value(value_proto.name)
            value.type = self.type(value_proto.type) or value.type
            value.doc_string = value_proto.doc_string
            graph.inputs.append(value)
            scope.values[value.name] = value
        for value in initializers.values():
            scope.values.setdefault(value.name, value)
        self._nodes(proto.node, graph, scope, where)
        for value_proto in proto.output:
            value = self._use(scope, value_proto.name, f"output of {where}")
            declared = self.type(value_proto.type)
            if declared is not None:
                value.type = declared
            if value_proto.doc_string:
                value.doc_string = value_proto.doc_string
            graph.outputs.append(value)
        self._value_info(proto.value_info, graph, scope)
        return graph

    def _value_info(self, value_infos: Any, graph: ir.Graph, scope: _Scope) -> None:
        for value_proto in value_infos:
            value = scope.values.get(value_proto.name)
            if value is None:  # describes a name nothing defines: keep it, detached
                value = ir.Value(value_proto.name)
            declared = self.type(value_proto.type)
            if declared is not None:
                value.type = declared
            if value_proto.doc_string:
                value.doc_string = value_proto.doc_string
            graph.value_info.append(value)

    def _nodes(self, node_protos: Any, graph: ir.Graph, scope: _Scope, where: str) -> None:
        # First bind every output name, so an unsorted (but acyclic) graph still converts.
        made: list[ir.Node] = []
        values = scope.values
        Node, Value = ir.Node, ir.Value
        for node_proto in node_protos:
            domain = node_proto.domain
            node = Node(
                node_proto.op_type, "" if domain == "ai.onnx" else domain, [], [], {},
                node_proto.name, node_proto.overload, node_proto.doc_string,
            )
            outputs = node.outputs
            for name in node_proto.output:
                value = Value(name, None, node)
                outputs.append(value)
                if name:
                    if name in values:
                        raise ModelLoadError(
                            f"{self.source}: {where}: value {name!r} is defined twice (second time by "
                            f"{_describe_node(node_proto)})",
                            hint="ONNX values are assigned once; the model is malformed",
                        )
                    values[name] = value
            made.append(node)
        functions = self.functions
        get = values.get
        for node, node_proto in zip(made, node_protos):
            inputs = node.inputs
            for name in node_proto.input:
                if not name:
                    inputs.append(None)
                    continue
                found = get(name)
                if found is None:
                    found = self._use(scope, name, lambda p=node_proto: f"input of {_describe_node(p)} in {where}")
                inputs.append(found)
            if node_proto.attribute:
                node.attributes = {a.name: self.attribute(a, scope) for a in node_proto.attribute}
            if functions:
                node.callee = functions.get((node.domain, node.op_type, node.overload))
        graph.nodes.extend(made)

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

    # ----------------------------------------------------------------- attributes

    def attribute(self, proto: onnx.AttributeProto, scope: _Scope) -> ir.Attr:
        kind = ir.AttrKind(proto.type) if proto.type else _guess_kind(proto)
        if proto.ref_attr_name:
            return ir.Attr(proto.name, kind, None, ref_attr_name=proto.ref_attr_name, doc_string=proto.doc_string)
        K = ir.AttrKind
        value: Any
        if kind == K.FLOAT:
            value = float(proto.f)
        elif kind == K.INT:
            value = int(proto.i)
        elif kind == K.STRING:
            value = _text(proto.s)
        elif kind == K.TENSOR:
            value = self.tensor(proto.t)
        elif kind == K.GRAPH:
            value = self.graph(proto.g, scope)
        elif kind == K.SPARSE_TENSOR:
            value = self.sparse_tensor(proto.sparse_tensor)
        elif kind == K.TYPE_PROTO:
            value = self.type(proto.tp)
        elif kind == K.FLOATS:
            value = [float(f) for f in proto.floats]
        elif kind == K.INTS:
            value = [int(i) for i in proto.ints]
        elif kind == K.STRINGS:
            value = [_text(s) for s in proto.strings]
        elif kind == K.TENSORS:
            value = [self.tensor(t) for t in proto.tensors]
        elif kind == K.GRAPHS:
            value = [self.graph(g, scope) for g in proto.graphs]
        elif kind == K.SPARSE_TENSORS:
            value = [self.sparse_tensor(s) for s in proto.sparse_tensors]
        elif kind == K.TYPE_PROTOS:
            value = [self.type(t) for t in proto.type_protos]
        else:
            raise ModelLoadError(
                f"{self.source}: attribute {proto.name!r} has no value (kind {kind.name})",
                hint="the model is malformed; run onnx.checker.check_model on it",
            )
        return ir.Attr(proto.name, kind, value, doc_string=proto.doc_string)

    def tensor(self, proto: onnx.TensorProto) -> ir.Tensor:
        from onnx import numpy_helper

        if proto.data_type == _STRING and proto.data_location != 1:
            # Text where it is UTF-8, bytes where it is not (numpy_helper would fail on those).
            strings = np.empty(len(proto.string_data), dtype=object)
            strings[:] = [_text(s) for s in proto.string_data]
            shape = tuple(int(d) for d in proto.dims)
            if strings.size != int(np.prod(shape)):
                raise ModelLoadError(
                    f"{self.source}: string tensor {proto.name!r} has {strings.size} strings for shape {list(shape)}",
                    hint="the model is malformed or truncated",
                )
            return ir.Tensor(strings.reshape(shape), _STRING, proto.name, proto.doc_string)
        data_type = proto.data_type
        fast_dtype = _RAW_DTYPES.get(data_type)
        if fast_dtype is not None and proto.data_location != 1:
            # The common cases, several times cheaper than numpy_helper.to_array.
            shape = tuple(proto.dims)
            size = math.prod(shape)
            if proto.HasField("raw_data"):
                raw = proto.raw_data
                if len(raw) == fast_dtype.itemsize * size:
                    array = np.frombuffer(raw, dtype=fast_dtype).reshape(shape)
                    return ir.Tensor(array, data_type, proto.name, proto.doc_string)
            elif data_type in _TYPED_FIELDS:
                typed = getattr(proto, _TYPED_FIELDS[data_type])
                if len(typed) == size:
                    array = np.fromiter(typed, dtype=fast_dtype, count=size).reshape(shape)
                    return ir.Tensor(array, data_type, proto.name, proto.doc_string)
        try:
            array = numpy_helper.to_array(proto)
        except (ValueError, TypeError, KeyError, OSError) as error:
            raise ModelLoadError(
                f"{self.source}: tensor {proto.name!r} cannot be read ({error})",
                hint="its data is missing or does not match its shape and type; the file may be truncated",
            ) from None
        return ir.Tensor(array, int(proto.data_type), proto.name, proto.doc_string)

    def sparse_tensor(self, proto: onnx.SparseTensorProto) -> ir.SparseTensor:
        return ir.SparseTensor(self.tensor(proto.values), self.tensor(proto.indices), tuple(int(d) for d in proto.dims))

    def type(self, proto: onnx.TypeProto) -> ir.IRType | None:
        which = proto.WhichOneof("value")
        if which == "tensor_type":
            tensor = proto.tensor_type
            return ir.TensorType(int(tensor.elem_type), _shape(tensor))
        if which == "sparse_tensor_type":
            sparse = proto.sparse_tensor_type
            return ir.SparseTensorType(int(sparse.elem_type), _shape(sparse))
        if which == "sequence_type":
            return ir.SequenceType(self.type(proto.sequence_type.elem_type))
        if which == "optional_type":
            return ir.OptionalType(self.type(proto.optional_type.elem_type))
        if which == "map_type":
            return ir.MapType(int(proto.map_type.key_type), self.type(proto.map_type.value_type))
        return None


def _shape(tensor_type: Any) -> tuple[int | str | None, ...] | None:
    if not tensor_type.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for dim in tensor_type.shape.dim:
        which = dim.WhichOneof("value")
        if which == "dim_value":
            dims.append(int(dim.dim_value))
        elif which == "dim_param":
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _describe_node(proto: Any) -> str:
    label = f"{proto.domain}::{proto.op_type}" if proto.domain else proto.op_type
    return f"node {label} {proto.name!r}" if proto.name else f"node {label}"


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


def _referenced_kinds(graph: ir.Graph) -> dict[str, ir.AttrKind]:
    found: dict[str, ir.AttrKind] = {}
    stack = [graph]
    while stack:
        current = stack.pop()
        for node in current.nodes:
            for attr in node.attributes.values():
                if attr.ref_attr_name is not None:
                    found.setdefault(attr.ref_attr_name, attr.kind)
                elif attr.kind == ir.AttrKind.GRAPH:
                    stack.append(attr.value)
                elif attr.kind == ir.AttrKind.GRAPHS:
                    stack.extend(attr.value)
    return found

