"""IR -> ONNX protos: ``FunctionProto`` and ``ModelProto``, assembled from encoded graphs.

The pieces (tensors, types, attributes, nodes, graphs, with unique deterministic value
names) are encoded by :mod:`converter.onnx_encoding`; this back end decides what a
function or model needs that the IR does not say: the opset imports of every domain
used (reconciled with those of the model-local functions), the smallest IR version the
opsets and features require (so the installed onnxruntime loads the model whenever it
knows the opsets; onnx's own default, IR 14, it refuses), the model-local functions
(renamed apart where two clash), and output types (from ``onnx.shape_inference``, run
only when the IR lacks one).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import operator
import warnings
from typing import TYPE_CHECKING, Any

import onnx

from converter.inferred_types import infer_missing_output_types
from converter.onnx_encoding import (
    SCHEMA_DOMAINS,
    BodyContext,
    emit_initializer,
    emit_nodes,
    emit_value_info,
    fill_attribute,
    fill_graph,
    graph_to_proto,
    output_names,
)
from converter.value_encoding import (
    IR_FUNCTION_OVERLOAD,
    Export,
    annotation_type,
    fill_sparse,
    fill_type,
    has_elem_type,
    tensor_to_proto,
    type_to_proto,
)
from dsl import ir
from dsl.errors import ConversionError
from dsl.onnxruntime_limits import max_ir_version

if TYPE_CHECKING:
    from converter.external_data import WeightsSink

__all__ = ["function_to_proto", "model_to_proto", "graph_to_proto", "tensor_to_proto", "type_to_proto"]

_IR_MODEL_FUNCTIONS = 8  # ModelProto.functions
_IR_FUNCTION_ATTRIBUTE_DEFAULTS = 9  # FunctionProto.attribute_proto


# -------------------------------------------------------------------------------- functions


def _normal_imports(imports: dict[str, int]) -> dict[str, int]:
    return {("" if domain == "ai.onnx" else domain): version for domain, version in imports.items()}


def _direct_callees(graph: ir.Graph) -> list[ir.Function]:
    """The functions that nodes of ``graph`` (subgraphs included) call, each once, first call first."""
    found: dict[int, ir.Function] = {}
    for node, _ in ir.walk(graph):
        if node.callee is not None:
            found.setdefault(id(node.callee), node.callee)
    return list(found.values())


def _fill_function(
    proto: onnx.FunctionProto,
    function: ir.Function,
    export: Export,
    function_names: dict[int, tuple[str, str]],
) -> None:
    domain, name = function_names.get(id(function), (function.domain, function.name))
    proto.name = name
    proto.domain = domain
    if function.overload:
        export.need(IR_FUNCTION_OVERLOAD)
        proto.overload = function.overload
    if function.doc_string:
        proto.doc_string = function.doc_string
    context = BodyContext(export, attr_values=None, function_names=function_names)
    proto.input.extend(context.define(v) for v in function.inputs)
    nodes = proto.node
    for value in function.graph.initializers:
        if value.initializer is None:
            raise ConversionError(f"initializer {value.name!r} has no data", value.location)
        emit_initializer(value.initializer, context.define(value), context, nodes, None)
    emit_nodes(function.graph.nodes, context, proto, None)
    proto.output.extend(output_names(function.graph, context, nodes))
    for param in function.attr_params:
        if param.default is None:
            proto.attribute.append(param.name)
        else:
            export.need(_IR_FUNCTION_ATTRIBUTE_DEFAULTS)
            default = ir.Attr(param.name, param.default.kind, param.default.value)
            fill_attribute(proto.attribute_proto.add(), default, context)
    if emit_value_info(function.graph.value_info, context, proto):
        export.need(IR_FUNCTION_OVERLOAD)  # (FunctionProto.value_info came with IR 10)
    imports = _normal_imports(function.opset_imports)
    for callee in _direct_callees(function.graph):
        imports.setdefault(function_names.get(id(callee), (callee.domain, callee.name))[0], 1)
    for opset_domain, version in imports.items():
        proto.opset_import.add(domain=opset_domain, version=version)


def function_to_proto(function: ir.Function) -> onnx.FunctionProto:
    """An IR function as an ``onnx.FunctionProto``; the functions it calls are not included.

    Attribute parameters become the proto's attributes (with defaults in
    ``attribute_proto``); graph initializers become ``Constant`` nodes, since a
    FunctionProto has none.

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def relu(x: FLOAT[...]) -> FLOAT[...]:
    ...     return op.Relu(x)
    >>> function_to_proto(relu.function).name   # doctest: +SKIP
    'relu'
    """
    proto = onnx.FunctionProto()
    _fill_function(proto, function, Export(), {})
    return proto


# ------------------------------------------------------------------------------------ models


def _function_names(functions: list[ir.Function]) -> dict[int, tuple[str, str]]:
    """(domain, name) of each model-local function; a clash of distinct functions gets a suffix."""
    taken: set[tuple[str, str, str]] = set()
    chosen: dict[int, tuple[str, str]] = {}
    for function in functions:
        name = function.name
        suffix = 0
        while (function.domain, name, function.overload) in taken:
            suffix += 1
            name = f"{function.name}_{suffix}"
        taken.add((function.domain, name, function.overload))
        chosen[id(function)] = (function.domain, name)
    return chosen


def _attr_values(function: ir.Function, attributes: dict[str, Any] | None) -> dict[str, ir.Attr]:
    """The value of each attribute parameter when ``function`` becomes a model's graph."""
    values: dict[str, ir.Attr] = {}
    given = dict(attributes or {})
    for param in function.attr_params:
        if param.name in given:
            values[param.name] = _given_attr(function, param, given.pop(param.name))
        elif param.default is not None:
            values[param.name] = param.default
    if given:
        known = ", ".join(p.name for p in function.attr_params) or "none"
        raise ConversionError(
            f"{function.name} has no attribute parameter {', '.join(sorted(given))}",
            function.location,
            hint=f"its attribute parameters are: {known}",
        )
    return values


def _missing_attribute_error(function: ir.Function, values: dict[str, ir.Attr]) -> None:
    missing = [p for p in function.attr_params if p.name not in values]
    if missing:
        names = ", ".join(p.name for p in missing)
        raise ConversionError(
            f"{function.name} cannot become a model: attribute parameter{'s' if len(missing) > 1 else ''} "
            f"{names} {'have' if len(missing) > 1 else 'has'} no value",
            missing[0].location or function.location,
            hint=f"give {missing[0].name} a default ({missing[0].name}: int = 1), pass "
            f"attributes={{{missing[0].name!r}: ...}} to to_model_proto, or export it with to_function_proto()",
        )


def _io_type_overrides(graph: ir.Graph, io_types: Any) -> dict[int, ir.IRType]:
    """Map value ids to the types ``io_types=`` gives them (a dict by name or a list by position)."""
    if io_types is None:
        return {}
    values = [*graph.inputs, *graph.outputs]
    overrides: dict[int, ir.IRType] = {}
    if isinstance(io_types, dict):
        by_name = {v.name: v for v in values}
        for name, annotation in io_types.items():
            value = by_name.get(name)
            if value is None:
                raise ConversionError(
                    f"io_types names {name!r}, which is neither an input nor an output",
                    graph.location,
                    hint=f"inputs and outputs are: {', '.join(by_name)}",
                )
            overrides[id(value)] = annotation_type(annotation, f"io_types[{name!r}]")
        return overrides
    if isinstance(io_types, (list, tuple)):
        if len(io_types) not in (len(graph.inputs), len(values)):
            raise ConversionError(
                f"io_types lists {len(io_types)} types, but there are {len(graph.inputs)} inputs "
                f"and {len(graph.outputs)} outputs",
                graph.location,
                hint="give one type per input, or one per input followed by one per output",
            )
        for value, annotation in zip(values, io_types):
            if annotation is not None:
                overrides[id(value)] = annotation_type(annotation, f"io_types[{value.name!r}]")
        return overrides
    raise ConversionError(
        f"io_types must be a dict (name -> type) or a list, not {type(io_types).__name__}",
        hint="for example io_types={'x': FLOAT[2, 'N']}",
    )


def _given_attr(function: ir.Function, param: ir.AttrParam, given: Any) -> ir.Attr:
    # Python values are turned into IR attributes by the facade (dsl.script_function).
    if not isinstance(given, ir.Attr):
        raise ConversionError(
            f"attributes[{param.name!r}] of {function.name} must be an ir.Attr, not {type(given).__name__}",
            param.location or function.location,
            hint="pass Python values through fn.to_model_proto(attributes=...) or dsl.script_function.model_to_proto",
        )
    return given


class _ModelSource:
    """What a model is made from: the main graph, its attribute values and the functions."""

    __slots__ = ("attr_values", "doc_string", "functions", "graph", "imports", "location", "model", "name")

    def __init__(
        self,
        function_or_model: ir.Function | ir.Model,
        *,
        attributes: dict[str, Any] | None,
        extra_functions: list[ir.Function],
    ) -> None:
        self.model: ir.Model | None = None
        if isinstance(function_or_model, ir.Model):
            if attributes:
                raise ConversionError("attributes= applies to a function, not to an ir.Model")
            self.model = function_or_model
            self.graph = function_or_model.graph
            self.name = self.graph.name or "main"
            self.imports = _normal_imports(function_or_model.opset_imports)
            self.attr_values: dict[str, ir.Attr] = {}
            self.doc_string = function_or_model.doc_string
            extra = [*function_or_model.functions, *extra_functions]
            if extra or _may_call(self.graph):
                main = ir.Function(self.name, self.graph, opset_imports=self.imports)
                self.functions = _collect_functions(main, extra)
            else:  # (no function listed, no node that calls one: _collect_functions would find none)
                self.functions = []
        elif isinstance(function_or_model, ir.Function):
            function = function_or_model
            self.attr_values = _attr_values(function, attributes)
            _missing_attribute_error(function, self.attr_values)
            self.graph = function.graph
            self.name = self.graph.name or function.name
            self.imports = _normal_imports(function.opset_imports)
            self.doc_string = function.doc_string
            self.functions = _collect_functions(function, list(extra_functions))
        else:
            raise ConversionError(
                f"model_to_proto takes an ir.Function or ir.Model, not {type(function_or_model).__name__}",
                hint="for a @script function use fn.to_model_proto()",
            )
        self.location = self.graph.location


def model_to_proto(
    function_or_model: ir.Function | ir.Model,
    *,
    ir_version: int | None = None,
    producer_name: str | None = None,
    producer_version: str | None = None,
    io_types: Any = None,
    doc_string: str | None = None,
    attributes: dict[str, Any] | None = None,
    opset_imports: dict[str, int] | None = None,
    metadata_props: dict[str, str] | None = None,
    infer_output_types: bool = True,
    functions: list[ir.Function] | None = None,
    initializers: list[ir.Tensor | ir.SparseTensor] | None = None,
    external_data: WeightsSink | None = None,
    node_metadata: dict[str, dict[str, str]] | None = None,
    value_info: dict[str, Any] | None = None,
    graph_metadata_props: dict[str, str] | None = None,
    min_ir_version: int | None = None,
    source_links: bool = False,
    io_names: dict[str, str] | None = None,
    require_output_ranks: bool = True,
) -> onnx.ModelProto:
    """A ``ModelProto`` whose graph is the function's body, with its callees as local functions.

    Attribute parameters of the function take their defaults (or ``attributes=``, IR
    attributes by parameter name) as constants.  ``io_types`` overrides input/output
    types: a dict ``name -> type`` or a list (inputs, optionally followed by outputs).
    Calls stay calls of model-local functions (the facade's ``inline=True`` runs the
    inline pass first).  The IR version is the smallest that the opsets and features
    need; pass ``ir_version`` to force one.  Output types the IR
    lacks are filled by ONNX shape inference.  An input typed ``FLOAT[...]`` has no rank,
    which ONNX's checker rejects in a model: give it a rank or pass ``io_types``.
    ``producer_name`` defaults to ``"onnxquill"`` (an ir.Model keeps its own, none included).  ``functions``
    adds model-local functions nothing calls, and ``initializers`` main-graph
    initializers nothing reads (named after themselves where free), so that a model read
    from a file comes back whole; ``node_metadata`` (by a node's first output),
    ``value_info`` and ``graph_metadata_props`` put back the main graph's metadata (see
    :mod:`converter.recorded_metadata`); ``min_ir_version`` keeps a model read back
    from Python at its original IR version where onnxruntime loads that one;
    ``io_names`` (Python name -> model name) gives graph inputs and outputs back the
    names Python cannot spell.  ``require_output_ranks=False`` lets an output of unknown rank
    through (the markup front end checks its declared dims first, at their tags).  ``external_data`` (a :class:`converter.external_data.WeightsSink`) takes large
    initializers as they are reached, to write them from the IR's arrays: the weights
    are never copied into the proto (how models over protobuf's 2 GB are written, and
    others without a copy).  ``source_links=True`` writes on every node compiled from
    ``@script`` or markup where it came from (see :mod:`dsl.source_links`; IR 10).

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def relu(x: FLOAT["N"]) -> FLOAT["N"]:
    ...     return op.Relu(x)
    >>> model_to_proto(relu.function).ir_version   # doctest: +SKIP
    8
    """
    source = _ModelSource(function_or_model, attributes=attributes, extra_functions=functions or [])
    export = Export(external_data)
    function_names = _function_names(source.functions)
    imports = _model_opset_imports(source, function_names)
    overrides = _io_type_overrides(source.graph, io_types)
    _check_input_types(source.graph, overrides)

    model = onnx.ModelProto()
    context = BodyContext(export, attr_values=source.attr_values, function_names=function_names)
    if node_metadata or value_info or source_links or io_names:
        with _recorded_node_metadata(source, node_metadata, value_info), _source_links(source, source_links), \
                _interface_names(source, io_names):
            _fill_model_body(model, source, context, initializers, overrides, function_names)
    else:  # (the usual call: no metadata to attach for the time of the writing)
        _fill_model_body(model, source, context, initializers, overrides, function_names)
    if source.functions:
        export.need(_IR_MODEL_FUNCTIONS)
        _reconcile_opsets(imports, model.graph, model.functions, source.location)
    imports.update(_normal_imports(opset_imports or {}))
    written_opsets = sorted(imports.items())
    for domain, version in written_opsets:
        model.opset_import.add(domain=domain, version=version)
    if value_info or graph_metadata_props:
        from converter.recorded_metadata import apply_recorded_metadata

        apply_recorded_metadata(model, export, value_info=value_info, graph_metadata_props=graph_metadata_props)
    if min_ir_version is not None:
        export.need(min(min_ir_version, max_ir_version()))
    model.ir_version = _ir_version(model, export, ir_version, source.model, written_opsets)
    _fill_metadata(model, source, producer_name, producer_version, doc_string, metadata_props)
    if infer_output_types:
        infer_missing_output_types(model, source.graph, overrides, require_output_ranks)
    return model


def _fill_model_body(model: onnx.ModelProto, source: _ModelSource, context: BodyContext,
                     initializers: list[ir.Tensor | ir.SparseTensor] | None, overrides: dict[int, ir.IRType],
                     function_names: dict[int, tuple[str, str]]) -> None:
    graph = model.graph
    fill_graph(graph, source.graph, context)
    if initializers:
        _add_unread_initializers(graph, initializers, context)
    graph.name = source.name
    _apply_overrides(graph, source.graph, overrides, context.export)
    for callee in source.functions:
        _fill_function(model.functions.add(), callee, context.export, function_names)


def _recorded_node_metadata(source: _ModelSource, node_metadata: dict[str, dict[str, str]] | None,
                            value_info: dict[str, Any] | None) -> Any:
    if not node_metadata and not value_info:
        return contextlib.nullcontext()
    from converter.recorded_metadata import node_metadata_attached

    return node_metadata_attached(source.graph, source.functions, node_metadata, value_info)


def _source_links(source: _ModelSource, wanted: bool) -> Any:
    if not wanted:
        return contextlib.nullcontext()
    from converter.node_source_links import source_links_attached

    return source_links_attached(source.graph, source.functions)


def _interface_names(source: _ModelSource, io_names: dict[str, str] | None) -> Any:
    if not io_names:
        return contextlib.nullcontext()
    from converter.recorded_metadata import interface_names_restored

    return interface_names_restored(source.graph, io_names)


def _model_opset_imports(source: _ModelSource, function_names: dict[int, tuple[str, str]]) -> dict[str, int]:
    """The main graph's versions; a domain only callees use takes the newest they use."""
    imports = dict(source.imports)
    from_callees: dict[str, int] = {}
    for callee in source.functions:
        for domain, version in _normal_imports(callee.opset_imports).items():
            from_callees[domain] = max(version, from_callees.get(domain, 0))
        from_callees.setdefault(function_names[id(callee)][0], 1)
    for domain, version in from_callees.items():
        imports.setdefault(domain, version)
    return imports


_TYPE, _ELEM_TYPE = operator.attrgetter("type"), operator.attrgetter("elem_type")
_TENSOR_TYPE = {ir.TensorType}


def _check_input_types(graph: ir.Graph, overrides: dict[int, ir.IRType]) -> None:
    if not overrides:
        # (An IR < 4 model lists every weight as an input: plain tensor types are told
        # typed by loops in C; anything else is asked below, one input at a time.)
        types = list(map(_TYPE, graph.inputs))
        if set(map(type, types)) <= _TENSOR_TYPE and 0 not in map(_ELEM_TYPE, types):
            return
    for value in graph.inputs:
        if not has_elem_type(overrides.get(id(value), value.type)):
            raise ConversionError(
                f"input {value.name!r} has no type",
                value.location or graph.location,
                hint=f"annotate it ({value.name}: FLOAT[...]) or pass io_types={{{value.name!r}: FLOAT[...]}}",
            )


def _ir_version(model: onnx.ModelProto, export: Export, requested: int | None, model_ir: ir.Model | None,
                model_opsets: list[tuple[str, int]]) -> int:
    """The smallest IR version that the opsets (``model_opsets``: the model's opset_import,
    as written) and the features used need, or the one requested."""
    opsets = [*model_opsets]
    for function in model.functions:
        opsets += [(opset.domain, opset.version) for opset in function.opset_import]
    required = max(export.required_ir_version(), _opsets_ir_version(tuple(opsets)))
    if requested is None:
        if model_ir is None or not model_ir.ir_version:
            return required
        # A model read from a file keeps its IR version, unless its content needs a newer
        # one or onnxruntime would refuse it (onnx writes IR versions before runtimes load them).
        return max(required, min(model_ir.ir_version, max_ir_version()))
    if requested < required:
        return _older_ir_version(model, requested, required, export.required_ir_version())
    return requested


@functools.lru_cache(maxsize=64)
def _opsets_ir_version(opsets: tuple[tuple[str, int], ...]) -> int:
    # onnx's table of the IR version each opset needs (a fixed table: a model's few opsets
    # repeat from one export to the next, so each tuple is looked up once).
    ids = [onnx.helper.make_opsetid(domain, version) for domain, version in opsets]
    return int(onnx.helper.find_min_ir_version_for(ids, True))


def _older_ir_version(model: onnx.ModelProto, requested: int, required: int, features: int) -> int:
    """An explicit ``ir_version`` older than onnx's table pairs with the opsets: honoured,
    with a warning, where the model uses no field that version lacks and the installed
    onnxruntime loads it (onnxscript's ``@script(ir_version=7)`` on an opset-15 function)."""
    from dsl.onnxruntime_limits import loads_ir_version

    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 1)
    if requested >= features and loads_ir_version(requested, opset):
        warnings.warn(
            f"ir_version={requested} is older than onnx's table pairs with the opsets imported (IR version "
            f"{required}); written as asked, since the installed onnxruntime loads it, though other runtimes "
            "may refuse it", UserWarning, stacklevel=4)
        return requested
    raise ConversionError(
        f"ir_version={requested} is too old for this model, which needs IR version "
        f"{max(features, required) if requested < features else required}",
        hint="leave ir_version unset to get the smallest that works",
    )


def _fill_metadata(
    model: onnx.ModelProto,
    source: _ModelSource,
    producer_name: str | None,
    producer_version: str | None,
    doc_string: str | None,
    metadata_props: dict[str, str] | None,
) -> None:
    model_ir = source.model
    # an ir.Model keeps its producer exactly (none included: a model read and written back is
    # still the other tool's); a function compiled here is onnxquill's unless told otherwise
    if producer_name is None:
        producer_name = model_ir.producer_name if model_ir is not None else "onnxquill"
    if producer_version is None:
        producer_version = (model_ir.producer_version if model_ir is not None
                            else _version() if producer_name == "onnxquill" else "")
    model.producer_name, model.producer_version = producer_name, producer_version
    doc_string = source.doc_string if doc_string is None else doc_string
    if doc_string:
        model.doc_string = doc_string
    props: dict[str, str] = {}
    if model_ir is not None:
        if model_ir.domain:
            model.domain = model_ir.domain
        if model_ir.model_version:
            model.model_version = model_ir.model_version
        props.update(model_ir.metadata_props)
    props.update(metadata_props or {})
    for key, value in props.items():
        model.metadata_props.add(key=key, value=value)


def _ops_used(nodes: Any, domain: str, found: set[str]) -> set[str]:
    for node in nodes:
        if node.domain == domain:
            found.add(node.op_type)
        for attr in node.attribute:
            if attr.HasField("g"):
                _ops_used(attr.g.node, domain, found)
            for graph in attr.graphs:
                _ops_used(graph.node, domain, found)
    return found


def _schema_since(op_type: str, version: int, domain: str) -> int | None:
    import onnx.defs

    try:
        return int(onnx.defs.get_schema(op_type, version, domain).since_version)
    except onnx.defs.SchemaError:
        return None


def _reconcile_opsets(
    imports: dict[str, int], graph: onnx.GraphProto, functions: Any, location: ir.SourceLocation | None
) -> None:
    """Pick, per domain, a model opset version under which every op keeps its schema.

    ONNX lets a model-local function import another version of a domain than the model
    only when each op it uses has the same schema in both versions.  A caller that uses
    no op of its own defaults to the newest opset, while its callees pin an older one: the
    model then takes the older version if the caller's ops are unchanged since then.
    """
    versions: dict[str, set[int]] = {}
    for function in functions:
        for opset in function.opset_import:
            versions.setdefault(opset.domain, set()).add(opset.version)
    for domain, found in versions.items():
        model_version = imports.get(domain)
        if model_version is None or found <= {model_version} or domain not in SCHEMA_DOMAINS:
            continue  # custom domains have no schemas to compare
        uses = [(op, model_version) for op in _ops_used(graph.node, domain, set())]
        for function in functions:
            version = next((o.version for o in function.opset_import if o.domain == domain), None)
            if version is not None:
                uses += [(op, version) for op in _ops_used(function.node, domain, set())]
        candidates = [model_version, *sorted(found - {model_version}, reverse=True)]
        for candidate in candidates:
            if all(_schema_since(op, version, domain) == _schema_since(op, candidate, domain) for op, version in uses):
                imports[domain] = candidate
                break
        else:
            changed = next(
                op for op, version in uses if _schema_since(op, version, domain) != _schema_since(op, model_version, domain)
            )
            raise ConversionError(
                f"the functions of this model use {domain or 'ai.onnx'} opsets {sorted(found | {model_version})}, and "
                f"{changed} differs between them, which ONNX does not allow in one model",
                location,
                hint="give every @script function the same opset (@script(opset=opset18)), or export with inline=True",
            )


def _add_unread_initializers(
    proto: onnx.GraphProto, weights: list[ir.Tensor | ir.SparseTensor], context: BodyContext
) -> None:
    """Initializers no node reads, after the graph's own: each keeps its name unless the
    graph already uses it."""
    sparse_names = {sparse.values.name for sparse in proto.sparse_initializer}
    for weight in weights:
        wanted = (weight.values.name if isinstance(weight, ir.SparseTensor) else weight.name) or "weight"
        name = context.claim(wanted)
        while name in sparse_names:  # (the graph's sparse initializers are named apart from the context's names)
            name = context.fresh(wanted)
        if isinstance(weight, ir.SparseTensor):
            sparse_proto = proto.sparse_initializer.add()
            fill_sparse(sparse_proto, weight, context.export)
            sparse_proto.values.name = name
            sparse_names.add(name)
        else:
            emit_initializer(weight, name, context, proto.node, proto.initializer)


def _collect_functions(main: ir.Function, extra: list[ir.Function]) -> list[ir.Function]:
    """Model-local functions, callees before callers, each once."""
    seen: set[int] = set()
    ordered: list[ir.Function] = []
    for function in [*extra, main]:
        for callee in _callees(function):
            if id(callee) not in seen:
                seen.add(id(callee))
                ordered.append(callee)
        if function is not main and id(function) not in seen:
            seen.add(id(function))
            ordered.append(function)
    return ordered


_CALLEE = operator.attrgetter("callee")


def _callees(function: ir.Function) -> list[ir.Function]:
    """``function.callees()``, without its walk where no node calls or holds a subgraph."""
    return function.callees() if _may_call(function.graph) else []


def _may_call(graph: ir.Graph) -> bool:
    """Whether a node of ``graph`` calls a function or holds a subgraph (that may)."""
    nodes = graph.nodes
    # (loops in C: a long graph is written right after)
    return not set(map(_CALLEE, nodes)) <= {None} or ir.holds_subgraphs(nodes)


def _apply_overrides(
    graph_proto: onnx.GraphProto, graph: ir.Graph, overrides: dict[int, ir.IRType], export: Export
) -> None:
    if not overrides:
        return
    for proto, value in zip(graph_proto.input, graph.inputs):
        if id(value) in overrides:
            proto.ClearField("type")
            fill_type(proto.type, overrides[id(value)], export)
    for proto, value in zip(graph_proto.output, graph.outputs):
        if id(value) in overrides:
            proto.ClearField("type")
            fill_type(proto.type, overrides[id(value)], export)


@functools.cache
def _version() -> str:
    # The installed distribution's version (pyproject's), without importing the dsl facade.
    try:
        return importlib.metadata.version("onnxquill")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"
