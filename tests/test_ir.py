"""The IR's own behaviour: callee collection, readable reprs, error rendering."""

from __future__ import annotations

import pickle

import numpy as np

from dsl import ir, types
from dsl.errors import DslError, OpCallError, render_location


def _call(callee: ir.Function, x: ir.Value, out: str) -> ir.Node:
    result = ir.Value(out)
    node = ir.Node(callee.name, callee.domain, [x], [result], callee=callee)
    result.producer = node
    return node


def _identity_function(name: str, body: list[ir.Node] | None = None) -> ir.Function:
    x = ir.Value("x", types.FLOAT[...])
    nodes = body or []
    if not nodes:
        y = ir.Value("y")
        nodes = [ir.Node("Identity", "", [x], [y])]
    return ir.Function(name, ir.Graph(name, [x], [nodes[-1].outputs[0]], nodes), domain="this")


def test_callees_are_transitive_unique_and_callees_first() -> None:
    leaf = _identity_function("leaf")
    x = ir.Value("x", types.FLOAT[...])
    mid = ir.Function("mid", ir.Graph("mid", [x], [], [_call(leaf, x, "a")]), domain="this")
    mid.graph.outputs = [mid.graph.nodes[0].outputs[0]]
    top_x = ir.Value("x", types.FLOAT[...])
    n1 = _call(mid, top_x, "b")
    n2 = _call(leaf, n1.outputs[0], "c")
    # a call hidden inside an If branch counts too
    branch = ir.Graph("then", [], [], [_call(mid, top_x, "d")])
    branch.outputs = [branch.nodes[0].outputs[0]]
    n3 = ir.Node("If", "", [top_x], [ir.Value("e")], {"then_branch": ir.Attr("then_branch", ir.AttrKind.GRAPH, branch)})
    top = ir.Function("top", ir.Graph("top", [top_x], [n3.outputs[0]], [n1, n2, n3]))
    assert [f.name for f in top.callees()] == ["leaf", "mid"]


def test_reprs_are_readable() -> None:
    x = ir.Value("x", types.FLOAT[2, "N"])
    y = ir.Value("y")
    node = ir.Node("LeakyRelu", "", [x], [y], {"alpha": ir.Attr("alpha", ir.AttrKind.FLOAT, 0.1)})
    assert repr(x) == "%x: FLOAT[2, 'N']"
    assert repr(node) == "%y = LeakyRelu(%x, Attr(alpha=0.1: FLOAT))"
    graph = ir.Graph("g", [x], [y], [node])
    assert repr(graph).splitlines() == ["graph g(%x: FLOAT[2, 'N']):", f"    {node!r}", "    return %y"]
    tensor = ir.Tensor(np.zeros((2, 3), np.float32), types.FLOAT.enum, "w")
    assert repr(tensor) == "Tensor(FLOAT[2, 3], name='w')"


def test_error_report_has_location_source_caret_and_hint() -> None:
    location = ir.SourceLocation("model.py", 12, 8, "    y = op.Relu(x, w)\n", 21)
    error = OpCallError("Relu takes 1 input, got 2", location, hint="drop w")
    assert str(error).splitlines() == [
        "model.py:12:9: error: Relu takes 1 input, got 2",
        "    y = op.Relu(x, w)",
        "        ^^^^^^^^^^^^^",
        "hint: drop w",
    ]
    assert isinstance(error, DslError)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)


def test_error_without_location_or_source_still_renders() -> None:
    assert str(DslError("bad", hint="fix it")) == "error: bad\nhint: fix it"
    assert render_location(ir.SourceLocation("a.xml", 3, 4)) == "a.xml:3:5"
    error = DslError("late").with_location(ir.SourceLocation("f.py", 1, 0, "x"))
    assert str(error).startswith("f.py:1:1: error: late")
