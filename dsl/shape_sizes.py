"""Sizes as the shape rules see them: one definition for every rule module.

``dsl.shape_rules``, ``dsl.shape_rules_inputs`` and ``dsl.shape_rules_gemm_conv`` decide
whether sizes are proven equal or different; if they disagreed on what counts as a
static size (numpy integers read from constants included), one rule would check what
another lets pass.  A size is an ``int`` (static), a ``str`` (a symbolic name) or None
(unknown); a shape is a tuple of sizes, or None where even the rank is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Dim", "Shape", "differ", "is_static", "product", "shape_text"]

Dim = int | str | None
Shape = tuple[Dim, ...] | None


def shape_text(shape: Sequence[Dim]) -> str:
    """``[B, S, 256]``: a shape as the user wrote it (symbolic sizes by name, ``?`` unknown).

    >>> shape_text(("B", None, 256))
    '[B, ?, 256]'
    """
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def is_static(dim: Dim) -> bool:
    """Whether a size is a number (a Python or numpy integer).

    >>> is_static(3), is_static(np.int64(3)), is_static("N"), is_static(None)
    (True, True, False, False)
    """
    return type(dim) is int or isinstance(dim, (int, np.integer))


def differ(left: Dim, right: Dim) -> bool:
    """Whether two sizes are proven different: both static and unequal.

    >>> differ(3, 4), differ(3, "N"), differ(None, 4)
    (True, False, False)
    """
    return is_static(left) and is_static(right) and left != right


def product(dims: Sequence[Dim]) -> int | None:
    """The number of elements of a shape, where every size is static (else None).

    >>> product((2, 3)), product(()), product((2, "N"))
    (6, 1, None)
    """
    total = 1
    for dim in dims:
        if not is_static(dim):
            return None
        total *= int(dim)  # type: ignore[arg-type]  # (static: an int)
    return total
