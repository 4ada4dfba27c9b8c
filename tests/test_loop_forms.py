"""dsl.loop_forms: the If/Loop forms the compiler emits are the ones the back end recognises,
and dsl.operators' inverse spelling agrees with the forward tables."""

from __future__ import annotations

import numpy as np

from dsl import BOOL, FLOAT, INT64, ir, script
from dsl import opset18 as op
from dsl.loop_forms import CONDITION_TYPE, ITERATION_TYPE, if_form, known_scalar, plan_loops
from dsl.operators import BINARY, COMPARE, PYTHON_BINARY, PYTHON_UNARY, SYMBOLS, UNARY, binary_spelling


def _nodes(function: ir.Function, op_type: str) -> list[ir.Node]:
    return [node for node, _ in ir.walk(function.graph) if node.op_type == op_type]


def test_the_compiled_forms_are_recognised() -> None:
    @script()
    def loops(x: FLOAT[3], n: INT64, go: BOOL) -> FLOAT[3]:
        for _i in range(n):
            x = x * 2.0
        for _i in range(n):
            if not go:
                break
            x = x + 1.0
        for _i in range(n):
            x = x - 1.0
            if op.ReduceMax(x) > 10.0:
                break
        keep = op.ReduceMax(x) < 100.0
        while keep:
            x = x * 3.0
            keep = op.ReduceMax(x) < 100.0
        return x

    loops_found = _nodes(loops.function, "Loop")
    plans = plan_loops(loops.function.graph).plans
    assert [plans[loop].form for loop in loops_found] == ["for", "for", "for", "while"]
    assert plans[loops_found[1]].condition is not None and plans[loops_found[2]].final is not None
    body = loops_found[0].attributes["body"].value
    assert body.inputs[0].type == ITERATION_TYPE and body.inputs[1].type == CONDITION_TYPE


def test_an_if_on_a_comparison_is_recognised() -> None:
    @script()
    def choose(x: FLOAT[3], y: FLOAT[3]) -> FLOAT[3]:
        if op.ReduceSum(x) > op.ReduceSum(y):
            z = x + y
        else:
            z = x - y
        return z

    (node,) = _nodes(choose.function, "If")
    form = if_form(node)
    assert form is not None and not form.aliases


def test_known_scalar_follows_elementwise_producers_only() -> None:
    scalar = ir.Value("s", ir.TensorType(1, ()))
    vector = ir.Value("v", ir.TensorType(1, (3,)))
    unknown = ir.Value("u", ir.TensorType(1, None))
    add = ir.Node("Add", inputs=[scalar, scalar], outputs=[ir.Value("sum")])
    add.outputs[0].producer = add
    reduce = ir.Node("ReduceMax", inputs=[unknown], outputs=[ir.Value("max")])
    reduce.outputs[0].producer = reduce
    constant = ir.Node("Constant", attributes={
        "value": ir.Attr("value", ir.AttrKind.TENSOR, ir.Tensor(np.array(True), 9))}, outputs=[ir.Value("c")])
    constant.outputs[0].producer = constant
    assert known_scalar(scalar) and known_scalar(add.outputs[0]) and known_scalar(constant.outputs[0])
    assert not known_scalar(vector) and not known_scalar(unknown) and not known_scalar(reduce.outputs[0])


def test_the_inverse_spelling_compiles_back_to_the_same_op() -> None:
    by_symbol = {SYMBOLS[name]: name for name in (*BINARY, *COMPARE) if name not in ("NotEq",)}
    for op_type, symbol in PYTHON_BINARY.items():
        ast_op = by_symbol[symbol]
        spelling = binary_spelling(ast_op, None) if ast_op in BINARY else COMPARE[ast_op]
        assert spelling.op_type == op_type and not spelling.attributes and not spelling.negate
    assert PYTHON_UNARY == {"Neg": "-", "Not": "~"}
    assert {UNARY[name].op_type for name in ("USub", "Invert")} == set(PYTHON_UNARY)
    assert "Mod" not in PYTHON_BINARY
