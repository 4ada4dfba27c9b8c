"""Bounds on what a file from anywhere can make onnxquill spend, checked before the work.

A few hundred bytes can describe gigabytes: a compressed ``.npz`` member, a pickle of
shared list references, ``rep="1000000"`` in markup, a Loop whose trip count is 2**62.
Each such size is compared with a limit here *before* anything is allocated or run, and
going over raises :class:`dsl.errors.LimitExceededError` whose hint names the setting.

The defaults are generous for real models.  Raise one for a block of code with
:func:`raised_limits` (a context variable: other threads keep theirs), or for a whole
process (the command line included) with an environment variable::

    with dsl.limits.raised_limits(loop_iterations=10**8):
        eager.run("model.onnx", inputs)

    ONNXQUILL_LOOP_ITERATIONS=100000000 onnxquill ...
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass

from dsl.errors import LimitExceededError

__all__ = ["Limits", "current_limits", "raised_limits", "check_limit"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds; each field's environment variable is ``ONNXQUILL_`` + its upper-case name."""

    # Bytes a weights file may inflate to beyond its own size (compressed .npz members,
    # pickled lists of shared references).  Data a file really holds is never capped.
    inflated_bytes: int = 1 << 30
    # Bytes of one tensor a markup project asks onnxquill to create (a <param>).
    tensor_bytes: int = 1 << 31
    # Block copies (rep, stretch, nested: their product) plus nodes one markup compilation builds.
    markup_nodes: int = 200_000
    # Iterations of one Loop node in eager.run.
    loop_iterations: int = 1_000_000


_DEFAULTS = Limits()
_OVERRIDES: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("onnxquill_limits", default=None)


def _from_environment() -> Limits:
    values = {}
    for field in dataclasses.fields(Limits):
        text = os.environ.get(f"ONNXQUILL_{field.name.upper()}")
        if text is not None:
            try:
                values[field.name] = int(text)
            except ValueError:
                raise LimitExceededError(
                    f"ONNXQUILL_{field.name.upper()}={text!r} is not an integer",
                    hint="set it to a whole number, or unset it for the default",
                ) from None
    return dataclasses.replace(_DEFAULTS, **values) if values else _DEFAULTS


def current_limits() -> Limits:
    """The limits in force here: :func:`raised_limits` if active, else the environment's.

    >>> current_limits().loop_iterations >= 1
    True
    """
    found = _OVERRIDES.get()
    return found if found is not None else _from_environment()


@contextlib.contextmanager
def raised_limits(**changes: int) -> Iterator[Limits]:
    """Use other limits inside the ``with`` block (any field of :class:`Limits`).

    >>> with raised_limits(markup_nodes=10**7):
    ...     current_limits().markup_nodes
    10000000
    """
    limits = dataclasses.replace(current_limits(), **changes)
    token = _OVERRIDES.set(limits)
    try:
        yield limits
    finally:
        _OVERRIDES.reset(token)


def check_limit(name: str, wanted: int, what: str, location: object = None) -> None:
    """Raise :class:`LimitExceededError` when ``wanted`` exceeds the limit ``name``.

    >>> check_limit("loop_iterations", 5, "a Loop of 5 iterations")
    """
    limit = getattr(current_limits(), name)
    if wanted > limit:
        raise LimitExceededError(
            f"{what} exceeds onnxquill's limit of {limit:,} ({name})",
            location,
            hint=f"if you trust this input, raise the limit: dsl.limits.raised_limits({name}=...) "
            f"or the environment variable ONNXQUILL_{name.upper()}",
        )
