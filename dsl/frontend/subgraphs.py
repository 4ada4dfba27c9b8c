"""Graph attributes written by hand: a ``@graph()`` function passed as ``body=``,
``then_branch=``, ... of Loop, Scan or If.

A nested ``@graph()`` definition is compiled where it is used, as a graph nested in the
current one, so it reads the enclosing function's values directly (outer-scope
capture); a module-level one sees only its own module's names.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from dsl import ir
from dsl.errors import DslSyntaxError, DslTypeError, UnsupportedSyntaxError
from dsl.frontend.bindings import GraphDef
from dsl.frontend.builder import GraphBuilder
from dsl.frontend.exits import ReturnExit
from dsl.frontend.origin import Origin
from dsl.frontend.scope import Scope
from dsl.frontend.scripted import ScriptedGraph
from dsl.frontend.signature import read_signature
from dsl.frontend.source import function_source

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["SubgraphCompiler"]


class SubgraphCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler` for ``@graph()`` attributes."""

    def compile_graph_def(self, graph_def: GraphDef, location: Any) -> ir.Graph:
        tree = graph_def.tree
        ctx = self.ctx
        builder = GraphBuilder(ctx, tree.name, parent=self.builder)
        scope = Scope(graph_def.scope)
        signature = read_signature(tree, None, {}, self.origin.evaluate, self.loc)
        for parameter in signature.parameters:
            if parameter.attr_kind is not None:
                raise DslTypeError(
                    f"parameter {parameter.name!r} of a @graph function must be a tensor",
                    parameter.location,
                    hint="annotate graph inputs with tensor types such as INT64, BOOL, FLOAT[...]",
                )
            value = ctx.new_value(parameter.name, parameter.location, type=parameter.type)
            builder.graph.inputs.append(value)
            scope.bind(parameter.name, value)
        saved = (self.builder, self.scope, self.loop_depth, self.declared_outputs)
        self.builder, self.scope, self.loop_depth = builder, scope, 0
        self.declared_outputs = signature.output_types
        try:
            body = tree.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                builder.graph.doc_string = str(body[0].value.value)
                body = body[1:]
            outcome = self.compile_block(body)
            if not isinstance(outcome, ReturnExit):
                raise DslSyntaxError(f"the @graph function {tree.name!r} does not return a value",
                                     self.loc(body[-1] if body else tree), hint="end it with 'return ...'")
            types = signature.output_types
            if types is not None and len(types) != len(outcome.values):
                raise DslTypeError(
                    f"{tree.name} returns {len(outcome.values)} value(s) but its annotation declares {len(types)}",
                    outcome.location)
            taken: set[ir.Value] = set()
            for index, value in enumerate(outcome.values):
                value = self.output_value(value, taken, outcome.location)
                if types is not None:
                    value.type = types[index]
                elif value.type is None:
                    elem = ctx.elem(value)
                    if elem is not None:
                        value.type = ir.TensorType(elem, None)
                builder.graph.outputs.append(value)
        finally:
            self.builder, self.scope, self.loop_depth, self.declared_outputs = saved
        builder.graph.location = self.loc(tree)
        return builder.graph

    def compile_graph_function(self, graph_function: ScriptedGraph, location: Any) -> ir.Graph:
        """A module-level ``@graph()`` function: compiled with its own module's names."""
        source = function_source(graph_function.python_function)
        tree = source.tree
        if isinstance(tree, ast.AsyncFunctionDef):  # as for @script: a body is no coroutine
            raise UnsupportedSyntaxError(f"async def {tree.name} cannot be a @graph() body", source.location(tree),
                                         hint="define the @graph() function with a plain def")
        saved = self.origin
        self.origin = Origin(graph_function.python_function, source)
        try:
            return self.compile_graph_def(GraphDef(tree, Scope()), location)
        finally:
            self.origin = saved
