"""Which kind of ONNX value the compiler knows a value to be: a tensor, a sequence or an optional.

Eager mode holds arrays, lists and None, and feeds each to onnxruntime as the op's input
asks; the model has to spell the kind out where it matters: an input typed optional(...)
only takes ``Optional`` of a tensor or sequence, and If and Loop pass tensors only before
opset 13 and no optionals before 16.  A value's kind is known from its declared type, from
the schema of the op that made it, or from the values an If or Loop output (or a Loop
body's carried input) is one of (``CompileContext.origins``); elsewhere (a call's output, an op whose output may be of any
kind, such as Identity from opset 16) it is not known, and the compiler leaves the value as
the program has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from dsl import ir
from dsl.opsets import Op

if TYPE_CHECKING:
    from dsl.frontend.builder import CompileContext

__all__ = ["Kind", "value_kind"]

Kind = Literal["tensor", "sequence", "optional"]

_KIND_OF_PREFIX: dict[str, Kind] = {"tensor(": "tensor", "seq(": "sequence", "optional(": "optional"}
_OUTPUT_KINDS: dict[tuple[Op, int], Kind | None] = {}


def value_kind(value: ir.Value, ctx: CompileContext | None) -> Kind | None:
    """The kind of ``value``, where every value it may be (an If's branches, a Loop's
    initial value) is of one known kind; None where the compiler cannot tell (``ctx``
    None: from the value alone).

    >>> value_kind(ir.Value("x", ir.TensorType(1, (2,))), None)
    'tensor'
    """
    found: set[Kind] = set()
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        joined = ctx.origins.get(current) if ctx is not None else None
        if joined is not None:
            pending.extend(joined)
            continue
        producer = current.producer
        if producer is not None and producer.op_type == "Identity" and producer.domain in ("", "ai.onnx") \
                and producer.inputs and producer.inputs[0] is not None:
            pending.append(producer.inputs[0])  # (of any kind: the kind of what it passes on)
            continue
        kind = _own_kind(current, ctx)
        if kind is None:
            return None
        found.add(kind)
    return found.pop() if len(found) == 1 else None


def _declared_kind(declared: ir.IRType | None) -> Kind | None:
    if isinstance(declared, ir.OptionalType):
        return "optional"
    if isinstance(declared, ir.SequenceType):
        return "sequence"
    return "tensor" if isinstance(declared, ir.TensorType) else None


def _own_kind(value: ir.Value, ctx: CompileContext | None) -> Kind | None:
    producer = value.producer
    if producer is None or not isinstance(value.type, ir.TensorType):
        # (a function's input; a Loop body's carried input is followed to its initial value)
        found = _declared_kind(value.type)
        if found is not None or producer is None:
            return found
    if producer.callee is not None:  # (a call of a scripted function: the output it declares)
        declared = producer.callee.outputs
        index = producer.outputs.index(value)
        return _declared_kind(declared[index].type) if index < len(declared) else None
    if producer.domain not in ("", "ai.onnx") or ctx is None:
        return None
    op = ctx.ops.get(producer.op_type)
    if op is None:
        op = ctx.ops[producer.op_type] = ctx.operator(producer.op_type)
    return _output_kind(op, producer.outputs.index(value))


def _output_kind(op: Op, index: int) -> Kind | None:
    """The kind every type output ``index`` of ``op`` admits has, if they share one."""
    key = (op, index)
    if key not in _OUTPUT_KINDS:
        outputs = [] if op.schema is None else op.schema.outputs
        allowed = op.allowed_type_strs(outputs[min(index, len(outputs) - 1)].type_str) if outputs else []
        kinds = {next((k for p, k in _KIND_OF_PREFIX.items() if t.startswith(p)), None) for t in allowed}
        _OUTPUT_KINDS[key] = kinds.pop() if len(kinds) == 1 else None
    return _OUTPUT_KINDS[key]
