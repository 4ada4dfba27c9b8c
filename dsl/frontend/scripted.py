"""What the front end needs of the objects ``@script`` and ``@graph`` make, and what it gives back.

The front end compiles a scripted function and, nested in it, every scripted function
it calls (as Triton's code generator compiles a called ``@jit`` function with a nested
generator).  It recognises them by the interfaces here and never imports the facade
that defines them (:mod:`dsl.script_function`, which implements them):

- :class:`Scripted`: a ``@script`` function: its Python function, its options, and the
  slot that keeps its finished IR (filled once, under its lock, by whoever compiles it
  first: the facade's ``.function`` or a caller's nested compile);
- :class:`ScriptedGraph`: a module-level ``@graph()`` function, compiled into a graph
  attribute where it is passed;
- :class:`GraphDecorator`: ``graph`` itself, so that a nested ``@graph()`` def is known;
- :class:`Loaded`: a whole model loaded with ``dsl.load``, inlined where it is called
  (the facade :mod:`dsl.loaded_model` implements it: reading and converting ONNX is no
  front end's business).

What the front end produces is a :class:`CompiledFunction`: the IR plus the passes it
asks for.  The caller's ``finish`` runs them (the front end imports no pass), and the
front end hands its nested compiles to the same ``finish``.

These are abstract classes rather than ``Protocol``s because they are checked with
``isinstance`` on every global name a function reads (to find its callees and
opsets): a runtime-checkable protocol with attributes costs about 9 µs per check.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsl import ir

if TYPE_CHECKING:
    from dsl.frontend.weights import Initializer
    from dsl.opsets import Opset

__all__ = ["Scripted", "ScriptedGraph", "GraphDecorator", "Loaded", "LoadedCall", "CompiledFunction", "Finish"]


class Scripted(ABC):
    """A ``@script`` function as the front end sees it.

    ``opset`` pins the ai.onnx opset (None: inferred from the body); ``domain`` and
    ``name`` name the function when others call it; ``inline`` asks callers to inline
    it.  ``compiled`` is the slot for its finished IR, filled under ``compile_lock``.

    >>> isinstance(relu6, Scripted)      # a ScriptFunction   # doctest: +SKIP
    True
    """

    python_function: Callable[..., Any]
    opset: Opset | None
    domain: str
    name: str
    inline: bool
    compiled: ir.Function | None
    compile_lock: threading.Lock


class ScriptedGraph(ABC):
    """A module-level ``@graph()`` function: compiled, with its own module's names, into
    the graph attribute it is passed as (``body=``, ``then_branch=``)."""

    python_function: Callable[..., Any]
    name: str


class GraphDecorator(ABC):
    """``graph``: ``@graph()`` on a nested def makes it a subgraph to pass as an attribute."""

    __slots__ = ()

    @abstractmethod
    def __call__(self) -> Callable[[Callable[..., Any]], ScriptedGraph]: ...


@dataclass(slots=True)
class LoadedCall:
    """One call of a loaded model: its graph as a function to inline, and its weights.

    ``function``'s inputs are the model's inputs followed by one input per weight (in the
    order of ``weights``); the caller passes its initializers for those, so a model called
    twice stores its weights once.
    """

    function: ir.Function
    weights: list[Initializer]

    @property
    def inputs(self) -> list[ir.Value]:
        """The model's own inputs (the arguments of a call)."""
        return self.function.inputs[: len(self.function.inputs) - len(self.weights)]


class Loaded(ABC):
    """A model loaded with ``dsl.load``: called in a scripted body, its graph is inlined.

    >>> net = dsl.load("net.onnx")        # a LoadedModel   # doctest: +SKIP
    >>> isinstance(net, Loaded)                               # doctest: +SKIP
    True
    """

    name: str

    @property
    @abstractmethod
    def opset_version(self) -> int:
        """The ai.onnx opset the model imports (a caller that uses no op of its own takes it)."""

    @abstractmethod
    def call_function(self, opset_version: int, prefix: str) -> LoadedCall:
        """The model converted to ai.onnx ``opset_version``, as a fresh function whose
        value and node names start with ``prefix``; its weights are the same objects at
        every call (a DslError says why the model cannot be converted)."""


@dataclass(slots=True)
class CompiledFunction:
    """What the front end made of one scripted function: its IR and the passes it asks for.

    ``inline_callees`` are the callees whose calls are to be inlined (``@script(inline=
    True)``); ``while_conditions`` are the Loop outputs carrying the copy of ``c`` of a
    ``while c:`` loop, to be dropped where nothing reads them (the prune-loop-carried
    pass).
    """

    function: ir.Function
    inline_callees: list[ir.Function] = field(default_factory=list)
    while_conditions: list[ir.Value] = field(default_factory=list)


# What runs the requested passes: a CompiledFunction in, the finished IR out.
Finish = Callable[[CompiledFunction], ir.Function]
