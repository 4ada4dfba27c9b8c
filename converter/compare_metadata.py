"""What ``check_metadata=True`` adds to the comparison of two models.

Besides the model's own doc string, producer name and ``metadata_props`` (compared in
:mod:`converter.compare`), metadata is: the names of the main graph's inputs and outputs
(what callers feed and fetch by), the IR version (the second model's may be
higher, since its content may need a newer one, but not lower unless the first's is
one the installed onnxruntime refuses: a round trip keeps what runs), each graph's
``metadata_props``, each node's ``metadata_props`` (an exporter's stack traces and
module names), in function bodies too, and the types of ``value_info`` (of values that are not a graph input or output).  Nodes and values are compared through
the pairing the structural comparison found, so names may still differ.
"""

from __future__ import annotations

from typing import Any

import onnx

from converter.compare_values import Different, compare_types

__all__ = ["compare_metadata", "compare_scope_metadata"]


def compare_metadata(first: onnx.ModelProto, second: onnx.ModelProto, comparison: Any) -> None:
    """Raise :class:`~converter.compare_values.Different` at the first metadata difference;
    ``comparison`` is the finished structural comparison of the two main graphs."""
    from dsl.onnxruntime_limits import max_ir_version

    if second.ir_version < min(first.ir_version, max_ir_version()):
        raise Different(f"ir_version: {first.ir_version} vs {second.ir_version}")
    _interface_names(first.graph, second.graph)
    compare_scope_metadata(comparison)


def _interface_names(first: onnx.GraphProto, second: onnx.GraphProto) -> None:
    """The names callers feed and fetch by: the main graph's inputs (weights listed as
    inputs aside) and outputs, position by position."""
    for kind in ("input", "output"):
        weights = ({t.name for t in first.initializer}, {t.name for t in second.initializer})
        names = [[value.name for value in getattr(graph, kind) if value.name not in held]
                 for graph, held in zip((first, second), weights)]
        for index, (name_a, name_b) in enumerate(zip(*names)):
            if name_a != name_b:
                raise Different(f"graph {kind} {index} is named {name_a!r} vs {name_b!r}")


def compare_scope_metadata(comparison: Any) -> None:
    """The metadata of the graphs and nodes a finished structural comparison paired (of a
    main graph and its subgraphs, or of a function body and its subgraphs)."""
    scopes = {id(one): one for pair in comparison.scopes for one in pair}
    for scope_a, scope_b in comparison.scopes:
        if isinstance(scope_a.graph, onnx.GraphProto):
            _graph_metadata(scope_a, scope_b, comparison.forward)
    for (scope_a_id, index_a), (scope_b_id, index_b) in comparison.node_pairs.items():
        node_a = scopes[scope_a_id].nodes[index_a]
        node_b = scopes[scope_b_id].nodes[index_b]
        props_a, props_b = _props(node_a), _props(node_b)
        if props_a != props_b:
            label = f"{node_a.op_type} node {node_a.name or node_a.output[0]!r}"
            raise Different(f"metadata_props of the {label}: {props_a} vs {props_b}")


def _graph_metadata(scope_a: Any, scope_b: Any, forward: dict[Any, Any]) -> None:
    graph_a, graph_b = scope_a.graph, scope_b.graph
    where = scope_a.where
    if _props(graph_a) != _props(graph_b):
        raise Different(f"{where} metadata_props: {_props(graph_a)} vs {_props(graph_b)}")
    infos_a, infos_b = _inner_value_info(graph_a), _inner_value_info(graph_b)
    if len(infos_a) != len(infos_b):
        raise Different(f"{where}: {len(infos_a)} value_info entries vs {len(infos_b)}")
    second = {info.name: info for info in infos_b}
    for info in infos_a:
        paired = forward.get((id(scope_a), info.name))
        # (a value the walk never reaches, such as an initializer nothing reads, by its name)
        found = second.get(paired[1]) if paired is not None else second.get(info.name)
        if found is None:
            raise Different(f"{where} value_info {info.name!r}: the second has none for its value")
        compare_types(info.type, found.type, f"{where} value_info {info.name!r}", True, None)


def _inner_value_info(graph: onnx.GraphProto) -> list[Any]:
    """The value_info entries of values that are not the graph's inputs or outputs: an entry
    for one of those repeats its declaration (which wins where the two disagree, as
    onnxruntime reads them), so a model written back leaves it out."""
    interface = {value.name for value in (*graph.input, *graph.output)}
    return [info for info in graph.value_info if info.name not in interface]


def _props(owner: Any) -> dict[str, str]:
    return {p.key: p.value for p in owner.metadata_props}
