"""Finding the text of a corrupt model that is not UTF-8.

ONNX names are protobuf ``string`` fields, but onnx.proto is proto2, whose Python parser
hands out ``bytes`` instead of failing where a field holds bytes that are not UTF-8 (a
bit flip, a truncated multi-byte character).  Such a model loads, and then breaks code
that expects text.  Checking every name on load would cost as much as reading the
model, so the back ends call :func:`undecodable_text` only once something has failed,
to tell a corrupt file from a bug.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dsl import ir

__all__ = ["undecodable_text"]


def undecodable_text(model: ir.Model | ir.Function | ir.Graph) -> str | None:
    """A description of the first name or text field of ``model`` that is bytes, else None.

    >>> from dsl import ir
    >>> undecodable_text(ir.Graph(name=b"\\xff"))
    "graph text b'\\\\xff'"
    """
    for where, text in _texts(model):
        if isinstance(text, bytes):
            return f"{where} {text!r}"
    return None


def _texts(model: ir.Model | ir.Function | ir.Graph) -> Iterator[tuple[str, Any]]:
    graphs: list[ir.Graph] = []
    if isinstance(model, ir.Model):
        yield from (("model text", t) for t in (model.producer_name, model.producer_version, model.domain,
                                                model.doc_string))
        yield from (("metadata", t) for item in model.metadata_props.items() for t in item)
        yield from (("opset domain", d) for d in model.opset_imports)
        functions = list(model.functions)
        graphs.append(model.graph)
    elif isinstance(model, ir.Function):
        functions = [model, *model.callees()]
    else:
        functions = []
        graphs.append(model)
    for function in functions:
        yield from (("function name", t) for t in (function.name, function.domain, function.overload))
        yield ("function doc string", function.doc_string)
        yield from (("opset domain", d) for d in function.opset_imports)
        yield from (("attribute parameter name", p.name) for p in function.attr_params)
        graphs.append(function.graph)
    while graphs:
        graph = graphs.pop()
        yield from (("graph text", t) for t in (graph.name, graph.doc_string))
        yield from (("sparse initializer name", n) for n in graph.sparse_initializers)
        for value in [*graph.inputs, *graph.outputs, *graph.initializers, *graph.value_info]:
            yield from _value_texts(value)
        for node in graph.nodes:
            yield from (("node text", t) for t in (node.op_type, node.domain, node.name, node.overload,
                                                   node.doc_string))
            for value in node.outputs:
                yield from _value_texts(value)
            for attr in node.attributes.values():
                yield from (("attribute name", t) for t in (attr.name, attr.ref_attr_name or ""))
                if isinstance(attr.value, ir.Graph):
                    graphs.append(attr.value)
                elif isinstance(attr.value, list):
                    graphs.extend(g for g in attr.value if isinstance(g, ir.Graph))


def _value_texts(value: ir.Value) -> Iterator[tuple[str, Any]]:
    yield ("value name", value.name)
    yield ("value doc string", value.doc_string)
    shape = getattr(value.type, "shape", None)
    if shape:
        yield from (("dimension", d) for d in shape)
