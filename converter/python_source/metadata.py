"""The main graph's metadata in the generated module: entries of ``model_options``.

What a function body cannot say (see :mod:`converter.recorded_metadata`, which puts it
back): the IR version (``min_ir_version``: the model's own, which the export lowers to
the newest the installed onnxruntime loads, and raises where the compiled content needs
a newer one; so the source does not depend on the onnxruntime release that wrote it), the graph's ``metadata_props``, each
node's ``metadata_props`` (a main-graph node under the Python name of its first output, a
node of a subgraph or function by its path: ``'y/then_branch/Relu#0'``, ``'block()/MatMul#1'``), and the types of
``value_info`` under the Python names of their values.  They go at the end of the
module, after the code, so the code reads first.
"""

from __future__ import annotations

from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import type_text, utf8
from converter.recorded_metadata import main_node_key
from dsl import ir

__all__ = ["metadata_items"]


def metadata_items(model: ir.Model, module: GeneratedModule) -> list[tuple[str, str]]:
    """``(key, Python text of the value)`` for each metadata entry the model has."""
    items: list[tuple[str, str]] = []
    if model.ir_version:
        items.append(("min_ir_version", repr(model.ir_version)))
    graph = model.graph
    if graph.metadata_props:
        items.append(("graph_metadata_props", repr(utf8(dict(graph.metadata_props), "graph metadata_props"))))
    names = module.main_value_names
    recorded: dict[str, dict[str, str]] = {}
    body_types: dict[str, ir.IRType] = {}  # a body's value_info, by producer path and output index
    seen: dict[str, int] = {}
    for node in graph.nodes:
        key = main_node_key(node, seen)
        if key is not None and not key.partition("#")[2]:  # a node named by its output: its Python name
            first = node.outputs[0]
            key = names.get(first) if first.name else None
        if key is not None:
            _record(node, key, recorded, body_types)
    for function in model.functions:
        python_name = module.function_names.get(id(function))
        if python_name is not None:
            _record_scope(function.graph, f"{python_name}()", recorded, body_types)
    if recorded:
        lines = "".join(f"        {key!r}: {props!r},\n" for key, props in recorded.items())
        items.append(("node_metadata", "{\n" + lines + "    }"))
    typed = []
    for value in graph.value_info:
        name = names.get(value)
        text = type_text(value.type, module) if value.type is not None else ""
        if name and text:
            typed.append(f"        {name!r}: {text},\n")
    for key, value_type in body_types.items():
        text = type_text(value_type, module)
        if text:
            typed.append(f"        {key!r}: {text},\n")
    if typed:
        items.append(("value_info", "{\n" + "".join(typed) + "    }"))
    return items


def _record(node: ir.Node, key: str, recorded: dict[str, dict[str, str]], body_types: dict[str, ir.IRType]) -> None:
    """``node``'s metadata under ``key``, and that of the nodes of its subgraphs under
    paths below it (see :func:`converter.recorded_metadata.node_keys`)."""
    if node.metadata_props:
        recorded[key] = utf8(dict(node.metadata_props), "node metadata_props")
    for attr in node.attributes.values():
        if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
            _record_scope(attr.value, f"{key}/{attr.name}", recorded, body_types)
        elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
            for index, graph in enumerate(attr.value):
                _record_scope(graph, f"{key}/{attr.name}[{index}]", recorded, body_types)


def _record_scope(graph: ir.Graph, scope: str, recorded: dict[str, dict[str, str]],
                  body_types: dict[str, ir.IRType]) -> None:
    # A body's nodes by op and occurrence: Python writes one name for an If's output and
    # the outputs of both branches, so names cannot place them; its value_info entries by
    # the path of the node computing the value and the output's index.
    seen: dict[str, int] = {}
    paths: dict[int, str] = {}
    for node in graph.nodes:
        occurrence = seen.get(node.op_type, 0)
        seen[node.op_type] = occurrence + 1
        paths[id(node)] = path = f"{scope}/{node.op_type}#{occurrence}"
        _record(node, path, recorded, body_types)
    for value in graph.value_info:
        producer = value.producer
        if producer is not None and id(producer) in paths and value.type is not None:
            index = next(i for i, output in enumerate(producer.outputs) if output is value)
            body_types[f"{paths[id(producer)]}:{index}"] = value.type
