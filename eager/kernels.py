"""One-op kernels: an onnxruntime session (or an ``onnx.reference`` evaluator) for one op.

A kernel is built once per cache key (see :mod:`eager.sessions`) from a one-node
ModelProto made with ``onnx.helper``; its inputs are declared with the element type and
rank of the call and unnamed dimensions, so one session serves every shape.  Everything
a call needs (feed names, output names, which outputs need raw reading) is computed here,
so :meth:`OrtKernel.run` is a dict build and one ``run`` call.

Backend choice: onnxruntime first, at the oldest opset where the op's schema is the one
requested (``since_version``) when the requested opset is newer than onnxruntime loads;
when onnxruntime cannot build the session (op missing, type not implemented, opset
refused) the kernel is an ``onnx.reference`` evaluator at the requested opset.  A call
that fails at run time in onnxruntime is retried in ``onnx.reference``.  Each kernel
records its ``backend`` and, for a fallback, ``fallback_reason`` (onnxruntime's error).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from dsl.onnxruntime_limits import max_ir_version, max_opset
from eager.backend_policy import reference_reason
from eager.ortvalues import NUMPY_NATIVE, from_ortvalue, to_ortvalue

__all__ = ["KernelSpec", "OrtKernel", "ReferenceKernel", "build_kernel", "KernelBuildError", "LOGGER"]

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


def _type_proto(sig: tuple[Any, ...] | None) -> onnx.TypeProto:
    if sig is None:  # an empty optional: its type is not known, and does not matter
        return oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
    if sig[0] == "opt":
        return oh.make_optional_type_proto(_type_proto(sig[1]))
    if sig[0] == "seq":
        shape = None if sig[2] is None else [None] * sig[2]
        return oh.make_sequence_type_proto(oh.make_tensor_type_proto(sig[1], shape))
    return oh.make_tensor_type_proto(sig[0], [None] * sig[1])


def _value_info(name: str, sig: tuple[Any, ...]) -> onnx.ValueInfoProto:
    return oh.make_value_info(name, _type_proto(sig))


def _is_raw_incapable(sig: tuple[Any, ...]) -> bool:
    """Sequences and optionals cannot be built from raw buffers (see OrtKernel._run_raw)."""
    return sig[0] in ("seq", "opt")


class KernelBuildError(Exception):
    """Neither backend could prepare the op; carries both backends' messages."""

    def __init__(self, ort_message: str, reference_message: str) -> None:
        self.ort_message = ort_message
        self.reference_message = reference_message
        super().__init__(f"onnxruntime: {ort_message}\nonnx.reference: {reference_message}")


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

    def model(self, version: int, ir_version: int) -> onnx.ModelProto:
        present = iter(self.input_names)
        input_names = ["" if sig is None else next(present) for sig in self.inputs]
        while input_names and input_names[-1] == "":
            input_names.pop()
        output_names = [f"y{i}" for i in range(self.n_outputs)]
        node = onnx.NodeProto(op_type=self.op_type, domain=self.domain, input=input_names, output=output_names)
        node.attribute.extend(self.attributes)
        graph_inputs = [_value_info(name, sig) for name, sig in zip(input_names, self.inputs) if sig is not None]
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

    def __init__(self, spec: KernelSpec) -> None:
        import onnxruntime

        self.spec = spec
        self.label = spec.label
        version = spec.ort_version()
        if spec.domain == "" and version > max_opset():
            raise RuntimeError(
                f"onnxruntime loads ai.onnx opsets up to {max_opset()}; {spec.op_type} changed in opset {version}"
            )
        if not _OPTIONS:
            _OPTIONS.append(_session_options())
        model = spec.model(version, max_ir_version())
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
                raise TypeError("sequences of bfloat16/float8/4-bit tensors cannot be passed to onnxruntime")
            feeds[name] = to_ortvalue(array, sig[0], keep_alive)
        values = self._run_values(feeds, self._output_names, self._run_options)
        return [from_ortvalue(values[i], elem) for i, elem in enumerate(self._output_elems)]

    def fallback(self) -> ReferenceKernel:
        """The onnx.reference kernel used when this session fails at run time."""
        if self._fallback is None:
            self._fallback = ReferenceKernel(self.spec, "")
        return self._fallback


class ReferenceKernel:
    """``onnx.reference.ReferenceEvaluator`` on the same one-node model."""

    backend = "onnx.reference"

    __slots__ = ("_evaluator", "_input_names", "fallback_reason", "label", "spec")

    def __init__(self, spec: KernelSpec, fallback_reason: str) -> None:
        from onnx.reference import ReferenceEvaluator

        self.spec = spec
        self.label = spec.label
        self.fallback_reason = fallback_reason
        ir_version = onnx.IR_VERSION
        self._evaluator = ReferenceEvaluator(spec.model(spec.version, ir_version))
        self._input_names = spec.input_names

    def run(self, arrays: list[np.ndarray | None]) -> list[np.ndarray | None]:
        outputs = self._evaluator.run(None, self.spec.feeds(arrays))
        return [_as_onnx_value(o) for o in outputs]


def _as_onnx_value(value: object) -> Any:
    # onnx.reference may return numpy str arrays; onnxruntime (and ONNX) use object arrays.
    if value is None:
        return None
    if isinstance(value, list):
        return [_as_onnx_value(v) for v in value]
    array = np.asarray(value)
    return array.astype(object) if array.dtype.kind in "US" else array


def build_kernel(spec: KernelSpec) -> OrtKernel | ReferenceKernel:
    """onnxruntime if it accepts the op, else onnx.reference; KernelBuildError if neither."""
    n_inputs = max((i + 1 for i, sig in enumerate(spec.inputs) if sig is not None), default=0)
    preferred = reference_reason(spec.domain, spec.op_type, spec.attributes, n_inputs)
    if preferred:
        return ReferenceKernel(spec, f"onnx.reference preferred: {preferred}")
    try:
        return OrtKernel(spec)
    except Exception as ort_error:  # onnxruntime reports every refusal with its own classes
        ort_message = str(ort_error) or repr(ort_error)
    try:
        kernel = ReferenceKernel(spec, ort_message)
    except Exception as reference_error:
        raise KernelBuildError(ort_message, str(reference_error) or repr(reference_error)) from None
    LOGGER.info("eager: %s runs in onnx.reference; onnxruntime refused it: %s", spec.label, ort_message)
    return kernel
