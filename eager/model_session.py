"""One onnxruntime session for a whole model: how ``eager.run`` runs when it can.

Running node by node costs one session call per node and, on the first call, one
session per distinct op; a debugging user waits for that on every run.  Here the model
is handed to onnxruntime once, with every node output of the main graph added as a
graph output when values are captured, so one ``run`` call returns all of them.  The
model is not copied to add those outputs: a serialized ``GraphProto`` holding only the
extra outputs (and a lowered IR version) is appended to the model's bytes, which
protobuf merges into the graph.  A model read from a path is read without its external
data; onnxruntime reads the weights itself from the model's folder.

Sessions are cached per model and input signature in :data:`MODEL_SESSIONS` (the same
LRU class as the one-op kernels, :func:`eager.set_model_cache_size`,
:func:`eager.model_cache_info`, :func:`eager.clear_cache`).  A path is recognised by
its device and inode (and the path as given), size and modification time; bytes by a hash of their content; a proto,
IR object or ``@script`` function by identity (the entry holds it, so the identity
stays unique) and by a cheap fingerprint (the proto's size; the IR's node and weight
objects).  A model changed in place in a way the fingerprint cannot see (a weight's
bytes rewritten at the same size) needs :func:`eager.clear_cache`.

What cannot run as one session returns None from :func:`prepared`, with the reason
logged: a FunctionProto (its attribute references need a caller), ops where eager mode
prefers ``onnx.reference`` (:mod:`eager.backend_policy`), opsets newer than onnxruntime
loads, and whatever onnxruntime refuses to load; the refusal is remembered, so a later
call goes straight to the node-by-node runner, which names the node at fault.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import onnx.numpy_helper

from dsl import ir
from dsl.onnxruntime_limits import max_ir_version, max_opset
from eager.backend_policy import reference_reason
from eager.captured_values import BranchSessions, CapturePlan, InlinedBranches
from eager.kernels import LOGGER
from eager.model_inputs import quick_checks
from eager.sessions import MODEL_SESSIONS

__all__ = ["ModelSession", "prepared"]


class ModelSession:
    """A session over a whole model, and what a run needs to bind inputs and name values.

    ``plan`` says which values a captured run asks for and how they are captured
    (:mod:`eager.captured_values`), ``branches`` holds the sessions of the If branches
    taken, ``inlined`` the models with the main graph's If nodes replaced by the
    branches they took; ``proto`` is kept for captured runs only (initializer values, subgraphs to rerun).
    """

    __slots__ = (
        "_run",
        "base_dir",
        "branches",
        "declared",
        "defaults",
        "initial",
        "inlined",
        "input_names",
        "loop_counts",
        "output_names",
        "output_positions",
        "owner",
        "plan",
        "proto",
        "quick",
        "run_names",
        "weights",
    )

    def __init__(self, proto: onnx.ModelProto, serialized: bytes | str, base_dir: str | None,
                 capture: bool | frozenset[str], owner: Any, weights: dict[str, np.ndarray]) -> None:
        graph = proto.graph
        self.owner = owner  # (held so that an identity key stays unique while cached)
        self.base_dir = base_dir
        self.input_names = [v.name for v in graph.input]
        self.declared = {v.name: v.type for v in graph.input}
        self.quick = quick_checks(self.declared)
        initializer_names = {t.name for t in graph.initializer}
        self.defaults = [name for name in self.input_names if name in initializer_names]
        self.output_names = [v.name for v in graph.output]
        # Trip counts to check before each run: the fed input's name, or an initializer's value.
        counts = loop_trip_counts(proto) or []
        fixed = {t.name: t for t in graph.initializer if t.name in counts}
        self.loop_counts: list[str | int] = [
            _scalar_count(onnx.numpy_helper.to_array(fixed[name], base_dir or "")) if name in fixed else name
            for name in counts
        ]
        self.proto = proto if capture is not False else None
        self.initial: dict[str, Any] | None = None
        self.weights = weights  # (held: onnxruntime runs on these very buffers)
        self.plan: CapturePlan | None = None
        self.branches: BranchSessions | None = None
        self.run_names = self.output_names
        if capture is not False:
            functions = {(f.domain, f.name): f for f in proto.functions}
            self.plan = CapturePlan(graph, None if capture is True else capture, self.output_names, functions)
            self.run_names = self.plan.run_names
            self.branches = BranchSessions(proto, lambda branch: _session(branch, base_dir, {}))
        self.inlined: InlinedBranches | None = None
        if capture is True and any(node.op_type == "If" for node in graph.node):
            inlined = InlinedBranches(proto, lambda model: _session(model, base_dir, weights))
            self.inlined = inlined if inlined.ifs else None
        position = {name: index for index, name in enumerate(self.run_names)}
        self.output_positions = [position[name] for name in self.output_names]
        listed = set(self.output_names)
        extra = [name for name in self.run_names if name not in listed]
        model_bytes = serialized
        if extra or proto.ir_version > max_ir_version():
            if isinstance(model_bytes, str):
                with open(model_bytes, "rb") as handle:
                    model_bytes = handle.read()
            model_bytes = model_bytes + _appended_outputs(extra, proto.ir_version)
        self._run = _session(model_bytes, base_dir, weights).run

    def run(self, feeds: dict[str, Any]) -> list[Any]:
        """Every output of :attr:`run_names`, in that order."""
        return list(self._run(self.run_names, feeds))

    def loops_within_limit(self, feeds: dict[str, Any]) -> bool:
        """Whether every Loop's trip count (an input fed now, or an initializer) is within
        eager's bound on Loop iterations; when not, the node-by-node run refuses the Loop."""
        if not self.loop_counts:
            return True
        from dsl.limits import current_limits

        limit = current_limits().loop_iterations
        return all((count if isinstance(count, int) else _scalar_count(feeds.get(count))) <= limit
                   for count in self.loop_counts)

    def initializer_values(self) -> dict[str, Any]:
        """The main graph's initializers as read-only arrays (read once, kept while cached)."""
        if self.initial is None:
            assert self.proto is not None
            initial = {t.name: self.weights[t.name].view() if t.name in self.weights
                       else onnx.numpy_helper.to_array(t, self.base_dir or "")
                       for t in self.proto.graph.initializer}
            for array in initial.values():
                if isinstance(array, np.ndarray):
                    array.flags.writeable = False  # (shared by every captured run, and by onnxruntime)
            self.initial = initial
        return self.initial


def _session(model: bytes | str, base_dir: str | None, weights: dict[str, np.ndarray]) -> Any:
    """An onnxruntime session (default optimizations, as a user's own session has them)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # refusals are reported through the fallback, not on stderr
    if base_dir is not None and isinstance(model, bytes):
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", base_dir)
    if weights:  # (the arrays stay alive: the ModelSession and the IR hold them)
        options.add_external_initializers(list(weights), [onnxruntime.OrtValue.ortvalue_from_numpy(a)
                                                          for a in weights.values()])
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class _Refused:
    """The cached answer for a model that does not run as one session."""

    __slots__ = ("owner", "reason")

    def __init__(self, reason: str, owner: Any) -> None:
        self.reason = reason
        self.owner = owner


def _appended_outputs(names: list[str], ir_version: int) -> bytes:
    """Bytes that, appended to a serialized ModelProto, add graph outputs (protobuf merges
    a repeated message field) and lower the IR version (the last scalar wins)."""
    tail = onnx.ModelProto()
    for name in names:
        tail.graph.output.add(name=name)
    if ir_version > max_ir_version():
        tail.ir_version = max_ir_version()
    return tail.SerializeToString()


def prepared(obj: Any, capture: bool | frozenset[str], signature: tuple[Any, ...]) -> ModelSession | None:
    """The cached session running ``obj`` whole, or None where it must run node by node."""
    source = _source_key(obj)
    if source is None:
        return None
    key = (source, capture, signature)
    found = MODEL_SESSIONS.get(key)
    if found is None:
        found = MODEL_SESSIONS.add(key, lambda: _build(obj, capture))
    return found if isinstance(found, ModelSession) else None


def _build(obj: Any, capture: bool | frozenset[str]) -> ModelSession | _Refused:
    try:
        proto, serialized, base_dir, weights = _model(obj)
    except Exception as error:  # the node-by-node runner reports an unreadable model with its own words
        return _Refused(f"cannot read the model: {error}", obj)
    reason = _why_not_one_session(proto) or _external_data_outside(proto, base_dir, weights)
    if not reason:
        try:
            return ModelSession(proto, serialized, base_dir, capture, obj, weights)
        except Exception as error:  # any refusal of onnxruntime's: the node-by-node runner names the node
            reason = f"onnxruntime refuses the whole model: {str(error).splitlines()[0] if str(error) else error!r}"
    LOGGER.info("eager.run runs node by node: %s", reason)
    return _Refused(reason, obj)


def _source_key(obj: Any) -> tuple[Any, ...] | None:
    if isinstance(obj, (str, os.PathLike)):
        # One stat of the path as given (it follows links): the file's device and inode
        # name it as its real path would, without a system call per path component; a
        # relative path is keyed with the working directory it is read from.
        path = os.fspath(obj)
        try:
            stat = os.stat(path)
        except (OSError, ValueError):
            return None
        folder = "" if os.path.isabs(path) else os.getcwd()
        return ("path", path, folder, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if isinstance(obj, (bytes, bytearray)):
        return ("bytes", hashlib.blake2b(obj, digest_size=16).digest())
    if isinstance(obj, (onnx.ModelProto, onnx.GraphProto)):
        return ("proto", id(obj), obj.ByteSize())
    if isinstance(obj, (ir.Function, ir.Model)):
        return ("ir", id(obj), _ir_fingerprint(obj.graph))
    if hasattr(obj, "to_model_proto") and hasattr(obj, "python_function"):  # a ScriptFunction
        function = obj.function
        return ("script", id(obj), id(function), _ir_fingerprint(function.graph))
    return None  # FunctionProto, or something node by node reports


def _ir_fingerprint(graph: ir.Graph) -> int:
    # Nodes, values and weights replaced in the IR change the key (arrays are never written in place).
    parts = [id(node) for node in graph.nodes]
    parts += [id(v.initializer.array) if v.initializer is not None else 0 for v in graph.initializers]
    parts += [id(v) for v in (*graph.inputs, *graph.outputs)]
    return hash(tuple(parts))


def _model(obj: Any) -> tuple[onnx.ModelProto, bytes | str, str | None, dict[str, np.ndarray]]:
    """The ModelProto, its serialized form (or the path onnxruntime reads), the folder
    its external data lies in, and the weights handed to onnxruntime as arrays (an IR
    model's large initializers: never copied into the proto)."""
    if isinstance(obj, (str, os.PathLike)):
        path = os.path.realpath(os.fspath(obj))
        proto = onnx.load(path, load_external_data=False)
        return proto, path, os.path.dirname(path), {}
    if isinstance(obj, (bytes, bytearray)):
        return onnx.load_model_from_string(bytes(obj)), bytes(obj), None, {}
    if isinstance(obj, onnx.GraphProto):
        obj = onnx.helper.make_model(obj, opset_imports=[onnx.helper.make_opsetid("", onnx.defs.onnx_opset_version())])
    elif isinstance(obj, (ir.Function, ir.Model)) or not isinstance(obj, onnx.ModelProto):
        from converter.external_data import HandedOverWeights
        from converter.to_onnx import model_to_proto

        handed = HandedOverWeights()
        if isinstance(obj, (ir.Function, ir.Model)):
            obj = model_to_proto(obj, infer_output_types=False, external_data=handed)
        else:  # a ScriptFunction
            obj = obj.to_model_proto(external_data=handed)
        return obj, obj.SerializeToString(), None, handed.finish(obj)
    return obj, obj.SerializeToString(), None, {}


def _why_not_one_session(proto: onnx.ModelProto) -> str:
    """Why the model should run node by node (so results match it), or ""."""
    opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in proto.opset_import}
    if opsets.get("", 0) > max_opset():
        return f"the model's opset {opsets['']} is newer than onnxruntime's {max_opset()}"
    if loop_trip_counts(proto) is None:
        return "a Loop's trip count is not known before it runs, so it runs node by node, under the bound on Loop iterations"
    for node in _all_nodes(proto):
        n_inputs = len(node.input)
        while n_inputs and not node.input[n_inputs - 1]:
            n_inputs -= 1
        domain = "" if node.domain == "ai.onnx" else node.domain
        preferred = reference_reason(domain, node.op_type, list(node.attribute), n_inputs)
        if preferred:
            return f"{node.op_type} {node.name!r} runs in onnx.reference: {preferred}"
    return ""


def _external_data_outside(proto: onnx.ModelProto, base_dir: str | None, handed: dict[str, np.ndarray]) -> str:
    """Why onnxruntime must not read the model's external data itself, or "" (``handed``:
    the weights given to onnxruntime as arrays, which it does not read from a file).

    onnxruntime resolves a location against the working directory when the model came
    without a file, and may follow it out of the model's folder; node by node, external
    data is read only from the model's own folder (:mod:`dsl.tensor_protos`), and the
    reason for a refusal is named there.
    """
    from dsl.errors import UnsafePathError
    from dsl.safe_paths import contained

    tensors = [*proto.graph.initializer]
    for node in _all_nodes(proto):
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                tensors += attribute.g.initializer
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                tensors += [t for g in attribute.graphs for t in g.initializer]
            elif attribute.type == onnx.AttributeProto.TENSOR:
                tensors.append(attribute.t)
    for tensor in tensors:
        if tensor.data_location != onnx.TensorProto.EXTERNAL or tensor.name in handed:
            continue
        if base_dir is None:
            return f"tensor {tensor.name!r} keeps its data in a file, and the model came without one"
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        try:
            contained(base_dir, os.path.join(base_dir, location), f"the external data file {location!r}")
        except UnsafePathError:
            return f"tensor {tensor.name!r} keeps its data outside the model's folder"
    return ""


def loop_trip_counts(proto: onnx.ModelProto) -> list[str] | None:
    """The names of the main-graph inputs and initializers that give the model's Loops
    their trip counts, checked against eager's bound before a whole-model run; None when
    a Loop's count is known only while running (computed, absent, or the Loop is inside
    a subgraph or function), which only the node-by-node runner bounds.

    onnxruntime would run any trip count, and a run cannot be interrupted.
    """
    known = {v.name for v in proto.graph.input} | {t.name for t in proto.graph.initializer}
    counts: list[str] = []
    for node in proto.graph.node:
        if _is_loop(node):
            count = node.input[0] if len(node.input) else ""
            if count not in known:
                return None
            counts.append(count)
    inner = sum(1 for node in _all_nodes(proto) if _is_loop(node)) - len(counts)
    return None if inner else counts


def _scalar_count(value: Any) -> int:
    """A trip count's value; one that is not a single integer counts as unbounded (the
    node-by-node runner then says what is wrong with it)."""
    array = np.asarray(value) if value is not None else np.zeros(0)
    if array.size != 1 or array.dtype.kind not in "iu":
        return 2**63
    return int(array.reshape(()))


def _is_loop(node: Any) -> bool:
    return bool(node.op_type == "Loop" and node.domain in ("", "ai.onnx"))


def _all_nodes(proto: onnx.ModelProto) -> Any:
    pending: list[Any] = [proto.graph.node, *(f.node for f in proto.functions)]
    while pending:
        for node in pending.pop():
            yield node
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    pending.append(attribute.g.node)
                elif attribute.type == onnx.AttributeProto.GRAPHS:
                    pending.extend(g.node for g in attribute.graphs)


def value_signature(value: Any) -> Any:
    """A cache-key entry for one input: dtype and rank (sequences: their length's kind)."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.ndim)
    if isinstance(value, list):
        return ("seq", len(value) and value_signature(value[0]))
    return type(value).__name__
