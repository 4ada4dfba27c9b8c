"""Errors a user can cause, rendered the way a compiler reports them.

Every mistake in user input raises a :class:`DslError` subclass carrying a location and a
hint; ``str(error)`` is the full report::

    model.py:12:9: error: op.Relu takes 1 input, got 2
        y = op.Relu(x, w)
            ^^^^^^^^^^^^^
    hint: ...

Locations are duck-typed (anything with ``file``, ``line``, ``column``,
``source_line`` and optionally ``end_column``, such as :class:`dsl.ir.SourceLocation`), so this
module depends on nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "DslError",
    "DslSyntaxError",
    "UnsupportedSyntaxError",
    "DslNameError",
    "DslTypeError",
    "StaticAssertionError",
    "AnnotationError",
    "UnknownOpError",
    "OpCallError",
    "OpAttributeError",
    "SourceUnavailableError",
    "MarkupError",
    "ModelLoadError",
    "EagerError",
    "ConversionError",
    "LimitExceededError",
    "UnsafePathError",
    "render_location",
]


_LONG_LINE = 160  # source lines longer than this are shown cut around the caret


def render_location(location: Any) -> str:
    """``file:line:col`` (1-based column), the source line and a caret under the column."""
    if location is None:
        return ""
    line_text = getattr(location, "source_line", "") or ""
    column = getattr(location, "column", 0) or 0
    end_column = getattr(location, "end_column", None)
    parts = [f"{location.file}:{location.line}:{column + 1}"]
    if line_text:
        stripped = line_text.rstrip("\n")
        indent = len(stripped) - len(stripped.lstrip())
        shown = stripped.strip()
        caret_col = max(column - indent, 0)
        width = 1
        if end_column is not None and end_column > column:
            width = min(end_column - column, max(len(shown) - caret_col, 1))
        if len(shown) > _LONG_LINE:  # (a whole file on one line: show the part around the caret)
            start = max(caret_col - _LONG_LINE // 2, 0)
            width = min(width, _LONG_LINE // 2)
            shown = ("..." if start else "") + shown[start : start + _LONG_LINE] + "..."
            caret_col = caret_col - start + (3 if start else 0)
        parts.append(f"    {shown}\n    {' ' * caret_col}{'^' * width}")
    return "\n".join(parts)


class DslError(Exception):
    """Base of every error a user can cause; catch this to handle any of them.

    ``message`` says what is wrong, ``location`` where, ``hint`` what to do about it.
    """

    default_hint: str = ""

    def __init__(self, message: str, location: Any = None, hint: str | None = None) -> None:
        self.message = message
        self.location = location
        self.hint = hint if hint is not None else self.default_hint
        super().__init__(message)

    def with_location(self, location: Any) -> DslError:
        """Attach a location if the error was raised where none was known; returns self."""
        if self.location is None:
            self.location = location
        return self

    def __str__(self) -> str:
        if self.location is None:
            head = f"error: {self.message}"
            body = ""
        else:
            rendered = render_location(self.location)
            first, _, rest = rendered.partition("\n")
            head = f"{first}: error: {self.message}"
            body = f"\n{rest}" if rest else ""
        hint = f"\nhint: {self.hint}" if self.hint else ""
        return f"{head}{body}{hint}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.location, self.hint))


class DslSyntaxError(DslError):
    """Python or markup that is malformed for this DSL."""


class UnsupportedSyntaxError(DslSyntaxError):
    """Valid Python that ``@script`` does not translate (``try``, ``lambda``, ...)."""


class DslNameError(DslError):
    """A name that is not defined where it is used."""


class DslTypeError(DslError):
    """A value of the wrong type: a tensor where an attribute is needed, a bad annotation..."""


class StaticAssertionError(DslError):
    """An ``assert`` in a ``@script`` body, on values known while compiling, failed."""


class AnnotationError(DslTypeError, TypeError):
    """A malformed type annotation such as ``FLOAT[-1]``.

    Also a ``TypeError``, which is what subscripting a type wrongly raises in Python.
    """


class UnknownOpError(DslError, AttributeError):
    """An operator no schema defines for that domain and version.

    Also an ``AttributeError``, so ``hasattr(op, "Name")`` answers False instead of raising.
    """


class OpCallError(DslError):
    """A call that does not match the op's schema (input count, required attributes...)."""


class OpAttributeError(OpCallError):
    """An unknown attribute, or an attribute value of the wrong kind."""



class SourceUnavailableError(DslError):
    """``@script`` on a function whose source text cannot be found (stdin piped in, exec)."""

    default_hint = (
        "@script reads the function's source text: define it in a file, a Jupyter/IPython cell or at a "
        "python prompt that has readline, or register the text of exec() with linecache"
    )


class MarkupError(DslError):
    """Malformed or inconsistent XML markup (``.agr``)."""


class ModelLoadError(DslError):
    """A corrupt, truncated or unreadable ONNX file or proto."""


class ModelWarning(UserWarning):
    """Something in a model that onnxruntime accepts though ONNX forbids it, read the way
    onnxruntime reads it (a negative size declared for an unknown one, ...)."""


class EagerError(DslError):
    """An op that failed while executing eagerly (bad input types, backend failure).

    ``backend_messages`` keeps what onnxruntime and onnx.reference said about a failure
    (backend name -> its text) for debugging; the message says it in the user's terms.
    """

    backend_messages: Mapping[str, str] = MappingProxyType({})

    default_hint = (
        "the message names the node and the values it got; for a model from a file, "
        "onnx.checker.check_model(model, full_check=True) tells whether the model itself is malformed"
    )


class ConversionError(DslError):
    """A model a back end cannot express (e.g. a construct with no Python spelling)."""

    default_hint = (
        "the model uses something this back end cannot write; run onnx.checker.check_model on it, "
        "and rename or rewrite that part with onnx before converting"
    )


class LimitExceededError(DslError):
    """An input that would make onnxquill spend more memory or time than its limits allow.

    The limits (:mod:`dsl.limits`) bound what a small downloaded file can cost before the
    work starts; the hint names the setting that raises each one.
    """


class UnsafePathError(DslError):
    """A file a project or model refers to outside its own folder, or a write through a symlink."""
