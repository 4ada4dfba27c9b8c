"""Tracebacks of user mistakes that end in the user's code, as JAX and Triton show them.

A :class:`dsl.DslError` already says where the mistake is (file, line, caret, hint);
the frames of onnxquill's own compiler and runtime between the user's call and the
``raise`` only push that report off the screen.  Each public entry point (``@script``
functions called or exported, ops called on arrays, the ``converter`` functions) catches
a ``DslError`` on its way out, drops the library's frames from its traceback and
re-raises it with a bare ``raise`` (which adds no frame of its own), so the last frame
shown is the user's line.  A frame is the library's when the module running it belongs
to the ``dsl``, ``converter`` or ``eager`` package (its ``__name__``, not its file).

Set the environment variable ``ONNXQUILL_FULL_TRACEBACK=1`` to see every frame (when
debugging onnxquill itself).

>>> try:                                                   # doctest: +SKIP
...     broken.to_model_proto()
... except DslError as error:
...     hide_library_frames(error)
...     raise
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from dsl.errors import DslError

__all__ = ["FULL_TRACEBACK_VARIABLE", "LIBRARY_PACKAGES", "hide_library_frames", "user_traceback"]

FULL_TRACEBACK_VARIABLE = "ONNXQUILL_FULL_TRACEBACK"
LIBRARY_PACKAGES = frozenset({"dsl", "converter", "eager"})

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def hide_library_frames(error: BaseException) -> None:
    """Drop onnxquill's frames from the traceback of a :class:`DslError` (unless the
    environment asks for every frame); the user's frames stay, in order.  Any other
    exception is a bug of onnxquill, and keeps every frame."""
    if not isinstance(error, DslError) or os.environ.get(FULL_TRACEBACK_VARIABLE, "") not in ("", "0"):
        return
    kept: list[TracebackType] = []
    entry = error.__traceback__
    while entry is not None:
        module = entry.tb_frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or module.partition(".")[0] not in LIBRARY_PACKAGES:
            kept.append(entry)
        entry = entry.tb_next
    for earlier, later in itertools.pairwise(kept):
        earlier.tb_next = later
    if kept:
        kept[-1].tb_next = None
    error.__traceback__ = kept[0] if kept else None


def user_traceback(function: _Callable) -> _Callable:
    """Decorate a public entry point: a ``DslError`` leaving it shows the user's frames only.

    >>> @user_traceback                                    # doctest: +SKIP
    ... def to_python(model): ...
    """
    @functools.wraps(function)
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except DslError as error:
            hide_library_frames(error)
            raise  # (a bare raise adds no frame: this one is not shown either)

    return entry_point  # type: ignore[return-value]
