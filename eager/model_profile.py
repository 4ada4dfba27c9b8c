"""``eager.profile_model``: onnxruntime's own profile of a whole model, per op type and source line.

The model runs in one onnxruntime session with ``SessionOptions.enable_profiling``: one
warm-up run, then ``runs`` profiled runs.  onnxruntime writes a JSON trace (one
``<node>_kernel_time`` event per node run, one ``model_run`` event per run); it is read
and deleted.  Each node's time goes to its op type and to the source line its
metadata links it to (``onnxquill.location``, :mod:`dsl.source_links`, written by
``to_model_proto(source_links=True)``); nodes without a link go to one row.  The time a
run spends in onnxruntime outside any kernel (scheduling, copies) is a row of its own,
so the line rows add up to onnxruntime's time for the runs.

Graph optimizations are off by default: a fused node has no source line of its own, and
the profile is of the model as written.  ``optimized=True`` profiles what onnxruntime
runs by default, fused nodes under their own names.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

import onnx

from dsl import ir
from dsl.errors import DslTypeError, ModelLoadError
from dsl.source_links import read_link
from eager.call_site import caller_location
from eager.model_inputs import bind_inputs
from eager.profile_report import ProfileReport, TimeTally, make_report

__all__ = ["profile_model"]

NO_LINK = "(nodes without a source link)"
OUTSIDE_KERNELS = "(onnxruntime outside kernels)"
_KERNEL_SUFFIX = "_kernel_time"


def profile_model(model: Any, inputs: Any, runs: int = 10, *, optimized: bool = False,
                  print_table: bool = True) -> ProfileReport:
    """Profile ``runs`` runs of a whole model in onnxruntime; rows per op type and per source line.

    ``model`` is a ModelProto, an ``.onnx`` path, its bytes, a ``@script`` function or an
    IR function/model (those two written with source links); ``inputs`` a list in input
    order or a dict by name (numpy arrays or torch tensors).  Returns a
    :class:`~eager.profile_report.ProfileReport` whose ``wall_s`` is the time of the
    ``runs`` calls of ``InferenceSession.run`` as measured around them, and prints its
    tables unless ``print_table=False``.

    >>> report = eager.profile_model(block, [x], runs=20)          # doctest: +SKIP
    >>> report.by_line[0].source                                   # doctest: +SKIP
    'scores = q @ k.T'
    """
    import onnxruntime

    if not isinstance(runs, int) or runs < 1:
        raise DslTypeError(f"runs={runs!r}: profile at least one run", caller_location(),
                           hint="pass runs=N with N >= 1")
    proto, nodes = _named_nodes(_model_proto(model))
    feeds = _feeds(proto.graph, inputs)
    folder = tempfile.mkdtemp(prefix="onnxquill-profile-")
    try:
        options = onnxruntime.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "profile")
        options.log_severity_level = 3
        if not optimized:
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)  # warm-up: first-run allocations are not the model's steady cost
        wall_s = 0.0
        for _ in range(runs):
            start = time.perf_counter()
            session.run(None, feeds)
            wall_s += time.perf_counter() - start
        trace_path = session.end_profiling()
        with open(trace_path, encoding="utf-8") as trace:
            events = json.load(trace)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_op, by_line, notes = _tallies(events, nodes, runs)
    report = make_report(by_op, by_line, wall_s, runs, notes)
    if print_table:
        print(report.table())
    return report


def _model_proto(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(model))
        except Exception as err:  # (any reading failure: the user's file, said with its path)
            raise ModelLoadError(f"cannot read {os.fspath(model)!r}: {err}", caller_location(),
                                 hint="check that the file is a complete ONNX model") from None
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_model_from_string(bytes(model))
        except Exception as err:
            raise ModelLoadError(f"the bytes are not a ModelProto: {err}", caller_location(),
                                 hint="pass the bytes of a complete ONNX model") from None
    if isinstance(model, (ir.Function, ir.Model)):
        from converter.to_onnx import model_to_proto

        return model_to_proto(model, source_links=True)
    if hasattr(model, "to_model_proto") and hasattr(model, "python_function"):  # a ScriptFunction
        proto: onnx.ModelProto = model.to_model_proto(source_links=True)
        return proto
    raise DslTypeError(f"eager.profile_model cannot run a {type(model).__name__}", caller_location(),
                       hint="pass a ModelProto, an .onnx path, a @script function or an ir.Function/ir.Model")


def _named_nodes(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, onnx.NodeProto]]:
    """The model with every main-graph node named uniquely (a copy where some were not),
    and the nodes by name: onnxruntime's trace names a node by its name."""
    graph = proto.graph
    names = [node.name for node in graph.node]
    if all(names) and len(set(names)) == len(names):
        return proto, {node.name: node for node in graph.node}
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    taken = {name for name in names if name}
    seen: set[str] = set()
    for index, node in enumerate(proto.graph.node):
        if not node.name or node.name in seen:
            base = f"{node.op_type}_{index}"
            name, suffix = base, 0
            while name in taken:
                suffix += 1
                name = f"{base}_{suffix}"
            node.name = name
            taken.add(name)
        seen.add(node.name)
    return proto, {node.name: node for node in proto.graph.node}


def _feeds(graph: onnx.GraphProto, inputs: Any) -> dict[str, Any]:
    """The inputs bound to the model's input names with the check :func:`eager.run` makes
    (:func:`eager.model_inputs.bind_inputs`: a missing, unknown or surplus input, an element
    type, rank or size other than declared is the same error, with the same message); an
    initializer listed as an input keeps its value unless given."""
    initializers = {t.name for t in graph.initializer}
    names = [v.name for v in graph.input]
    env: dict[str, Any] = dict.fromkeys((name for name in names if name in initializers), _DEFAULT)
    bind_inputs(names, inputs, {v.name: v.type for v in graph.input}, env)
    return {name: value for name, value in env.items() if value is not _DEFAULT}


_DEFAULT: Any = object()  # an initializer listed as an input, not given: onnxruntime uses its value


def _tallies(events: list[dict[str, Any]], nodes: dict[str, onnx.NodeProto],
             runs: int) -> tuple[dict[str, TimeTally], dict[str, TimeTally], list[str]]:
    """Node times of the profiled runs (the warm-up run left out) by op type and by line."""
    model_runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                        key=lambda e: e["ts"])
    counted = model_runs[-runs:]
    start = counted[0]["ts"] if counted else 0
    by_op: dict[str, TimeTally] = {}
    by_line: dict[str, TimeTally] = {}
    kernels_s = 0.0
    for event in _outermost_kernels(events, start):
        name = event["name"]
        seconds = event["dur"] * 1e-6
        kernels_s += seconds
        node = nodes.get(name[: -len(_KERNEL_SUFFIX)])
        op_type = event.get("args", {}).get("op_name") or (node.op_type if node is not None else "?")
        _add(by_op, op_type, seconds)
        link = read_link({p.key: p.value for p in node.metadata_props}) if node is not None else None
        if link is None:
            _add(by_line, NO_LINK, seconds)
        else:
            _add(by_line, f"{link.file}:{link.line}", seconds, link.file, link.line, link.source)
    outside = sum(e["dur"] for e in counted) * 1e-6 - kernels_s
    if outside > 0:
        _add(by_line, OUTSIDE_KERNELS, outside, calls=len(counted))
    notes = [] if len(counted) == runs else [f"onnxruntime's trace holds {len(counted)} of the {runs} runs"]
    if set(by_line) <= {NO_LINK, OUTSIDE_KERNELS}:
        notes.append("no node carries a source link: write the model with to_model_proto(source_links=True)")
    return by_op, by_line, notes


def _outermost_kernels(events: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """The kernel events of main-graph nodes: a node of an If/Loop/Scan body runs inside its
    parent's kernel time, so its event lies within the parent's and would count twice."""
    kernels = sorted((e for e in events if e.get("cat") == "Node" and e.get("ts", -1) >= start
                      and e.get("name", "").endswith(_KERNEL_SUFFIX)), key=lambda e: (e["ts"], -e["dur"]))
    outermost: list[dict[str, Any]] = []
    open_until = -1.0
    for event in kernels:
        if event["ts"] < open_until and event["ts"] + event["dur"] <= open_until:
            continue  # inside the kernel of the control-flow node still running
        outermost.append(event)
        open_until = max(open_until, event["ts"] + event["dur"])
    return outermost


def _add(tallies: dict[str, TimeTally], key: str, seconds: float, file: str = "", line: int = 0,
         source: str = "", calls: int = 1) -> None:
    tally = tallies.get(key)
    if tally is None:
        tally = tallies[key] = TimeTally(0, 0.0, file, line, source)
    tally.calls += calls
    tally.total_s += seconds
