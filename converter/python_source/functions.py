"""The ``@script`` functions of the generated module: model-local functions, then the main graph.

Model-local functions are ``@script(opset, domain=..., name=...)`` functions written
before their callers and called by their Python name.  The main graph is the last
function; an initializer it also lists as an input (the IR < 4 style, an overridable
weight) is a parameter whose default is the module-level Initializer:
``def main(x: FLOAT[1, 3], w: FLOAT[3] = w_init)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import docstring, type_text, utf8
from converter.python_source.statements import GRAPH_KINDS, BodyWriter, def_line, return_annotation
from dsl import ir
from dsl.errors import ConversionError
from dsl.loop_forms import LoopPlans

__all__ = ["GraphTree", "graph_tree", "callee_order", "uncalled_functions", "write_function", "write_main"]

_ATTR_ANNOTATIONS = {
    ir.AttrKind.FLOAT: "float", ir.AttrKind.INT: "int", ir.AttrKind.STRING: "str",
    ir.AttrKind.FLOATS: "list[float]", ir.AttrKind.INTS: "list[int]", ir.AttrKind.STRINGS: "list[str]",
}


@dataclass(slots=True)
class GraphTree:
    """The main graph and its subgraphs (main first), and whether any node is a Loop or has
    a graph attribute: writing needs no walk of its own where there are none."""

    graphs: list[ir.Graph]
    has_loops: bool
    has_subgraphs: bool


def graph_tree(graph: ir.Graph) -> GraphTree:
    """The :class:`GraphTree` of ``graph``: one look at its nodes, a walk only where they hold graphs."""
    for node in graph.nodes:
        attributes = node.attributes
        if attributes:  # (loops, not any(): models have thousands of nodes)
            for attr in attributes.values():
                if attr.kind in GRAPH_KINDS:
                    return _nested_graph_tree(graph)
    return GraphTree([graph], False, False)


def _nested_graph_tree(graph: ir.Graph) -> GraphTree:
    graphs, has_loops = [graph], False
    for node, _ in ir.walk(graph):
        has_loops = has_loops or node.op_type == "Loop"
        graphs.extend(ir.subgraphs(node))
    return GraphTree(graphs, has_loops, True)


def callee_order(functions: list[ir.Function]) -> list[ir.Function]:
    """``functions`` and what they call, each after its callees."""
    order: list[ir.Function] = []
    seen: set[int] = set()
    for function in functions:
        for callee in function.callees():
            if id(callee) not in seen:
                seen.add(id(callee))
                order.append(callee)
        if id(function) not in seen:
            seen.add(id(function))
            order.append(function)
    return order


def uncalled_functions(model: ir.Model) -> list[ir.Function]:
    """The model-local functions that no call of the main graph reaches: the compiled main
    function would leave them out, so ``model_options`` lists them."""
    if not model.functions:
        return []
    reached: set[int] = set()
    for node, _ in ir.walk(model.graph):
        callee = node.callee
        if callee is not None and id(callee) not in reached:
            reached.add(id(callee))
            reached.update(id(f) for f in callee.callees())
    return [f for f in callee_order(model.functions) if id(f) not in reached]


def write_function(function: ir.Function, module: GeneratedModule, model_imports: dict[str, int]) -> str:
    """The ``@script`` function of a model-local function."""
    imports = dict(function.opset_imports) or dict(model_imports)
    writer = BodyWriter(module, imports, model_imports.get("", imports.get("")))
    python_name = module.function_names[id(function)]
    params = _attribute_parameters(function, writer)
    body_indent = "    "
    writer.graph_body(function.graph, body_indent)
    decorator_args = [writer.opset("")] if "" in imports else []
    decorator_args.append(f"domain={utf8(function.domain, 'function domain')!r}")
    if python_name != function.name:
        decorator_args.append(f"name={utf8(function.name, 'function name')!r}")
    header = [f"@script({', '.join(decorator_args)})", def_line("", python_name, params, "")]
    if function.doc_string:
        header.append(docstring(function.doc_string, body_indent))
    return "\n".join(header + writer.lines)


def _attribute_parameters(function: ir.Function, writer: BodyWriter) -> list[str]:
    """The parameters of ``function``: its inputs, then its attribute parameters (those
    with a default last).  Attribute parameters keep their names (callers pass them by
    name); inputs, named after them, give way."""
    for param in function.attr_params:
        name = writer.names.fresh(param.name, "attr")
        if name != param.name:
            raise ConversionError(
                f"attribute parameter {param.name!r} of function {function.name} cannot be a Python parameter "
                f"of that name (it is not an identifier, or the generated code needs the name itself)",
                hint="rename the attribute (in the function and at its calls) with onnx before converting",
            )
        writer.attr_param_names[param.name] = name
    params = [writer.parameter(v) for v in function.inputs]
    plain: list[str] = []
    with_default: list[str] = []
    for param in function.attr_params:
        name = writer.attr_param_names[param.name]
        if param.kind == ir.AttrKind.UNDEFINED:
            annotation = "int"  # never referenced, no default: the proto records only the name
        elif param.kind in _ATTR_ANNOTATIONS:
            annotation = _ATTR_ANNOTATIONS[param.kind]
        else:
            raise ConversionError(
                f"attribute parameter {param.name!r} of function {function.name} is {param.kind.name}; "
                "@script attribute parameters are int, float, str or lists of them",
                hint="inline the function into its callers before converting",
            )
        if param.default is not None:
            with_default.append(f"{name}: {annotation} = {writer.attribute(param.default)}")
        else:
            plain.append(f"{name}: {annotation}")
    return params + plain + with_default


def write_main(
    graph: ir.Graph, python_name: str, module: GeneratedModule, opset_imports: dict[str, int], keep_inputs: bool,
    tree: GraphTree,
) -> str:
    """The ``@script`` function of the main graph (the last function of the module)."""
    writer = BodyWriter(module, opset_imports, opset_imports.get(""))
    if not tree.has_loops:
        writer.loops = LoopPlans()  # (what plan_loops would find)
    writer.has_subgraphs = tree.has_subgraphs
    params = _main_parameters(graph, writer, keep_inputs)
    writer.graph_body(graph, "    ")
    module.main_value_names = writer.value_names
    returns = return_annotation(graph.outputs, module)
    if not returns and graph.outputs:
        # One output Python cannot annotate (untyped, a map...) leaves the annotation out;
        # the others keep their types through io_types (by position: inputs, then outputs).
        output_types: list[str | None] = [type_text(v.type, module) or None for v in graph.outputs]
        if any(output_types):
            input_types: list[str | None] = [None] * sum(p != "*" for p in params)
            module.partial_io_types = input_types + output_types
    version = opset_imports.get("")
    decorator = f"@script({writer.opset('')})" if version is not None else "@script()"
    header = [decorator, def_line("", python_name, params, returns)]
    if graph.doc_string:
        header.append(docstring(graph.doc_string, "    "))
    return "\n".join(header + writer.lines)


def _main_parameters(graph: ir.Graph, writer: BodyWriter, keep_inputs: bool) -> list[str]:
    """``x: FLOAT[N]`` for each input; ``w: FLOAT[3] = w`` for a weight that is an input too
    (with ``keep_inputs``; without, the body reads the module-level name)."""
    module = writer.module
    initializer_names = module.initializer_names  # (each initializer of graph and subgraphs)
    value_names = writer.value_names
    type_texts = module.type_texts
    params: list[str] = []
    defaults_started = False
    for value in graph.inputs:
        if value.initializer is not None:
            global_name = initializer_names.get(value)
        elif value.producer is None and value.name in module.sparse_names:  # (a sparse weight behind it)
            global_name = module.sparse_names[value.name]
        else:
            global_name = None
        if global_name is None:
            if defaults_started and "*" not in params:
                params.append("*")  # a plain input after an overridable weight: keyword-only keeps the order
            value_names.pop(value, None)
            params.append(writer.parameter(value))
        elif keep_inputs:
            defaults_started = True
            # (writer.parameter(value, global_name), written out: models have hundreds)
            value_type = value.type
            cached = type_texts.get(id(value_type))
            annotation = cached[1] if cached is not None and cached[0] is value_type else type_text(value_type, module)
            name = value_names.get(value) or writer.name_of(value)
            params.append(f"{name}: {annotation} = {global_name}" if annotation else f"{name}={global_name}")
    return params
