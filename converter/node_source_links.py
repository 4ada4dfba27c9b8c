"""Source links put on the nodes of a model while it is written (``source_links=True``).

The links (see :mod:`dsl.source_links`) are set on the IR nodes as ``metadata_props`` for
the duration of the write and taken off again afterwards: the IR is the user's (a
``@script`` function keeps its compiled IR) and the node writer stays as it is, writing
whatever metadata a node carries (which raises the IR version to 10 only when a node
carries some).  Nodes without a location (read from an ONNX file) get no link.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dsl import ir
from dsl.source_links import link_props

__all__ = ["source_links_attached"]


@contextlib.contextmanager
def source_links_attached(graph: ir.Graph, functions: list[ir.Function]) -> Iterator[int]:
    """Every node of ``graph``, its bodies and ``functions`` that has a source location
    carries its source link while the block runs; yields how many nodes got one.

    >>> with source_links_attached(fn.function.graph, []) as linked:   # doctest: +SKIP
    ...     proto = write(...)
    """
    previous: list[tuple[ir.Node, dict[str, str] | None]] = []
    graphs = [graph, *(function.graph for function in functions)]
    try:
        for owner in graphs:
            for node, _ in ir.walk(owner):
                location = node.location
                if location is None or location.line <= 0:
                    continue
                previous.append((node, node.metadata_props))
                node.metadata_props = {**(node.metadata_props or {}), **link_props(location)}
        yield len(previous)
    finally:
        for node, earlier in reversed(previous):
            node.metadata_props = earlier
