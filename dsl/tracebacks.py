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
import linecache
import os
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

from dsl.errors import DslError
from dsl.ir import SourceLocation

__all__ = [
    "FULL_TRACEBACK_VARIABLE", "LIBRARY_PACKAGES", "expression_span", "frame_location", "hide_library_frames",
    "is_library_frame", "user_traceback",
]

FULL_TRACEBACK_VARIABLE = "ONNXQUILL_FULL_TRACEBACK"
LIBRARY_PACKAGES = frozenset({"dsl", "converter", "eager"})

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def hide_library_frames(error: BaseException) -> None:
    """Drop onnxquill's frames from the traceback of a :class:`DslError` (unless the
    environment asks for every frame); the user's frames stay, in order.  Any other
    exception is a bug of onnxquill, and keeps every frame."""
    if not isinstance(error, DslError) or os.environ.get(FULL_TRACEBACK_VARIABLE, "") not in ("", "0"):
        return
    keep_frames(error, lambda module: not isinstance(module, str) or module.partition(".")[0] not in LIBRARY_PACKAGES)


def keep_frames(error: BaseException, keep: Callable[[Any], bool]) -> None:
    """Relink ``error``'s traceback through the entries whose frame's module name ``keep``
    accepts (``keep(f_globals["__name__"])``), in order."""
    kept: list[TracebackType] = []
    entry = error.__traceback__
    while entry is not None:
        if keep(entry.tb_frame.f_globals.get("__name__", "")):
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


def is_library_frame(frame: FrameType) -> bool:
    """True when ``frame`` runs code of onnxquill's own packages (by module name)."""
    module = frame.f_globals.get("__name__")
    return isinstance(module, str) and module.partition(".")[0] in LIBRARY_PACKAGES


def frame_location(frame: FrameType) -> SourceLocation:
    """Where ``frame`` is: the expression it runs (``x @ w``, ``op.Relu``) when Python
    knows its columns, else the line; for errors raised at a user's line outside ``@script``.

    >>> import sys
    >>> frame_location(sys._getframe()).line > 0                  # doctest: +SKIP
    True
    """
    line = frame.f_lineno or 0
    text = linecache.getline(frame.f_code.co_filename, line)
    column = len(text) - len(text.lstrip()) if text else 0
    span = expression_span(frame)
    if span is not None and span[0] == line:
        return SourceLocation(frame.f_code.co_filename, line, span[1], text.rstrip("\n"), end_column=span[2])
    return SourceLocation(frame.f_code.co_filename, line, column, text.rstrip("\n"))


def expression_span(frame: FrameType) -> tuple[int, int, int] | None:
    """(line, first column, end column) of the instruction ``frame`` runs, on one line
    (None before Python 3.11, whose code objects have no column positions)."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return None
    found = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
    if found is None:
        return None
    line, end_line, column, end_column = found
    if line is None or line != end_line or column is None or end_column is None:
        return None
    return line, column, end_column
