"""What ``eager.run`` checks on a proto before running any node of it.

``eager.run`` walks protos directly, and proto2 hands out ``bytes`` for a string field
that is not UTF-8 (a bit flip, a truncated character): an op type or domain of bytes
would reach onnx's schema lookup and the kernel builder as a raw TypeError.  One walk
over every graph, subgraph and function turns that into a
:class:`dsl.errors.ModelLoadError` before the first kernel is built.  It is kept to the
two fields per node that the runner hands on and the graphs' input and output names
(which messages list); other names only serve as dictionary keys, where bytes do no
harm.  It runs on every call, so it stays that small.  Tensors are checked where
they are read (:func:`dsl.tensor_protos.tensor_array`).
"""

from __future__ import annotations

from typing import Any

import onnx

from dsl.errors import ModelLoadError

__all__ = ["check_program_protos"]

_GRAPH = onnx.AttributeProto.GRAPH
_GRAPHS = onnx.AttributeProto.GRAPHS


def check_program_protos(root: Any, functions: Any, source: str) -> None:
    """Refuse ``root`` (a graph or function proto) or ``functions`` if a node's op type or
    domain, in any of them or their subgraphs, is not text."""
    stack = [root, *functions]
    while stack:
        body = stack.pop()
        if isinstance(body, onnx.FunctionProto):
            names = [*body.input, *body.output]
        else:
            names = [value.name for value in (*body.input, *body.output)]
        if not all(type(name) is str for name in names):
            _refuse(source, "an input or output name of a graph", next(n for n in names if type(n) is not str))
        for node in body.node:
            if type(node.op_type) is not str or type(node.domain) is not str:
                _refuse(source, f"a node's op type (domain {node.domain!r})", node.op_type)
            for attribute in node.attribute:
                if attribute.type == _GRAPH:
                    stack.append(attribute.g)
                elif attribute.type == _GRAPHS:
                    stack.extend(attribute.graphs)


def _refuse(source: str, what: str, text: Any) -> None:
    raise ModelLoadError(f"{source}: {what} {text!r} is not UTF-8 text",
                         hint="the file is damaged (names must be UTF-8); re-export or re-download it")
