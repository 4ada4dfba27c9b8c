"""What the compiler's mixins may use of each other, written down for the type checker.

:class:`dsl.frontend.compiler.FunctionCompiler` is assembled from one mixin per kind
of construct (expressions, calls, statements, control flow, subgraphs), and each mixin
calls into the others (``self.expr``, ``self.compile_block``) and into the shared state
(``self.builder``, ``self.scope``).  A mixin cannot name the combined class as its base
(that would be a cycle), so it names this class instead, and only while type checking
(``if TYPE_CHECKING``): at run time the mixins derive from ``object`` and this module
is never imported.  mypy then checks every mixin against the one surface, and checks
that ``FunctionCompiler`` implements all of it (a method missing there leaves the class
abstract, an error where it is built).  It is an abstract class rather than a
``Protocol`` because mypy does not let a protocol's explicit subclasses assign the
attributes it declares (``self.builder = ...`` reads as "cannot determine type").
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsl import ir

if TYPE_CHECKING:
    from dsl.frontend.bindings import GraphDef, PyValue
    from dsl.frontend.builder import CompileContext, GraphBuilder
    from dsl.frontend.origin import Origin
    from dsl.frontend.scope import Scope
    from dsl.frontend.scripted import Scripted, ScriptedGraph
    from dsl.opsets import Opset

__all__ = ["CompilerSurface"]


class CompilerSurface(ABC):
    """The state and the methods one mixin of the compiler may use from another."""

    # ----------------------------------------------------------------- state
    # set up by FunctionCompiler.__init__; builder and scope are swapped while a
    # branch, loop body or @graph() body compiles into its own graph
    origin: Origin
    ctx: CompileContext
    builder: GraphBuilder
    scope: Scope
    loop_depth: int
    while_conditions: list[ir.Value]
    declared_outputs: list[Any] | None
    inline_callees: list[ir.Function]
    callee_imports: dict[str, int]
    current_statement: ast.stmt | None
    visitors: dict[type, Callable[[Any, Any], Any]]
    synthetic: dict[str, Any]
    made_containers: dict[int, tuple[Any, int]]
    dynamic_depth: int
    helper_depth: int
    helper_sources: dict[Any, Any]

    # ------------------------------------------- FunctionCompiler (helpers)
    @abstractmethod
    def find_visitor(self, node: ast.AST) -> Callable[[Any, Any], Any] | None: ...

    @abstractmethod
    def loc(self, node: Any) -> ir.SourceLocation: ...

    @abstractmethod
    def resolve_name(self, name: str, node: ast.AST) -> Any: ...

    @abstractmethod
    def as_value(
        self, operand: Any, node: Any, beside: ir.Value | None = None, elem: int | None = None
    ) -> ir.Value: ...

    @abstractmethod
    def bind_name(self, name: str, operand: Any) -> None: ...

    @abstractmethod
    def output_value(self, value: ir.Value, taken: set[ir.Value], location: Any) -> ir.Value: ...

    @abstractmethod
    def is_compiling(self, scripted: Any) -> bool: ...

    @abstractmethod
    def compiled_callee(self, callee: Scripted, opset: Opset | None = None) -> ir.Function: ...

    # ---------------------------------------------------- ExpressionCompiler
    @abstractmethod
    def expr(self, node: ast.expr) -> Any: ...

    @abstractmethod
    def binary(self, name: str, left: Any, right: Any, node: ast.AST) -> ir.Value: ...

    @abstractmethod
    def fold(self, function: Any, arguments: tuple[Any, ...], node: ast.AST) -> PyValue: ...

    @abstractmethod
    def truth(self, operand: PyValue, node: ast.AST) -> bool: ...

    @abstractmethod
    def condition_value(self, operand: Any, node: ast.AST) -> ir.Value: ...

    # ---------------------------------------------------------- CallCompiler
    @abstractmethod
    def visit_Call(self, node: ast.Call, output_count: int | None = None) -> Any: ...

    # ----------------------------------------------------- StatementCompiler
    @abstractmethod
    def compile_block(self, statements: list[ast.stmt]) -> Any: ...

    # --------------------------------------------------- ControlFlowCompiler
    @abstractmethod
    def if_expression(self, node: ast.IfExp, condition: ir.Value) -> ir.Value: ...

    @abstractmethod
    def list_tensor(self, items: list[Any], node: ast.List) -> ir.Value: ...

    @abstractmethod
    def unsupported(self, node: ast.AST) -> Any: ...

    @abstractmethod
    def assign(self, target: ast.expr, operand: Any, value_node: ast.expr) -> None: ...

    # --------------------------------------------------- StaticPythonCompiler
    @abstractmethod
    def operand(self, value: Any) -> Any: ...

    @abstractmethod
    def static_items(self, operand: Any, node: ast.AST, what: str) -> list[Any]: ...

    @abstractmethod
    def new_synthetic(self, operand: Any, like: ast.AST) -> ast.Name: ...

    @abstractmethod
    def expand_starred(self, node: ast.Call) -> ast.Call: ...

    @abstractmethod
    def unroll_for(self, node: ast.For, items: list[Any]) -> Any: ...

    @abstractmethod
    def made_here(self, container: Any) -> Any: ...

    @abstractmethod
    def call_helper(self, function: Any, bound_self: Any, node: ast.Call, operands: list[Any],
                    keyword_operands: dict[str, Any]) -> Any: ...

    @abstractmethod
    def helper_return(self, node: ast.Return) -> Any: ...

    @abstractmethod
    def python_call(self, target: Any, node: ast.Call, operands: list[Any], keyword_operands: dict[str, Any]) -> Any: ...

    # ------------------------------------------------------ SubgraphCompiler
    @abstractmethod
    def compile_graph_def(self, graph_def: GraphDef, location: Any) -> ir.Graph: ...

    @abstractmethod
    def compile_graph_function(self, graph_function: ScriptedGraph, location: Any) -> ir.Graph: ...
