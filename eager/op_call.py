"""``op.X(...)`` outside ``@script``: check the call, find its kernel, run it, convert back.

The hot path (a cache hit) is: classify each argument (numpy array, EagerTensor,
Python literal, torch tensor, None), build the cache key, one dict lookup, one kernel
run.  Every check that depends only on the key (argument count, attribute names and
kinds, element types against the schema) runs on a miss only: a key that hits was
checked when it was first seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import shape_rules, types
from dsl.errors import DslError, DslTypeError, EagerError, OpCallError
from dsl.operators import literal_elem_type
from dsl.opsets import Op
from dsl.shape_rules_inputs import check_element_types
from eager import values
from eager.attributes import attribute_key, attribute_protos
from eager.call_site import caller_location, caller_operands, unpacked_count
from eager.control_flow import has_graph_function, run_control_flow
from eager.kernels import CallRefused, KernelBuildError, KernelSpec, build_kernel, runtime_fallback, sig_elem
from eager.list_inputs import packed_list
from eager.op_facts import OPTIONAL_KINDS, SEQUENCE_KINDS, OpFacts, facts_of
from eager.op_failures import Operand, backend_reason, explain, inference_refusal
from eager.script_context import IN_EAGER_SCRIPT
from eager.sequences import EagerSequence, is_tensor_item, sequence_arrays
from eager.sessions import KERNELS, LAST
from eager.shape_mismatch import MODEL_ONLY_RULES, refuse_before_running
from eager.tensor import EagerTensor

__all__ = ["call_op", "OpFacts"]

_LITERAL = "literal"  # placeholder in the signature until the literal's type is decided
_ELEM_BY_DTYPE = values.ELEM_BY_DTYPE  # (the same dict, filled in place: one attribute lookup less per input)
Signature = tuple[Any, ...]  # one eager.kernels.InputSig per input
# Python number literal -> its array, per element type (``x * 2.0`` in a loop builds it once).
_LITERALS: dict[tuple[type, Any, int], np.ndarray] = {}


def call_op(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any], num_outputs: int | None = None) -> Any:
    """Run one op on concrete values; what ``op.Add(x, y)`` does outside ``@script``.

    Inputs are numpy arrays, numpy scalars, Python numbers/lists (literals that take the
    element type of a tensor beside them), torch tensors (then outputs are torch tensors),
    lists of tensors where the op takes a sequence, or None for an omitted optional input
    (an empty optional where the op takes ``optional(...)`` only); ``kwargs`` are the
    attributes.  Returns one array (an :class:`~eager.sequences.EagerSequence` for a
    sequence, None for an empty optional), or a tuple when several outputs are asked for:
    by ``num_outputs``, by unpacking the call (``y, mask = op.Dropout(x)``), or by the
    schema (``TopK``).

    >>> import numpy as np
    >>> from dsl import opset18 as op
    >>> op.Add(np.array([1.0, 2.0], dtype=np.float32), 1)
    array([2., 3.], dtype=float32)
    """
    if kwargs:
        named = op.keyword_inputs(kwargs)
        if named:  # inputs passed by name (op.Unsqueeze(x, axes=[1])) go to their places
            try:
                args = op.place_inputs(list(args), {n: kwargs[n] for n in named}, None)
            except DslError as error:  # (the call site is looked up only for the message)
                raise error.with_location(caller_location()) from None
            kwargs = {n: v for n, v in kwargs.items() if n not in named}
        if any(value is None for value in kwargs.values()):  # an attribute given None is left out, as onnxscript does
            kwargs = {n: v for n, v in kwargs.items() if v is not None}
        if has_graph_function(kwargs):
            return run_control_flow(op, args, kwargs)
    facts = op._eager_key
    if facts is None:
        facts = facts_of(op)
    arrays, signature, torch_in, eager_in = _read_inputs(op, facts, args)
    if num_outputs is None:
        num_outputs = facts.default_outputs
        if facts.ambiguous_outputs:
            num_outputs = _outputs_asked(op, arrays, kwargs, facts.default_outputs)
    if op.name in MODEL_ONLY_RULES and op.domain == "":  # (shapes onnxruntime runs but a model refuses)
        refuse_before_running(op.name, arrays, lambda: [o.name for o in _operands(op, arrays, signature)], kwargs,
                              op.version, caller_location())
    key = (facts.key, attribute_key(kwargs) if kwargs else (), signature, num_outputs)
    kernel = KERNELS.get(key)
    if kernel is None:
        kernel = KERNELS.add(key, lambda: _prepare(op, facts, args, kwargs, signature, num_outputs, arrays))
    LAST.kernel = kernel
    try:
        outputs = kernel.run(arrays)
    except Exception as runtime_error:
        outputs = _run_fallback(op, kernel, arrays, signature, runtime_error)
    if facts.sequence_outputs:
        outputs = _with_sequences(kernel, outputs, torch_in, eager_in or IN_EAGER_SCRIPT.get())
    elif eager_in or IN_EAGER_SCRIPT.get():
        outputs = [None if o is None else EagerTensor(o, torch_in) for o in outputs]
    elif torch_in:
        outputs = [None if o is None else values.numpy_to_torch(o) for o in outputs]
    if num_outputs == 1:
        return outputs[0]
    return tuple(outputs)


def _read_inputs(op: Op, facts: OpFacts, args: tuple[Any, ...] | list[Any]) -> tuple[list[Any], Signature, bool, bool]:
    """The inputs as kernels take them, and the signature that picks the kernel.

    Returns ``(arrays, signature, torch_in, eager_in)``: a C-contiguous array (a list of
    them for a sequence, None for an omitted input) per input, the signature entry of
    each (see :data:`eager.kernels.InputSig`), and whether any input was a torch tensor
    or an EagerTensor (which decides what call_op returns).
    """
    arrays: list[Any] = []
    signature: list[Any] = []
    torch_in = eager_in = literals = sequences = False
    for value in args:  # (no enumerate: the rare paths that need the position read len(arrays))
        cls = type(value)
        if cls is np.ndarray:
            array = value
        elif cls is EagerTensor:
            array = value.array
            torch_in = torch_in or value.from_torch
            eager_in = True
        elif value is None:
            arrays.append(None)
            signature.append(None)
            continue
        elif cls is EagerSequence or (
            facts.takes_sequences and cls in (list, tuple) and _is_sequence(facts, len(arrays), value)
        ):
            items, elem, from_torch, from_eager = sequence_arrays(value, getattr(value, "elem_type", None))
            torch_in = torch_in or from_torch
            eager_in = eager_in or from_eager
            arrays.append(items)
            signature.append(("seq", elem, None))
            sequences = True
            continue
        elif cls in (list, tuple) and any(is_tensor_item(item) for item in value):
            array, from_torch, from_eager = packed_list(value, len(arrays), len(args))
            torch_in, eager_in = torch_in or from_torch, eager_in or from_eager
        elif cls in (int, float, bool, list, tuple):
            arrays.append(value)
            signature.append(_LITERAL)
            literals = True
            continue
        else:
            array, from_torch = _coerce(op, len(arrays), value)
            torch_in = torch_in or from_torch
        elem = _ELEM_BY_DTYPE.get(array.dtype)
        if elem is None:
            elem = _elem_or_raise(op, len(arrays), array)
            if elem == types.STRING.enum and array.dtype != object:
                array = array.astype(object)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        arrays.append(array)
        signature.append((elem, array.ndim))
    if literals:
        _decide_literals(op, facts, arrays, signature)
    if sequences:
        _type_empty_sequences(op, signature)
    if facts.optional_only:
        _as_optionals(facts, signature)
    return arrays, tuple(signature), torch_in, eager_in


def _is_sequence(facts: OpFacts, index: int, value: list[Any] | tuple[Any, ...]) -> bool:
    """A list is a sequence where the op takes one and it holds tensors or is empty (an
    empty list literal has no element type: compiled code rejects it as a tensor);
    otherwise it is a list literal (``op.Reshape(x, [2, -1])``)."""
    kinds = facts.formal_kinds.get(facts.formal_type(index) or "", frozenset())
    if not kinds & SEQUENCE_KINDS:
        return False
    return not value or is_tensor_item(value[0])


def _type_empty_sequences(op: Op, signature: list[Any]) -> None:
    """An empty list of unknown element type takes that of another sequence beside it, or
    of the tensor SequenceInsert puts in it, else FLOAT (it has no element to clash with)."""
    known = [s[1] for s in signature if s is not None and s[0] == "seq" and s[1] is not None]
    if not known and op.domain == "" and op.name == "SequenceInsert" and len(signature) > 1:
        known = [sig_elem(signature[1])]
    partner = next((elem for elem in known if elem is not None), None)
    for index, sig in enumerate(signature):
        if sig is not None and sig[0] == "seq" and sig[1] is None:
            signature[index] = ("seq", partner or types.FLOAT.enum, None)


def _as_optionals(facts: OpFacts, signature: list[Any]) -> None:
    """Inputs typed ``optional(...)`` only are fed as optionals; None is an empty one."""
    for index in range(len(signature)):
        kinds = facts.formal_kinds.get(facts.formal_type(index) or "")
        if kinds and kinds <= OPTIONAL_KINDS:
            signature[index] = ("opt", signature[index])


def _with_sequences(kernel: Any, outputs: list[Any], torch_in: bool, stay_eager: bool) -> list[Any]:
    """Outputs as call_op returns them, with sequence outputs as :class:`EagerSequence`."""

    def convert(array: Any) -> Any:
        if stay_eager:
            return EagerTensor(array, torch_in)
        return values.numpy_to_torch(array) if torch_in else array

    converted: list[Any] = []
    for index, output in enumerate(outputs):
        if output is None:
            converted.append(None)
        elif isinstance(output, list):
            if output:
                elem = values.elem_type_of_array(output[0])
            else:
                elem = kernel.spec.sequence_elem(index) if hasattr(kernel, "spec") else None
            converted.append(EagerSequence([convert(item) for item in output], elem))
        else:
            converted.append(convert(output))
    return converted


def _coerce(op: Op, index: int, value: Any) -> tuple[np.ndarray, bool]:
    if values.is_torch_tensor(value):
        return values.torch_to_numpy(value), True
    if isinstance(value, np.ndarray):
        return np.asarray(value), False
    if isinstance(value, np.generic):
        return np.asarray(value), False
    if isinstance(value, EagerTensor):
        return value.array, value.from_torch
    if isinstance(value, (str, bytes)):
        return np.array(value, dtype=object), False
    if hasattr(value, "__array__") or hasattr(value, "__dlpack__"):
        return np.asarray(value), False
    raise DslTypeError(
        f"input {_input_name(op, index)!r} of {op.name} is a {type(value).__name__}, which is not a tensor",
        caller_location(),
        hint="pass numpy arrays, torch tensors, Python numbers or None (an omitted optional input)",
    )


def _elem_or_raise(op: Op, index: int, array: np.ndarray) -> int:
    elem = values.elem_type_of_array(array)
    if elem is None:
        raise DslTypeError(
            f"input {_input_name(op, index)!r} of {op.name} has dtype {array.dtype}, which ONNX has no element type for",
            caller_location(),
            hint="convert it with .astype(...) to a numeric, bool or string dtype",
        )
    return elem


def _input_name(op: Op, index: int) -> str:
    names = op.input_names
    if not names:
        return f"#{index}"
    if index < len(names):
        return names[index]
    return f"{names[-1]}[{index - len(names) + 1}]"


def _decide_literals(op: Op, facts: OpFacts, arrays: list[Any], signature: list[Any]) -> None:
    """A literal takes the type of a tensor bound to the same type parameter (as compiled)."""
    by_formal: dict[str | None, int] = {}
    first_tensor: int | None = None
    for index, sig in enumerate(signature):
        if sig is not None and sig is not _LITERAL:
            elem_of_sig = sig_elem(sig)
            if elem_of_sig is None:
                continue
            by_formal.setdefault(facts.formal_type(index), elem_of_sig)
            if first_tensor is None:
                first_tensor = elem_of_sig
    for index, sig in enumerate(signature):
        if sig is not _LITERAL:
            continue
        value = arrays[index]
        formal = facts.formal_type(index)
        partner = by_formal.get(formal)
        if partner is None:
            partner = facts.single_type.get(formal or "")
        elem = literal_elem_type(value, partner) if partner is not None else None
        if elem is None:
            if formal is None and first_tensor is not None:
                elem = literal_elem_type(value, first_tensor)
            else:
                elem = types.element_type_of_python(value)
        if elem is None:
            raise DslTypeError(
                f"input {_input_name(op, index)!r} of {op.name}: cannot make a tensor of {value!r}",
                caller_location(),
                hint="pass a numpy array with an explicit dtype",
            )
        cls = type(value)
        # -0.0 == 0.0 as a key, but not as a value: zero floats are not cached.
        cacheable = cls is int or cls is bool or (cls is float and value != 0.0)
        cache_key = (cls, value, elem) if cacheable else None
        cached = _LITERALS.get(cache_key) if cache_key is not None else None
        if cached is not None:
            arrays[index] = cached
            signature[index] = (elem, 0)
            continue
        array = values.literal_input_array(value, elem, op.name, _input_name(op, index),
                                           "pass a numpy array with an explicit dtype")
        if elem == types.STRING.enum:
            array = array.astype(object)
        if cache_key is not None and len(_LITERALS) < 1024:
            array.flags.writeable = False  # shared by every call with this literal
            _LITERALS[cache_key] = array
        arrays[index] = array
        signature[index] = (elem, array.ndim)


def _outputs_asked(op: Op, arrays: list[Any], kwargs: dict[str, Any], default: int) -> int:
    asked = unpacked_count()
    if asked is not None:
        return asked
    if op.domain == "" and op.name == "Split":
        if "num_outputs" in kwargs:
            return int(kwargs["num_outputs"])
        if len(arrays) > 1 and arrays[1] is not None:
            return int(np.asarray(arrays[1]).size)
        raise OpCallError(
            "Split needs to know how many outputs to make",
            caller_location(),
            hint="pass num_outputs=..., a split input, or unpack the result: a, b = op.Split(x, ...)",
        )
    graph_outputs = _subgraph_output_count(op, kwargs)
    return graph_outputs if graph_outputs is not None else default


def _subgraph_output_count(op: Op, kwargs: dict[str, Any]) -> int | None:
    if op.domain != "":
        return None
    body = kwargs.get("then_branch") if op.name == "If" else kwargs.get("body")
    if body is None:
        return None
    outputs = getattr(body, "output", None)
    if outputs is None:
        outputs = getattr(body, "outputs", None)
    if outputs is None:
        return None
    return max(len(outputs) - (1 if op.name == "Loop" else 0), 1)


def _prepare(
    op: Op,
    facts: OpFacts,
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any],
    signature: Signature,
    num_outputs: int,
    arrays: list[Any],
) -> Any:
    location = caller_location()
    op.check_call(len(signature), kwargs, location)
    op.check_outputs(num_outputs, location)
    _check_required_inputs(op, signature, location)
    protos = attribute_protos(op, kwargs, location)
    _check_value_kinds(op, facts, signature, location)
    op.check_input_types([sig_elem(s) for s in signature], location)
    if op.domain == "":
        shape_rules.check_attributes(op.name, kwargs, location)
        check_element_types(op.name, op.since_version, [sig_elem(s) for s in signature], kwargs, location)
    spec = KernelSpec(op.domain, op.name, op.version, op.since_version, protos, tuple(signature), num_outputs)
    try:
        kernel = build_kernel(spec, arrays)
    except KernelBuildError as err:
        backend_messages = {"onnxruntime": err.ort_message, "onnx.reference": err.reference_message}
        operands, found = _explained(op, arrays, signature, protos)
        raise _failure(op, operands, found, signature, backend_messages, location) from None
    except CallRefused as err:  # onnxruntime has the op and refuses this call: so would the exported model
        operands, found = _explained(op, arrays, signature, protos)
        raise _failure(op, operands, found, signature, {"onnxruntime": err.ort_message}, location) from None
    if kernel.backend == "onnx.reference" and kernel.fallback_reason:
        # onnxruntime lacks the op; onnx.reference may still run what no model may hold
        # (Gemm of a rank-3 input): the compiler's rules decide, as they would compiled
        operands, found = _explained(op, arrays, signature, protos)
        if found is not None:
            raise _failure(op, operands, found, signature, {"onnxruntime": kernel.fallback_reason}, location)
    return kernel


def _check_value_kinds(op: Op, facts: OpFacts, signature: Signature, location: Any) -> None:
    """A sequence where the op takes a tensor, or a tensor where it takes a sequence, is an
    error the exported model would report at load time; say so before building a kernel."""
    if op.schema is None:
        return
    for index, sig in enumerate(signature):
        if sig is None:
            continue
        kinds = facts.formal_kinds.get(facts.formal_type(index) or "", frozenset())
        if not kinds or kinds & OPTIONAL_KINDS:
            continue
        given = "seq" if sig[0] == "seq" else "tensor"
        if given not in kinds:
            wanted = "a sequence of tensors" if given == "tensor" else "a tensor"
            raise DslTypeError(
                f"input {_input_name(op, index)!r} of {op.name} takes {wanted}, got "
                f"{'a sequence' if given == 'seq' else 'a tensor'}",
                location,
                hint="make a sequence with op.SequenceConstruct(...) and take a tensor out with op.SequenceAt(...)"
                if given == "tensor"
                else "take a tensor out of the sequence with op.SequenceAt(seq, i) or op.ConcatFromSequence",
            )
    if op.domain == "" and op.name == "SequenceInsert" and len(signature) > 1 and None not in signature[:2]:
        held, inserted = sig_elem(signature[0]), sig_elem(signature[1])
        if held != inserted and held is not None and inserted is not None:
            raise DslTypeError(
                f"SequenceInsert: the sequence holds {types.element_type_name(held)}, the tensor is "
                f"{types.element_type_name(inserted)}",
                location,
                hint="a sequence holds tensors of one element type; cast with op.Cast(..., to=...)",
            )


def _check_required_inputs(op: Op, signature: Signature, location: Any) -> None:
    if op.schema is None:
        return
    import onnx.defs

    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    for index, formal in enumerate(op.schema.inputs[: len(signature)]):
        if signature[index] is None and formal.option != optional:
            raise OpCallError(
                f"input {formal.name!r} of {op.name} is required, got None",
                location,
                hint=f"the inputs of {op.name} are ({', '.join(op.input_names)})",
            )


class _RuntimeFallback:
    """The backend report of a call that onnxruntime failed and onnx.reference ran."""

    backend = "onnx.reference"

    def __init__(self, label: str, reason: str) -> None:
        self.label = label
        self.fallback_reason = reason


def _attribute_values(protos: Any) -> dict[str, Any]:
    """The attributes of a call by name, as Python values (what the failure rules read)."""
    import onnx.helper

    return {proto.name: onnx.helper.get_attribute_value(proto) for proto in protos}


def _operands(op: Op, arrays: list[Any], signature: Signature) -> list[Operand]:
    """The inputs of the call as the user wrote them (the schema's names where the source
    cannot be read), with their shapes (None for a sequence, an optional or an omitted one)."""
    written = caller_operands(len(arrays))
    operands = []
    for index, (array, sig, name) in enumerate(zip(arrays, signature, written)):
        if name == f"input {index}":
            name = _input_name(op, index)
        tensor = sig is not None and sig is not _LITERAL and sig[0] not in ("seq", "opt")
        operands.append(Operand(name, tuple(np.shape(array)) if tensor else None, array if tensor else None))
    return operands


def _explained(
    op: Op, arrays: list[Any], signature: Signature, protos: list[Any]
) -> tuple[list[Operand], tuple[str, str] | None]:
    """The call's operands, and the op's rule that they break when one is known: the
    compiler's shape rules and eager's own (:func:`eager.op_failures.explain`), then, for an
    op those have no rule for, ONNX's shape inference on the call's shapes, as compiled."""
    operands = _operands(op, arrays, signature)
    found = explain(op.name, operands, _attribute_values(protos), op.version)
    if found is None and op.schema is not None and op.domain == "" and not shape_rules.has_rule(op.name):
        found = inference_refusal(op.schema, op.default_output_count(), arrays, signature, protos)
    return operands, found


def _failure(
    op: Op,
    operands: list[Operand],
    found: tuple[str, str] | None,
    signature: Signature,
    backend_messages: dict[str, str],
    location: Any,
) -> EagerError:
    """One error for a call the backends refused: ``found``, the rule the operands break,
    when one is known, else the first backend's reason in one sentence, at the user's line."""
    if found is None:
        described = ", ".join(_operand_text(operand, sig) for operand, sig in zip(operands, signature))
        reason = backend_reason(next(iter(backend_messages.values()), ""))
        takes = (f"{op.name} takes ({', '.join(op.input_names)}) at {op.opset.describe()}" if op.schema is not None
                 else f"no schema defines {op.domain}::{op.name}: a backend runs it only with a kernel registered for it")
        if list(backend_messages) == ["onnxruntime"]:  # it has the op: the exported model would meet the same refusal
            takes = f"onnxruntime refuses this call, and would refuse it in an exported model too; {takes}"
        found = (f"{op.name}: {described}: {reason}", f"{takes}; the backends' own reports are in the error's "
                 "backend_messages")
    error = EagerError(found[0], location, hint=found[1])
    error.backend_messages = dict(backend_messages)
    return error


def _operand_text(operand: Operand, sig: Any) -> str:
    if sig is None:
        return f"{operand.name}=None"
    if operand.shape is None:
        return operand.name
    elem = types.element_type_name(sig_elem(sig) or types.FLOAT.enum)
    return f"{operand.name}: {elem}[{', '.join(str(d) for d in operand.shape)}]"


def _run_fallback(
    op: Op, kernel: Any, arrays: list[Any], signature: Signature, runtime_error: Exception
) -> Any:
    """Outputs of a call the kernel failed: from onnx.reference where onnxruntime lacks what
    the call needs, else the EagerError saying why the call is refused."""
    if isinstance(runtime_error, DslError):
        raise runtime_error
    if isinstance(runtime_error, CallRefused):  # (onnxruntime's verdict on a call another backend runs)
        backend_messages = {"onnxruntime": runtime_error.ort_message}
    else:
        backend_messages = {kernel.backend: str(runtime_error) or repr(runtime_error)}
        if kernel.backend == "onnx.reference" and kernel.fallback_reason:
            backend_messages = {"onnxruntime": kernel.fallback_reason, **backend_messages}
    operands, found = _explained(op, arrays, signature, kernel.spec.attributes)
    fallback = runtime_fallback(kernel, runtime_error) if found is None else None
    if fallback is not None:
        try:
            outputs = fallback.run(arrays)
        except Exception as reference_error:  # (any failure of the second backend is reported)
            backend_messages["onnx.reference"] = str(reference_error) or repr(reference_error)
        else:
            LAST.kernel = _RuntimeFallback(kernel.label, str(runtime_error))
            return outputs
    raise _failure(op, operands, found, signature, backend_messages, caller_location()) from None
