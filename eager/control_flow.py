"""If, Loop and Scan whose bodies are ``@graph()`` Python functions, run as Python.

In compiled code a ``@graph()`` function becomes a subgraph attribute; eagerly there is
no graph to build: ``If`` calls the branch the condition picks, ``Loop`` and ``Scan``
call the body once per iteration, each time with EagerTensors, so a breakpoint inside
a body stops on real values and values the body reads from the enclosing function are
simply the closure's.  The iteration rules are the ONNX ones: Loop runs while
``i < M`` (when M is given) and ``cond`` (when given), returns the final loop-carried
values and the per-iteration scan outputs stacked on axis 0; Scan slices each scan
input along its axis (reversed for direction 1) and stacks each scan output likewise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeGuard

import numpy as np

from dsl.errors import DslTypeError, OpCallError
from dsl.opsets import Op
from eager import values
from eager.call_site import caller_location
from eager.results import declared_results, typed_results
from eager.script_context import IN_EAGER_SCRIPT
from eager.sequences import EagerSequence, is_tensor_item, sequence_arrays
from eager.tensor import EagerTensor

__all__ = ["has_graph_function", "run_control_flow"]


class _GraphFunctionLike(Protocol):
    python_function: Callable[..., Any]


def _is_graph_function(value: Any) -> TypeGuard[_GraphFunctionLike]:
    # Recognised by shape, not imported: dsl.script_function is the facade above eager, not below it.
    return type(value).__name__ == "GraphFunction" and hasattr(value, "python_function")


def has_graph_function(kwargs: dict[str, Any]) -> bool:
    """True when an attribute is a ``@graph()`` function (so the op runs as Python here)."""
    return any(_is_graph_function(value) for value in kwargs.values())


def _tensor(value: Any) -> Any:
    """An input of the op as the body sees it: EagerTensor, EagerSequence or None."""
    if value is None or isinstance(value, (EagerTensor, EagerSequence)):
        return value
    if isinstance(value, list) and (not value or is_tensor_item(value[0])):
        arrays, elem, from_torch, _ = sequence_arrays(value, None)
        return EagerSequence([EagerTensor(a, from_torch) for a in arrays], elem)
    if values.is_torch_tensor(value):
        return EagerTensor(values.torch_to_numpy(value), True)
    return EagerTensor(np.asarray(value))


def _call_body(body: Any, *inputs: Any) -> list[Any]:
    """Call a body and type its results as the compiled subgraph's outputs are typed."""
    result = typed_results(body.__name__, body(*inputs), declared_results(body))
    return list(result) if isinstance(result, tuple) else [result]


def _body(op: Op, kwargs: dict[str, Any], name: str) -> Any:
    body = kwargs.get(name)
    if not _is_graph_function(body):
        raise OpCallError(
            f"{op.name} needs {name}= as a @graph() function to run eagerly",
            caller_location(),
            hint=f"decorate a nested function with @graph() and pass it as {name}=...",
        )
    return body.python_function


def run_control_flow(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> Any:
    """Run If/Loop/Scan with Python bodies; results as call_op would return them."""
    stay_eager = IN_EAGER_SCRIPT.get() or any(isinstance(a, EagerTensor) for a in args)
    token = IN_EAGER_SCRIPT.set(True)
    try:
        if op.name == "If":
            outputs = _run_if(op, args, kwargs)
        elif op.name == "Loop":
            outputs = _run_loop(op, args, kwargs)
        elif op.name == "Scan":
            outputs = _run_batched_scan(op, args, kwargs) if (op.since_version or 9) < 9 else _run_scan(op, args, kwargs)
        elif op.name == "SequenceMap":
            outputs = _run_sequence_map(op, args, kwargs)
        else:
            raise OpCallError(
                f"{op.name} cannot run a @graph() function eagerly",
                caller_location(),
                hint="eager mode runs @graph() bodies of If, Loop, Scan and SequenceMap",
            )
    finally:
        IN_EAGER_SCRIPT.reset(token)
    if not stay_eager:
        from_torch = any(_from_torch(t) for t in outputs)
        outputs = [_plain(t, from_torch) for t in outputs]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _from_torch(value: Any) -> bool:
    if isinstance(value, EagerSequence):
        return any(_from_torch(item) for item in value)
    return isinstance(value, EagerTensor) and value.from_torch


def _plain(value: Any, from_torch: bool) -> Any:
    """An output as ``call_op`` returns it outside a script: arrays (or torch tensors)."""
    if isinstance(value, EagerSequence):
        return EagerSequence([_plain(item, from_torch) for item in value], value.elem_type)
    if isinstance(value, EagerTensor):
        return values.numpy_to_torch(value.array) if from_torch else value.array
    return value


def _run_if(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> list[EagerTensor]:
    if len(args) != 1:
        op.check_inputs(len(args), caller_location())
    condition = _tensor(args[0])
    branch = _body(op, kwargs, "then_branch" if bool(condition) else "else_branch")
    return _call_body(branch)


def _run_loop(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> list[EagerTensor]:
    op.check_inputs(len(args), caller_location())
    body = _body(op, kwargs, "body")
    trip = _tensor(args[0]) if len(args) > 0 else None
    condition = _tensor(args[1]) if len(args) > 1 else None
    carried = [_tensor(v) for v in args[2:]]
    limit = None if trip is None else int(trip)
    keep_going = True if condition is None else bool(condition)
    scans: list[list[np.ndarray]] = []
    i = 0
    while (limit is None or i < limit) and keep_going:
        results = _call_body(body, EagerTensor(np.array(i, np.int64)), EagerTensor(np.array(keep_going)), *carried)
        if len(results) < 1 + len(carried):
            raise DslTypeError(
                f"the Loop body returns {len(results)} value(s); it must return the condition, then the "
                f"{len(carried)} loop-carried value(s), then any scan outputs",
                caller_location(),
            )
        keep_going = bool(results[0])
        carried = results[1: 1 + len(carried)]
        step_scans = results[1 + len(carried):]
        if not scans:
            scans = [[] for _ in step_scans]
        for collected, value in zip(scans, step_scans):
            collected.append(value.array)
        i += 1
    stacked = [EagerTensor(np.stack(collected)) for collected in scans]
    return [*carried, *stacked]


def _scan_body(op: Op, kwargs: dict[str, Any]) -> tuple[Any, int]:
    """A Scan's Python body and its number of scan inputs (every opset's Scan has both)."""
    body = _body(op, kwargs, "body")
    if "num_scan_inputs" not in kwargs:
        raise OpCallError("Scan requires attribute num_scan_inputs", caller_location(),
                          hint="pass num_scan_inputs=... as a keyword argument")
    return body, int(kwargs["num_scan_inputs"])


def _run_scan(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> list[EagerTensor]:
    body, n_scan = _scan_body(op, kwargs)
    tensors = [_tensor(v) for v in args]
    states = tensors[: len(tensors) - n_scan]
    inputs = [t.array for t in tensors[len(tensors) - n_scan:]]
    axes = list(kwargs.get("scan_input_axes", [0] * n_scan))
    directions = list(kwargs.get("scan_input_directions", [0] * n_scan))
    inputs = [np.moveaxis(a, axis, 0) for a, axis in zip(inputs, axes)]
    inputs = [a[::-1] if d else a for a, d in zip(inputs, directions)]
    steps = inputs[0].shape[0] if inputs else 0
    scans: list[list[np.ndarray]] = []
    for step in range(steps):
        # (np.array, not ascontiguousarray: that makes a rank-0 slice of a vector rank 1)
        results = _call_body(body, *states, *[EagerTensor(np.array(a[step])) for a in inputs])
        states = results[: len(states)]
        step_scans = results[len(states):]
        if not scans:
            scans = [[] for _ in step_scans]
        for collected, value in zip(scans, step_scans):
            collected.append(value.array)
    out_axes = list(kwargs.get("scan_output_axes", [0] * len(scans)))
    out_directions = list(kwargs.get("scan_output_directions", [0] * len(scans)))
    outputs = []
    for collected, axis, direction in zip(scans, out_axes, out_directions):
        stacked = np.stack(collected[::-1] if direction else collected)
        outputs.append(EagerTensor(np.ascontiguousarray(np.moveaxis(stacked, 0, axis))))
    return [*states, *outputs]


def _run_batched_scan(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> list[EagerTensor]:
    """Scan of opset 8: its inputs are ``sequence_lens`` (None: every sequence whole), the
    states and the scan inputs, all with a leading batch axis, scanned along axis 1
    (``directions``: 1 reverses an input's first ``sequence_lens`` steps).  Each batch
    entry runs on its own; a scan output's steps past its length are zeros, as
    onnxruntime gives them (ONNX leaves them undefined)."""
    body, n_scan = _scan_body(op, kwargs)
    lengths_in, *rest = args if args else [None]
    tensors = [_tensor(v) for v in rest]
    states = [t.array for t in tensors[: len(tensors) - n_scan]]
    inputs = [t.array for t in tensors[len(tensors) - n_scan:]]
    directions = list(kwargs.get("directions", [0] * n_scan))
    if not inputs or any(a.ndim < 2 for a in inputs) or any(s.ndim < 1 for s in states):
        raise DslTypeError("Scan (opset 8): the states are [batch, ...] and the scan inputs [batch, sequence, ...]",
                           caller_location(), hint="Scan before opset 9 takes a leading batch axis on every input")
    batch, longest = inputs[0].shape[:2]
    if batch == 0:
        raise DslTypeError("Scan (opset 8): a batch of 0 entries cannot run eagerly (the body's shapes are unknown)",
                           caller_location(), hint="give at least one batch entry")
    lengths = [longest] * batch if lengths_in is None else [int(n) for n in _tensor(lengths_in).array.reshape(-1)]
    if len(lengths) != batch or any(not 1 <= n <= longest for n in lengths):
        raise DslTypeError(f"Scan (opset 8): sequence_lens {lengths} must give each of the {batch} batch entries "
                           f"a length from 1 to {longest}", caller_location(),
                           hint="one length a batch entry, at most the scan inputs' axis 1")
    finals: list[list[np.ndarray]] = [[] for _ in states]
    scanned: list[list[np.ndarray]] = []
    for entry, length in enumerate(lengths):
        carried = [EagerTensor(np.array(state[entry])) for state in states]
        steps: list[list[np.ndarray]] = []
        for step in range(length):
            slices = [EagerTensor(np.array(a[entry, length - 1 - step if d else step])) for a, d in zip(inputs, directions)]
            results = _call_body(body, *carried, *slices)
            carried = results[: len(states)]
            steps.append([value.array for value in results[len(states):]])
        for collected, value in zip(finals, carried):
            collected.append(value.array)
        outputs = [np.stack(column) for column in zip(*steps)] if steps else []
        scanned.append([np.concatenate([out, np.zeros((longest - length, *out.shape[1:]), out.dtype)])
                        for out in outputs])
    return [*(EagerTensor(np.stack(collected)) for collected in finals),
            *(EagerTensor(np.stack(column)) for column in zip(*scanned))]


def _run_sequence_map(op: Op, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The body once per position of the input sequence; each result collected into a sequence.

    Additional inputs that are sequences give the body their item at the same position
    (they must be as long as the input sequence); tensors are passed whole.
    """
    op.check_inputs(len(args), caller_location())
    body = _body(op, kwargs, "body")
    inputs = [_tensor(value) for value in args]
    if not isinstance(inputs[0], EagerSequence):
        raise DslTypeError("input 'input_sequence' of SequenceMap takes a sequence of tensors, got a tensor",
                           caller_location(), hint="make a sequence with op.SequenceConstruct(...)")
    length = len(inputs[0])
    for position, value in enumerate(inputs[1:], start=1):
        if isinstance(value, EagerSequence) and len(value) != length:
            raise DslTypeError(
                f"input {position} of SequenceMap is a sequence of {len(value)} tensor(s), the input sequence has "
                f"{length}",
                caller_location(),
                hint="sequences mapped together must have the same length",
            )
    declared = declared_results(body)
    collected: list[list[Any]] = [[] for _ in declared] if declared is not None else []
    for step in range(length):
        results = _call_body(body, *[v[step] if isinstance(v, EagerSequence) else v for v in inputs])
        if not collected:
            collected = [[] for _ in results]
        for bucket, value in zip(collected, results):
            bucket.append(value)
    outputs = []
    for index, bucket in enumerate(collected):
        want = declared[index] if declared is not None else None
        elem = bucket[0].elem_type if bucket else getattr(want, "elem_type", None)
        outputs.append(EagerSequence(bucket, elem))
    return outputs
