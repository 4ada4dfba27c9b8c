"""The IR's own behaviour: callee collection, the walker and use counts, readable reprs, error rendering."""

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


def _nested_model() -> tuple[ir.Graph, dict[str, ir.Node]]:
    """x -> Relu -> If(then: Neg(r) then a Loop whose body reads x; else: Abs(x)) -> out.

    Built by hand (no front end), so the oracle is the construction itself."""
    x = ir.Value("x", types.FLOAT[2])
    r = ir.Value("r")
    relu = ir.Node("Relu", "", [x], [r], name="relu")
    n = ir.Value("n")
    neg = ir.Node("Neg", "", [r], [n], name="neg")
    body_out = ir.Value("b")
    body_add = ir.Node("Add", "", [x, x], [body_out], name="body_add")  # outer-scope capture of x
    body = ir.Graph("body", [], [body_out], [body_add])
    looped = ir.Value("looped")
    loop = ir.Node("Loop", "", [None, None], [looped], {"body": ir.Attr("body", ir.AttrKind.GRAPH, body)}, name="loop")
    then_branch = ir.Graph("then", [], [n], [neg, loop])
    a = ir.Value("a")
    abs_node = ir.Node("Abs", "", [x], [a], name="abs")
    else_branch = ir.Graph("else", [], [a], [abs_node])
    out = ir.Value("out")
    if_node = ir.Node("If", "", [r], [out], {
        "then_branch": ir.Attr("then_branch", ir.AttrKind.GRAPH, then_branch),
        "else_branch": ir.Attr("else_branch", ir.AttrKind.GRAPH, else_branch),
    }, name="if")
    tail = ir.Node("Identity", "", [out], [ir.Value("y")], name="tail")
    graph = ir.Graph("main", [x], [tail.outputs[0]], [relu, if_node, tail])
    nodes = {node.name: node for node in (relu, neg, body_add, loop, abs_node, if_node, tail)}
    return graph, nodes


def test_walk_visits_every_node_once_in_pre_order_with_its_graph() -> None:
    graph, nodes = _nested_model()
    seen = [(node.name, where.name) for node, where in ir.walk(graph)]
    assert seen == [
        ("relu", "main"), ("if", "main"), ("neg", "then"), ("loop", "then"), ("body_add", "body"),
        ("abs", "else"), ("tail", "main"),
    ]
    # GRAPHS attributes (a list of graphs) are entered as well
    listed = ir.Node("Custom", "x", [], [ir.Value("z")], {
        "bodies": ir.Attr("bodies", ir.AttrKind.GRAPHS, [ir.Graph("g1", nodes=[nodes["abs"]]), ir.Graph("g2")])
    })
    assert [node.name for node, _ in ir.walk(ir.Graph("top", nodes=[listed]))] == ["", "abs"]
    assert [g.name for g in ir.subgraphs(nodes["if"])] == ["then", "else"]


def test_use_counts_count_inputs_outputs_and_outer_scope_reads() -> None:
    graph, nodes = _nested_model()
    counts = ir.use_counts(graph)
    x = graph.inputs[0]
    assert counts[x] == 4  # Relu, Abs, and the loop body's Add reads it twice
    assert counts[nodes["relu"].outputs[0]] == 2  # If's condition and Neg in a branch
    assert counts[nodes["neg"].outputs[0]] == 1  # the then-branch's output
    assert counts[graph.outputs[0]] == 1
    assert nodes["loop"].outputs[0] not in counts  # nobody reads it


def test_core_reprs_need_no_other_module() -> None:
    assert ir.element_type_name(16) == "BFLOAT16" and ir.element_type_name(99) == "DataType(99)"
    assert [ir.element_type_name(t.enum) for t in types.ELEMENT_TYPES.values()] == list(types.ELEMENT_TYPES)


def _produce(op_type: str, inputs: list[ir.Value], name: str, **attributes: ir.Attr) -> ir.Node:
    out = ir.Value(name)
    node = ir.Node(op_type, "", list(inputs), [out], dict(attributes), name=name)
    out.producer = node
    return node


def test_needed_nodes_follow_producers_and_outer_reads_of_bodies() -> None:
    x = ir.Value("x", types.FLOAT[2])
    relu = _produce("Relu", [x], "relu")
    dead = _produce("Exp", [x], "dead")
    neg = _produce("Neg", [relu.outputs[0]], "neg")
    inner = _produce("Abs", [neg.outputs[0]], "inner")  # reads neg from the enclosing graph
    branch = ir.Graph("then", [], [inner.outputs[0]], [inner])
    if_node = _produce("If", [x], "if", then_branch=ir.Attr("then_branch", ir.AttrKind.GRAPH, branch),
                       else_branch=ir.Attr("else_branch", ir.AttrKind.GRAPH, ir.Graph("else", [], [x], [])))
    graph = ir.Graph("main", [x], [if_node.outputs[0]], [relu, dead, neg, if_node])
    assert [n.name for n in ir.needed_nodes(graph, graph.outputs)] == ["relu", "neg", "if"]
    assert [n.name for n in ir.needed_nodes(graph, [relu.outputs[0], dead.outputs[0]])] == ["relu", "dead"]
    assert ir.needed_nodes(graph, [x]) == []


def test_bound_attributes_take_the_call_then_the_defaults_and_resolve_references() -> None:
    alpha = ir.AttrParam("alpha", ir.AttrKind.FLOAT, ir.Attr("alpha", ir.AttrKind.FLOAT, 0.5))
    axis = ir.AttrParam("axis", ir.AttrKind.INT)
    callee = ir.Function("f", ir.Graph("f"), attr_params=[alpha, axis])
    bound = ir.bound_attributes(callee, {"axis": ir.Attr("axis", ir.AttrKind.INT, 1)})
    assert {name: attr.value for name, attr in bound.items()} == {"axis": 1, "alpha": 0.5}
    forwarded = ir.Attr("scale", ir.AttrKind.FLOAT, None, ref_attr_name="alpha")
    resolved = ir.resolve_attribute(forwarded, bound)
    assert resolved is not None and (resolved.name, resolved.value, resolved.ref_attr_name) == ("scale", 0.5, None)
    assert ir.resolve_attribute(ir.Attr("k", ir.AttrKind.INT, None, ref_attr_name="missing"), bound) is None
    plain = ir.Attr("k", ir.AttrKind.INT, 3)
    assert ir.resolve_attribute(plain, bound) is plain
    # a caller inside another function forwards its own reference
    outer = {"alpha": ir.Attr("alpha", ir.AttrKind.FLOAT, None, ref_attr_name="gain")}
    again = ir.resolve_attribute(forwarded, ir.bound_attributes(callee, outer))
    assert again is not None and again.ref_attr_name == "gain"
