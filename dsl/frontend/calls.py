"""Calls: ``op.X(...)`` becomes a node, ``other_script(...)`` a call of a model-local
function, ``loaded_model(...)`` (``dsl.load``) the model's graph inlined, and a plain
Python callable on constants is evaluated at compile time.

Positional arguments are inputs and keyword arguments attributes, as in onnxscript;
a keyword naming an input of the schema passes that input (``op.Unsqueeze(x, axes=[1])``).  A
literal input adopts the element type of another input sharing its schema type
parameter (``op.Clip(x, 0.0, 6.0)`` with FLOAT16 ``x`` makes FLOAT16 bounds).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from dsl import hooks, ir
from dsl.annotation_checks import argument_hint, check_declared
from dsl.errors import DslError, DslTypeError, OpAttributeError, OpCallError
from dsl.frontend.bindings import AttrRef, GraphDef, PyValue, ValueTuple
from dsl.frontend.builder import check_call
from dsl.frontend.python_values import holds_tensor, is_user_function
from dsl.frontend.scripted import Loaded, Scripted, ScriptedGraph
from dsl.frontend.static_shapes import SourceNames, callee_output_shapes
from dsl.frontend.value_kinds import value_kind
from dsl.frontend.weights import initializer_operand
from dsl.opsets import Op, python_to_attr

if TYPE_CHECKING:  # the other mixins, as mypy sees them (see dsl.frontend.surface)
    from dsl.frontend.surface import CompilerSurface as _CompilerBase
else:
    _CompilerBase = object

__all__ = ["CallCompiler"]

_FORMAL_TYPES: dict[Op, list[str | None]] = {}
_FLOAT = 1  # TensorProto.FLOAT: an empty sequence's element type when nothing says another


def _formal_types(op: Op, count: int) -> list[str | None]:
    """The schema type parameter of each of ``count`` actual inputs (variadic repeats)."""
    formals = _FORMAL_TYPES.get(op)
    if formals is None:
        formals = _FORMAL_TYPES[op] = [] if op.schema is None else [p.type_str for p in op.schema.inputs]
    if not formals:
        return [None] * count
    if len(formals) >= count:
        return list(formals[:count])
    return list(formals) + [formals[-1]] * (count - len(formals))


def _list_items(operand: Any) -> list[Any] | None:
    """The items of a Python list or tuple of tensors (eager mode's rule for a sequence:
    empty, or its first item a tensor); None for any other operand."""
    if isinstance(operand, ValueTuple):
        items: list[Any] = list(operand.items)
    elif isinstance(operand, PyValue) and isinstance(operand.value, (list, tuple)):
        items = list(operand.value)
    else:
        return None
    if items and not isinstance(items[0], ir.Value):
        return None
    return items


def _sequence_items(op: Op, formal: str | None, operand: Any) -> list[Any] | None:
    """The tensors of a Python list or tuple passed where ``op`` takes a sequence (see
    :func:`_list_items`); None for any other operand."""
    if formal is None:
        return None
    items = _list_items(operand)
    if items is None or not any(type_str.startswith("seq(") for type_str in op.allowed_type_strs(formal)):
        return None  # (not a list of tensors, or the input takes no seq(tensor))
    return items


_OPTIONAL_FORMALS: dict[Op, frozenset[str]] = {}


def _optional_formals(op: Op) -> frozenset[str]:
    """The formal types of ``op`` that admit ``optional(...)`` types only (OptionalHasElement
    and OptionalGetElement before opset 18), whose inputs eager mode feeds as optionals."""
    found = _OPTIONAL_FORMALS.get(op)
    if found is None:
        found = frozenset() if op.schema is None else frozenset(
            p.type_str for p in op.schema.inputs
            if (allowed := op.allowed_type_strs(p.type_str)) and all(t.startswith("optional(") for t in allowed)
        )
        _OPTIONAL_FORMALS[op] = found
    return found


class CallCompiler(_CompilerBase):
    """Mixin of :class:`dsl.frontend.compiler.FunctionCompiler` for call expressions."""

    def visit_Call(self, node: ast.Call, output_count: int | None = None) -> Any:
        callee = self.expr(node.func)
        node = self.expand_starred(node)
        if isinstance(callee, PyValue):
            target = callee.value
            if isinstance(target, Op):
                return self.call_op(target, node, output_count)
            if isinstance(target, Scripted):
                return self.call_script(target, node, output_count)
            if isinstance(target, Loaded):
                return self.call_loaded(target, node, output_count)
            if isinstance(target, ScriptedGraph):
                raise DslTypeError(f"the @graph function {target.name!r} cannot be called",
                                   self.loc(node), hint="pass it as a graph attribute: body=..., then_branch=...")
            if callable(target):
                return self.call_python(target, node)
        if isinstance(callee, GraphDef):
            raise DslTypeError(f"the @graph function {callee.tree.name!r} cannot be called", self.loc(node),
                               hint="pass it as a graph attribute: body=..., then_branch=...")
        raise DslTypeError("this value is not callable", self.loc(node.func),
                           hint="call ops as op.Name(...) or other @script functions")

    # -------------------------------------------------------------- op calls
    def call_op(self, op: Op, node: ast.Call, output_count: int | None) -> Any:
        location = self.loc(node)
        arguments, keywords = self.op_arguments(op, node)
        try:
            check_call(op, len(arguments), [k.arg for k in keywords], location)
        except OpAttributeError as err:  # point at the keyword that is wrong, when one is
            wrong = next((k for k in keywords if k.arg and repr(k.arg) in err.message), None)
            if wrong is not None:
                err.location = self.loc(wrong)
            raise
        operands = [self.expr(argument) for argument in arguments]
        attributes: dict[str, ir.Attr] = {}
        for keyword in keywords:
            if keyword.arg is not None:  # always: visit_Call has refused **mapping
                attribute = self.attribute(op, keyword.arg, keyword.value)
                if attribute is not None:
                    attributes[keyword.arg] = attribute
        if len(attributes) < len(keywords):  # one was None: a required one must still be there
            check_call(op, len(arguments), list(attributes), location)
        inputs = self.op_inputs(op, operands, arguments)
        if output_count is not None:
            op.check_outputs(output_count, location)
        count = output_count if output_count is not None else _split_count(op, operands, attributes)
        outputs = self.builder.call_op(op, inputs, attributes, location, count, SourceNames(arguments))
        if output_count is None and len(outputs) == 1:
            return outputs[0]
        return ValueTuple(tuple(outputs))

    def op_arguments(self, op: Op, node: ast.Call) -> tuple[list[ast.expr], list[ast.keyword]]:
        """The input expressions in schema order and the attribute keywords of a call;
        inputs may be named (``op.Slice(x, starts=s, ends=e)``), as onnxscript allows."""
        named = op.keyword_inputs(k.arg for k in node.keywords)
        if not named:
            return list(node.args), list(node.keywords)
        by_name = {k.arg: k.value for k in node.keywords if k.arg in named}
        omitted = ast.copy_location(ast.Constant(value=None), node)
        arguments = op.place_inputs(list(node.args), by_name, omitted, self.loc(node))
        return arguments, [k for k in node.keywords if k.arg not in named]

    def attribute(self, op: Op, name: str, node: ast.expr) -> ir.Attr | None:
        """The attribute ``name=<node>`` of a call; it must be known when compiling.
        None where its value is Python's None: the attribute is left out, as eagerly
        (and as onnxscript does: ``op.Unique(x, axis=None)`` flattens)."""
        location = self.loc(node)
        operand = self.expr(node)
        if isinstance(operand, PyValue) and operand.value is None:
            return None
        if isinstance(operand, ir.Value):
            raise DslTypeError(
                f"attribute {name} of {op.name} must be known when compiling, but this is a tensor",
                location,
                hint="pass tensors positionally as inputs; attributes take Python constants or the "
                "function's attribute parameters",
            )
        if isinstance(operand, AttrRef):
            param = operand.param
            reference = ir.Attr(name, param.kind, None, ref_attr_name=param.name, location=location)
            return op.make_attr(name, reference, location)
        if isinstance(operand, GraphDef):
            return op.make_attr(name, self.compile_graph_def(operand, location), location)
        if isinstance(operand, ValueTuple):
            raise DslTypeError(f"attribute {name} of {op.name} cannot hold several values", location)
        value = operand.value
        if isinstance(value, ScriptedGraph):
            return op.make_attr(name, self.compile_graph_function(value, location), location)
        try:
            return op.make_attr(name, value, location)
        except DslError as err:
            raise err.with_location(location) from None

    def op_inputs(self, op: Op, operands: list[Any], nodes: list[ast.expr]) -> list[ir.Value | None]:
        optional_formals = _optional_formals(op)
        for operand in operands:
            if not isinstance(operand, ir.Value):
                break
        else:  # tensors only (the usual call): nothing to convert
            if not optional_formals:
                return operands
        formals = _formal_types(op, len(operands))
        partners: dict[str, ir.Value] = {}
        for formal, operand in zip(formals, operands):
            if formal is not None and isinstance(operand, ir.Value) and formal not in partners:
                partners[formal] = operand
        inputs: list[ir.Value | None] = []
        for formal, operand, node in zip(formals, operands, nodes):
            if formal in optional_formals:
                inputs.append(self.optional_value(op, operand, operands, node))
                continue
            if isinstance(operand, PyValue) and operand.value is None:
                inputs.append(None)
                continue
            items = _sequence_items(op, formal, operand)
            if items is not None:
                inputs.append(self.sequence_value(op, items, operands, node))
                continue
            partner = partners.get(formal) if formal is not None else None
            inputs.append(self.as_value(operand, node, beside=partner))
        while inputs and inputs[-1] is None:
            inputs.pop()
        return inputs

    def sequence_value(self, op: Op, items: list[Any], operands: list[Any], node: ast.expr) -> ir.Value:
        """A Python list of tensors where ``op`` takes a sequence: ``SequenceConstruct`` of
        them, as eager mode hands onnxruntime the list; an empty list is ``SequenceEmpty``
        of the element type eager mode gives it (the tensor SequenceInsert puts in, else
        FLOAT)."""
        location = self.loc(node)
        for index, item in enumerate(items):
            if not isinstance(item, ir.Value):  # (eager mode's words)
                raise DslTypeError(
                    f"item {index} of a sequence is a {type(item).__name__}, not a tensor", location,
                    hint="a sequence holds tensors: numpy arrays, torch tensors or values computed by ops",
                )
        if items:
            return self.builder.operator("SequenceConstruct", items, location)
        elem = None
        if op.domain == "" and op.name == "SequenceInsert" and len(operands) > 1 and isinstance(operands[1], ir.Value):
            elem = self.ctx.elem(operands[1])
        return self.builder.operator("SequenceEmpty", [], location, dtype=elem or _FLOAT)

    def optional_value(self, op: Op, operand: Any, operands: list[Any], node: ast.expr) -> ir.Value:
        """What eager mode feeds an input typed ``optional(...)`` only: ``Optional`` of the
        tensor, or of the sequence a Python list makes (see :meth:`sequence_value`); None
        is an empty optional (of FLOAT tensors, as eagerly: its type does not matter); an
        optional value is passed as it is."""
        location = self.loc(node)
        if isinstance(operand, PyValue) and operand.value is None:
            return self.builder.operator("Optional", [], location, type=ir.TensorType(_FLOAT, None))
        items = _list_items(operand)
        if items is not None:
            contained = self.sequence_value(op, items, operands, node)
        else:
            contained = self.as_value(operand, node)
            if value_kind(contained, self.ctx) not in ("tensor", "sequence"):
                return contained  # an optional, or of a kind not known (as the program has it)
        return self.builder.operator("Optional", [contained], location)

    # ---------------------------------------------------------- script calls
    def call_script(self, target: Scripted, node: ast.Call, output_count: int | None) -> Any:
        location = self.loc(node)
        operands = [self.expr(argument) for argument in node.args]
        keyword_operands = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}
        passed = [*operands, *keyword_operands.values()]
        if any(_holds_container(operand) for operand in passed) or (
                any(isinstance(o, PyValue) and o.value is None for o in passed) and _tests_none(target)):
            # None for an optional input, or a list/dict of tensors: the callee's body is
            # Python around the graph (``if bias is None``), compiled in place for this call.
            return self.call_helper(target.python_function, None, node, operands, keyword_operands)
        node = self.evaluated_call(node, operands, keyword_operands)
        if self.is_compiling(target):
            raise DslTypeError(
                f"{target.name} calls itself (directly or through other functions)",
                location,
                hint="ONNX functions cannot be recursive; write the repetition as a loop",
            )
        callee: ir.Function = self.callee_function(target, location)
        params = {p.name: p for p in callee.attr_params}
        given = self.script_arguments(target, node)
        inputs: list[ir.Value | None] = []
        for formal in callee.inputs:
            argument = given.get(formal.name)
            if argument is None:
                raise OpCallError(f"{target.name} is missing input {formal.name!r}", location,
                                  hint=f"its inputs are ({', '.join(v.name for v in callee.inputs)})")
            operand = self.expr(argument)
            if isinstance(operand, PyValue) and operand.value is None:
                inputs.append(None)
                continue
            elem = formal.type.elem_type if isinstance(formal.type, ir.TensorType) else None
            value = self.as_value(operand, argument, elem=elem)
            check_declared(f"input {formal.name!r} of {target.name}", self.ctx.shapes.shape(value),
                           self.ctx.elem(value), formal.type, self.loc(argument),
                           argument_hint(target.name, formal.name, formal.type), check_rank=False)
            inputs.append(value)
        attributes: dict[str, ir.Attr] = {}
        for name, param in params.items():
            argument = given.get(name)
            if argument is None:
                if param.default is None:
                    raise OpAttributeError(f"{target.name} requires attribute {name!r}", location,
                                           hint=f"pass {name}=... (it has no default)")
                default = param.default
                attributes[name] = ir.Attr(name, default.kind, default.value, location=location)
                continue
            attributes[name] = self.script_attribute(target.name, param, argument)
        count = len(callee.outputs)
        if output_count is not None and output_count != count:
            raise OpCallError(f"{target.name} returns {count} value(s), but {output_count} are bound", location,
                              hint="bind as many names as the function returns")
        elems = [o.type.elem_type if isinstance(o.type, ir.TensorType) else None for o in callee.outputs]
        self.ctx.use_opset(callee.domain, getattr(target, "domain_version", 1), location)
        for domain, version in callee.opset_imports.items():
            if domain != "":
                self.callee_imports.setdefault(domain, version)
        outputs = self.builder.add_node(callee.name, callee.domain, inputs, attributes, count, location, elems,
                                        callee=callee)
        shapes = callee_output_shapes([formal.type for formal in callee.inputs],
                                      [self.ctx.shapes.shape(value) if value is not None  # (omitted: as declared)
                                       else getattr(formal.type, "shape", None) for value, formal in zip(inputs, callee.inputs)],
                                      [output.type for output in callee.outputs])
        for output, shape in zip(outputs, shapes):
            self.ctx.shapes.set(output, shape)
        if target.inline and callee not in self.inline_callees:
            self.inline_callees.append(callee)
        if output_count is None and count == 1:
            return outputs[0]
        return ValueTuple(tuple(outputs))

    def evaluated_call(self, node: ast.Call, operands: list[Any], keyword_operands: dict[str, Any]) -> ast.Call:
        """``node`` with its arguments replaced by names of the operands they compiled to,
        so that they are compiled once."""
        args: list[ast.expr] = [self.new_synthetic(o, a) for o, a in zip(operands, node.args)]
        keywords = [ast.copy_location(ast.keyword(arg=k.arg, value=self.new_synthetic(keyword_operands[k.arg], k.value)), k)
                    for k in node.keywords if k.arg is not None]
        evaluated = ast.copy_location(ast.Call(func=node.func, args=args, keywords=keywords), node)
        evaluated.end_lineno, evaluated.end_col_offset = node.end_lineno, node.end_col_offset
        return evaluated

    def script_arguments(self, target: Scripted, node: ast.Call) -> dict[str, ast.expr]:
        """The argument of each parameter a call of ``target`` names, by position or keyword."""
        code = target.python_function.__code__
        order = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
        if len(node.args) > len(order):
            raise OpCallError(f"{target.name} takes {len(order)} arguments, got {len(node.args)}", self.loc(node),
                              hint=f"its parameters are ({', '.join(order)})")
        given: dict[str, ast.expr] = dict(zip(order, node.args))
        for keyword in node.keywords:
            name = keyword.arg or ""
            if name not in order:
                raise OpAttributeError(f"{target.name} has no parameter {name!r}", self.loc(keyword),
                                       hint=f"its parameters are ({', '.join(order)})")
            if name in given:
                raise OpCallError(f"{target.name} got {name!r} twice", self.loc(keyword))
            given[name] = keyword.value
        return given

    def callee_function(self, target: Scripted, location: Any) -> ir.Function:
        """The callee's IR; an inline callee compiled against another ai.onnx version is
        compiled again against the caller's, so its body can be inlined."""
        callee = self.compiled_callee(target)
        version = self.ctx.default_opset.version
        if target.inline and callee.opset_imports.get("", version) != version and target.opset is None:
            callee = self.compiled_callee(target, self.ctx.default_opset)
        return callee

    def script_attribute(self, function_name: str, param: ir.AttrParam, node: ast.expr) -> ir.Attr:
        location = self.loc(node)
        operand = self.expr(node)
        if isinstance(operand, AttrRef):
            if operand.param.kind != param.kind:
                raise OpAttributeError(
                    f"attribute {param.name} of {function_name} is {param.kind.name}, but "
                    f"{operand.param.name!r} is {operand.param.kind.name}", location,
                    hint=f"pass a {param.kind.name} value, or an attribute parameter annotated as one")
            return ir.Attr(param.name, param.kind, None, ref_attr_name=operand.param.name, location=location)
        if not isinstance(operand, PyValue):
            raise DslTypeError(
                f"attribute {param.name} of {function_name} must be known when compiling, but this is a tensor",
                location, hint="pass a Python constant or an attribute parameter")
        try:
            return python_to_attr(param.name, operand.value, param.kind, location)
        except DslError as err:
            raise err.with_location(location) from None

    # ---------------------------------------------------------- loaded models
    def call_loaded(self, target: Loaded, node: ast.Call, output_count: int | None) -> Any:
        """A model from ``dsl.load``: a call to inline (its names prefixed per call site,
        ``net_0_``, ``net_1_``), reading its weights as initializers of the outermost graph."""
        location = self.loc(node)
        if node.keywords:
            raise OpCallError(f"the loaded model {target.name} takes its inputs by position",
                              self.loc(node.keywords[0]), hint="drop the keyword: net(x)")
        operands = [self.expr(argument) for argument in node.args]  # inner calls first: net(net(x)) is net_1_(net_0_)
        counts: dict[int, int] = self.__dict__.setdefault("_loaded_calls", {})
        index = counts[id(target)] = counts.get(id(target), -1) + 1
        try:
            call = target.call_function(self.ctx.default_opset.version, f"{target.name}_{index}_")
        except DslError as err:
            raise err.with_location(location) from None
        formals = call.inputs
        if len(node.args) != len(formals):
            raise OpCallError(f"the loaded model {target.name} takes {len(formals)} input(s), got {len(node.args)}",
                              location, hint=f"its inputs are ({', '.join(v.name for v in formals)})")
        inputs: list[ir.Value | None] = []
        for formal, operand, argument in zip(formals, operands, node.args):
            want = formal.type.elem_type if isinstance(formal.type, ir.TensorType) else None
            value = self.as_value(operand, argument, elem=want)
            have = self.ctx.elem(value)
            if want is not None and have is not None and want != have:
                raise DslTypeError(
                    f"input {formal.name!r} of the loaded model {target.name} is {ir.element_type_name(want)}, "
                    f"but this is {ir.element_type_name(have)}", self.loc(argument),
                    hint=f"cast it to {ir.element_type_name(want)} first (op.Cast), or load a model of that type")
            inputs.append(value)
        inputs.extend(initializer_operand(self, weight) for weight in call.weights)
        callee = call.function
        count = len(callee.outputs)
        if output_count is not None and output_count != count:
            raise OpCallError(f"the loaded model {target.name} returns {count} value(s), but {output_count} are bound",
                              location, hint="bind as many names as the model has outputs")
        elems = [o.type.elem_type if isinstance(o.type, ir.TensorType) else None for o in callee.outputs]
        outputs = self.builder.add_node(callee.name, callee.domain, inputs, {}, count, location, elems,
                                        callee=callee)
        self.inline_callees.append(callee)
        if output_count is None and count == 1:
            return outputs[0]
        return ValueTuple(tuple(outputs))

    # ---------------------------------------------------------- python calls
    def call_python(self, target: Any, node: ast.Call) -> Any:
        """A Python function on compile-time constants (``np.array(...)``, ``len(...)``)."""
        arguments = [self.expr(a) for a in node.args]
        keywords = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}  # no **mapping here
        every = [*arguments, *keywords.values()]
        if not all(isinstance(a, PyValue) and not holds_tensor(a.value) for a in every):
            return self.python_call(target, node, arguments, keywords)
        if not all(isinstance(a, PyValue) for a in every):
            name = getattr(target, "__name__", type(target).__name__)
            raise DslTypeError(
                f"the Python function {name} cannot be applied to tensors inside @script",
                self.loc(node),
                hint="use ONNX ops (op.X) on tensors; Python functions only run on compile-time constants",
            )
        positional = tuple(a.value for a in arguments)
        named = {k: v.value for k, v in keywords.items()}
        try:
            if is_user_function(target):  # as it runs eagerly: its ops give eager tensors
                return self.operand(hooks.call_as_eager_body(target, positional, named, self.ctx.default_opset))
            return self.operand(target(*positional, **named))
        except DslError as err:
            raise err.with_location(self.loc(node)) from None
        except Exception as err:
            raise DslTypeError(f"calling {getattr(target, '__name__', target)!r} failed: "
                               f"{type(err).__name__}: {err}", self.loc(node)) from None


def _holds_container(operand: Any) -> bool:
    """Whether an argument is a Python container holding tensors or weights, which no
    graph input can take."""
    if isinstance(operand, ValueTuple):
        return True
    if isinstance(operand, PyValue):
        value = operand.value
        return not isinstance(value, (int, float, str, bool)) and value is not None and holds_tensor(value)
    return False


def _tests_none(target: Scripted) -> bool:
    """Whether the body of ``target`` compares something with ``is``/``is not`` (``if bias
    is None``): a call passing None then compiles the body for that call."""
    from dsl.frontend.source import function_source

    try:
        tree = function_source(target.python_function).tree
    except DslError:
        return False
    return any(isinstance(node, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops)
               for node in ast.walk(tree))


def _split_count(op: Op, operands: list[Any], attributes: dict[str, ir.Attr]) -> int | None:
    """How many outputs ``op.Split`` has when its call says (``num_outputs=3``, or split
    sizes known while compiling), so ``len(parts)`` and ``for p in parts`` work."""
    if op.name != "Split" or op.opset.domain != "":
        return None
    number = attributes.get("num_outputs")
    if number is not None and isinstance(number.value, int) and number.ref_attr_name is None:
        return number.value
    if len(operands) > 1 and isinstance(operands[1], PyValue) and isinstance(operands[1].value, (list, tuple)):
        return len(operands[1].value)
    return None
