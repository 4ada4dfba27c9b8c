"""Whole-model execution with every intermediate value kept by name: ``eager.run``.

A model runs in one cached onnxruntime session when it can (:mod:`eager.model_session`,
intermediate values added as outputs); this module is also the node-by-node runner used
for what one session cannot do: stopping at a node, a model onnxruntime refuses as a
whole (the failing node is named), and the values inside If/Loop bodies and function
calls, for which those nodes are rerun node by node after the session's run.

Node by node, ``eager.run`` accepts what a user debugging a model has at hand — an ``.onnx`` path, a
``ModelProto``/``FunctionProto``, a ``@script`` function, an IR ``Function``/``Model`` —
turns it into protos (IR through ``converter.to_onnx``, the one serialiser; protos are
walked directly, so this never depends on the proto -> IR reader), and runs each node as
a one-op kernel from the same cache as ``op.X(...)`` calls.  Calls to model-local
functions run their bodies node by node too, so values inside a function are captured
(as ``"<call node>/<inner name>"``).

If and Loop run natively: the branch the condition picks, or the body once per
iteration, runs node by node like the main graph (reading enclosing scopes through a
``ChainMap``), so values inside are captured too (``"<If node>/then_branch/<name>"``,
``"<Loop node>/<iteration>/<name>"``) and a failing node inside a body is named.  Their
rules are short (pick a branch; iterate while ``i < M`` and ``cond``, stack the scan
outputs).  Every other node with subgraph attributes (Scan, SequenceMap, ...) runs as
a one-node model: the values its bodies read from enclosing scopes become extra inputs
of that model, and the model-local functions and opsets come along; that delegates
Scan's axes and directions to a backend that implements the spec instead of
re-implementing them, at the price of not capturing values inside those bodies.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Collection, MutableMapping
from typing import Any, NamedTuple

import numpy as np
import onnx
import onnx.defs
import onnx.numpy_helper

from dsl import types
from dsl.errors import DslTypeError, EagerError
from dsl.limits import check_limit
from dsl.progress import Progress, progress
from dsl.tensor_protos import tensor_array
from dsl.tracebacks import user_traceback
from eager import values
from eager.call_site import caller_location
from eager.captured_values import capture_graph, outer_names_of_graph
from eager.kernels import LOGGER, CallRefused, KernelBuildError, KernelSpec, build_kernel, runtime_fallback
from eager.model_inputs import bind_inputs
from eager.model_program import Program, load_program, opset_dict
from eager.model_session import ModelSession, prepared, value_signature
from eager.proto_checks import check_program_protos
from eager.sessions import KERNELS, LAST

__all__ = ["run", "RunResult"]


class RunResult(NamedTuple):
    """Outputs of a run, and (``capture=True``) every value by name in execution order."""

    outputs: list[Any]
    values: dict[str, Any]


@user_traceback
def run(
    model_or_function: Any,
    inputs: Any = (),
    capture: bool | Collection[str] | Callable[[str], bool] = False,
    *,
    node_by_node: bool = False,
    stop_after: str | None = None,
) -> Any:
    """Run a model or function on real inputs, in one onnxruntime session where it can.

    ``inputs`` is a list (in input order) or a dict by input name of numpy arrays (lists
    of arrays for sequence inputs).  Returns the list of outputs; with ``capture=True`` a
    :class:`RunResult` whose ``values`` holds every input, initializer and node output
    by name (values inside If/Loop bodies and model-local functions under
    ``"<node>/..."``).  ``capture`` may instead name the values wanted (a list of names:
    only those are asked of onnxruntime, which keeps its fusions for the rest, and only
    the If/Loop/function nodes whose inside is named rerun; a name of the main graph that
    does not exist is an error, a name inside a branch not taken is left out) or be a
    filter ``name -> bool`` applied to every captured name.  A model runs as one cached
    session with its intermediate values as extra outputs (:mod:`eager.model_session`,
    If branches in a session of their own, :mod:`eager.captured_values`); ``node_by_node=True`` runs each node
    in its own one-op session instead, as does ``stop_after`` (a node name or a value
    name: run up to that node, and return its outputs), and so does any model
    onnxruntime refuses as a whole, so that the node at fault is named.

    >>> import numpy as np, onnx.helper as oh, eager
    >>> graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"]), oh.make_node("Neg", ["y"], ["z"])], "g",
    ...     [oh.make_tensor_value_info("x", 1, [2])], [oh.make_tensor_value_info("z", 1, [2])])
    >>> result = eager.run(oh.make_model(graph), [np.array([-1.0, 2.0], dtype=np.float32)], capture=True)
    >>> result.values["y"]
    array([0., 2.], dtype=float32)
    """
    inputs = dict(inputs) if isinstance(inputs, dict) else list(inputs)
    wanted = _capture_selection(capture)
    found = None
    if not node_by_node and stop_after is None:
        found = _run_in_one_session(model_or_function, inputs, wanted)
    if found is None:
        found = _run_node_by_node(model_or_function, inputs, wanted is not False, stop_after)
    if isinstance(found, RunResult) and not isinstance(capture, bool):
        return RunResult(found.outputs, _selected(found.values, capture))
    return found


def _capture_selection(capture: Any) -> bool | frozenset[str]:
    """What the session captures: everything (True, or a filter), nothing, or the names given."""
    if isinstance(capture, bool) or callable(capture):
        return capture is not False
    if isinstance(capture, (str, bytes)) or not all(isinstance(name, str) for name in capture):
        raise DslTypeError(f"capture={capture!r} is neither a bool, a collection of value names nor a filter",
                           caller_location(), hint='pass capture=True, capture=["name", ...] or capture=lambda name: ...')
    return frozenset(capture)


def _selected(captured: dict[str, Any], capture: Any) -> dict[str, Any]:
    """The captured values the caller asked for; a main-graph name that names no value is an error
    (a name inside a subgraph may belong to a branch this run did not take)."""
    if callable(capture):
        return {name: value for name, value in captured.items() if capture(name)}
    unknown = [name for name in capture if name not in captured and "/" not in name]
    if unknown:
        raise EagerError(f"capture names {', '.join(map(repr, sorted(unknown)))}, which the model does not compute",
                         caller_location(), hint="name inputs, initializers or node outputs of the main graph "
                         "(values inside a node: '<node>/...')")
    wanted = set(capture)
    return {name: value for name, value in captured.items() if name in wanted}


def _run_node_by_node(model_or_function: Any, inputs: list[Any] | dict[str, Any], capture: bool,
                      stop_after: str | None) -> Any:
    program = load_program(model_or_function)
    check_program_protos(program.graph, program.functions.values(), "the model")
    env: dict[str, Any] = {}
    graph = program.graph
    input_names = list(graph.input) if isinstance(graph, onnx.FunctionProto) else [v.name for v in graph.input]
    if isinstance(graph, onnx.GraphProto):
        for initializer in graph.initializer:
            env[initializer.name] = tensor_array(initializer, None, "the model")
    bind_inputs(input_names, inputs, program.input_types, env)
    attributes = _function_defaults(graph) if isinstance(graph, onnx.FunctionProto) else {}
    runner = _Runner(program, dict(env) if capture else None, stop_after)
    output_names = list(graph.output) if isinstance(graph, onnx.FunctionProto) else [v.name for v in graph.output]
    try:
        with progress(len(graph.node), "eager.run, node by node", unit="node") as runner.bar:
            runner.run_nodes(graph.node, env, attributes, "")
    except _Stopped:
        output_names = runner.stopped_at
    else:
        if stop_after is not None:
            raise EagerError(f"stop_after={stop_after!r} names no node and no node output of the main graph",
                             caller_location(), hint="pass a node's name or the name of a value a node computes")
    missing = [name for name in output_names if name not in env]
    if missing:
        raise EagerError(f"the graph's output(s) {', '.join(missing)} are never computed", caller_location())
    outputs = [env[name] for name in output_names]
    if capture:
        return RunResult(outputs, runner.captured if runner.captured is not None else {})
    return outputs


_DEFAULT: Any = object()  # an initializer listed as an input: bound unless the caller gives it


def _run_in_one_session(obj: Any, inputs: list[Any] | dict[str, Any], capture: bool | frozenset[str]) -> Any:
    """The run in one whole-model session, or None where it must run node by node."""
    given = inputs.values() if isinstance(inputs, dict) else inputs
    signature = tuple(value_signature(v) for v in given)
    if isinstance(inputs, dict):
        signature += tuple(inputs)
    session = prepared(obj, capture, signature)
    if session is None:
        return None
    env: dict[str, Any] = dict.fromkeys(session.defaults, _DEFAULT)
    bind_inputs(session.input_names, inputs, session.declared, env, session.quick)
    feeds = {name: value for name, value in env.items() if value is not _DEFAULT}
    if not session.loops_within_limit(feeds):
        return None
    if session.inlined is not None and session.inlined.last is not None:
        captured = dict(session.initializer_values())
        captured.update(feeds)
        inlined = session.inlined.run(feeds, captured)
        if inlined is not None:  # (the If branches taken last time, in one session: see InlinedBranches)
            plan, results, by_name = inlined
            capture_graph(plan, results, captured, captured, "", None, None)
            return RunResult([by_name[name] for name in session.output_names], captured)
    try:
        results = session.run(feeds)
    except Exception as error:  # onnxruntime's own classes: the node-by-node run names the node at fault
        LOGGER.info("eager.run runs node by node: onnxruntime failed on the whole model: %s", error)
        return None
    outputs = [results[index] for index in session.output_positions]
    if session.plan is None:
        return outputs
    captured = dict(session.initializer_values())
    captured.update(feeds)
    scope: MutableMapping[str, Any] = captured
    if session.plan.inner:  # (reruns read values by their own names, captured or not)
        scope = collections.ChainMap(dict(zip(session.run_names, results)), dict(captured))
    rerun = _Rerun(session, captured)
    assert session.branches is not None
    capture_graph(session.plan, results, scope, captured, "", session.branches, rerun)
    if session.inlined is not None:  # (an inlined If is in plan.inner: scope holds every value by name)
        session.inlined.last = session.inlined.taken(scope)
    return RunResult(outputs, captured)


class _Rerun:
    """Reruns a node node by node for the values inside it (its runner built when first needed)."""

    __slots__ = ("_captured", "_runner", "_session")

    def __init__(self, session: ModelSession, captured: dict[str, Any]) -> None:
        self._session = session
        self._captured = captured
        self._runner: _Runner | None = None

    def __call__(self, index: int, node: onnx.NodeProto, env: Any, attributes: dict[str, Any], prefix: str) -> None:
        if self._runner is None:
            proto = self._session.proto
            assert proto is not None
            functions = {(f.domain, f.name): f for f in proto.functions}
            program = Program(proto.graph, opset_dict(proto.opset_import), functions, {})
            self._runner = _Runner(program, self._captured, None)
        self._runner.run_node_at(index, node, env, attributes, prefix)


def _function_defaults(function: onnx.FunctionProto) -> dict[str, onnx.AttributeProto]:
    return {a.name: a for a in function.attribute_proto}


# ------------------------------------------------------------------------ execution


def _signature(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, list):
        if not value:  # (its element type is decided by _typed_empty_sequences)
            return ("seq", None, None)
        return ("seq", values.elem_type_of_array(np.asarray(value[0])) or 1, np.ndim(value[0]))
    elem = values.elem_type_of_array(value)
    if elem is None:
        raise EagerError(f"a value of dtype {value.dtype} has no ONNX element type")
    return (elem, value.ndim)


def _typed_empty_sequences(node: onnx.NodeProto, signature: list[Any]) -> tuple[Any, ...]:
    """An empty sequence holds the element type of another sequence the node takes, or of
    the tensor SequenceInsert puts in it (as eager op calls type it), FLOAT where nothing
    says: the one-node model must declare one, and onnxruntime checks it."""
    known = [sig[1] for sig in signature if sig is not None and sig[0] == "seq" and sig[1] is not None]
    if not known and node.op_type == "SequenceInsert" and len(signature) > 1 and signature[1] is not None:
        known = [signature[1][0]]
    elem = known[0] if known else types.FLOAT.enum
    return tuple(("seq", elem, None) if sig is not None and sig[0] == "seq" and sig[1] is None else sig
                 for sig in signature)


@functools.cache
def _since_version(domain: str, op_type: str, version: int) -> int | None:
    try:
        return int(onnx.defs.get_schema(op_type, version, domain).since_version)
    except onnx.defs.SchemaError:
        return None


def _graph_attributes(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    found = []
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            found.append(attribute.g)
        elif attribute.type == onnx.AttributeProto.GRAPHS:
            found.extend(attribute.graphs)
    return found


class _Stopped(Exception):
    """Raised past the node ``stop_after`` names: the run ends there."""


class _Runner:
    def __init__(self, program: Program, captured: dict[str, Any] | None, stop_after: str | None = None) -> None:
        self.program = program
        self.captured = captured
        self.stop_after = stop_after
        self.stopped_at: list[str] = []
        self.bar = Progress(None)  # advanced once per main-graph node

    def run_nodes(
        self,
        nodes: Any,
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> None:
        for index, node in enumerate(nodes):
            self.run_node_at(index, node, env, attributes, prefix)
            if not prefix:
                self.bar.update(1)
            if not prefix and self.stop_after is not None and (
                    node.name == self.stop_after or self.stop_after in node.output):
                self.stopped_at = [name for name in node.output if name]
                raise _Stopped()

    def run_node_at(
        self,
        index: int,
        node: onnx.NodeProto,
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> None:
        """Run node number ``index`` of its graph, its outputs into ``env`` (and captured)."""
        inputs: list[Any] = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name in env:
                inputs.append(env[name])
            else:
                raise EagerError(
                    f"node {index} ({node.op_type} {node.name!r}) reads {name!r}, which no earlier node, input "
                    "or initializer defines",
                    caller_location(),
                    hint="the graph is not in topological order, or the name is misspelled",
                )
        domain = "" if node.domain == "ai.onnx" else node.domain
        function = self.program.functions.get((node.domain, node.op_type))
        inner_prefix = f"{prefix}{node.name or f'{node.op_type}{index}'}/"
        if function is not None:
            outputs = self.call_function(function, node, inputs, attributes, inner_prefix)
        elif domain == "" and node.op_type == "If":
            outputs = self.run_if(node, inputs, env, attributes, inner_prefix)
        elif domain == "" and node.op_type == "Loop":
            outputs = self.run_loop(node, inputs, env, attributes, inner_prefix)
        else:
            outputs = self.run_node(node, domain, inputs, env, attributes, index)
        for name, value in zip(node.output, outputs):
            if name:
                env[name] = value
                if self.captured is not None:
                    self.captured[prefix + name] = value

    def run_graph(
        self,
        graph: onnx.GraphProto,
        bound: dict[str, Any],
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> list[Any]:
        """Run a subgraph whose nodes also read the enclosing scopes (``env``)."""
        local = {t.name: tensor_array(t, None, "the model") for t in graph.initializer}
        local.update(bound)
        scope = collections.ChainMap(local, env)
        if self.captured is not None:
            for name, value in bound.items():
                self.captured[prefix + name] = value
        self.run_nodes(graph.node, scope, attributes, prefix)
        missing = [o.name for o in graph.output if o.name not in scope]
        if missing:
            raise EagerError(f"subgraph {graph.name!r} never computes its output(s) {', '.join(missing)}",
                             caller_location())
        return [scope[o.name] for o in graph.output]

    def run_if(
        self,
        node: onnx.NodeProto,
        inputs: list[Any],
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> list[Any]:
        """If, natively: the branch the condition picks runs node by node (and is captured)."""
        branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        condition = inputs[0] if inputs else None
        if condition is None or np.asarray(condition).size != 1:
            raise EagerError(f"If {node.name!r} needs a one-element condition, got {_describe(node, inputs)}",
                             caller_location())
        chosen = "then_branch" if bool(np.asarray(condition).reshape(())) else "else_branch"
        if chosen not in branches:
            raise EagerError(f"If {node.name!r} has no {chosen} attribute", caller_location())
        return self.run_graph(branches[chosen], {}, env, attributes, f"{prefix}{chosen}/")

    def run_loop(
        self,
        node: onnx.NodeProto,
        inputs: list[Any],
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> list[Any]:
        """Loop, natively: one body run per iteration, ONNX's rules for M, cond and scan outputs."""
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None:
            raise EagerError(f"Loop {node.name!r} has no body attribute", caller_location())
        padded = [*inputs, None, None][: max(len(inputs), 2)]
        trip, condition, carried = padded[0], padded[1], list(padded[2:])
        limit, keep_going = _loop_bounds(node, trip, condition)
        names = [v.name for v in body.input]
        n_carried = len(carried)
        scans: list[list[Any]] = [[] for _ in body.output[1 + n_carried:]]
        iteration = 0
        while (limit is None or iteration < limit) and keep_going:
            bound = dict(zip(names, [np.array(iteration, np.int64), np.array(keep_going), *carried]))
            results = self.run_graph(body, bound, env, attributes, f"{prefix}{iteration}/")
            keep_going = bool(np.asarray(results[0]).reshape(()))
            carried = results[1: 1 + n_carried]
            for collected, value in zip(scans, results[1 + n_carried:]):
                collected.append(value)
            iteration += 1
            if limit is None and keep_going:  # (a trip count was checked before the first iteration)
                check_limit("loop_iterations", iteration + 1, f"Loop {node.name!r}: iteration {iteration + 1}",
                            caller_location())
        stacked = []
        for collected, output in zip(scans, body.output[1 + n_carried:]):
            if collected:
                stacked.append(np.stack(collected))
            else:
                elem = output.type.tensor_type.elem_type or types.FLOAT.enum
                stacked.append(np.zeros((0,), dtype=types.numpy_dtype(elem)))
        return [*carried, *stacked]

    def call_function(
        self,
        function: onnx.FunctionProto,
        node: onnx.NodeProto,
        inputs: list[Any],
        outer_attributes: dict[str, onnx.AttributeProto],
        prefix: str,
    ) -> list[Any]:
        bound = _function_defaults(function)
        for attribute in node.attribute:
            resolved = _resolve(attribute, outer_attributes)
            if resolved is not None:  # a reference to an attribute the caller left unset: the default stays
                bound[attribute.name] = resolved
        inner: dict[str, Any] = dict(zip(function.input, inputs))
        saved = self.program
        opsets = dict(saved.opsets)
        opsets.update(opset_dict(function.opset_import))
        self.program = saved._replace(opsets=opsets)
        try:
            self.run_nodes(function.node, inner, bound, prefix)
        finally:
            self.program = saved
        return [inner.get(name) for name in function.output]

    def run_node(
        self,
        node: onnx.NodeProto,
        domain: str,
        inputs: list[Any],
        env: MutableMapping[str, Any],
        attributes: dict[str, onnx.AttributeProto],
        index: int,
    ) -> list[Any]:
        version = self.program.opsets.get(domain, self.program.opsets.get("", onnx.defs.onnx_opset_version()))
        resolved = [r for r in (_resolve(a, attributes) for a in node.attribute) if r is not None]
        while inputs and inputs[-1] is None:
            inputs = inputs[:-1]
        signature = _typed_empty_sequences(node, [_signature(v) for v in inputs])
        subgraphs = _graph_attributes(node)
        outer: tuple[tuple[str, Any], ...] = ()
        arrays = list(inputs)
        functions: tuple[onnx.FunctionProto, ...] = ()
        if subgraphs:
            names: dict[str, None] = {}
            for sub in subgraphs:
                for name in outer_names_of_graph(sub):
                    names.setdefault(name, None)
            outer = tuple((name, _signature(env[name])) for name in names if name in env)
            arrays += [env[name] for name, _ in outer]
            functions = tuple(self.program.functions.values())
        key = (
            "node", domain, node.op_type, version,
            b"".join(a.SerializeToString() for a in resolved),
            signature, len(node.output), outer, tuple(id(f) for f in functions),
        )
        kernel = KERNELS.get(key)
        if kernel is None:
            spec = KernelSpec(
                domain, node.op_type, version, _since_version(domain, node.op_type, version), resolved,
                signature, len(node.output), outer, functions,
                self.program.opsets if subgraphs else None,
            )
            try:
                kernel = KERNELS.add(key, lambda: build_kernel(spec, arrays))
            except KernelBuildError as err:
                raise EagerError(
                    f"node {index} ({_describe(node, inputs)}) cannot run in either backend:\n"
                    f"onnxruntime: {err.ort_message}\nonnx.reference: {err.reference_message}",
                    caller_location(),
                ) from None
            except CallRefused as err:  # onnxruntime has the op and refuses the node as called
                raise EagerError(f"node {index} ({_describe(node, inputs)}) failed:\nonnxruntime: {err.ort_message}",
                                 caller_location()) from None
        LAST.kernel = kernel
        try:
            return list(kernel.run(arrays))
        except Exception as run_error:
            backend = "onnxruntime" if isinstance(run_error, CallRefused) else kernel.backend
            message = f"{backend}: {run_error}"
            if kernel.backend == "onnx.reference" and kernel.fallback_reason and backend != "onnxruntime":
                message = f"onnxruntime: {kernel.fallback_reason}\n{message}"
            fallback = runtime_fallback(kernel, run_error)  # (only where onnxruntime lacks what the node needs)
            if fallback is not None:
                try:
                    return list(fallback.run(arrays))
                except Exception as reference_error:
                    message += f"\nonnx.reference: {reference_error}"
            raise EagerError(f"node {index} ({_describe(node, inputs)}) failed:\n{message}", caller_location()) from None


def _loop_bounds(node: onnx.NodeProto, trip: Any, condition: Any) -> tuple[int | None, bool]:
    """A Loop's trip count (checked against the limit before the first iteration) and its first condition."""
    for name, given in (("trip count", trip), ("condition", condition)):
        if given is not None and (isinstance(given, list) or np.asarray(given).size != 1):
            raise EagerError(f"Loop {node.name!r} needs a one-element {name}", caller_location())
    limit = None if trip is None else int(np.asarray(trip).reshape(()))
    if limit is not None:
        check_limit("loop_iterations", limit, f"Loop {node.name!r} with trip count {limit:,}", caller_location())
    return limit, True if condition is None else bool(np.asarray(condition).reshape(()))


def _resolve(attribute: onnx.AttributeProto, bound: dict[str, onnx.AttributeProto]) -> onnx.AttributeProto | None:
    """The attribute with a function-attribute reference replaced by the caller's value."""
    if not attribute.ref_attr_name:
        return attribute
    value = bound.get(attribute.ref_attr_name)
    if value is None:
        return None  # an unset optional attribute: the op's default applies
    resolved = onnx.AttributeProto()
    resolved.CopyFrom(value)
    resolved.name = attribute.name
    return resolved


def _describe(node: onnx.NodeProto, inputs: list[Any]) -> str:
    parts = []
    for name, value in zip(node.input, inputs):
        if value is None:
            parts.append(f"{name or '_'}=None")
        elif isinstance(value, list):
            parts.append(f"{name}: sequence of {len(value)}")
        else:
            elem = values.elem_type_of_array(value)
            parts.append(f"{name}: {types.element_type_name(elem or 0)}{list(value.shape)}")
    label = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
    return f"{label} {node.name!r}({', '.join(parts)})" if node.name else f"{label}({', '.join(parts)})"
