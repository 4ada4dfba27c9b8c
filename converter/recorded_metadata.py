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

from typing import Any

import onnx

from converter.onnx_encoding import IR_METADATA_PROPS, Export, fill_type
from dsl import ir, types
from dsl.errors import ConversionError

__all__ = ["apply_recorded_metadata"]


def apply_recorded_metadata(
    model: onnx.ModelProto,
    export: Export,
    *,
    node_metadata: dict[str, dict[str, str]] | None = None,
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
    if node_metadata:
        producers = {node.output[0]: node for node in graph.node if node.output and node.output[0]}
        for name, props in node_metadata.items():
            node = producers.get(name)
            if node is None:
                continue
            export.need(IR_METADATA_PROPS)
            del node.metadata_props[:]
            for key, text in props.items():
                node.metadata_props.add(key=key, value=text)
    if value_info:
        interface = {v.name for v in (*graph.input, *graph.output)}
        known = {name for node in graph.node for name in node.output} - interface
        listed = {v.name for v in graph.value_info}
        for name, annotation in value_info.items():
            if name not in known or name in listed:
                continue
            fill_type(graph.value_info.add(name=name).type, _ir_type(annotation, name), export)


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
