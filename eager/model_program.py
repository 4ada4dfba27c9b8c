"""What ``eager.run`` accepts, turned into the protos its node-by-node run walks.

A user debugging a model passes whatever is at hand: an ``.onnx`` path, a proto, a
``@script`` function, an IR function or model.  The node-by-node runner
(:mod:`eager.model_runner`) walks protos only, so everything becomes one here: IR goes
through ``converter.to_onnx`` (the one serialiser) and protos are read as they are, so a
run never depends on the proto -> IR reader.  Reading is kept apart from running so that
the runner's module holds execution only; a file that is no model is a ``ModelLoadError``
at the caller's line.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import onnx
import onnx.defs

from dsl import ir
from dsl.errors import DslTypeError, ModelLoadError
from eager.call_site import caller_location

__all__ = ["Program", "load_program", "opset_dict"]


class Program(NamedTuple):
    """The protos a node-by-node run walks: the main graph (or function body), the opset
    versions by domain, the model-local functions by (domain, name), and the declared
    types of the main graph's inputs."""

    graph: onnx.GraphProto | onnx.FunctionProto
    opsets: dict[str, int]
    functions: dict[tuple[str, str], onnx.FunctionProto]
    input_types: dict[str, onnx.TypeProto]


def load_program(obj: Any) -> Program:
    """The program of what a user hands ``eager.run``: an ``.onnx`` path, the bytes of a
    model, a ``ModelProto``, ``FunctionProto`` or ``GraphProto``, a ``@script`` function,
    or an IR ``Function``/``Model`` (serialised by ``converter.to_onnx``); a
    ``ModelLoadError`` for a file or bytes that are no model, a ``DslTypeError`` for
    anything else.

    >>> import onnx.helper as oh
    >>> graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g",
    ...     [oh.make_tensor_value_info("x", 1, [2])], [oh.make_tensor_value_info("y", 1, [2])])
    >>> program = load_program(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
    >>> program.opsets, [node.op_type for node in program.graph.node], list(program.input_types)
    ({'': 18}, ['Relu'], ['x'])
    """
    if isinstance(obj, (str, os.PathLike)):
        try:
            obj = onnx.load(os.fspath(obj))
        except Exception as err:
            raise ModelLoadError(f"cannot read {os.fspath(obj)!r}: {err}", caller_location(),
                                 hint="check that the file is a complete ONNX model whose external data lies in "
                                 "its own folder") from None
    if isinstance(obj, (bytes, bytearray)):
        try:
            obj = onnx.load_model_from_string(bytes(obj))
        except Exception as err:
            raise ModelLoadError(f"the bytes are not a ModelProto: {err}", caller_location(),
                                 hint="pass the bytes of a complete ONNX model") from None
    if isinstance(obj, (ir.Function, ir.Model)):
        from converter.to_onnx import model_to_proto

        obj = model_to_proto(obj, infer_output_types=False)
    elif hasattr(obj, "to_model_proto") and hasattr(obj, "python_function"):  # a ScriptFunction
        obj = obj.to_model_proto()
    if isinstance(obj, onnx.ModelProto):
        return Program(
            obj.graph,
            opset_dict(obj.opset_import),
            {(f.domain, f.name): f for f in obj.functions},
            {v.name: v.type for v in obj.graph.input},
        )
    if isinstance(obj, onnx.FunctionProto):
        return Program(obj, opset_dict(obj.opset_import), {}, {})
    if isinstance(obj, onnx.GraphProto):
        return Program(obj, {"": onnx.defs.onnx_opset_version()}, {}, {v.name: v.type for v in obj.input})
    raise DslTypeError(
        f"eager.run cannot run a {type(obj).__name__}",
        caller_location(),
        hint="pass an .onnx path, a ModelProto, a FunctionProto, a @script function, or an ir.Function/ir.Model",
    )


def opset_dict(imports: Any) -> dict[str, int]:
    """A proto's opset imports as versions by domain, ``ai.onnx`` spelled ``""``.

    >>> import onnx.helper as oh
    >>> opset_dict([oh.make_opsetid("ai.onnx", 18), oh.make_opsetid("com.microsoft", 1)])
    {'': 18, 'com.microsoft': 1}
    """
    return {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in imports}
