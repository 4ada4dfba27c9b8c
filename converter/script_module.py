"""Loading a Python file of ``@script`` functions, as ``onnxquill compile`` needs.

The file is imported under a private module name (registered in ``sys.modules``, so the
compiler finds its source text with ``inspect``), and one ScriptFunction is chosen:
the one named after ``:`` in ``model.py:function``, else the last one the file defines
(``converter.to_python`` writes the model's main graph last, after the functions it
calls).
"""

from __future__ import annotations

import importlib.util
import itertools
import linecache
import os
import sys
from typing import Any

from dsl.errors import DslError, DslNameError, ModelLoadError
from dsl.script_function import ScriptFunction

__all__ = ["split_spec", "load_script_function", "model_options"]

_COUNTER = itertools.count()


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"model.py:main"`` -> ``("model.py", "main")``; a Windows drive colon is not a separator."""
    path, sep, name = spec.rpartition(":")
    if sep and name.isidentifier() and path:
        return path, name
    return spec, None


def load_script_function(path: str | os.PathLike[str], name: str | None = None) -> ScriptFunction:
    """Import the Python file ``path`` and return its ScriptFunction ``name`` (default: the last).

    >>> fn = load_script_function("model.py")          # doctest: +SKIP
    >>> fn.to_model_proto().graph.name                  # doctest: +SKIP
    'main_graph'
    """
    file_name = os.fspath(path)
    if not os.path.isfile(file_name):
        raise ModelLoadError(f"{file_name}: no such file", hint="check the path of the Python file")
    # The compiler reads function source through linecache: forget any older text of this
    # file (rewritten in place, say by to-python) so it cannot compile stale source.
    linecache.cache.pop(os.path.abspath(file_name), None)
    linecache.cache.pop(file_name, None)
    module_name = f"_onnxquill_script_{next(_COUNTER)}"
    spec = importlib.util.spec_from_file_location(module_name, file_name)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{file_name}: not a Python file", hint="pass a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except DslError:
        raise
    except Exception as error:
        del sys.modules[module_name]
        raise ModelLoadError(
            f"{file_name}: importing the file failed: {type(error).__name__}: {error}",
            hint="run the file with python to see the full traceback",
        ) from error
    functions = {key: value for key, value in vars(module).items() if isinstance(value, ScriptFunction)}
    if name is not None:
        found = functions.get(name)
        if found is None:
            raise DslNameError(
                f"{file_name} has no @script function {name!r}",
                hint=f"its @script functions are: {', '.join(functions) or 'none'}",
            )
        return found
    if not functions:
        raise DslNameError(f"{file_name} defines no @script function", hint="decorate the model's function with @script()")
    return list(functions.values())[-1]


def model_options(function: ScriptFunction) -> dict[str, Any]:
    """Keyword arguments for ``to_model_proto`` that the file attached to ``function``.

    ``converter.to_python`` keeps the original model's producer, doc string and
    metadata, and the functions nothing calls and weights nothing reads, as
    ``main_graph.model_options = {...}``, so compiling the file gives them back.
    """
    found = getattr(function, "model_options", None)
    return dict(found) if isinstance(found, dict) else {}
