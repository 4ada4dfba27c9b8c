"""Finding a function's text, and resolving its outer names, in the layouts the fast paths
of the front end must not get wrong.

The source block is first cut at the first line at the ``def``'s indentation after the
first body statement; a body line at that indentation (inside a string or brackets)
makes that cut fail to parse, and the slower rules take over.  Outer names are resolved
once per module (Origin), so a module-level ``@graph`` function from another module must
still see its own module's names.  Each test runs the exported model with onnxruntime
and eagerly against a numpy oracle.
"""

from __future__ import annotations

import linecache
import textwrap

import numpy as np

from tests.helpers import check_script

_COUNT = 0


def load(text: str, **names: object) -> dict:
    """Run ``text`` as a module (with ``names`` among its globals) whose source linecache
    knows, as for a file or a notebook cell."""
    global _COUNT
    _COUNT += 1
    filename = f"<layout-{_COUNT}>"
    text = textwrap.dedent(text)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = dict(names)
    exec(compile(text, filename, "exec"), namespace)
    return namespace


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def test_multi_line_decorator_and_signature_closing_at_def_column():
    module = load(
        """
        from dsl import FLOAT, script
        from dsl import opset18 as op


        @script(
            domain="layout",
        )
        def add_relu(
            x: FLOAT["N"],
            y: FLOAT["N"],
        ) -> FLOAT["N"]:
            z = op.Add(x, y)
            return op.Relu(z)


        after = 1
        """
    )
    x, y = f32(1, -2, 3), f32(-4, 1, 1)
    check_script(module["add_relu"], [x, y], np.maximum(x + y, 0))
    assert [n.op_type for n in module["add_relu"].function.nodes] == ["Add", "Relu"]


def test_string_line_at_column_zero_inside_the_body():
    module = load(
        '''
        from dsl import FLOAT, script
        from dsl import opset18 as op


        @script()
        def noted(x: FLOAT["N"]) -> FLOAT["N"]:
            y = op.Relu(x)
            note = """
        this line of the string starts at column 0
        """
            return y * 2.0
        '''
    )
    x = f32(-1, 2)
    check_script(module["noted"], [x], np.maximum(x, 0) * 2)


def test_bracket_continuation_and_comment_at_column_zero():
    module = load(
        """
        from dsl import FLOAT, script
        from dsl import opset18 as op


        @script()
        def wrapped(x: FLOAT["N"]) -> FLOAT["N"]:
            y = op.Add(x,
        x)
        # a comment at column 0 does not end the body
            return y - 1.0
        """
    )
    x = f32(1, 2)
    check_script(module["wrapped"], [x], x + x - 1)


def test_one_line_function_followed_by_module_code():
    module = load(
        """
        from dsl import FLOAT, script
        from dsl import opset18 as op


        @script()
        def negate(x: FLOAT["N"]) -> FLOAT["N"]: return op.Neg(x)
        negate_again = 2
        """
    )
    x = f32(1, -2)
    check_script(module["negate"], [x], -x)
    assert [n.op_type for n in module["negate"].function.nodes] == ["Neg"]


def test_graph_function_from_another_module_sees_its_own_names():
    other = load(
        """
        from dsl import FLOAT, graph
        from dsl import opset18 as op

        scale = 2.0


        @graph()
        def then_branch() -> FLOAT["N"]:
            return op.Constant(value_floats=[scale, scale])
        """
    )
    module = load(
        """
        from dsl import BOOL, FLOAT, graph, script
        from dsl import opset18 as op

        scale = 5.0


        @graph()
        def else_branch() -> FLOAT["N"]:
            return op.Constant(value_floats=[scale, scale])


        @script()
        def choose(c: BOOL, x: FLOAT["N"]) -> FLOAT["N"]:
            y = x * scale  # ``scale`` is resolved here first, as this module's 5.0
            picked = op.If(c, then_branch=other_then_branch, else_branch=else_branch)
            return picked + y
        """,
        other_then_branch=other["then_branch"],
    )
    x = f32(1, 1)
    check_script(module["choose"], [np.array(True), x], f32(2, 2) + x * 5)
    check_script(module["choose"], [np.array(False), x], f32(5, 5) + x * 5)
