"""The text of a function defined where Python keeps no file: the prompt, ``python -c``.

``linecache`` serves files, Jupyter cells and Python 3.13's REPL (which registers each
input as ``<python-input-N>``).  The classic prompt (3.10-3.12, or 3.13 with
``PYTHON_BASIC_REPL``) compiles each statement as ``<stdin>`` and keeps its lines only in
the readline history; ``python -c CODE`` keeps CODE in ``sys.orig_argv``.  Candidates from
there are accepted only when compiling them gives the very code object the function runs,
so a redefinition or an unrelated line of history is never taken for the function.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["interactive_lines"]

_DEFINITION_STARTS = ("@", "def ", "async def ", "class ")
# How far back the history is searched, and the longest statement tried: bounds on the
# compiles one lookup may cost (each candidate that is not yet a whole statement fails fast).
_HISTORY_LINES = 2000
_STATEMENT_LINES = 400

def interactive_lines(code: types.CodeType) -> list[str] | None:
    """Lines (with line ends) whose line ``code.co_firstlineno`` starts ``code``'s definition,
    recovered from the readline history (``<stdin>``) or the ``-c`` argument (``<string>``);
    None when there is no such text.

    >>> interactive_lines(compile("def f(): pass", "a.py", "exec"))  # a file: not interactive
    """
    if code.co_filename == "<stdin>":
        candidates = _history_statements()
    elif code.co_filename == "<string>":
        candidates = _command_argument()
    else:
        return None
    for text in candidates:
        if _defines(text, code):
            return text.splitlines(keepends=True)
    return None


def _history_statements() -> Iterator[str]:
    """Candidate statements from the readline history, newest first: from each line at the
    left margin that starts a definition (its first decorator, if any) to each later line.
    The prompt adds every line typed to the history, but not the empty line ending a block."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline, or a Python built without it
        return
    count = readline.get_current_history_length()
    history = [readline.get_history_item(index) or "" for index in range(max(1, count - _HISTORY_LINES), count + 1)]
    for start in range(len(history) - 1, -1, -1):
        line = history[start]
        if not line.startswith(_DEFINITION_STARTS) or (start and history[start - 1].startswith("@")):
            continue
        for end in range(start + 1, min(len(history), start + _STATEMENT_LINES) + 1):
            yield "\n".join(history[start:end]) + "\n"


def _command_argument() -> Iterator[str]:
    argv = getattr(sys, "orig_argv", [])
    for index, argument in enumerate(argv[:-1]):
        if argument == "-c":
            yield argv[index + 1]
            return


def _defines(text: str, code: types.CodeType) -> bool:
    """True when compiling ``text`` as ``code``'s file gives a code object equal to ``code``."""
    try:
        module = compile(text, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return False
    return any(_same_code(found, code) for found in _code_objects(module))


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _same_code(found: Any, code: types.CodeType) -> bool:
    return (
        found.co_name == code.co_name
        and found.co_firstlineno == code.co_firstlineno
        and found.co_code == code.co_code
        and found.co_names == code.co_names
        and found.co_varnames == code.co_varnames
    )
