"""The main graph's metadata in the generated module: entries of ``model_options``.

What a function body cannot say (see :mod:`converter.recorded_metadata`, which puts it
back): the IR version (``min_ir_version``: the model's own, which the export lowers to
the newest the installed onnxruntime loads, and raises where the compiled content needs
a newer one; so the source does not depend on the onnxruntime release that wrote it), the graph's ``metadata_props``, each
node's ``metadata_props`` under the Python name of its first output, and the types of
``value_info`` under the Python names of their values.  They go at the end of the
module, after the code, so the code reads first.
"""

from __future__ import annotations

from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import type_text, utf8
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
    nodes = [_node_entry(node, names) for node in graph.nodes if node.metadata_props]
    if any(nodes):
        lines = "".join(entry for entry in nodes if entry)
        items.append(("node_metadata", "{\n" + lines + "    }"))
    typed = []
    for value in graph.value_info:
        name = names.get(value)
        text = type_text(value.type, module) if value.type is not None else ""
        if name and text:
            typed.append(f"        {name!r}: {text},\n")
    if typed:
        items.append(("value_info", "{\n" + "".join(typed) + "    }"))
    return items


def _node_entry(node: ir.Node, names: dict[ir.Value, str]) -> str:
    first = node.outputs[0] if node.outputs else None
    name = names.get(first) if first is not None and first.name else None
    if name is None or not node.metadata_props:
        return ""
    return f"        {name!r}: {utf8(dict(node.metadata_props), 'node metadata_props')!r},\n"
