"""The Python front end: a ``@script`` function's ``ast`` -> :class:`dsl.ir.Function`.

``compile_script(scripted, finish)`` compiles a scripted function once and keeps the
result in its slot; the functions it calls are compiled by nested compiles the same way.
Modules: ``scripted`` (the interfaces the front end recognises, and what it produces),
``source`` (finding and parsing the text), ``origin`` (closure, globals and builtins),
``signature`` (inputs, attribute parameters, outputs), ``scope``/``bindings``/``names``
(SSA name binding), ``builder`` (emitting nodes and constants), ``expressions``,
``calls``, ``statements``, ``control_flow``, ``exits``, ``subgraphs``, ``opset_choice``,
``weights`` (outer-scope initializers), ``python_values`` and ``static_python`` (Python
evaluated while compiling: containers of tensors, loops over Python values unrolled,
comprehensions, helpers compiled in place, static asserts), and ``compiler`` which ties
them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsl import ir
    from dsl.frontend.scripted import Finish, Scripted

__all__ = ["compile_script"]


def compile_script(scripted: Scripted, finish: Finish) -> ir.Function:
    """The finished IR of ``scripted`` (a :class:`dsl.frontend.scripted.Scripted`, such as a
    ScriptFunction), compiled on first use and kept in ``scripted.compiled``.

    ``finish`` runs the passes the front end asks for on each function it compiles (this
    one and the callees it compiles on the way), and what it returns is what is kept.
    Every mistake in the function raises a :class:`dsl.errors.DslError` that points at
    the offending source.  The cyclic garbage collector is paused meanwhile
    (:mod:`dsl.frontend.collection_pause`).

    >>> from dsl import script, FLOAT, opset18 as op
    >>> from dsl.script_function import finish
    >>> @script()
    ... def double(x: FLOAT[...]) -> FLOAT[...]:
    ...     return op.Add(x, x)
    >>> compile_script(double, finish).nodes[0].op_type     # what double.function does   # doctest: +SKIP
    'Add'
    """
    from dsl.collection_pause import collection_paused
    from dsl.frontend.compiler import kept_function

    with collection_paused():
        return kept_function(scripted, finish)
