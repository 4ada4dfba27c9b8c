"""Finding a scripted function's source text and turning ``ast`` positions into SourceLocations.

The text comes from ``linecache`` (which also serves Jupyter/IPython cells, Python 3.13's
prompt and code passed to ``exec`` after being registered there), or for the classic
python prompt and ``python -c`` from :mod:`dsl.frontend.interactive_source`, starting at the code object's first
line.  The function is not dedented: an indented definition is parsed behind an
``if 1:`` line, so ``ast`` columns are already the user's columns and only the line
number needs shifting.
"""

from __future__ import annotations

import ast
import inspect
import linecache
from dataclasses import dataclass, field
from typing import Any

from dsl.errors import DslSyntaxError, SourceUnavailableError
from dsl.frontend.interactive_source import interactive_lines
from dsl.ir import SourceLocation

__all__ = ["FunctionSource", "function_source"]


@dataclass(slots=True)
class FunctionSource:
    """The parsed definition of one function and what is needed to locate its nodes."""

    tree: ast.FunctionDef | ast.AsyncFunctionDef  # async is refused by the compiler, with a location
    file: str
    lines: list[str]
    line_offset: int
    stripped: dict[int, str] = field(default_factory=dict)

    def location(self, node: Any) -> SourceLocation:
        """The user's file position of an ``ast`` node (statement or expression)."""
        line = node.lineno + self.line_offset
        source_line = self.stripped.get(line)
        if source_line is None:
            source_line = self.lines[line - 1].rstrip("\n") if 0 < line <= len(self.lines) else ""
            self.stripped[line] = source_line
        end_column = node.end_col_offset if node.end_lineno == node.lineno else len(source_line)
        return SourceLocation(self.file, line, node.col_offset, source_line, end_column)


def function_source(python_function: Any) -> FunctionSource:
    """Parse the definition of ``python_function`` from the text Python compiled it from.

    >>> def f(x):
    ...     return x
    >>> function_source(f).tree.name                     # doctest: +SKIP
    'f'
    """
    code = getattr(python_function, "__code__", None)
    if code is None:
        raise SourceUnavailableError(f"{python_function!r} is not a Python function")
    file = code.co_filename
    lines = linecache.getlines(file, getattr(python_function, "__globals__", None))
    first = code.co_firstlineno - 1
    if not lines or first >= len(lines):  # the python prompt or -c: see interactive_source
        lines = interactive_lines(code) or []
    if not lines or first >= len(lines):
        raise SourceUnavailableError(f"the source of {code.co_name} ({file}) cannot be found")
    block = _block_by_indentation(lines, first, _first_body_line(code))
    tree, shift = _parse_definition(block, code.co_name)
    if tree is None:  # a body line at the def's indentation (in a string or brackets) cut the block short
        block = _block_by_indentation(lines, first, _last_code_line(code))
        tree, shift = _parse_definition(block, code.co_name)
    if tree is None:
        block = _block_by_inspect(python_function, lines, first)
        tree, shift = _parse_definition(block, code.co_name)
    if tree is None:
        raise SourceUnavailableError(
            f"the source text of {code.co_name} in {file} does not match the running code",
            hint="the file changed after it was imported; reload the module or restart the kernel",
        )
    return FunctionSource(tree, file, lines, first - shift)


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _first_body_line(code: Any) -> int:
    """The first line of the body holding bytecode (0-based), which is past a multi-line
    signature; only the first few instruction runs are read (they start on the first line)."""
    first = code.co_firstlineno
    for _, _, line in code.co_lines():
        if line is not None and line > first:
            return line - 1
    return first - 1  # a one-line function


def _last_code_line(code: Any) -> int:
    """The last line holding bytecode (0-based): reading every instruction run costs about
    as much per statement as compiling it, so this is only the fallback."""
    return max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno) - 1


def _block_by_indentation(lines: list[str], first: int, body_line: int) -> list[str]:
    """Lines from the first decorator to the end of the body, judged by indentation.

    ``body_line`` is known to be in the body, which skips a multi-line signature whose
    ``):`` sits at the ``def``'s own indentation.  A later body line at that indentation
    (inside a string or brackets) ends the block too early, which the parse then rejects.
    """
    indent = _indent_of(lines[first])
    deeper = lines[first][:indent] + " "  # most body lines start with this: no need to measure them
    end = max(body_line + 1, first + 1)
    count = len(lines)
    while end < count:
        text = lines[end]
        if not text.startswith(deeper):
            stripped = text.strip()
            if stripped and not stripped.startswith("#") and _indent_of(text) <= indent:
                break
        end += 1
    return lines[first:end]


def _block_by_inspect(python_function: Any, lines: list[str], first: int) -> list[str]:
    try:
        found, _ = inspect.getsourcelines(python_function)
    except (OSError, TypeError):
        return lines[first:]
    return found


def _parse_definition(block: list[str], name: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, int]:
    """The definition and how many lines were put before it (1 for an indented one)."""
    indented = bool(block) and block[0][:1] in (" ", "\t")
    text = ("if 1:\n" if indented else "") + "".join(block)
    try:
        module = ast.parse(text)
    except SyntaxError:
        return None, 0
    except (ValueError, MemoryError) as err:  # null bytes, absurd nesting
        raise DslSyntaxError(f"cannot parse the source of {name}: {err}") from None
    body = module.body
    if indented:
        body = body[0].body if body and isinstance(body[0], ast.If) else []
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
            return statement, int(indented)
    return None, 0
