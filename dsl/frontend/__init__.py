"""The Python front end: a ``@script`` function's ``ast`` -> :class:`dsl.ir.Function`.

``compile_script(script_function)`` is called once per ScriptFunction (which keeps the
result).  Modules: ``source`` (finding and parsing the text), ``signature`` (inputs,
attribute parameters, outputs), ``scope``/``bindings``/``names`` (SSA name binding),
``builder`` (emitting nodes and constants), ``expressions``, ``calls``, ``statements``,
``control_flow``, ``exits``, ``subgraphs``, ``opset_choice``, ``weights`` (outer-scope
initializers), and ``compiler`` which ties them together.
"""

from __future__ import annotations

from typing import Any

from dsl import ir

__all__ = ["compile_script"]


def compile_script(script_function: Any) -> ir.Function:
    """Compile a :class:`dsl.script_function.ScriptFunction` into an IR function.

    Every mistake in the function raises a :class:`dsl.errors.DslError` that points at
    the offending source.

    >>> from dsl import script, FLOAT, opset18 as op
    >>> @script()
    ... def double(x: FLOAT[...]) -> FLOAT[...]:
    ...     return op.Add(x, x)
    >>> compile_script(double).nodes[0].op_type         # doctest: +SKIP
    'Add'
    """
    import gc

    from dsl.frontend.compiler import compile_with_safety_net

    # The compiler allocates many small objects that all stay alive; cyclic garbage
    # collection passes over them would make compiling large functions superlinear.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return compile_with_safety_net(script_function)
    finally:
        if collecting:
            gc.enable()
