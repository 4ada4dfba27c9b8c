"""The main graph's metadata in the generated module: entries of ``model_options``.

What a function body cannot say (see :mod:`converter.recorded_metadata`, which puts it
back): the IR version (``min_ir_version``: the model's own, which the export lowers to
the newest the installed onnxruntime loads, and raises where the compiled content needs
a newer one; so the source does not depend on the onnxruntime release that wrote it), the graph's ``metadata_props``, each
node's ``metadata_props`` (a main-graph node under the Python name of its first output, a
node of a subgraph or function by its path: ``'y/then_branch/Relu#0'``, ``'block()/MatMul#1'``), and the types of
``value_info`` under the Python names of their values, and ``io_names``: the model's
name of each graph input and output whose Python name differs (``'input_': 'input'``,
``'v387': '387'``), so code feeding the compiled model by name keeps working.  They go at the end of the
module, after the code, so the code reads first.
"""

from __future__ import annotations

from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import dict_text, type_text, utf8
from converter.recorded_metadata import node_paths
from dsl import ir
from dsl.source_links import LINK_KEYS

__all__ = ["metadata_items"]


def metadata_items(model: ir.Model, module: GeneratedModule) -> list[tuple[str, str]]:
    """``(key, Python text of the value)`` for each metadata entry the model has."""
    items: list[tuple[str, str]] = []
    if model.ir_version:
        items.append(("min_ir_version", repr(model.ir_version)))
    graph = model.graph
    if graph.metadata_props:
        items.append(("graph_metadata_props", dict_text(utf8(dict(graph.metadata_props), "graph metadata_props"), 4)))
    names = module.main_value_names
    paths = node_paths(graph, model.functions, names.get, lambda function: module.function_names.get(id(function)))
    # (source links are written as a comment above each statement instead: the source
    # written is the code's origin from now on)
    recorded = {}
    for key, (node, _) in paths.items():
        props = _without_links(node.metadata_props) if node.metadata_props else None
        if props:
            recorded[key] = utf8(props, "node metadata_props")
    # A body's value_info by the path of the node computing the value and the output's index.
    body_types: dict[str, ir.IRType] = {}
    where = {id(node): key for key, (node, owner) in paths.items() if owner is not graph}
    for owner in {id(owner): owner for _, owner in paths.values() if owner is not graph}.values():
        for value in owner.value_info:
            producer = value.producer
            if producer is not None and id(producer) in where and value.type is not None:
                index = next(i for i, output in enumerate(producer.outputs) if output is value)
                body_types[f"{where[id(producer)]}:{index}"] = value.type
    if recorded:
        lines = "".join(f"        {key!r}: {dict_text(props, 8)},\n" for key, props in recorded.items())
        items.append(("node_metadata", "{\n" + lines + "    }"))
    typed = []
    interface = {*graph.inputs, *graph.outputs}  # (their own declarations say it: the model's types)
    for value in graph.value_info:
        # (a weight is written initializer(..., name=<its model name>): keyed by that name)
        name = None if value in interface else value.name if value.initializer is not None else names.get(value)
        text = type_text(value.type, module) if value.type is not None else ""
        if name and text:
            typed.append(f"        {name!r}: {text},\n")
    for key, value_type in body_types.items():
        text = type_text(value_type, module)
        if text:
            typed.append(f"        {key!r}: {text},\n")
    if typed:
        items.append(("value_info", "{\n" + "".join(typed) + "    }"))
    renamed = {names[value]: value.name for value in (*graph.inputs, *graph.outputs)
               if value in names and names[value] != value.name}
    if renamed:
        lines = "".join(f"        {python!r}: {utf8(name, 'a graph input or output name')!r},\n"
                        for python, name in renamed.items())
        items.append(("io_names", "{\n" + lines + "    }"))
    return items


def _without_links(props: dict[str, str] | None) -> dict[str, str]:
    return {key: text for key, text in (props or {}).items() if key not in LINK_KEYS}
