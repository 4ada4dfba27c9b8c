"""Every model and function the test suite exports goes through ``onnx.checker``.

What compiles must be a valid model: the functions that hand a proto to the user
(``to_model_proto()``, ``to_function_proto()``, ``converter.merge``/``split``/``join``/
``cut``, the markup front end's exports...) and the ONNX back end's two entry points
(:func:`converter.to_onnx.model_to_proto`, :func:`converter.to_onnx.function_to_proto`,
when a test or another module calls them) are wrapped for the whole test run so that each
proto they return is checked: a model by ``onnx.checker.check_model(full_check=True)`` (shape inference in
strict mode, model-local functions included), a function by
``onnx.checker.check_function`` with its own opset imports.  A refusal is recorded
against the running test, which ``tests/conftest.py`` fails at teardown, so a test that
catches every exception still cannot hide an invalid export.

The notebooks run in a kernel of their own: :func:`kernel_argv` starts that kernel with
the same wrapping, writing what the checker refuses to a file the notebook test reads.

A model exported with ``external_data=`` keeps some weights outside the proto (a data
file, arrays handed to onnxruntime or streamed at writing): it is checked with zeros of
their shapes in their place.

A model read by ``converter.from_onnx`` is checked too: an export refused for the reason
a model the test read was refused, or while the latest model read was refused, inherited
the mistake (the converter reads and writes broken
models faithfully, and says so), and is logged but not failed.  A test that exports an
invalid model on purpose otherwise says so with ``@pytest.mark.invalid_export("why")``.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import onnx.shape_inference
from google.protobuf.message import EncodeError

from dsl.errors import DslError
from dsl.tracebacks import keep_frames

__all__ = ["FINDINGS", "INPUT_REFUSALS", "LATEST_INPUT", "LOG_VARIABLE", "RUNNING", "check_exported", "install", "installed", "kernel_argv"]

# What the checker refused since the running test started: (entry point, proto name, message).
FINDINGS: list[tuple[str, str, str]] = []

# What the checker refused of the models the running test read (converter.from_onnx): an
# export refused for the same reason inherited the mistake from its source, which the
# converter reproduces faithfully (a model read from a broken file and written back).
INPUT_REFUSALS: set[str] = set()
# Whether the latest model read was refused: what a round trip exports next comes from it.
LATEST_INPUT = {"refused": False}

# The test running now (set by tests/conftest.py), named in the log.
RUNNING = {"test": ""}

# Set in a notebook kernel's environment: the file each export and the checker's verdict on it
# are appended to (JSON lines).
LOG_VARIABLE = "ONNXQUILL_CHECKED_EXPORTS_LOG"

_WRAPPED = "_checked_export_of"


def check_exported(proto: onnx.ModelProto | onnx.FunctionProto) -> str | None:
    """The checker's refusal of ``proto`` (a model under full_check, or a function), or None."""
    try:
        if isinstance(proto, onnx.FunctionProto):
            context = onnx.checker.C.CheckerContext()
            context.ir_version = onnx.IR_VERSION  # (a function has no IR version: the newest reads it)
            context.opset_imports = {entry.domain: entry.version for entry in proto.opset_import}
            onnx.checker.check_function(proto, context)
        else:
            onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as refusal:
        return str(refusal)
    except ValueError as refusal:  # (a message the checker cannot decode: text that is not UTF-8)
        return f"{type(refusal).__name__}: {refusal}"
    return None


def _weights_in_place(model: onnx.ModelProto, large_too: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` for the checker when an ``external_data=`` sink kept some
    weights outside the proto (a data file, arrays handed to onnxruntime, arrays streamed
    at writing): the checker reads a file only beside a model path, and the data is not
    what it checks.  With ``large_too`` (a model over protobuf's 2 GB, which the checker
    cannot take whole) every initializer over 1 MB counts as kept elsewhere.  A main-graph
    initializer kept elsewhere becomes a graph input of its
    type and shape (no copy of gigabytes of zeros); a tensor kept elsewhere inside a
    subgraph (small: the sinks take large ones from the main graph) holds zeros."""
    if not large_too and not any(_elsewhere(t) for t in _tensors(model.graph)):
        return model
    kept = [t for t in model.graph.initializer if _elsewhere(t) or (large_too and t.ByteSize() > 1 << 20)]
    copy = onnx.ModelProto()
    _copy_fields(model, copy, "graph")
    _copy_fields(model.graph, copy.graph, "initializer")  # (the large tensors are never copied)
    names = {t.name for t in kept}
    copy.graph.initializer.extend(t for t in model.graph.initializer if t.name not in names)
    for tensor in kept:
        copy.graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    for tensor in _tensors(copy.graph):
        if _elsewhere(tensor):
            zeros = np.zeros(tuple(tensor.dims), onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
            filled = onnx.numpy_helper.from_array(zeros, tensor.name)
            tensor.ClearField("external_data")
            tensor.data_location = onnx.TensorProto.DEFAULT
            tensor.raw_data = filled.raw_data
    return copy


def _copy_fields(source: Any, target: Any, skipped: str) -> None:
    for field, value in source.ListFields():
        if field.name == skipped:
            continue
        if hasattr(value, "extend"):  # (a repeated field)
            getattr(target, field.name).extend(value)
        elif hasattr(value, "CopyFrom"):
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def _elsewhere(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL or not _has_data(tensor)


def _has_data(tensor: onnx.TensorProto) -> bool:
    fields = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
    return tensor.HasField("raw_data") or any(len(getattr(tensor, field)) for field in fields)


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _tensors(subgraph)


def _larger_than(model: onnx.ModelProto, size: int) -> bool:
    try:
        return model.ByteSize() > size
    except EncodeError:  # (protobuf cannot even size a message over 2 GB)
        return True


def _record(entry: str, proto: Any, weights_elsewhere: bool = False) -> None:
    too_large = isinstance(proto, onnx.ModelProto) and _larger_than(proto, onnx.checker.MAXIMUM_PROTOBUF)
    refusal = check_exported(_weights_in_place(proto, too_large) if weights_elsewhere or too_large else proto)
    name = proto.graph.name if isinstance(proto, onnx.ModelProto) else proto.name
    inherited = refusal is not None and (refusal in INPUT_REFUSALS or LATEST_INPUT["refused"])
    if refusal is not None and not inherited:
        FINDINGS.append((entry, name, refusal))
    log = os.environ.get(LOG_VARIABLE)
    if log:  # (every export, refused or not: a reader can tell that the checking ran)
        with open(log, "a", encoding="utf-8") as stream:
            record = {"test": RUNNING["test"], "entry": entry, "name": name, "refusal": refusal,
                      "inherited": inherited}
            stream.write(json.dumps(record) + "\n")


# The facades that hand a proto to the user, as (module, owner attribute or "", name): what
# they return is checked, and the back-end calls they make on the way are not (the markup
# front end checks its intermediate model itself and raises a located error).
FACADES = (
    ("dsl.script_function", "ScriptFunction", "to_model_proto"),
    ("dsl.script_function", "ScriptFunction", "to_function_proto"),
    ("dsl.script_function", "", "model_to_proto"),
    ("dsl.script_function", "", "export_onnx_lib"),
    ("dsl.markup.export", "", "to_model_proto"),
    ("dsl.markup.export", "", "export"),
    ("converter", "", "merge"),
    ("converter", "", "split"),
    ("converter", "", "join"),
    ("converter", "", "cut"),
    ("converter", "", "with_weights"),
)
# The back end's entry points: checked when called from anything but a facade above.
BACK_END = (("converter.to_onnx", "", "model_to_proto"), ("converter.to_onnx", "", "function_to_proto"))

_INSIDE_FACADE = {"depth": 0}
_LARGEST_INPUT_CHECKED = 64 << 20


def _protos(result: Any) -> list[Any]:
    if isinstance(result, (onnx.ModelProto, onnx.FunctionProto)):
        return [result]
    if isinstance(result, (list, tuple)):
        return [item for item in result if isinstance(item, (onnx.ModelProto, onnx.FunctionProto))]
    return []


def _checked(entry: str, export: Callable[..., Any], facade: bool) -> Callable[..., Any]:
    @functools.wraps(export)
    def checked_export(*args: Any, **kwargs: Any) -> Any:
        if facade:
            _INSIDE_FACADE["depth"] += 1
        try:
            result = export(*args, **kwargs)
        except DslError as error:  # (a user's mistake: its traceback ends at their line, not here)
            _hide_own_frames(error)
            raise
        finally:
            if facade:
                _INSIDE_FACADE["depth"] -= 1
        if _INSIDE_FACADE["depth"] == 0:  # (the outermost call: what the caller receives)
            for proto in _protos(result):
                _record(entry, proto, kwargs.get("external_data") is not None)
        return result

    setattr(checked_export, _WRAPPED, export)
    return checked_export


def _reading(read: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(read)
    def checked_read(proto: Any, *args: Any, **kwargs: Any) -> Any:
        _check_input(proto)
        return read(proto, *args, **kwargs)

    setattr(checked_read, _WRAPPED, read)
    return checked_read


def _reading_several(read: Callable[..., Any]) -> Callable[..., Any]:
    """``models_and_values_from_protos`` (the models a composition reads): each checked, in order."""
    @functools.wraps(read)
    def checked_read(protos: Any, *args: Any, **kwargs: Any) -> Any:
        for proto, _ in protos:
            _check_input(proto)
        return read(protos, *args, **kwargs)

    setattr(checked_read, _WRAPPED, read)
    return checked_read


def _check_input(proto: Any) -> None:
    # (a model of more than 64 MB read is not checked: a copy for the checker would cost
    # as much again; what is exported from it still is)
    if isinstance(proto, onnx.ModelProto):
        small = not _larger_than(proto, _LARGEST_INPUT_CHECKED)
        refusal = check_exported(_weights_in_place(proto)) if small else None
        LATEST_INPUT["refused"] = refusal is not None
        if refusal is not None:
            INPUT_REFUSALS.add(refusal)


def _hide_own_frames(error: BaseException) -> None:
    """Drop this module's frames from ``error``'s traceback, as the library drops its own."""
    keep_frames(error, lambda module: module != __name__)


def _owner(module_name: str, owner_name: str) -> Any:
    module = importlib.import_module(module_name)
    return getattr(module, owner_name) if owner_name else module


def install() -> None:
    """Wrap the facades and the back end's entry points (once; a second call changes
    nothing), under every name a library module already binds them to
    (``dsl.markup.to_model_proto`` is ``dsl.markup.export.to_model_proto``)."""
    importlib.import_module("dsl.markup")
    replaced: dict[int, Callable[..., Any]] = {}
    for entries, facade in ((FACADES, True), (BACK_END, False)):
        for module_name, owner_name, name in entries:
            owner = _owner(module_name, owner_name)
            current = owner.__dict__[name] if owner_name else getattr(owner, name)
            if not hasattr(current, _WRAPPED):
                wrapped = _checked(f"{owner_name or module_name}.{name}", current, facade)
                setattr(owner, name, wrapped)
                replaced[id(current)] = wrapped
    import converter.from_onnx as from_onnx

    for reader_name in ("model_from_proto", "model_and_values_from_proto"):
        read = getattr(from_onnx, reader_name)
        if not hasattr(read, _WRAPPED):
            replaced[id(read)] = _reading(read)
            setattr(from_onnx, reader_name, replaced[id(read)])
    read_several = from_onnx.models_and_values_from_protos
    if not hasattr(read_several, _WRAPPED):
        replaced[id(read_several)] = from_onnx.models_and_values_from_protos = _reading_several(read_several)
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.partition(".")[0] not in ("dsl", "converter", "eager"):
            continue
        for attribute, value in list(vars(module).items()):
            if id(value) in replaced and not hasattr(value, _WRAPPED):
                setattr(module, attribute, replaced[id(value)])


def installed() -> bool:
    """True when every entry point is wrapped (what a test of this module asserts)."""
    return all(hasattr(getattr(_owner(module_name, owner_name), name), _WRAPPED)
               for module_name, owner_name, name in FACADES + BACK_END)


def kernel_argv() -> list[str]:
    """A Jupyter kernel command line whose kernel checks its exports like the test run does."""
    launch = ("import tests.checked_exports as checked; checked.install(); "
              "from ipykernel import kernelapp; kernelapp.launch_new_instance()")
    return [sys.executable, "-c", launch, "-f", "{connection_file}"]
