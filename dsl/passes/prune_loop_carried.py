"""The prune-loop-carried pass: drop the loop-carried values of a Loop that nothing reads.

A carried value of ``Loop`` (slot ``k``: input ``2 + k``, body input ``2 + k``, body
output ``1 + k``, output ``k``) computes nothing when neither the body reads its formal
input nor anything reads the Loop's output ``k``: the body's output for it is a dead
end.  The pass removes the slot from the node and the body, and the Identity the body
made only to output that value (when it then has no reader).  The front end asks for it
on the copy of ``c`` that ``while c:`` carries, so the Loop is ``Loop("", c, x...)`` as
one would write it by hand.

It works in place: the Function (or the Model's graph and functions) passed in is the
one changed and returned.

>>> PruneLoopCarried()(function).modified                          # doctest: +SKIP
>>> PruneLoopCarried(only=[loop.outputs[0]])(function)             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Collection

from dsl import ir
from dsl.passes.protocol import PassResult, T

__all__ = ["PruneLoopCarried", "prune_loop_carried"]


class PruneLoopCarried:
    """Drop unread loop-carried values, in place.

    ``only`` limits the pass to the given Loop outputs (each standing for its slot);
    None considers every carried value of every Loop, subgraphs included.
    """

    def __init__(self, only: Collection[ir.Value] | None = None) -> None:
        self.only = only

    def __call__(self, target: T) -> PassResult[T]:
        if isinstance(target, ir.Model):
            graphs = [target.graph, *(f.graph for f in target.functions)]
        else:
            graphs = [target.graph]
        modified = False
        for graph in graphs:
            modified = prune_loop_carried(graph, self.only) or modified
        return PassResult(target, modified)


def prune_loop_carried(graph: ir.Graph, only: Collection[ir.Value] | None = None) -> bool:
    """Drop the unread carried values of the Loops in ``graph`` (and its subgraphs);
    whether any was dropped.  ``only`` as for :class:`PruneLoopCarried`.

    >>> prune_loop_carried(function.graph)      # doctest: +SKIP
    True
    """
    if only is not None and not only:
        return False
    uses = ir.use_counts(graph)
    if only is None:
        candidates = [
            output
            for node, _ in ir.walk(graph) if node.op_type == "Loop" and node.domain == ""
            for output in node.outputs[: max(len(node.inputs) - 2, 0)]
        ]
    else:
        candidates = list(only)
    pruned = False
    for output in candidates:
        pruned = _prune_slot(output, uses) or pruned
    return pruned


def _prune_slot(output: ir.Value, uses: dict[ir.Value, int]) -> bool:
    loop = output.producer
    if loop is None or uses.get(output, 0) or output not in loop.outputs:
        return False
    slot = loop.outputs.index(output)
    body_attr = loop.attributes.get("body")
    body = body_attr.value if body_attr is not None else None
    if not isinstance(body, ir.Graph) or slot >= len(loop.inputs) - 2 or len(body.outputs) < 2 + slot:
        return False
    if len(loop.outputs) < 2:  # a Loop keeps at least one output
        return False
    formal, final = body.inputs[2 + slot], body.outputs[1 + slot]
    if uses.get(formal, 0):
        return False
    initial = loop.inputs[2 + slot]
    del loop.inputs[2 + slot], loop.outputs[slot], body.inputs[2 + slot], body.outputs[1 + slot]
    if initial is not None:
        uses[initial] -= 1
    uses[final] -= 1
    producer = final.producer
    if producer is not None and producer.op_type == "Identity" and not uses[final] and producer in body.nodes:
        body.nodes.remove(producer)  # the copy made only because the value was output twice
        source = producer.inputs[0]
        if source is not None:
            uses[source] -= 1
    return True
