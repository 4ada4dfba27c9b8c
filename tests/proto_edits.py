"""Edits on ONNX protos that must not change a model's meaning: renaming and reordering.

The compare tests apply them at random (hypothesis) and check that
``converter.compare`` still calls the result isomorphic; the round-trip tests use
:func:`node_case_models` to reach the ONNX backend cases.
"""

from __future__ import annotations

import random
from typing import Any

import onnx


def _graph_attrs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def rename_values(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """A copy with every value, node and graph name replaced by a fresh random one.

    Names are unique across a model's graphs (ONNX forbids shadowing), so one mapping
    for the whole model keeps outer-scope references intact.
    """
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    mapping: dict[str, str] = {"": ""}

    def new(name: str) -> str:
        if name not in mapping:
            mapping[name] = f"n{rng.randrange(10**9)}_{len(mapping)}"
        return mapping[name]

    def visit_graph(graph: Any, is_function: bool) -> None:
        if is_function:
            inputs = [new(n) for n in graph.input]
            outputs = [new(n) for n in graph.output]
            del graph.input[:]
            graph.input.extend(inputs)
        else:
            for value in [*graph.input, *graph.output, *graph.value_info]:
                value.name = new(value.name)
            for tensor in graph.initializer:
                tensor.name = new(tensor.name)
            for sparse in graph.sparse_initializer:
                sparse.values.name = new(sparse.values.name)
            graph.name = f"g{rng.randrange(10**6)}"
        for node in graph.node:
            node.name = f"node{rng.randrange(10**6)}"
            for index, name in enumerate(list(node.input)):
                node.input[index] = new(name)
            for index, name in enumerate(list(node.output)):
                node.output[index] = new(name)
            for sub in _graph_attrs(node):
                visit_graph(sub, False)
        if is_function:
            del graph.output[:]
            graph.output.extend(outputs)

    visit_graph(renamed.graph, False)
    for function in renamed.functions:
        mapping.clear()
        mapping[""] = ""
        visit_graph(function, True)
    return renamed


def _reads(node: onnx.NodeProto) -> set[str]:
    """Every name a node reads, including what its subgraphs read from outside themselves."""
    read = {n for n in node.input if n}
    for sub in _graph_attrs(node):
        defined = {v.name for v in sub.input} | {t.name for t in sub.initializer}
        for inner in sub.node:
            defined.update(inner.output)
        for inner in sub.node:
            read.update(_reads(inner) - defined)
        read.update(v.name for v in sub.output if v.name not in defined)
    return read


def shuffle_nodes(model: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    """A copy whose graphs list their nodes in another (random) topological order."""
    shuffled = onnx.ModelProto()
    shuffled.CopyFrom(model)

    def visit(graph: Any) -> None:
        nodes = list(graph.node)
        producer = {name: i for i, node in enumerate(nodes) for name in node.output if name}
        deps = [{producer[n] for n in _reads(node) if n in producer} for node in nodes]
        users: list[list[int]] = [[] for _ in nodes]
        for index, needed in enumerate(deps):
            for dep in needed:
                users[dep].append(index)
        waiting = [len(d) for d in deps]
        ready = [i for i, w in enumerate(waiting) if w == 0]
        order: list[int] = []
        while ready:
            chosen = ready.pop(rng.randrange(len(ready)))
            order.append(chosen)
            for user in users[chosen]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
        assert len(order) == len(nodes), "graph is not acyclic"
        copies = [onnx.NodeProto() for _ in nodes]
        for copy, index in zip(copies, order):
            copy.CopyFrom(nodes[index])
        del graph.node[:]
        graph.node.extend(copies)
        for node in graph.node:
            for sub in _graph_attrs(node):
                visit(sub)

    visit(shuffled.graph)
    for function in shuffled.functions:
        visit(function)
    return shuffled


def node_case_models() -> dict[str, Any]:
    """The ONNX backend node test cases by name (collected once per process)."""
    global _CASES
    if _CASES is None:
        import warnings

        from onnx.backend.test.case.node import collect_testcases

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CASES = {case.name: case for case in collect_testcases()}
    return _CASES


_CASES: dict[str, Any] | None = None
