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
from collections.abc import Iterator
from typing import Any

import onnx

from converter.onnx_encoding import IR_METADATA_PROPS, Export, fill_type
from dsl import ir, types
from dsl.errors import ConversionError

__all__ = ["apply_recorded_metadata", "node_metadata_attached", "main_node_key"]


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
        export.need(IR_METADATA_PROPS)
        for key, text in graph_metadata_props.items():
            graph.metadata_props.add(key=key, value=text)
    if value_info:
        interface = {v.name for v in (*graph.input, *graph.output)}
        known = {name for node in graph.node for name in node.output} - interface
        listed = {v.name for v in graph.value_info}
        for name, annotation in value_info.items():
            if name not in known or name in listed:
                continue
            fill_type(graph.value_info.add(name=name).type, _ir_type(annotation, name), export)


@contextlib.contextmanager
def node_metadata_attached(graph: ir.Graph, functions: list[ir.Function],
                           node_metadata: dict[str, dict[str, str]] | None,
                           value_info: dict[str, Any] | None = None) -> Iterator[None]:
    """The recorded node metadata set on the IR nodes it names while the model is written,
    and taken off again afterwards (the function's IR is the user's, and kept); likewise
    the value_info of bodies, keyed by the path of the node computing the value and the
    output's index (``'If#0/then_branch/Relu#0:0'``).

    A main-graph node is named as :func:`main_node_key` says, a node of an If/Loop/Scan body by the path of the node holding
    the body, the attribute, and its op and occurrence among the body's nodes of that op
    (``'y/then_branch/Relu#0'``), a node of a function body likewise below ``'<name>()'``.
    A name the (edited) source no longer defines is skipped.
    """
    body_types = {key: annotation for key, annotation in (value_info or {}).items() if "/" in key and ":" in key}
    if not node_metadata and not body_types:
        yield
        return
    keyed: dict[str, ir.Node] = {}
    owners: dict[str, ir.Graph] = {}
    seen: dict[str, int] = {}
    for main_node in graph.nodes:
        key = main_node_key(main_node, seen)
        if key is not None:
            _key_node(main_node, key, keyed, owners)
    for function in functions:
        _key_scope(function.graph, f"{function.name}()", keyed, owners)
    previous: list[tuple[ir.Node, dict[str, str] | None]] = []
    for key, props in (node_metadata or {}).items():
        found = keyed.get(key)
        if found is not None:
            previous.append((found, found.metadata_props))
            found.metadata_props = dict(props)
    listed: list[tuple[ir.Graph, list[ir.Value], list[tuple[ir.Value, ir.IRType | None]]]] = []
    for key, annotation in body_types.items():
        path, _, index_text = key.rpartition(":")
        found, owner = keyed.get(path), owners.get(path)
        if found is None or owner is None or not index_text.isdigit() or int(index_text) >= len(found.outputs):
            continue
        value = found.outputs[int(index_text)]
        if any(entry is value for entry in owner.value_info):
            continue
        listed.append((owner, owner.value_info, [(value, value.type)]))
        owner.value_info = [*owner.value_info, value]
        value.type = _ir_type(annotation, key)
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


def _key_node(node: ir.Node, key: str, keyed: dict[str, ir.Node], owners: dict[str, ir.Graph]) -> None:
    keyed[key] = node
    for attr in node.attributes.values():
        if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
            _key_scope(attr.value, f"{key}/{attr.name}", keyed, owners)
        elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
            for index, body in enumerate(attr.value):
                _key_scope(body, f"{key}/{attr.name}[{index}]", keyed, owners)


def _key_scope(graph: ir.Graph, scope: str, keyed: dict[str, ir.Node], owners: dict[str, ir.Graph]) -> None:
    seen: dict[str, int] = {}
    for node in graph.nodes:
        occurrence = seen.get(node.op_type, 0)
        seen[node.op_type] = occurrence + 1
        path = f"{scope}/{node.op_type}#{occurrence}"
        owners[path] = graph
        _key_node(node, path, keyed, owners)


def _ir_type(annotation: Any, name: str) -> ir.IRType:
    found = types.to_ir_type(annotation)
    if found is None and isinstance(annotation, (ir.MapType, ir.SparseTensorType)):
        found = annotation
    if found is None:
        raise ConversionError(
            f"value_info[{name!r}] is {annotation!r}, not a type",
            hint="write a type such as FLOAT[2, 'N'], INT64 or Sequence[FLOAT[...]]",
        )
    return found
