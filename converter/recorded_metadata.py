"""Metadata a model read back as Python carries beside its code, put back on export.

An exporter's node ``metadata_props`` (torch's stack traces and module names), the
main graph's ``value_info`` and ``metadata_props`` have no Python spelling in a
function body: ``converter.to_python`` lists them in the function's ``model_options``
under the Python names of the values (a node by its first output), and
``to_model_proto(node_metadata=..., value_info=..., graph_metadata_props=...)`` puts them
on the values and nodes that carry those names again.  A name the (edited) source no
longer defines is skipped: the metadata described code that is gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import onnx

from converter.value_encoding import Export, annotation_type, fill_metadata_props, fill_type
from dsl import ir

__all__ = ["apply_recorded_metadata", "node_metadata_attached", "node_paths", "main_node_key", "interface_names_restored"]


def apply_recorded_metadata(
    model: onnx.ModelProto,
    export: Export,
    *,
    value_info: dict[str, Any] | None = None,
    graph_metadata_props: dict[str, str] | None = None,
) -> None:
    """Write the recorded metadata into ``model``'s main graph (before its IR version is chosen:
    node and graph metadata_props need IR 10).

    >>> apply_recorded_metadata(model, export, node_metadata={"y": {"module": "fc"}})   # doctest: +SKIP
    """
    graph = model.graph
    if graph_metadata_props:
        fill_metadata_props(graph, graph_metadata_props, export)
    if value_info:
        interface = {v.name for v in (*graph.input, *graph.output)}
        known = ({name for node in graph.node for name in node.output} | {t.name for t in graph.initializer}) - interface
        listed = {v.name for v in graph.value_info}
        for name, annotation in value_info.items():
            if name not in known or name in listed:
                continue
            fill_type(graph.value_info.add(name=name).type, annotation_type(annotation, f"value_info[{name!r}]"), export)


@contextlib.contextmanager
def interface_names_restored(graph: ir.Graph, io_names: dict[str, str] | None) -> Iterator[None]:
    """The graph's inputs and outputs under the model's own names while it is written:
    ``io_names`` maps the Python name of each one whose name Python cannot spell
    (``'input_'``, ``'v387'``) to the original (``'input'``, ``'387'``).  A name some other
    value of the graph or its bodies holds is left as it is (the edited source took it).
    The IR is the user's: the Python names come back afterwards.

    >>> with interface_names_restored(function.graph, {"v387": "387"}): ...   # doctest: +SKIP
    """
    if not io_names:
        yield
        return
    taken = {value.name for value in graph.inputs} | {value.name for value in graph.initializers}
    for node, owner in ir.walk(graph):
        taken.update(value.name for value in node.outputs)
        taken.update(value.name for value in owner.inputs)
    renamed: list[tuple[ir.Value, str]] = []
    for value in (*graph.inputs, *graph.outputs):
        wanted = io_names.get(value.name)
        if not isinstance(wanted, str) or wanted in taken:
            continue
        taken.discard(value.name)
        taken.add(wanted)
        renamed.append((value, value.name))
        value.name = wanted
    try:
        yield
    finally:
        for value, name in renamed:
            value.name = name


@contextlib.contextmanager
def node_metadata_attached(graph: ir.Graph, functions: list[ir.Function],
                           node_metadata: dict[str, dict[str, str]] | None,
                           value_info: dict[str, Any] | None = None) -> Iterator[None]:
    """The recorded node metadata set on the IR nodes it names while the model is written,
    and taken off again afterwards (the function's IR is the user's, and kept); likewise
    the value_info of bodies, keyed by the path of the node computing the value and the
    output's index (``'If#0/then_branch/Relu#0:0'``).

    Nodes are named as :func:`node_paths` says; a name the (edited) source no longer
    defines is skipped.
    """
    body_types = {key: annotation for key, annotation in (value_info or {}).items() if "/" in key and ":" in key}
    if not node_metadata and not body_types:
        yield
        return
    paths = node_paths(graph, functions)
    previous: list[tuple[ir.Node, dict[str, str] | None]] = []
    for key, props in (node_metadata or {}).items():
        found, _ = paths.get(key, (None, None))
        if found is not None:
            previous.append((found, found.metadata_props))
            found.metadata_props = dict(props)
    listed: list[tuple[ir.Graph, list[ir.Value], list[tuple[ir.Value, ir.IRType | None]]]] = []
    for key, annotation in body_types.items():
        path, _, index_text = key.rpartition(":")
        found, owner = paths.get(path, (None, None))
        if found is None or owner is None or not index_text.isdigit() or int(index_text) >= len(found.outputs):
            continue
        value = found.outputs[int(index_text)]
        if any(entry is value for entry in owner.value_info):
            continue
        listed.append((owner, owner.value_info, [(value, value.type)]))
        owner.value_info = [*owner.value_info, value]
        value.type = annotation_type(annotation, f"value_info[{key!r}]")
    try:
        yield
    finally:
        for changed, earlier in reversed(previous):
            changed.metadata_props = earlier
        for owner, entries, types in reversed(listed):
            owner.value_info = entries
            for value, value_type in types:
                value.type = value_type


def main_node_key(node: ir.Node, seen: dict[str, int]) -> str | None:
    """The key a main-graph node's metadata is recorded under: its first output's name,
    except for If, Loop and Scan (Python writes their outputs under the names of the body
    values that compute them, and the compiler renames one of the two): their op and
    occurrence, ``'If#0'``.  ``seen`` counts the occurrences met so far, in node order.

    >>> main_node_key(relu_node, {})            # doctest: +SKIP
    'h'
    """
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop", "Scan"):
        occurrence = seen.get(node.op_type, 0)
        seen[node.op_type] = occurrence + 1
        return f"{node.op_type}#{occurrence}"
    if node.outputs and node.outputs[0].name:
        return node.outputs[0].name
    return None


def node_paths(
    graph: ir.Graph,
    functions: list[ir.Function],
    value_name: Callable[[ir.Value], str | None] | None = None,
    function_name: Callable[[ir.Function], str | None] | None = None,
) -> dict[str, tuple[ir.Node, ir.Graph]]:
    """Every node of the main graph, its bodies and the function bodies under the key its
    metadata is recorded by, with the graph holding it (the one scheme both the Python
    writer and the export use): a main-graph node as :func:`main_node_key` says (its
    output named by ``value_name``, default the IR's name), a body's node by the path of
    the node holding the body, the attribute, and its op and occurrence among the body's
    nodes of that op (``'y/then_branch/Relu#0'``), a function body's node likewise below
    ``'<function name>()'`` (named by ``function_name``; a function it names None is left out).

    >>> sorted(node_paths(model.graph, model.functions))     # doctest: +SKIP
    ['If#0', 'If#0/else_branch/Neg#0', 'If#0/then_branch/Relu#0', 's']
    """
    found: dict[str, tuple[ir.Node, ir.Graph]] = {}
    seen: dict[str, int] = {}
    for node in graph.nodes:
        key = main_node_key(node, seen)
        if key is not None and value_name is not None and "#" not in key:  # named by its output
            key = value_name(node.outputs[0])
        if key is not None:
            _key_node(node, key, graph, found)
    for function in functions:
        name = function.name if function_name is None else function_name(function)
        if name is not None:
            _key_scope(function.graph, f"{name}()", found)
    return found


def _key_node(node: ir.Node, key: str, owner: ir.Graph, found: dict[str, tuple[ir.Node, ir.Graph]]) -> None:
    found[key] = (node, owner)
    for attr in node.attributes.values():
        if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
            _key_scope(attr.value, f"{key}/{attr.name}", found)
        elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
            for index, body in enumerate(attr.value):
                _key_scope(body, f"{key}/{attr.name}[{index}]", found)


def _key_scope(graph: ir.Graph, scope: str, found: dict[str, tuple[ir.Node, ir.Graph]]) -> None:
    seen: dict[str, int] = {}
    for node in graph.nodes:
        occurrence = seen.get(node.op_type, 0)
        seen[node.op_type] = occurrence + 1
        _key_node(node, f"{scope}/{node.op_type}#{occurrence}", graph, found)
