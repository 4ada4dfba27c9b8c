"""Captured runs in one session: every value of a graph from one ``run`` call, If branches too.

A captured ``eager.run`` asks onnxruntime for every node output of the main graph (or
the ones the caller names) as extra outputs.  Turning those results into the captured
mapping is planned once per session (:class:`CapturePlan`): the names in execution
order, and where a node with values inside it (If, Loop, a model-local function call)
sits among them, so a warm run is one ``dict.update`` per stretch of plain nodes rather
than Python work per value.  onnxruntime's ``run`` already returns its outputs as numpy
arrays without a Python object per intermediate ``OrtValue``; I/O binding and
``run_with_ort_values`` measured slower for hundreds of small outputs, so results are
taken as they come.  Constant nodes' values are not asked for: they are read from the
nodes once per plan (read-only, shared by every run, as the initializers are), since
fetching a copy of each weight a model keeps in Constant nodes cost a captured run more
than the model's own work.

The values inside an If branch come from one more session: the branch taken, made a
model of its own whose inputs are the outer values it reads (typed from the arrays at
hand) and whose outputs are all its node outputs (:class:`BranchSessions`), captured
the same way, recursively.  A model that keeps its weights in Constant nodes inside
If branches therefore runs its captured first call in two sessions instead of one
one-op session per node.  Loop bodies and function calls (and a branch onnxruntime
refuses as a model of its own) rerun node by node, through the runner handed in.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Protocol

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

from eager import values
from eager.kernels import LOGGER

__all__ = ["BranchSessions", "CapturePlan", "InlinedBranches", "NodeRerun", "capture_graph", "constant_value"]


class NodeRerun(Protocol):
    """What reruns one node node by node (the model runner's ``run_node_at``)."""

    def __call__(self, index: int, node: onnx.NodeProto, env: Any, attributes: dict[str, Any],
                 prefix: str) -> None: ...


class CapturePlan:
    """Which outputs to ask a session for, and how its results become captured values.

    ``run_names``: the captured node outputs in execution order (the first
    ``n_captured``), then the values reruns read and the graph outputs not yet listed;
    ``inner``: ``(position in run_names, node index, node)`` for each node whose inside
    is captured too, rerun once the values before it are in; ``steps``: those, and the
    outputs of Constant nodes ``(position, name, array)``, in node order.  A Constant's
    value does not depend on the inputs: it is read from the node once, kept read-only
    (as the initializers are) and not asked of onnxruntime, whose fetched copy of every
    weight held in a Constant costs a captured run more than the model's own work.
    """

    __slots__ = ("_constants", "_gather", "_order", "inner", "n_captured", "run_names", "steps")

    def __init__(self, graph: onnx.GraphProto, selection: frozenset[str] | None, output_names: list[str],
                 functions: Mapping[tuple[str, str], Any]) -> None:
        names: list[str] = []
        seen: set[str] = set()
        inner: list[tuple[int, int, onnx.NodeProto]] = []
        steps: list[tuple[int, Any, Any]] = []
        read_by_reruns: list[str] = []
        for index, node in enumerate(graph.node):
            if _has_inside(node, functions) and (selection is None or _selects_inside(selection, index, node)):
                inner.append((len(names), index, node))
                steps.append((len(names), index, node))
                read_by_reruns += [name for name in node.input if name]
                read_by_reruns += outer_names(node)
            constant = constant_value(node)
            for name in node.output:
                if name and name not in seen and (selection is None or name in selection):
                    if constant is not None:
                        steps.append((len(names), name, constant))
                    else:
                        names.append(name)
                    seen.add(name)
        self.n_captured = len(names)
        fetched = set(names)
        produced = {name for node in graph.node for name in node.output if name}
        for name in [*read_by_reruns, *output_names]:
            if name not in fetched and (name in produced or name in output_names):
                names.append(name)
                fetched.add(name)
        self.run_names = names
        self.inner = inner
        self.steps = steps
        self._constants = [step[2] for step in steps if isinstance(step[2], np.ndarray)]
        self._order, self._gather = self._flat_order()

    def _flat_order(self) -> tuple[list[str], Callable[[Sequence[Any]], Any] | None]:
        """For a plan without inner nodes: every captured name in execution order, and a
        C-level gather that puts the session's results and the Constants' values in
        that order (one ``dict.update`` per run instead of one per Constant)."""
        if self.inner:
            return [], None
        constants = [step for step in self.steps if isinstance(step[2], np.ndarray)]
        order: list[str] = []
        slots: list[int] = []
        start = 0
        for number, (position, name, _) in enumerate(constants):
            order += self.run_names[start:position]
            slots += range(start, position)
            order.append(name)
            slots.append(self.n_captured + number)
            start = position
        order += self.run_names[start:self.n_captured]
        slots += range(start, self.n_captured)
        if len(slots) < 2:  # (itemgetter of one index gives the item, not a tuple)
            return order, lambda pool: [pool[slot] for slot in slots]
        return order, operator.itemgetter(*slots)

    def gathered(self, results: list[Any]) -> tuple[list[str], Any] | None:
        """(names, values) in execution order for a plan without inner nodes, else None."""
        if self._gather is None:
            return None
        return self._order, self._gather(results[:self.n_captured] + self._constants)


_CONSTANT_KINDS = frozenset("biuf")


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The read-only value of a Constant node whose ``value`` tensor numpy holds exactly as
    onnxruntime returns it (numbers and booleans, data in the node); None otherwise."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.attribute) != 1:
        return None
    attribute = node.attribute[0]
    if attribute.name != "value" or attribute.type != onnx.AttributeProto.TENSOR:
        return None
    tensor = attribute.t
    if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.data_type not in _PLAIN_TYPES:
        return None
    try:
        array = onnx.numpy_helper.to_array(tensor)
    except Exception:  # (a malformed tensor: onnxruntime's run reports it)
        return None
    if array.dtype.kind not in _CONSTANT_KINDS:
        return None
    array.flags.writeable = False
    return array


_PLAIN_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BOOL,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
})


def capture_graph(plan: CapturePlan, results: list[Any], scope: MutableMapping[str, Any], captured: dict[str, Any],
                  prefix: str, branches: BranchSessions | None, rerun: NodeRerun | None) -> None:
    """Put a session's results into ``captured`` (under ``prefix``) in execution order,
    the values inside If/Loop/function-call nodes just before each such node's outputs,
    the Constant nodes' values in their place.
    ``scope``: every value the graph's reruns may read, by its own name (``branches``
    and ``rerun`` may be None for a plan without :attr:`CapturePlan.inner`)."""
    flat = plan.gathered(results) if not prefix else None
    if flat is not None:
        names, values = flat
        captured.update(zip(names, values))
        return
    names = plan.run_names
    start = 0
    for position, index, step in plan.steps:
        _put(names[start:position], results[start:position], captured, prefix)
        start = position
        if isinstance(step, np.ndarray):
            captured[prefix + index] = step
            continue
        assert branches is not None and rerun is not None  # (a plan with inner nodes gets both)
        node = step
        inside = f"{prefix}{node.name or f'{node.op_type}{index}'}/"
        if not (node.op_type == "If" and node.domain in ("", "ai.onnx")
                and branches.capture_if(node, scope, captured, inside, rerun)):
            rerun(index, node, collections.ChainMap({}, scope), {}, prefix)
    end = plan.n_captured
    _put(names[start:end], results[start:end], captured, prefix)


def _put(names: list[str], results: list[Any], captured: dict[str, Any], prefix: str) -> None:
    if prefix:
        captured.update(zip([prefix + name for name in names], results))
    else:
        captured.update(zip(names, results))


class BranchSessions:
    """One session per If branch taken and outer-value signature, built when first taken."""

    __slots__ = ("_found", "_graphs", "_reads", "_session", "model")

    def __init__(self, model: onnx.ModelProto, session: Callable[[bytes], Any]) -> None:
        self.model = model  # (its opsets, functions and IR version are the branches')
        self._session = session
        self._found: dict[tuple[Any, ...], _Branch | None] = {}
        self._graphs: dict[int, onnx.GraphProto] = {}  # (keeps each keyed branch alive, so its id stays unique)
        self._reads: dict[int, list[str]] = {}

    def capture_if(self, node: onnx.NodeProto, scope: MutableMapping[str, Any], captured: dict[str, Any], inside: str,
                   rerun: NodeRerun) -> bool:
        """Capture the values inside the branch ``node`` takes; False where that branch
        cannot run as a session of its own (the caller reruns the node node by node)."""
        condition = scope.get(node.input[0]) if len(node.input) else None
        if not isinstance(condition, np.ndarray) or condition.size != 1:
            return False
        chosen = "then_branch" if bool(condition.reshape(())) else "else_branch"
        graph = next((a.g for a in node.attribute if a.name == chosen and a.type == onnx.AttributeProto.GRAPH), None)
        if graph is None:
            return False
        reads = self._reads.get(id(graph))
        if reads is None:
            self._graphs[id(graph)] = graph
            reads = self._reads[id(graph)] = outer_names_of_graph(graph)
        if any(name not in scope for name in reads):
            return False
        feeds = {name: scope[name] for name in reads}
        if not all(isinstance(v, np.ndarray) and values.elem_type_of_array(v) for v in feeds.values()):
            return False
        key = (id(graph), *((v.dtype.str, v.ndim) for v in feeds.values()))
        if key not in self._found:
            self._found[key] = self._build(graph, feeds)
        branch = self._found[key]
        if branch is None:
            return False
        try:
            results = branch.run(branch.plan.run_names, feeds)
        except Exception as error:  # onnxruntime's own classes: the node-by-node rerun names the node at fault
            LOGGER.info("eager.run captures %s node by node: %s", inside, error)
            return False
        local = dict(zip(branch.plan.run_names, results))
        capture_graph(branch.plan, results, collections.ChainMap(local, scope), captured, f"{inside}{chosen}/",
                      self, rerun)
        return True

    def _build(self, graph: onnx.GraphProto, feeds: dict[str, np.ndarray]) -> _Branch | None:
        functions = {(f.domain, f.name): f for f in self.model.functions}
        plan = CapturePlan(graph, None, [o.name for o in graph.output], functions)
        try:
            return _Branch(self._session(_branch_model(self.model, graph, feeds, plan.run_names)), plan)
        except Exception as error:  # any refusal of onnxruntime's: the branch reruns node by node
            LOGGER.info("eager.run captures If branch %r node by node: %s", graph.name, error)
            return None


class _Branch:
    __slots__ = ("plan", "run")

    def __init__(self, session: Any, plan: CapturePlan) -> None:
        self.run = session.run
        self.plan = plan


def _branch_model(model: onnx.ModelProto, graph: onnx.GraphProto, feeds: dict[str, np.ndarray],
                  run_names: list[str]) -> bytes:
    """A branch as a model: the outer values it reads become inputs (element type and rank
    of the arrays at hand), every node output an output; the model's opsets and functions."""
    from dsl.onnxruntime_limits import max_ir_version

    branch = onnx.GraphProto(name=graph.name or "branch")
    branch.node.extend(graph.node)
    branch.initializer.extend(graph.initializer)
    branch.sparse_initializer.extend(graph.sparse_initializer)
    branch.value_info.extend(graph.value_info)
    for name, array in feeds.items():
        elem = values.elem_type_of_array(array) or 0  # (checked non-zero by the caller)
        branch.input.append(onnx.helper.make_tensor_value_info(name, elem, [None] * array.ndim))
    for name in run_names:
        branch.output.add(name=name)
    proto = onnx.ModelProto(ir_version=min(model.ir_version, max_ir_version()), graph=branch)
    proto.opset_import.extend(model.opset_import)
    proto.functions.extend(model.functions)
    return proto.SerializeToString()


def _has_inside(node: onnx.NodeProto, functions: Mapping[tuple[str, str], Any]) -> bool:
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop"):
        return True
    return (node.domain, node.op_type) in functions


def _selects_inside(selection: frozenset[str], index: int, node: onnx.NodeProto) -> bool:
    label = f"{node.name or f'{node.op_type}{index}'}/"
    return any(name.startswith(label) for name in selection)


def outer_names(node: onnx.NodeProto) -> list[str]:
    """Names the subgraphs of ``node`` read from enclosing scopes."""
    found: dict[str, None] = {}
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            found.update(dict.fromkeys(outer_names_of_graph(attribute.g)))
        elif attribute.type == onnx.AttributeProto.GRAPHS:
            for graph in attribute.graphs:
                found.update(dict.fromkeys(outer_names_of_graph(graph)))
    return list(found)


def outer_names_of_graph(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads that it does not define (read from enclosing scopes), in order."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: dict[str, None] = {}
    for node in graph.node:
        for name in node.input:
            if name and name not in defined:
                used.setdefault(name, None)
        for name in outer_names(node):
            if name not in defined:
                used.setdefault(name, None)
        defined.update(node.output)
    for output in graph.output:
        if output.name not in defined:
            used.setdefault(output.name, None)
    return list(used)


class InlinedBranches:
    """Captured runs of a model whose main graph holds If nodes in one session, not two.

    A run that captures the values inside an If's branch runs the model, then the branch
    (:class:`BranchSessions`). Where the If nodes of the main graph hold plain branches
    (no subgraph, no function call inside), a model with each branch taken last time
    written in place of its If (names prefixed as captured, ``<If>/<branch>/<name>``;
    the If's outputs copied by Identity nodes) computes the same values in one session.
    It is built on the second captured call, after the first has shown which branches
    are taken, and used while the conditions it computes say the same branches; a run
    where they do not is done again the long way.
    """

    __slots__ = ("_found", "_session", "conditions", "ifs", "last", "model")

    def __init__(self, model: onnx.ModelProto, session: Callable[[bytes], Any]) -> None:
        self.model = model
        self._session = session
        functions = {(f.domain, f.name) for f in model.functions}
        self.ifs = [(index, node, f"{node.name or f'{node.op_type}{index}'}/") for index, node in
                    enumerate(model.graph.node) if _inlinable_if(node, functions)]
        self.conditions = [node.input[0] for _, node, _ in self.ifs]
        self.last: tuple[bool, ...] | None = None
        self._found: dict[tuple[bool, ...], _Branch | None] = {}

    def taken(self, scope: Mapping[str, Any], known: Mapping[str, Any] | None = None) -> tuple[bool, ...] | None:
        """The branch each inlinable If takes, by the conditions in ``scope`` (or ``known``)."""
        chosen = []
        for name in self.conditions:
            condition = scope.get(name)
            if condition is None and known is not None:
                condition = known.get(name)
            if not isinstance(condition, np.ndarray) or condition.size != 1:
                return None
            chosen.append(bool(condition.reshape(())))
        return tuple(chosen)

    def run(self, feeds: dict[str, Any], known: Mapping[str, Any]
            ) -> tuple[CapturePlan, list[Any], dict[str, Any]] | None:
        """(plan, results, values by name) of the inlined model for the branches taken
        last time; None where there is none yet or this run takes other branches
        (``known``: the inputs and initializers, which a condition may be)."""
        if self.last is None:
            return None
        if self.last not in self._found:
            self._found[self.last] = self._build(self.last)
        inlined = self._found[self.last]
        if inlined is None:
            return None
        try:
            results = inlined.run(inlined.plan.run_names, feeds)
        except Exception as error:  # a branch not taken now may fail: the run is done the long way
            LOGGER.info("eager.run reruns with the If branches of this call: %s", error)
            return None
        local = dict(zip(inlined.plan.run_names, results))
        if self.taken(local, known) != self.last:
            return None
        return inlined.plan, results, local

    def _build(self, chosen: tuple[bool, ...]) -> _Branch | None:
        from dsl.onnxruntime_limits import max_ir_version

        proto = onnx.ModelProto(ir_version=min(self.model.ir_version, max_ir_version()))
        proto.opset_import.extend(self.model.opset_import)
        proto.functions.extend(self.model.functions)
        graph = proto.graph
        source = self.model.graph
        graph.name = source.name
        graph.input.extend(source.input)
        graph.initializer.extend(source.initializer)
        graph.sparse_initializer.extend(source.sparse_initializer)
        graph.output.extend(source.output)
        replaced = {index: (node, prefix, then) for (index, node, prefix), then in zip(self.ifs, chosen)}
        for index, node in enumerate(source.node):
            if index in replaced:
                _inline_branch(graph, *replaced[index])
            else:
                graph.node.append(node)
        functions = {(f.domain, f.name): f for f in self.model.functions}
        produced = {name for node in graph.node for name in node.output}
        conditions = [name for name in self.conditions if name in produced]  # (read by taken(): fetched)
        plan = CapturePlan(graph, None, [*(o.name for o in graph.output), *conditions], functions)
        defined = [name for node in graph.node for name in node.output if name]
        defined += [t.name for t in graph.initializer] + [v.name for v in graph.input]
        if plan.inner or len(set(defined)) != len(defined):  # (a Loop to rerun, or a prefixed name taken)
            return None
        listed = {o.name for o in graph.output}
        for name in plan.run_names:
            if name not in listed:
                graph.output.add(name=name)
                listed.add(name)
        try:
            return _Branch(self._session(proto.SerializeToString()), plan)
        except Exception as error:  # any refusal of onnxruntime's: the run goes the long way
            LOGGER.info("eager.run keeps If branches in sessions of their own: %s", error)
            return None


def _inline_branch(graph: onnx.GraphProto, node: onnx.NodeProto, prefix: str, then: bool) -> None:
    """The branch ``node`` takes, in place of ``node``: its names prefixed as captured."""
    chosen = "then_branch" if then else "else_branch"
    branch = next(a.g for a in node.attribute if a.name == chosen)
    local = prefix + chosen + "/"
    renamed = {t.name: local + t.name for t in branch.initializer}
    renamed.update((name, local + name) for inner in branch.node for name in inner.output if name)
    for tensor in branch.initializer:
        copy = graph.initializer.add()
        copy.CopyFrom(tensor)
        copy.name = renamed[tensor.name]
    for inner in branch.node:
        copy = graph.node.add()
        copy.CopyFrom(inner)
        copy.input[:] = [renamed.get(name, name) for name in inner.input]
        copy.output[:] = [renamed.get(name, name) for name in inner.output]
    for output, result in zip(node.output, branch.output):
        if output:
            graph.node.add(op_type="Identity", input=[renamed.get(result.name, result.name)], output=[output])


def _inlinable_if(node: onnx.NodeProto, functions: set[tuple[str, str]]) -> bool:
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.input:
        return False
    branches = [a.g for a in node.attribute if a.name in ("then_branch", "else_branch")
                and a.type == onnx.AttributeProto.GRAPH]
    if len(branches) != 2:
        return False
    for branch in branches:
        if branch.sparse_initializer or len(branch.output) != len(node.output):
            return False
        for inner in branch.node:
            if (inner.domain, inner.op_type) in functions or any(
                    a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in inner.attribute):
                return False
    return True
