"""dsl.inline.inline_calls: call nodes replaced by callee bodies, with attribute references
substituted, fresh names, and the original function left untouched; the inlined model
must compute what the model with local functions computes."""

from __future__ import annotations

import numpy as np
import onnx

from dsl import FLOAT, script
from dsl import opset18 as op
from dsl.inline import inline_calls
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
