"""What an eager op call needs to know about an Op's schema, computed once per Op.

Every ``op.X(...)`` call reads the same facts from the schema: how many outputs it makes
by default, the formal type of each input, which type parameters admit a single element
type (a literal then takes it), and which inputs and outputs are sequences or optionals.
Reading them from ``onnx.defs`` on every call would cost more than running a small
kernel, so :func:`facts_of` computes them on an Op's first eager call and keeps them on
the Op; :mod:`eager.op_call` (the call itself) reads only these.
"""

from __future__ import annotations

from dsl.opsets import Op

__all__ = ["OPTIONAL_KINDS", "SEQUENCE_KINDS", "OpFacts", "facts_of"]


class OpFacts:
    """What eager calls need to know about an Op, computed once and kept on the Op."""

    __slots__ = (
        "ambiguous_outputs",
        "default_outputs",
        "formal_kinds",
        "formal_types",
        "key",
        "optional_only",
        "sequence_outputs",
        "single_type",
        "takes_sequences",
    )

    def __init__(self, op: Op) -> None:
        self.key = (op.domain, op.name, op.since_version or op.version, op.version if op.schema is None else 0)
        self.default_outputs = op.default_output_count()
        self.ambiguous_outputs = op.max_outputs > self.default_outputs
        schema = op.schema
        self.formal_types: list[str] = [] if schema is None else [f.type_str for f in schema.inputs]
        self.single_type: dict[str, int | None] = {}
        if schema is not None:
            from dsl.opsets import elem_of_type_str

            for constraint in schema.type_constraints:
                allowed = list(constraint.allowed_type_strs)
                if len(allowed) == 1:
                    self.single_type[constraint.type_param_str] = elem_of_type_str(allowed[0])
            for formal in schema.inputs:
                if formal.type_str.startswith("tensor("):
                    self.single_type[formal.type_str] = elem_of_type_str(formal.type_str)
        # What kinds of value each formal type admits: "tensor", "seq", "optional" (of a
        # tensor) and "optional-seq".
        self.formal_kinds: dict[str, frozenset[str]] = {}
        outputs_admit_sequences = schema is None
        if schema is not None:
            for formal in (*schema.inputs, *schema.outputs):
                allowed = op.allowed_type_strs(formal.type_str)
                self.formal_kinds[formal.type_str] = frozenset(_kind_of_type_str(a) for a in allowed)
            outputs_admit_sequences = any(
                not self.formal_kinds[f.type_str] <= {"tensor"} for f in schema.outputs
            )
        input_kinds = [self.formal_kinds.get(t, frozenset()) for t in self.formal_types]
        self.takes_sequences = any(kinds & SEQUENCE_KINDS for kinds in input_kinds)
        # Formals typed optional(...) only (OptionalHasElement before opset 18): fed as optionals.
        self.optional_only = any(kinds and kinds <= OPTIONAL_KINDS for kinds in input_kinds)
        self.sequence_outputs = outputs_admit_sequences

    def formal_type(self, index: int) -> str | None:
        if not self.formal_types:
            return None
        return self.formal_types[min(index, len(self.formal_types) - 1)]


# The kinds (see OpFacts.formal_kinds) of a formal that takes a sequence, and one that takes an optional.
SEQUENCE_KINDS = frozenset({"seq", "optional-seq"})
OPTIONAL_KINDS = frozenset({"optional", "optional-seq"})


def _kind_of_type_str(type_str: str) -> str:
    if type_str.startswith("seq("):
        return "seq"
    if type_str.startswith("optional(seq("):
        return "optional-seq"
    if type_str.startswith("optional("):
        return "optional"
    return "tensor"


def facts_of(op: Op) -> OpFacts:
    """The facts of ``op``, computed on its first eager call and kept on it (``op._eager_key``).

    >>> from dsl import opset18 as op
    >>> facts = facts_of(op.SequenceInsert)
    >>> facts.takes_sequences, facts.sequence_outputs, facts.default_outputs
    (True, True, 1)
    """
    facts = op._eager_key
    if facts is None:
        facts = op._eager_key = OpFacts(op)
    return facts
