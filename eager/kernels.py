"""One-op kernels: an onnxruntime session (or an ``onnx.reference`` evaluator) for one op.

A kernel is built once per cache key (see :mod:`eager.sessions`) from a one-node
ModelProto made with ``onnx.helper``; its inputs are declared with the element type and
rank of the call and unnamed dimensions, so one session serves every shape.  Everything
a call needs (feed names, output names, which outputs need raw reading) is computed here,
so :meth:`OrtKernel.run` is a dict build and one ``run`` call.

Backend choice: onnxruntime first, at the oldest opset where the op's schema is the one
requested (``since_version``) when the requested opset is newer than onnxruntime loads.
The kernel is an ``onnx.reference`` evaluator at the requested opset only where
onnxruntime *lacks* the op: no kernel for the op at these element types or this opset,
no schema for it, an element type it cannot hold (:func:`onnxruntime_lacks`).  Where
onnxruntime has the op and refuses the call itself (an axis out of range, a repeat count
that does not fit, an index outside the data), the exported model would be refused
too, so the call is refused (:class:`CallRefused`): onnx.reference, which accepts more
than the specification allows, never runs it.  A one-node model declares ranks only,
so that one session serves every shape; where onnxruntime refuses that model, the call's
own shapes decide (:class:`ShapedKernel`, one session per shape), as the exported
model's declared shapes would.  The ops eager mode runs in onnx.reference although
onnxruntime has them (:mod:`eager.backend_policy`) are run in onnxruntime too, for its
verdict only.  Each kernel records its ``backend`` and, for a fallback,
``fallback_reason`` (onnxruntime's error).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from dsl.onnxruntime_limits import max_ir_version, max_opset
from eager.backend_policy import reference_reason
from eager.ortvalues import NUMPY_NATIVE, from_ortvalue, to_ortvalue

__all__ = [
    "CallRefused",
    "KernelBuildError",
    "KernelSpec",
    "LOGGER",
    "OrtKernel",
    "ReferenceKernel",
    "ShapedKernel",
    "build_kernel",
    "onnxruntime_lacks",
    "runtime_fallback",
]

LOGGER = logging.getLogger("eager")

# Input signature entry: (element type, rank) for a tensor, ("seq", element type, rank)
# for a sequence of tensors (rank None: any rank), ("opt", inner entry or None) for an
# input the schema types ``optional(...)`` only, or None for an omitted optional input.
InputSig = tuple[Any, ...] | None

_TYPE_STR_ELEM = {
    "tensor(float)": 1, "tensor(uint8)": 2, "tensor(int8)": 3, "tensor(uint16)": 4, "tensor(int16)": 5,
    "tensor(int32)": 6, "tensor(int64)": 7, "tensor(string)": 8, "tensor(bool)": 9, "tensor(float16)": 10,
    "tensor(double)": 11, "tensor(uint32)": 12, "tensor(uint64)": 13, "tensor(complex64)": 14,
    "tensor(complex128)": 15, "tensor(bfloat16)": 16, "tensor(float8e4m3fn)": 17, "tensor(float8e4m3fnuz)": 18,
    "tensor(float8e5m2)": 19, "tensor(float8e5m2fnuz)": 20, "tensor(uint4)": 21, "tensor(int4)": 22,
    "tensor(float4e2m1)": 23, "tensor(float8e8m0)": 24, "tensor(uint2)": 25, "tensor(int2)": 26,
    "tensor(float6e2m3)": 27, "tensor(float6e3m2)": 28,
}


def sig_elem(sig: InputSig) -> int | None:
    """The element type in an input signature entry (of the tensors of a sequence)."""
    if sig is None:
        return None
    if sig[0] == "opt":
        return sig_elem(sig[1])
    return sig[1] if sig[0] == "seq" else sig[0]


Shapes = tuple[tuple[int, ...] | None, ...]  # per node input: the call's shape of a tensor, else None


def _type_proto(sig: tuple[Any, ...] | None, shape: tuple[int, ...] | None = None) -> onnx.TypeProto:
    if sig is None:  # an empty optional: its type is not known, and does not matter
        return oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
    if sig[0] == "opt":
        return oh.make_optional_type_proto(_type_proto(sig[1]))
    if sig[0] == "seq":
        dims = None if sig[2] is None else [None] * sig[2]
        return oh.make_sequence_type_proto(oh.make_tensor_type_proto(sig[1], dims))
    return oh.make_tensor_type_proto(sig[0], [None] * sig[1] if shape is None else list(shape))


def _value_info(name: str, sig: tuple[Any, ...], shape: tuple[int, ...] | None = None) -> onnx.ValueInfoProto:
    return oh.make_value_info(name, _type_proto(sig, shape))


def call_shapes(spec: KernelSpec, arrays: list[Any]) -> Shapes:
    """The shapes of a call's tensor inputs (None for sequences, optionals, omitted inputs)."""
    return tuple(
        None if sig is None or sig[0] in ("seq", "opt") else tuple(np.shape(array))
        for sig, array in zip(spec.inputs, arrays)
    )


def _is_raw_incapable(sig: tuple[Any, ...]) -> bool:
    """Sequences and optionals cannot be built from raw buffers (see OrtKernel._run_raw)."""
    return sig[0] in ("seq", "opt")


class KernelBuildError(Exception):
    """Neither backend could prepare the op; carries both backends' messages."""

    def __init__(self, ort_message: str, reference_message: str) -> None:
        self.ort_message = ort_message
        self.reference_message = reference_message
        super().__init__(f"onnxruntime: {ort_message}\nonnx.reference: {reference_message}")


class CallRefused(Exception):
    """onnxruntime has the op for the call's element types and opset, and refused the call
    itself (its shapes, values or attributes): a user error, which the exported model would
    meet in onnxruntime too.  Carries onnxruntime's message."""

    def __init__(self, ort_message: str) -> None:
        self.ort_message = ort_message
        super().__init__(ort_message)


class OnnxruntimeLacks(RuntimeError):
    """Raised here where onnxruntime cannot be asked at all: an opset newer than it loads,
    a sequence of element types its Python binding cannot feed."""


# onnxruntime's words, under status FAIL or INVALID_GRAPH, for an op, a type or an opset it
# has no implementation of (the status NOT_IMPLEMENTED says so by itself): no schema for
# the op, an element type it cannot hold, an element type its copy of the op's schema does
# not list (eager mode checked the type against onnx's schema before asking).
_LACKS = re.compile(
    r"is not a registered function/op"
    r"|MLDataType for: \S+ is not currently registered or supported"
    r"|Type Error: Type '[^']*' of input parameter \([^)]*\) of operator \([^)]*\) in node \([^)]*\) is invalid"
)


def onnxruntime_lacks(error: BaseException) -> bool:
    """True when onnxruntime failed because it cannot run the op *at all* for the call's
    element types and opset, whatever the values: the one case where eager mode runs the
    op in onnx.reference instead (every other failure is the call's fault).

    >>> onnxruntime_lacks(OnnxruntimeLacks("onnxruntime loads ai.onnx opsets up to 28"))
    True
    >>> onnxruntime_lacks(ValueError("'repeat' input tensor must have the same length as the 'input' tensor"))
    False
    """
    if isinstance(error, OnnxruntimeLacks):
        return True
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    if isinstance(error, state.NotImplemented):
        return True
    return isinstance(error, (state.Fail, state.InvalidGraph)) and _LACKS.search(str(error)) is not None


def _message(error: BaseException) -> str:
    return str(error) or repr(error)


class KernelSpec:
    """What one kernel computes: op, opset versions, attributes, input signature, output count.

    ``outer`` lists values a subgraph attribute reads from an enclosing scope (name and
    signature): they become extra graph inputs of the one-node model.  ``functions`` and
    ``opset_imports`` carry what such subgraphs need (model-local functions, opsets).
    """

    __slots__ = (
        "attributes",
        "domain",
        "functions",
        "inferred_outputs",
        "input_names",
        "inputs",
        "label",
        "n_outputs",
        "op_type",
        "opset_imports",
        "outer",
        "present",
        "since_version",
        "version",
    )

    def __init__(
        self,
        domain: str,
        op_type: str,
        version: int,
        since_version: int | None,
        attributes: list[onnx.AttributeProto],
        inputs: tuple[InputSig, ...],
        n_outputs: int,
        outer: tuple[tuple[str, tuple[Any, ...]], ...] = (),
        functions: tuple[onnx.FunctionProto, ...] = (),
        opset_imports: dict[str, int] | None = None,
    ) -> None:
        self.domain = domain
        self.op_type = op_type
        self.version = version
        self.since_version = since_version
        self.attributes = attributes
        self.inputs = inputs
        self.n_outputs = n_outputs
        self.outer = outer
        self.functions = functions
        self.opset_imports = opset_imports or {}
        self.label = f"{domain + '::' if domain else ''}{op_type} (opset {version})"
        taken = {name for name, _ in outer}
        prefix = "x"
        while any(f"{prefix}{i}" in taken for i in range(len(inputs))):
            prefix = "_" + prefix
        # Feed names, in the order run() receives arrays: present node inputs, then outer values.
        self.input_names = [f"{prefix}{i}" for i, sig in enumerate(inputs) if sig is not None] + [
            name for name, _ in outer
        ]
        # Positions of the node inputs that are fed (an empty optional is fed, as None).
        self.present = [i for i, sig in enumerate(inputs) if sig is not None]
        self.inferred_outputs: list[onnx.TypeProto] | None = None

    def feeds(self, arrays: list[Any]) -> dict[str, Any]:
        """Feed dict for the node inputs that are present, then the outer values."""
        present = [arrays[i] for i in self.present] + list(arrays[len(self.inputs):])
        return dict(zip(self.input_names, present))

    def sequence_elem(self, index: int) -> int | None:
        """The element type of sequence output ``index`` by ONNX type inference (None if unknown).

        Only needed for an empty sequence, which has no tensor to read the type from.
        """
        if self.inferred_outputs is None:
            import onnx.shape_inference

            try:
                model = onnx.shape_inference.infer_shapes(self.model(self.version, onnx.IR_VERSION))
                self.inferred_outputs = [o.type for o in model.graph.output]
            except Exception:  # inference is a nicety here: an unknown type stays unknown
                self.inferred_outputs = []
        if index >= len(self.inferred_outputs):
            return None
        found = self.inferred_outputs[index]
        if found.HasField("optional_type"):
            found = found.optional_type.elem_type
        if found.HasField("sequence_type") and found.sequence_type.elem_type.HasField("tensor_type"):
            return found.sequence_type.elem_type.tensor_type.elem_type or None
        return None

    def ort_version(self) -> int:
        """The opset to stamp on the model for onnxruntime (see the module docstring)."""
        if self.domain != "" or self.outer or self.functions:
            return self.version
        newest = max_opset()
        if self.version <= newest:
            return self.version
        since = self.since_version or self.version
        # The schema in force at ``version`` is also in force at every opset from ``since`` on.
        return newest if since <= newest else since

    def model(self, version: int, ir_version: int, shapes: Shapes | None = None) -> onnx.ModelProto:
        """The one-node model; its tensor inputs declare ranks only, or ``shapes`` (a call's)."""
        present = iter(self.input_names)
        input_names = ["" if sig is None else next(present) for sig in self.inputs]
        while input_names and input_names[-1] == "":
            input_names.pop()
        output_names = [f"y{i}" for i in range(self.n_outputs)]
        node = onnx.NodeProto(op_type=self.op_type, domain=self.domain, input=input_names, output=output_names)
        node.attribute.extend(self.attributes)
        sizes = shapes or (None,) * len(self.inputs)
        graph_inputs = [
            _value_info(name, sig, shape)
            for name, sig, shape in zip(input_names, self.inputs, sizes)
            if sig is not None
        ]
        graph_inputs += [_value_info(name, sig) for name, sig in self.outer]
        graph_outputs = [onnx.ValueInfoProto(name=name) for name in output_names]
        graph = oh.make_graph([node], self.op_type, graph_inputs, graph_outputs)
        imports = dict(self.opset_imports)
        imports[self.domain] = version
        imports.setdefault("", min(max_opset(), onnx.defs.onnx_opset_version()))
        model = oh.make_model(
            graph, opset_imports=[oh.make_opsetid(d, v) for d, v in imports.items()], ir_version=ir_version
        )
        model.functions.extend(self.functions)
        return model


def _session_options() -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # failures are raised with onnxruntime's text; no stderr noise
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return options


_OPTIONS: list[Any] = []


class OrtKernel:
    """A prepared onnxruntime session for one op and one input signature."""

    backend = "onnxruntime"
    fallback_reason = ""

    __slots__ = (
        "_dense",
        "_fallback",
        "_input_names",
        "_output_elems",
        "_output_names",
        "_raw",
        "_run",
        "_run_options",
        "_run_values",
        "label",
        "spec",
    )

    def __init__(self, spec: KernelSpec, shapes: Shapes | None = None) -> None:
        import onnxruntime

        self.spec = spec
        self.label = spec.label
        version = spec.ort_version()
        if spec.domain == "" and version > max_opset():
            raise OnnxruntimeLacks(
                f"onnxruntime loads ai.onnx opsets up to {max_opset()}; {spec.op_type} changed in opset {version}"
            )
        if not _OPTIONS:
            _OPTIONS.append(_session_options())
        model = spec.model(version, max_ir_version(), shapes)
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), _OPTIONS[0], providers=["CPUExecutionProvider"]
        )
        self._run = session._sess.run
        self._run_values = session._sess.run_with_ort_values
        self._input_names = spec.input_names
        self._output_names = [o.name for o in session.get_outputs()]
        self._run_options = onnxruntime.RunOptions()
        self._run_options.log_severity_level = 4
        self._output_elems = [_TYPE_STR_ELEM.get(o.type) for o in session.get_outputs()]
        input_elems = [sig_elem(sig) for sig in spec.inputs]
        raw_inputs = any(elem is not None and elem not in NUMPY_NATIVE for elem in input_elems)
        raw_outputs = any(e is not None and e not in NUMPY_NATIVE for e in self._output_elems)
        self._raw = raw_inputs or raw_outputs
        # No omitted input: arrays line up with feed names one to one (the common case).
        self._dense = all(sig is not None for sig in spec.inputs)
        self._fallback: ReferenceKernel | None = None

    def run(self, arrays: list[np.ndarray | None]) -> list[np.ndarray | None]:
        if self._raw:
            return self._run_raw(arrays)
        if self._dense:
            return self._run(self._output_names, dict(zip(self._input_names, arrays)), self._run_options)
        return self._run(self._output_names, self.spec.feeds(arrays), self._run_options)

    def _run_raw(self, arrays: list[np.ndarray | None]) -> list[np.ndarray | None]:
        keep_alive: list[Any] = []
        feeds = {}
        sigs = [sig for sig in self.spec.inputs if sig is not None] + [sig for _, sig in self.spec.outer]
        for (name, array), sig in zip(self.spec.feeds(arrays).items(), sigs):
            if _is_raw_incapable(sig):
                raise OnnxruntimeLacks("sequences of bfloat16/float8/4-bit tensors cannot be passed to onnxruntime")
            feeds[name] = to_ortvalue(array, sig[0], keep_alive)
        values = self._run_values(feeds, self._output_names, self._run_options)
        return [from_ortvalue(values[i], elem) for i, elem in enumerate(self._output_elems)]

    def fallback(self) -> ReferenceKernel:
        """The onnx.reference kernel for a call this session failed because onnxruntime lacks
        what it needs (see :func:`runtime_fallback`)."""
        if self._fallback is None:
            self._fallback = ReferenceKernel(self.spec, "")
        return self._fallback


class ShapedKernel:
    """onnxruntime sessions for one op, one per input shape of the calls.

    For the calls whose rank-only model onnxruntime refuses while it accepts the call's
    own shapes (its shape inference reads an unknown size as 0 for a few ops, Resize's
    ``sizes`` among them), as it accepts an exported model that declares them.  A shape
    it refuses is a :class:`CallRefused` at run time.
    """

    backend = "onnxruntime"
    fallback_reason = ""
    max_shapes = 64  # sessions kept per kernel: the oldest half goes when it is full

    __slots__ = ("_by_shape", "label", "spec")

    def __init__(self, spec: KernelSpec, shapes: Shapes, first: OrtKernel) -> None:
        self.spec = spec
        self.label = spec.label
        self._by_shape: dict[Shapes, OrtKernel] = {shapes: first}

    def run(self, arrays: list[np.ndarray | None]) -> list[np.ndarray | None]:
        shapes = call_shapes(self.spec, arrays)
        kernel = self._by_shape.get(shapes)
        if kernel is None:
            kernel = _ort_session(self.spec, shapes)
            if len(self._by_shape) >= self.max_shapes:
                for old in list(self._by_shape)[: self.max_shapes // 2]:
                    del self._by_shape[old]
            self._by_shape[shapes] = kernel
        return kernel.run(arrays)

    def fallback(self) -> ReferenceKernel:
        return next(iter(self._by_shape.values())).fallback()


class ReferenceKernel:
    """``onnx.reference.ReferenceEvaluator`` on the same one-node model.

    ``verdict``: for an op eager mode prefers to run in onnx.reference although onnxruntime
    has it (:mod:`eager.backend_policy`), the onnxruntime kernel that runs each call first
    for its verdict alone, so that a call onnxruntime refuses is refused here too.
    """

    backend = "onnx.reference"

    __slots__ = ("_evaluator", "_input_names", "_verdict", "fallback_reason", "label", "spec")

    def __init__(self, spec: KernelSpec, fallback_reason: str, verdict: Kernel | None = None) -> None:
        from onnx.reference import ReferenceEvaluator

        self.spec = spec
        self.label = spec.label
        self.fallback_reason = fallback_reason
        self._verdict = verdict
        ir_version = onnx.IR_VERSION
        self._evaluator = ReferenceEvaluator(spec.model(spec.version, ir_version))
        self._input_names = spec.input_names

    def run(self, arrays: list[np.ndarray | None]) -> list[np.ndarray | None]:
        if self._verdict is not None:
            try:
                self._verdict.run(arrays)
            except CallRefused:
                raise
            except Exception as error:  # (onnxruntime's own classes: refused, or lacking what the call needs)
                if not onnxruntime_lacks(error):
                    raise CallRefused(_message(error)) from None
        outputs = self._evaluator.run(None, self.spec.feeds(arrays))
        return [_as_onnx_value(o) for o in outputs]


Kernel = OrtKernel | ShapedKernel | ReferenceKernel


def _as_onnx_value(value: object) -> Any:
    # onnx.reference may return numpy str arrays; onnxruntime (and ONNX) use object arrays.
    if value is None:
        return None
    if isinstance(value, list):
        return [_as_onnx_value(v) for v in value]
    array = np.asarray(value)
    return array.astype(object) if array.dtype.kind in "US" else array


def build_kernel(spec: KernelSpec, arrays: list[Any] | None = None) -> Kernel:
    """The kernel for ``spec``, built on the first call's inputs ``arrays``: onnxruntime
    where it has the op, else onnx.reference.  Raises :class:`CallRefused` where
    onnxruntime has the op and refuses the call (with the call's shapes where the
    rank-only model is refused), :class:`KernelBuildError` where neither backend has it.
    """
    n_inputs = max((i + 1 for i, sig in enumerate(spec.inputs) if sig is not None), default=0)
    preferred = reference_reason(spec.domain, spec.op_type, spec.attributes, n_inputs)
    try:
        ort_kernel = _ort_kernel(spec, arrays)
    except CallRefused:
        raise
    except Exception as ort_error:  # onnxruntime lacks the op (onnxruntime_lacks said so)
        ort_message = _message(ort_error)
    else:
        if preferred:
            return ReferenceKernel(spec, f"onnx.reference preferred: {preferred}", ort_kernel)
        return ort_kernel
    try:
        kernel = ReferenceKernel(spec, ort_message)
    except Exception as reference_error:
        raise KernelBuildError(ort_message, _message(reference_error)) from None
    LOGGER.info("eager: %s runs in onnx.reference; onnxruntime lacks it: %s", spec.label, ort_message)
    return kernel


def _ort_kernel(spec: KernelSpec, arrays: list[Any] | None) -> OrtKernel | ShapedKernel:
    """The onnxruntime kernel for a rank-only model, else for the call's shapes; raises
    onnxruntime's error where it lacks the op, CallRefused where it refuses the call.

    A refusal of the rank-only model is not the last word, a NOT_IMPLEMENTED one included:
    onnxruntime expands some ops (CausalConvWithState) into function bodies that need
    static sizes, and reads an unknown size as 0 in some shape inference (Resize's
    ``sizes``); the model with the call's shapes decides, as an exported model's would.
    """
    try:
        return OrtKernel(spec)
    except OnnxruntimeLacks:
        raise
    except Exception as error:  # (onnxruntime's own classes)
        rank_only = error
    if arrays is None:
        if onnxruntime_lacks(rank_only):
            raise rank_only
        raise CallRefused(_message(rank_only))
    if _untyped_input(spec) and not onnxruntime_lacks(rank_only):
        raise OnnxruntimeLacks(f"{_message(rank_only)} (a list or None given to a Loop or Scan may be an optional "
                               "its body declares, which the call cannot say: onnxruntime cannot be asked)")
    shapes = call_shapes(spec, arrays)
    return ShapedKernel(spec, shapes, _ort_session(spec, shapes))


def _untyped_input(spec: KernelSpec) -> bool:
    """Whether a value the call passes to a variadic input of a control-flow op (Loop,
    Scan) is None or a list: its body may declare it ``optional(...)``, which a list or a
    None cannot say, and the one-node model then declares another type than an exported
    model would; onnxruntime's refusal of that model says nothing about the call."""
    import onnx.defs

    if not any(a.type == onnx.AttributeProto.GRAPH for a in spec.attributes):
        return False
    if not onnx.defs.has(spec.op_type, spec.version, spec.domain):
        return False
    formals = onnx.defs.get_schema(spec.op_type, spec.version, spec.domain).inputs
    if not formals or formals[-1].option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return False
    return any(sig is None or sig[0] == "seq" for sig in spec.inputs[len(formals) - 1:])


def _ort_session(spec: KernelSpec, shapes: Shapes) -> OrtKernel:
    """The onnxruntime kernel for the call's shapes: onnxruntime's error where it lacks the
    op, CallRefused where it refuses the call."""
    try:
        return OrtKernel(spec, shapes)
    except Exception as error:  # (onnxruntime's own classes, or OnnxruntimeLacks)
        if onnxruntime_lacks(error):
            raise
        raise CallRefused(_message(error)) from None


def runtime_fallback(kernel: Kernel, error: BaseException) -> ReferenceKernel | None:
    """The onnx.reference kernel to rerun a call that an onnxruntime kernel failed at run
    time because onnxruntime lacks what the call needs; None where onnxruntime refused the
    call itself (the exported model would fail the same way: the call is an error)."""
    if isinstance(kernel, (OrtKernel, ShapedKernel)) and onnxruntime_lacks(error):
        return kernel.fallback()
    return None
