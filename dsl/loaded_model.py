"""``dsl.load``: a whole ONNX model as a callable, inside ``@script`` or on arrays.

Called in a scripted body (``probs = net(pre(img))``), the model's graph is inlined at
each call site with its own name prefix (``net_0_``, ``net_1_``); its initializers
become initializers of the caller's outermost graph, stored once however often it is
called; its model-local functions come along; and it is converted to the caller's
ai.onnx opset (``onnx.version_converter``) when they differ.  The front end checks a
call's inputs against the model's like an op call's (:mod:`dsl.frontend.calls`); this
facade reads and converts the model (:mod:`converter.from_onnx`), copies and prefixes
its graph (:mod:`dsl.passes`), and runs it on arrays in one cached onnxruntime session.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir, types
from dsl.errors import ConversionError, DslTypeError, OpCallError
from dsl.frontend.scripted import Loaded, LoadedCall
from dsl.frontend.weights import Initializer
from dsl.tracebacks import user_traceback

if TYPE_CHECKING:
    import onnx

__all__ = ["LoadedModel", "load"]

# The domain of the (always inlined) call nodes the front end makes for a loaded model.
CALL_DOMAIN = "onnxquill.load"


class LoadedModel(Loaded):
    """An ONNX model loaded with :func:`load`: callable inside ``@script`` and on arrays.

    ``inputs``/``outputs`` are the model's (graph inputs that are initializers excluded).
    The converted IR is kept per ai.onnx version (:meth:`ir_model`), the onnxruntime
    session once made (:meth:`clear_cache` drops both).

    >>> net = load("net.onnx")                       # doctest: +SKIP
    >>> net(np.ones((1, 4), np.float32)).shape       # doctest: +SKIP
    (1, 2)
    """

    def __init__(self, proto: onnx.ModelProto, name: str, source: str) -> None:
        self.proto = proto
        self.name = name
        self.source = source
        self._lock = threading.Lock()
        self._models: dict[int, ir.Model] = {}
        self._weights: dict[int, list[Initializer]] = {}
        self._session: Any = None
        model = self.ir_model()
        weights = {id(v) for v in model.graph.initializers}
        self.inputs: list[ir.Value] = [v for v in model.graph.inputs if id(v) not in weights]
        self.outputs: list[ir.Value] = list(model.graph.outputs)
        if model.graph.sparse_initializers:
            raise ConversionError(f"{source}: dsl.load does not take models with sparse initializers",
                                  hint="densify them first (onnx.numpy_helper)")

    @property
    def opset_version(self) -> int:
        """The ai.onnx opset the model imports."""
        from converter.opset_conversion import onnx_opset

        return onnx_opset(self.proto) or 1

    def ir_model(self, opset_version: int | None = None) -> ir.Model:
        """The model as IR, converted to ai.onnx ``opset_version`` (default: its own); kept."""
        from converter.from_onnx import model_from_proto

        version = self.opset_version if opset_version is None else opset_version
        with self._lock:
            found = self._models.get(version)
            if found is None:
                proto = self.proto if version == self.opset_version else self._converted(version)
                found = self._models[version] = model_from_proto(proto, source=self.source)
            return found

    def _converted(self, version: int) -> onnx.ModelProto:
        # The converter drops model-local functions: each body is converted on its own.
        converted = self._convert(self.proto, version, self.name)
        del converted.functions[:]
        converted.functions.extend(self._converted_function(f, version) for f in self.proto.functions)
        return converted

    def _converted_function(self, function: onnx.FunctionProto, version: int) -> onnx.FunctionProto:
        import onnx

        own = next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), None)
        if own is None or own == version:
            return function
        untyped = onnx.TypeProto()
        body = onnx.helper.make_model(
            onnx.helper.make_graph(list(function.node), function.name,
                                   [onnx.helper.make_value_info(n, untyped) for n in function.input],
                                   [onnx.helper.make_value_info(n, untyped) for n in function.output]),
            opset_imports=list(function.opset_import),
        )
        converted_body = self._convert(body, version, f"{self.name}'s function {function.name}")
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        del copy.node[:]
        copy.node.extend(converted_body.graph.node)
        for opset_id in copy.opset_import:
            if opset_id.domain in ("", "ai.onnx"):
                opset_id.version = version
        return copy

    def _convert(self, proto: onnx.ModelProto, version: int, what: str) -> onnx.ModelProto:
        from converter.opset_conversion import convert_opset

        return convert_opset(proto, version, self.source, what=what,
                             hint=f"script the caller with opset{self.opset_version}, or convert the model by hand")

    def weights(self, opset_version: int) -> list[Initializer]:
        """The model's initializers at ``opset_version``, one Initializer object each (kept)."""
        model = self.ir_model(opset_version)
        with self._lock:
            found = self._weights.get(opset_version)
            if found is None:
                found = self._weights[opset_version] = [
                    Initializer(dataclasses.replace(v.initializer, name=f"{self.name}_{v.name}"))
                    for v in model.graph.initializers
                    if v.initializer is not None
                ]
            return found

    def call_function(self, opset_version: int, prefix: str) -> LoadedCall:
        from dsl.passes import PrefixPass
        from dsl.passes.inline import copy_graph

        model = self.ir_model(opset_version)
        weights = self.weights(opset_version)
        original = model.graph
        graph = copy_graph(original)
        PrefixPass(prefix)(ir.Model(graph, functions=list(model.functions), opset_imports=dict(model.opset_imports)))
        weight_ids = {id(v) for v in original.initializers}
        inputs = [copy for v, copy in zip(original.inputs, graph.inputs) if id(v) not in weight_ids]
        weight_values = list(graph.initializers)
        for value in weight_values:
            value.initializer = None
        graph.inputs = [*inputs, *weight_values]
        graph.initializers = []
        function = ir.Function(prefix.rstrip("_"), graph, domain=CALL_DOMAIN,
                               opset_imports=dict(model.opset_imports), location=model.location)
        return LoadedCall(function, weights)

    # ------------------------------------------------------------------ eager
    def session(self) -> Any:
        """The onnxruntime session that runs the whole model, made on first use and kept."""
        with self._lock:
            if self._session is None:
                import onnxruntime

                from dsl.onnxruntime_limits import loadable

                self._session = onnxruntime.InferenceSession(
                    loadable(self.proto).SerializeToString(), providers=["CPUExecutionProvider"]
                )
            return self._session

    def clear_cache(self) -> None:
        """Drop the converted models and the session (the weights objects too)."""
        with self._lock:
            self._models = {k: v for k, v in self._models.items() if k == self.opset_version}
            self._weights.clear()
            self._session = None

    @user_traceback
    def __call__(self, *arrays: Any) -> Any:
        from eager.call_site import caller_location

        if len(arrays) != len(self.inputs):
            raise OpCallError(f"the loaded model {self.name} takes {len(self.inputs)} input(s), got {len(arrays)}",
                              caller_location(),
                              hint=f"its inputs are ({', '.join(v.name for v in self.inputs)})")
        feeds: dict[str, np.ndarray] = {}
        for formal, argument in zip(self.inputs, arrays):
            array = np.asarray(argument)
            want = formal.type.elem_type if isinstance(formal.type, ir.TensorType) else None
            have = types.element_type_of_dtype(array.dtype)
            if want is not None and want != have:
                raise DslTypeError(
                    f"input {formal.name!r} of the loaded model {self.name} is {ir.element_type_name(want)}, "
                    f"but this is {ir.element_type_name(have)}", caller_location(),
                    hint=f"convert it: array.astype({types.numpy_dtype(want)!s})")
            feeds[formal.name] = array
        results = self.session().run(None, feeds)
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        return f"<LoadedModel {self.name} from {self.source} (ai.onnx {self.opset_version})>"


@user_traceback
def load(path_or_model: str | os.PathLike[str] | onnx.ModelProto, name: str | None = None) -> LoadedModel:
    """Load an ONNX model (a path or a ``ModelProto``) as a callable.

    Inside ``@script`` a call inlines the model's graph (``probs = net(pre(img))``; twice
    is fine), its weights becoming initializers of the result, stored once; on arrays it
    runs the whole model in onnxruntime.  ``name`` (default: the file's or graph's name)
    prefixes the inlined names.

    >>> net = load("squeezenet.onnx", name="net")              # doctest: +SKIP
    >>> @script()                                               # doctest: +SKIP
    ... def classify(img: FLOAT[1, 3, 224, 224]) -> FLOAT[1, 1000, 1, 1]:
    ...     return net(img * 0.017)
    """
    import onnx

    from converter.from_onnx import read_model_proto

    if isinstance(path_or_model, onnx.ModelProto):
        proto, source = path_or_model, "<model>"
        default = path_or_model.graph.name
    elif isinstance(path_or_model, (str, os.PathLike)):
        source = os.fspath(path_or_model)
        proto = read_model_proto(source)
        default = os.path.splitext(os.path.basename(source))[0]
    else:
        raise DslTypeError(f"dsl.load takes a path or an onnx.ModelProto, not {type(path_or_model).__name__}",
                           hint="pass the .onnx file's path")
    chosen = name if name is not None else re.sub(r"\W", "_", default) or "model"
    if not chosen.isidentifier():
        chosen = f"m_{chosen}"
    return LoadedModel(proto, chosen, source)
