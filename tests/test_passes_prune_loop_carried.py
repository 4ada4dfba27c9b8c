"""dsl.passes.prune_loop_carried: a loop-carried value that neither the body nor anything
after the Loop reads is dropped from the node and its body, and the model still computes
what it computed before (onnxruntime on the model before and after is the oracle, and
numpy where the loop is simple enough to write down)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from converter.to_onnx import model_to_proto
from dsl import BOOL, FLOAT, INT64, ScriptFunction, ir
from dsl.frontend import compile_script
from dsl.frontend.scripted import CompiledFunction
from dsl.passes import PassResult, PruneLoopCarried, prune_loop_carried
from tests.helpers import run_model

K = ir.AttrKind
SCALAR_F, SCALAR_I, SCALAR_B = FLOAT[()], INT64[()], BOOL[()]


def node(op_type: str, inputs: list, outputs: list, **attributes: ir.Attr) -> ir.Node:
    made = ir.Node(op_type, inputs=inputs, outputs=outputs, attributes=dict(attributes))
    for value in outputs:
        value.producer = made
    return made


def counting_loop_node(x: ir.Value, n: ir.Value, zero: ir.Value, read_dead_formal: bool = False) -> ir.Node:
    """``for i in range(n): total = total + x`` carrying ``spare``, a copy of ``total``
    that (by default) nothing in the body reads."""
    iteration, cond_in = ir.Value("i", SCALAR_I), ir.Value("cond_in", SCALAR_B)
    total_in, spare_in = ir.Value("total_in", SCALAR_F), ir.Value("spare_in", SCALAR_F)
    total_out, spare_out, cond_out = ir.Value("total_out"), ir.Value("spare_out"), ir.Value("cond_out")
    body_nodes = [
        node("Identity", [cond_in], [cond_out]),
        node("Add", [total_in, spare_in if read_dead_formal else x], [total_out]),
        node("Identity", [total_out], [spare_out]),  # made only to output total twice
    ]
    body = ir.Graph("body", [iteration, cond_in, total_in, spare_in], [cond_out, total_out, spare_out], body_nodes)
    total, spare = ir.Value("total", SCALAR_F), ir.Value("spare", SCALAR_F)
    return node("Loop", [n, None, zero, zero], [total, spare], body=ir.Attr("body", K.GRAPH, body))


def zero_initializer() -> ir.Value:
    return ir.Value("zero", SCALAR_F, initializer=ir.Tensor(np.array(0.0, np.float32), FLOAT.enum, "zero"))


def counting_loop(read_dead_formal: bool = False, read_dead_output: bool = False) -> ir.Function:
    """A function of (x, n) returning the loop's total, and its spare copy when asked."""
    x, n, zero = ir.Value("x", SCALAR_F), ir.Value("n", SCALAR_I), zero_initializer()
    loop = counting_loop_node(x, n, zero, read_dead_formal)
    outputs = list(loop.outputs) if read_dead_output else [loop.outputs[0]]
    graph = ir.Graph("main", [x, n], outputs, [loop], initializers=[zero])
    return ir.Function("main", graph, opset_imports={"": 18})


def loops_of(graph: ir.Graph) -> list[ir.Node]:
    return [n for n, _ in ir.walk(graph) if n.op_type == "Loop"]


def run_function(function: ir.Function, *inputs: np.ndarray) -> list[np.ndarray]:
    model = model_to_proto(function)
    onnx.checker.check_model(model, full_check=True)
    return run_model(model, list(inputs))


INPUTS = [np.array(1.5, np.float32), np.array(4, np.int64)]


def test_an_unread_carried_value_is_dropped_and_the_loop_computes_the_same() -> None:
    function = counting_loop()
    before = run_function(function, *INPUTS)
    result = PruneLoopCarried()(function)
    assert isinstance(result, PassResult) and result.modified and result.target is function  # in place
    (loop,) = loops_of(function.graph)
    body = loop.attributes["body"].value
    assert [v.name if v else "" for v in loop.inputs] == ["n", "", "zero"]
    assert [v.name for v in loop.outputs] == ["total"]
    assert [v.name for v in body.inputs] == ["i", "cond_in", "total_in"]
    assert [v.name for v in body.outputs] == ["cond_out", "total_out"]
    assert [n.op_type for n in body.nodes] == ["Identity", "Add"]  # the Identity copy is gone too
    after = run_function(function, *INPUTS)
    np.testing.assert_allclose(after[0], before[0])
    np.testing.assert_allclose(after[0], np.float32(1.5 * 4))


@pytest.mark.parametrize("read_dead_formal, read_dead_output", [(True, False), (False, True)])
def test_a_carried_value_read_inside_or_after_the_loop_is_kept(read_dead_formal: bool, read_dead_output: bool) -> None:
    function = counting_loop(read_dead_formal, read_dead_output)
    before = run_function(function, *INPUTS)
    assert not PruneLoopCarried()(function).modified
    (loop,) = loops_of(function.graph)
    assert len(loop.inputs) == 4 and len(loop.outputs) == 2
    assert len(loop.attributes["body"].value.nodes) == 3
    for got, expected in zip(run_function(function, *INPUTS), before):
        np.testing.assert_allclose(got, expected)


def test_only_the_listed_loop_outputs_are_considered() -> None:
    function = counting_loop()
    (loop,) = loops_of(function.graph)
    total, spare = loop.outputs
    assert not prune_loop_carried(function.graph, only=[total])  # read after the loop: kept
    assert not prune_loop_carried(function.graph, only=[])
    assert len(loop.outputs) == 2
    assert prune_loop_carried(function.graph, only=[spare])
    assert loop.outputs == [total]


def test_loops_in_subgraphs_and_in_a_models_functions_are_pruned() -> None:
    # The loop inside an If branch of the main graph (reading x and zero from outside),
    # and again in a model-local function that the main graph does not call.
    x, n, flag, zero = ir.Value("x", SCALAR_F), ir.Value("n", SCALAR_I), ir.Value("flag", SCALAR_B), zero_initializer()
    nested = counting_loop_node(x, n, zero)
    then_branch = ir.Graph("then", [], [nested.outputs[0]], [nested])
    else_total = ir.Value("else_total")
    else_branch = ir.Graph("else", [], [else_total], [node("Identity", [x], [else_total])])
    result = ir.Value("result", SCALAR_F)
    choose = node("If", [flag], [result], then_branch=ir.Attr("then_branch", K.GRAPH, then_branch),
                  else_branch=ir.Attr("else_branch", K.GRAPH, else_branch))
    local = counting_loop()
    model = ir.Model(ir.Graph("main", [x, n, flag], [result], [choose], initializers=[zero]), functions=[local],
                     opset_imports={"": 18})
    pruned = PruneLoopCarried()(model)
    assert pruned.modified and pruned.target is model
    assert len(nested.outputs) == 1 and len(nested.attributes["body"].value.inputs) == 3
    (local_loop,) = loops_of(local.graph)
    assert len(local_loop.outputs) == 1
    proto = model_to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    for flag_value, expected in ((True, 1.5 * 4), (False, 1.5)):
        got = run_model(proto, [*INPUTS, np.array(flag_value)])[0]
        np.testing.assert_allclose(got, np.float32(expected))


def _until(x: FLOAT, limit: FLOAT) -> FLOAT:
    going = x < limit
    while going:
        x = x * 2.0
        going = x < limit
    return x


def test_the_front_end_lists_the_copy_of_a_while_condition_and_the_pass_drops_it() -> None:
    seen: list[CompiledFunction] = []

    def keep_unpruned(compiled: CompiledFunction) -> ir.Function:
        seen.append(compiled)
        return compiled.function

    function = compile_script(ScriptFunction(_until), keep_unpruned)
    (compiled,) = seen
    (loop,) = loops_of(function.graph)
    assert compiled.while_conditions == [loop.outputs[1]]  # ``going`` is carried next to x
    assert loop.outputs[1].name.startswith("going") and len(loop.outputs) == 2
    inputs = [np.array(1.0, np.float32), np.array(10.0, np.float32)]
    before = run_function(function, *inputs)
    assert PruneLoopCarried(only=compiled.while_conditions)(function).modified
    assert len(loop.outputs) == 1 and loop.outputs[0].name.startswith("x")
    assert [v.name if v else "" for v in loop.inputs] == ["", "going", "x"]  # Loop("", c, x) as by hand
    body = loop.attributes["body"].value
    assert len(body.inputs) == 3 and len(body.outputs) == 2
    after = run_function(function, *inputs)
    np.testing.assert_allclose(after[0], before[0])
    np.testing.assert_allclose(after[0], np.float32(16.0))
