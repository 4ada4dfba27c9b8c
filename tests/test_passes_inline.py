"""dsl.passes.inline (inline_calls, InlinePass): call nodes replaced by callee bodies, with attribute references
substituted, fresh names, and the original function left untouched; the inlined model
must compute what the model with local functions computes."""

from __future__ import annotations

import numpy as np
import onnx

from converter.to_onnx import model_to_proto
from dsl import FLOAT, ir, script
from dsl import opset18 as op
from dsl.passes import InlinePass, PassResult
from dsl.passes.inline import inline_calls
from tests.helpers import run_model


@script()
def scale(x: FLOAT["N"], factor: float = 2.0) -> FLOAT["N"]:
    y = x * factor
    return y


@script()
def shift_then_scale(x: FLOAT["N"], amount: float = 1.0) -> FLOAT["N"]:
    y = x + amount
    return scale(y, factor=amount)


@script()
def outer(x: FLOAT["N"], k: float = 3.0) -> tuple[FLOAT["N"], FLOAT["N"], FLOAT["N"]]:
    y = shift_then_scale(x, amount=k)
    return y, scale(x), op.Relu(y)


def all_nodes(graph) -> list:
    found = []
    for node in graph.nodes:
        found.append(node)
        for attr in node.attributes.values():
            if attr.kind.name == "GRAPH":
                found.extend(all_nodes(attr.value))
    return found


def test_inline_everything_substitutes_attributes() -> None:
    original = outer.function
    flat = inline_calls(original)
    assert all(node.callee is None for node in all_nodes(flat.graph))
    assert [n.callee is not None for n in original.nodes].count(True) == 2  # untouched
    references = {a.ref_attr_name for n in flat.nodes for a in n.attributes.values() if a.ref_attr_name}
    assert references == {"k"}  # amount -> k, factor -> amount -> k
    names = [v.name for n in flat.nodes for v in n.outputs]
    assert len(names) == len(set(names))
    assert [v.name for v in flat.outputs] == [v.name for v in original.outputs]
    assert "this" not in flat.opset_imports


def test_inlined_model_computes_the_same() -> None:
    x = np.array([1.0, -2.0, 0.5], np.float32)
    with_functions = outer.to_model_proto()
    inlined = outer.to_model_proto(inline=True)
    onnx.checker.check_model(inlined, full_check=True)
    assert not inlined.functions and with_functions.functions
    for a, b in zip(run_model(with_functions, [x]), run_model(inlined, [x])):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    expected_y = (x + 3) * 3
    np.testing.assert_allclose(run_model(inlined, [x])[0], expected_y, rtol=1e-6)


def test_only_selected_callees_are_inlined() -> None:
    partial = inline_calls(outer.function, only=[scale.function])
    callees = [n.op_type for n in all_nodes(partial.graph) if n.callee is not None]
    assert callees == ["shift_then_scale"]
    by_predicate = inline_calls(outer.function, only=lambda f: f.name == "shift_then_scale")
    assert sorted(n.op_type for n in all_nodes(by_predicate.graph) if n.callee is not None) == ["scale", "scale"]


def test_defaults_apply_when_the_call_gives_no_attribute() -> None:
    flat = inline_calls(scale_caller.function)
    constant = next(n for n in flat.nodes if n.op_type == "Constant" and "value_float" in n.attributes)
    assert constant.attributes["value_float"].value == 2.0
    assert constant.attributes["value_float"].ref_attr_name is None


@script()
def scale_caller(x: FLOAT["N"]) -> FLOAT["N"]:
    return scale(x)


# ------------------------------------------------------------------ the pass object


def test_the_pass_reports_whether_it_inlined_and_leaves_its_input_alone() -> None:
    original = outer.function
    before = [(n.op_type, n.callee is not None) for n in original.nodes]
    result = InlinePass()(original)
    assert isinstance(result, PassResult) and result.modified
    assert result.target is not original
    assert [(n.op_type, n.callee is not None) for n in original.nodes] == before
    unchanged = InlinePass(only=lambda callee: callee.name == "no such function")(original)
    assert not unchanged.modified
    assert [n.op_type for n in unchanged.target.nodes] == [n.op_type for n in original.nodes]


def test_script_inline_callees_are_inlined_by_the_facade() -> None:
    # ``@script(inline=True)``: the front end asks for the pass, the facade runs it, so the
    # caller's IR (what .function keeps) holds no call of the callee at all.
    assert all(n.callee is None for n, _ in ir.walk(double_then_add.function.graph))
    assert any(n.callee is not None for n, _ in ir.walk(plain_caller.function.graph))
    x = np.array([1.0, -2.0, 0.5], np.float32)
    model = double_then_add.to_model_proto()
    assert not model.functions
    np.testing.assert_allclose(run_model(model, [x])[0], x * 2 + 1, rtol=1e-6)


@script(inline=True)
def doubled(x: FLOAT["N"]) -> FLOAT["N"]:
    return x + x


@script()
def double_then_add(x: FLOAT["N"]) -> FLOAT["N"]:
    return doubled(x) + 1.0


@script()
def plain_caller(x: FLOAT["N"]) -> FLOAT["N"]:
    return scale(x) + 1.0


def _leaky() -> ir.Function:
    """A local function ``leaky<alpha=0.1>(x) = LeakyRelu(x, alpha) + x``."""
    x, relu, y = ir.Value("x", FLOAT["N"]), ir.Value("relu"), ir.Value("y", FLOAT["N"])
    alpha_ref = ir.Attr("alpha", ir.AttrKind.FLOAT, None, ref_attr_name="alpha")
    nodes = [_node("LeakyRelu", [x], [relu], alpha=alpha_ref), _node("Add", [relu, x], [y])]
    default = ir.Attr("alpha", ir.AttrKind.FLOAT, 0.1)
    return ir.Function("leaky", ir.Graph("leaky", [x], [y], nodes), domain="this",
                       attr_params=[ir.AttrParam("alpha", ir.AttrKind.FLOAT, default)], opset_imports={"": 18})


def _node(op_type: str, inputs: list, outputs: list, **attributes: ir.Attr) -> ir.Node:
    made = ir.Node(op_type, inputs=inputs, outputs=outputs, attributes=dict(attributes))
    for value in outputs:
        value.producer = made
    return made


def _call(callee: ir.Function, inputs: list, outputs: list, **attributes: ir.Attr) -> ir.Node:
    made = _node(callee.name, inputs, outputs, **attributes)
    made.domain, made.callee = callee.domain, callee
    return made


def _model_with_functions() -> tuple[ir.Model, ir.Function, ir.Function]:
    """main(a) = twice(a) + leaky(a, alpha=0.5), where twice(x) = leaky(leaky(x))."""
    leaky = _leaky()
    x, mid, y = ir.Value("x", FLOAT["N"]), ir.Value("mid"), ir.Value("y", FLOAT["N"])
    twice = ir.Function("twice", ir.Graph("twice", [x], [y], [_call(leaky, [x], [mid]), _call(leaky, [mid], [y])]),
                        domain="this", opset_imports={"": 18, "this": 1})
    a, b, c, out = ir.Value("a", FLOAT[3]), ir.Value("b"), ir.Value("c"), ir.Value("out", FLOAT[3])
    half = ir.Attr("alpha", ir.AttrKind.FLOAT, 0.5)
    main = ir.Graph("main", [a], [out], [_call(twice, [a], [b]), _call(leaky, [a], [c], alpha=half),
                                          _node("Add", [b, c], [out])])
    return ir.Model(main, functions=[leaky, twice], opset_imports={"": 18, "this": 1}), leaky, twice


def _leaky_oracle(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * x) + x


def test_a_model_keeps_the_functions_not_selected_and_calls_their_inlined_copies() -> None:
    model, leaky, twice = _model_with_functions()
    a = np.array([-2.0, 0.5, 3.0], np.float32)
    expected = _leaky_oracle(_leaky_oracle(a, 0.1), 0.1) + _leaky_oracle(a, 0.5)
    original = model_to_proto(model)
    np.testing.assert_allclose(run_model(original, [a])[0], expected, rtol=1e-6)
    result = InlinePass(only=[leaky])(model)
    assert result.modified and result.target is not model
    flat = result.target
    assert [f.name for f in flat.functions] == ["twice"]  # leaky is inlined everywhere, so dropped
    (twice_copy,) = flat.functions
    assert twice_copy is not twice and all(n.callee is None for n in twice_copy.nodes)
    calls = [n for n, _ in ir.walk(flat.graph) if n.callee is not None]
    assert [n.callee for n in calls] == [twice_copy]  # redirected to the inlined copy
    assert [f.name for f in model.functions] == ["leaky", "twice"] and twice.nodes[0].callee is leaky  # untouched
    proto = model_to_proto(flat)
    onnx.checker.check_model(proto, full_check=True)
    assert [f.name for f in proto.functions] == ["twice"]
    np.testing.assert_allclose(run_model(proto, [a])[0], expected, rtol=1e-6)
    everything = InlinePass()(model).target
    assert not everything.functions and "this" not in everything.opset_imports
    np.testing.assert_allclose(run_model(model_to_proto(everything), [a])[0], expected, rtol=1e-6)
