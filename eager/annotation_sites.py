"""Where an eagerly run ``@script`` body returned, and where an argument was written: the
lines the compiler points at when a value disagrees with its annotation.

Only read when a check fails, so a passing call pays nothing.  The ``return`` is found in
the function's source: the one ``return`` statement of the body (not of a nested
``def``); with several, the one that ran is not known after the call, and the call site
is given instead.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from dsl.ir import SourceLocation
from eager.call_site import caller_location

__all__ = ["argument_location", "returned_expression", "return_site"]


def return_site(python_function: Any, count: int) -> tuple[SourceLocation | None, list[str]]:
    """The location of the body's ``return`` and the name each of ``count`` results was
    returned under (``return_val`` for an expression), as the compiler names outputs."""
    found = _only_return(python_function)
    if found is None:
        return caller_location(), ["return_val"] * count
    location, statement = found
    value = statement.value
    items = value.elts if isinstance(value, ast.Tuple) else [value] if value is not None else []
    names = [item.id if isinstance(item, ast.Name) else "return_val" for item in items]
    if len(names) != count:
        names = names * count if len(names) == 1 else ["return_val"] * count
    return location, names


def _only_return(python_function: Any) -> tuple[SourceLocation, ast.Return] | None:
    try:
        lines, first = inspect.getsourcelines(python_function)
        filename = inspect.getsourcefile(python_function) or python_function.__code__.co_filename
    except (OSError, TypeError):
        return None
    text = "".join(lines)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return None
    function = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None:
        return None
    returns = list(_returns(function.body))
    if len(returns) != 1:
        return None
    statement = returns[0]
    line = first + statement.lineno - 1
    source_line = lines[statement.lineno - 1].rstrip("\n")
    end = statement.end_col_offset + indent if statement.end_lineno == statement.lineno and \
        statement.end_col_offset is not None else None
    return SourceLocation(filename, line, statement.col_offset + indent, source_line, end_column=end), statement


def returns_a_tuple_display(python_function: Any) -> bool | None:
    """Whether the body's one ``return`` writes a tuple display (``return a, b``: an output
    each, as compiled) rather than an expression whose value is a tuple (``return
    x.shape``: one output, as compiled); None where the source cannot say."""
    found = _only_return(python_function)
    if found is None or found[1].value is None:
        return None
    return isinstance(found[1].value, ast.Tuple)


def returned_expression(python_function: Any, count: int, index: int) -> tuple[SourceLocation, ast.expr] | None:
    """The location and text of result ``index`` of ``count`` in the body's one ``return``
    (``[a, b]`` in ``return [a, b], c``), as the compiler locates an expression; None
    where the source cannot say."""
    found = _only_return(python_function)
    value = found[1].value if found is not None else None
    if found is None or value is None:
        return None
    statement_location, statement = found
    items = value.elts if count > 1 and isinstance(value, ast.Tuple) else [value]
    if len(items) != count or statement.end_lineno != statement.lineno:
        return None
    node = items[index]
    shift = statement_location.column - statement.col_offset  # (the def's indentation)
    return SourceLocation(statement_location.file, statement_location.line, node.col_offset + shift,
                          statement_location.source_line, end_column=(node.end_col_offset or 0) + shift), node


def _returns(body: list[ast.stmt]) -> Any:
    """The ``return`` statements of a body, not those of functions or classes defined in it."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.expr)):
            pending.extend(ast.iter_child_nodes(node))


def argument_location(signature: inspect.Signature, parameter: str) -> SourceLocation | None:
    """The location of the argument given for ``parameter`` in the user's running call
    (``x`` in ``project(x)``); the whole call where it cannot be read."""
    location = caller_location()
    if location is None or location.end_column is None:
        return location
    text = location.source_line[location.column:location.end_column]
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return location
    if not isinstance(call, ast.Call):
        return location
    names = list(signature.parameters)
    argument: ast.expr | None = next((k.value for k in call.keywords if k.arg == parameter), None)
    position = names.index(parameter) if parameter in names else -1
    if argument is None and 0 <= position < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        argument = call.args[position]
    if argument is None or argument.end_col_offset is None:
        return location
    return SourceLocation(location.file, location.line, location.column + argument.col_offset, location.source_line,
                          end_column=location.column + argument.end_col_offset)
