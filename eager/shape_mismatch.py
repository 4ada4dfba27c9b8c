"""Which dimensions disagree, when an op fails on the shapes it was given.

onnxruntime reports a shape mismatch as "MatMul dimension mismatch" or "Attempting to
broadcast an axis by a dimension other than 1"; the user wants the operands, their
shapes and the axis where they disagree, named as in their own source.  The rules are
:mod:`dsl.shape_rules`, the ones the compiler applies to every node it builds, so a
program gets the same message eagerly and compiled.  They are checked on the shapes only
after a kernel has failed, so a call that runs pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dsl import shape_rules
from dsl.errors import DslError, EagerError
from dsl.shape_rules_inputs import MODEL_ONLY_RULES

__all__ = ["BROADCASTING_OPS", "MODEL_ONLY_RULES", "disagreement", "refuse_before_running"]

BROADCASTING_OPS = shape_rules.BROADCASTING_OPS

Shape = Sequence[int]


def disagreement(
    op_type: str,
    shapes: Sequence[Shape | None],
    names: Sequence[str],
    attributes: Mapping[str, Any] | None = None,
    arrays: Sequence[Any] | None = None,
    version: int = 1000,
) -> tuple[str, str] | None:
    """``(message, hint)`` naming the operands (``names``, as written by the user) and the
    axis where their ``shapes`` disagree for ``op_type`` with ``attributes``, or None when
    they agree.  ``arrays`` are the input values (a Reshape's target shape), ``version``
    the opset's.

    >>> disagreement("Add", [(4, 3), (4,)], ["a", "b"])[0]
    'Add: a: [4, 3] vs b: [4]: axis -1 is 3 in a and 4 in b'
    """
    constants = [_small_ints(array) for array in arrays] if arrays is not None else []
    try:
        shape_rules.infer(op_type, [None if s is None else tuple(s) for s in shapes], names,
                          attributes or {}, constants, None, version)
    except DslError as err:
        return err.message, err.hint or ""
    return None


def _small_ints(array: Any) -> np.ndarray | None:
    if isinstance(array, np.ndarray) and array.dtype.kind in "iu" and array.size <= 64:
        return array
    return None


def refuse_before_running(op_type: str, arrays: Sequence[Any], names: Callable[[], Sequence[str]],
                          attributes: Mapping[str, Any], version: int, location: Any) -> None:
    """The compiler's input rules (:mod:`dsl.shape_rules_inputs`) on an ``op_type`` call
    before it runs: onnxruntime runs some calls whose static shapes an exported model
    refuses (a loss's target shorter than the scores), so eager mode asks first and
    raises the compiler's message at ``location``; ``names`` gives the operands' text.

    >>> refuse_before_running("NegativeLogLikelihoodLoss", [np.ones((3, 5, 2)), np.zeros((2, 2))],
    ...                       lambda: ["x", "t"], {}, 18, None)
    Traceback (most recent call last):
    ...
    dsl.errors.EagerError: error: NegativeLogLikelihoodLoss: t: [2, 2] vs x: [3, 5, 2]: axis 0 of the target is 2, the scores have 3
    ...
    """
    shapes = [np.shape(array) if isinstance(array, np.ndarray) else None for array in arrays]
    try:
        shape_rules.infer(op_type, shapes, [f"input {i}" for i in range(len(arrays))], attributes, [], None, version)
    except DslError:  # (again, with the operands named as written: read only for the message)
        found = disagreement(op_type, shapes, names(), attributes, None, version)
        if found is not None:
            raise EagerError(found[0], location, hint=found[1]) from None
