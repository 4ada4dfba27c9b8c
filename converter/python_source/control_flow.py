"""If and Loop nodes written as ``if``/``else``, ``for`` and ``while``.

Only nodes in the forms :mod:`dsl.loop_forms` describes are written this way (those the
compiler turns back into the very same node); every other If, Loop, Scan... keeps
``op.If(...)`` with ``@graph()`` functions for its graphs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsl import ir
from dsl.loop_forms import if_form

if TYPE_CHECKING:
    from converter.python_source.statements import BodyWriter

__all__ = ["write_if", "write_loop"]


def write_if(writer: BodyWriter, node: ir.Node, indent: str) -> bool:
    """Write ``node`` as ``if cond: ... else: ...`` when that compiles back to the same If;
    False leaves it to ``op.If``.  Branch outputs take the If outputs' names."""
    form = if_form(node)
    if form is None:
        return False
    names = [writer.define(v) for v in node.outputs]
    for value, name in zip(form.else_branch.outputs, names):
        writer.value_names[value] = name
    if not form.aliases:
        for value, name in zip(form.then_branch.outputs, names):
            writer.value_names[value] = name
    inner = indent + "    "
    writer.lines.append(f"{indent}if {writer.name_of(form.condition)}:")
    writer.nodes(form.then_branch.nodes, inner)
    if form.aliases:
        for value, name in zip(form.then_branch.outputs, names):
            writer.lines.append(f"{inner}{name} = {writer.name_of(value)}")
    writer.lines.append(f"{indent}else:")
    writer.nodes(form.else_branch.nodes, inner)
    return True


def write_loop(writer: BodyWriter, node: ir.Node, indent: str) -> bool:
    """Write ``node`` as a ``for``/``while`` loop when :func:`dsl.loop_forms.plan_loops`
    planned one; False leaves it to ``op.Loop``.

    Each loop-carried value is one Python variable: set from the initial value before
    the loop, read in the body, set to the body's result at its end, read after the
    loop as the Loop's output::

        y = x                      # Loop(n, "", x) -> y
        for i in range(n):
            t = y * i
            y = t
    """
    assert writer.loops is not None
    plan = writer.loops.plans.get(node)
    if plan is None:
        return False
    body: ir.Graph = node.attributes["body"].value
    lines = writer.lines
    inner = indent + "    "
    names = [writer.define(v) for v in node.outputs]
    for name, initial, formal in zip(names, node.inputs[2:], body.inputs[2:]):
        lines.append(f"{indent}{name} = {writer.name_of(initial)}")  # type: ignore[arg-type]
        writer.value_names[formal] = name
    condition_name = ""
    if plan.form == "while":
        assert plan.condition is not None
        condition_name = writer.names.fresh("keep_going")
        lines.append(f"{indent}{condition_name} = {writer.name_of(plan.condition)}")
        lines.append(f"{indent}while {condition_name}:")
    else:
        trip = node.inputs[0]
        assert trip is not None
        lines.append(f"{indent}for {writer.name_of(body.inputs[0])} in range({writer.name_of(trip)}):")
        if plan.condition is not None:
            lines.append(f"{inner}if not {writer.name_of(plan.condition)}:")
            lines.append(f"{inner}    break")
    writer.nodes(body.nodes, inner)
    for name, final in zip(names, body.outputs[1:]):
        lines.append(f"{inner}{name} = {writer.name_of(final)}")
    if plan.form == "while":
        assert plan.final is not None
        lines.append(f"{inner}{condition_name} = {writer.name_of(plan.final)}")
    elif plan.final is not None:
        lines.append(f"{inner}if {writer.name_of(plan.final)}:")
        lines.append(f"{inner}    break")
    return True
