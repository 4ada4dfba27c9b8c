"""If, Loop and Scan as torch modules whose bodies are GraphModules built like the model.

A body is a ``torch.fx.GraphModule`` taking the ONNX body's inputs, then every value it
reads from enclosing scopes (outer values and weights are passed explicitly, so the
parameters stay on the root module under their ONNX names); it returns a tuple of the
body's outputs.  The loops follow the ONNX rules: a Loop runs while ``i < M`` and
``cond``, stacking its scan outputs; a Scan (opset 9 and later) slices its scan inputs
along their axes, in their directions, and stacks the outputs likewise; an opset-8 Scan
(:class:`BatchedScan`) runs one such scan per entry of a leading batch axis, each as
long as its ``sequence_lens`` entry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from dsl.errors import ConversionError

__all__ = ["If", "Loop", "Scan", "BatchedScan"]


def _truth(value: Any) -> bool:
    return bool(value.reshape(()).item()) if isinstance(value, torch.Tensor) else bool(value)


class If(torch.nn.Module):
    """``forward(condition, *outer)``: the chosen branch run on the outer values."""

    def __init__(self, then_branch: torch.nn.Module, else_branch: torch.nn.Module) -> None:
        super().__init__()
        self.then_branch = then_branch
        self.else_branch = else_branch

    def forward(self, condition: Any, *outer: Any) -> tuple[Any, ...]:
        if isinstance(condition, torch.Tensor) and _tracing():
            # torch.export cannot read the condition's value: both branches go into the
            # exported program (eager runs and torch.compile, which breaks the graph there
            # and so allows branches of different shapes, take the branch in Python)
            chosen = torch.cond(condition.reshape(()), _Branch(self.then_branch), _Branch(self.else_branch), outer)
            return tuple(chosen)
        branch = self.then_branch if _truth(condition) else self.else_branch
        return tuple(branch(*outer))


class _Branch:
    """A branch as ``torch.cond`` calls it: operands in, a tuple out.  torch.cond refuses
    an output that aliases an operand (an ONNX branch that is an Identity of an outer
    value), so each output is a copy; only traced graphs run this."""

    def __init__(self, body: torch.nn.Module) -> None:
        self.body = body

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        return tuple(value.clone() if isinstance(value, torch.Tensor) else value for value in self.body(*operands))


def _tracing() -> bool:
    return bool(torch.compiler.is_exporting())


def _explains_data_dependence(forward: Callable[..., tuple[Any, ...]]) -> Callable[..., tuple[Any, ...]]:
    """torch.export traces one straight graph: a Loop runs there only while its trip count
    and condition are known when tracing (a constant trip count unrolls it)."""

    @functools.wraps(forward)
    def traced(*args: Any) -> tuple[Any, ...]:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        try:
            return forward(*args)
        except GuardOnDataDependentSymNode as error:
            raise ConversionError(
                "a Loop whose trip count or condition is computed from the model's data cannot be traced "
                "(torch.export needs every iteration known when tracing)",
                hint="give the Loop a constant trip count and a condition that stays true, or run the module "
                     "eagerly or under torch.compile, which evaluate the loop in Python",
            ) from error

    return traced


class Loop(torch.nn.Module):
    """``forward(trip_count, condition, *carried, *outer)`` -> ``(*carried, *scan_outputs)``."""

    def __init__(self, body: torch.nn.Module, n_carried: int, scan_dtypes: list[torch.dtype]) -> None:
        super().__init__()
        self.body = body
        self.n_carried = n_carried
        self.scan_dtypes = scan_dtypes

    @_explains_data_dependence
    def forward(self, trip_count: Any, condition: Any, *rest: Any) -> tuple[Any, ...]:
        carried = list(rest[: self.n_carried])
        outer = rest[self.n_carried:]
        limit = None if trip_count is None else int(_scalar(trip_count))
        keep_going = True if condition is None else _truth(condition)
        scans: list[list[Any]] = [[] for _ in self.scan_dtypes]
        iteration = 0
        while (limit is None or iteration < limit) and keep_going:
            results = self.body(torch.tensor(iteration, dtype=torch.int64), torch.tensor(keep_going), *carried, *outer)
            keep_going = _truth(results[0])
            carried = list(results[1: 1 + self.n_carried])
            for collected, value in zip(scans, results[1 + self.n_carried:]):
                collected.append(value)
            iteration += 1
        stacked = [torch.stack(collected) if collected else torch.zeros((0,), dtype=dtype)
                   for collected, dtype in zip(scans, self.scan_dtypes)]
        return (*carried, *stacked)


def _scalar(value: Any) -> Any:
    return value.reshape(()).item() if isinstance(value, torch.Tensor) else value


class Scan(torch.nn.Module):
    """``forward(*state, *scan_inputs, *outer)`` -> ``(*final_state, *scan_outputs)`` (opset >= 9)."""

    def __init__(self, body: torch.nn.Module, n_state: int, n_scan_inputs: int, input_axes: list[int],
                 input_reversed: list[bool], output_axes: list[int], output_reversed: list[bool]) -> None:
        super().__init__()
        self.body = body
        self.n_state = n_state
        self.n_scan_inputs = n_scan_inputs
        self.input_axes = input_axes
        self.input_reversed = input_reversed
        self.output_axes = output_axes
        self.output_reversed = output_reversed

    def forward(self, *inputs: Any) -> tuple[Any, ...]:
        state = list(inputs[: self.n_state])
        scanned = inputs[self.n_state: self.n_state + self.n_scan_inputs]
        outer = inputs[self.n_state + self.n_scan_inputs:]
        axes = [axis % tensor.dim() for axis, tensor in zip(self.input_axes, scanned)]
        length = scanned[0].shape[axes[0]] if scanned else 0
        collected: list[list[Any]] = [[] for _ in self.output_axes]
        for step in range(length):
            slices = [tensor.select(axis, length - 1 - step if backward else step)
                      for tensor, axis, backward in zip(scanned, axes, self.input_reversed)]
            results = self.body(*state, *slices, *outer)
            state = list(results[: self.n_state])
            for found, value in zip(collected, results[self.n_state:]):
                found.append(value)
        outputs = []
        for found, axis, backward in zip(collected, self.output_axes, self.output_reversed):
            if backward:
                found.reverse()
            outputs.append(torch.stack(found, dim=axis % (found[0].dim() + 1)) if found else torch.zeros((0,)))
        return (*state, *outputs)


class BatchedScan(torch.nn.Module):
    """Opset-8 Scan: ``forward(sequence_lens, *state, *scan_inputs, *outer)`` ->
    ``(*final_state, *scan_outputs)``.  Axis 0 of every state and scan input is the batch,
    axis 1 of a scan input the sequence.  Batch entry ``b`` runs ``sequence_lens[b]`` steps
    (all of them when it is None), a reversed input read from its last valid step back;
    its scan outputs are zero past its length (ONNX leaves them undefined)."""

    def __init__(self, body: torch.nn.Module, n_state: int, n_scan_inputs: int, input_reversed: list[bool]) -> None:
        super().__init__()
        self.body = body
        self.n_state = n_state
        self.n_scan_inputs = n_scan_inputs
        self.input_reversed = input_reversed

    def forward(self, sequence_lens: Any, *inputs: Any) -> tuple[Any, ...]:
        state = inputs[: self.n_state]
        scanned = inputs[self.n_state: self.n_state + self.n_scan_inputs]
        outer = inputs[self.n_state + self.n_scan_inputs:]
        batch = (scanned or state)[0].shape[0]
        longest = scanned[0].shape[1] if scanned else 0
        lengths = [longest] * batch if sequence_lens is None else [int(n) for n in sequence_lens.reshape(-1).tolist()]
        finals: list[list[Any]] = []
        outputs: list[list[Any]] = []  # per batch entry, per scan output: the steps' elements
        for entry, length in enumerate(lengths):
            carried = [value[entry] for value in state]
            steps: list[list[Any]] = []
            for step in range(length):
                slices = [value[entry].select(0, length - 1 - step if backward else step)
                          for value, backward in zip(scanned, self.input_reversed)]
                results = self.body(*carried, *slices, *outer)
                carried = list(results[: self.n_state])
                steps.append(list(results[self.n_state:]))
            finals.append(carried)
            outputs.append([list(found) for found in zip(*steps)] if steps else [])
        stacked_state = [torch.stack([final[index] for final in finals]) for index in range(self.n_state)]
        return (*stacked_state, *self._stack_outputs(outputs, longest, batch))

    @staticmethod
    def _stack_outputs(outputs: list[list[list[Any]]], longest: int, batch: int) -> list[Any]:
        sample = next((entry for entry in outputs if entry), None)
        if sample is None:
            return []
        stacked = []
        for index, elements in enumerate(sample):
            blank = torch.zeros_like(elements[0])
            rows = []
            for entry in outputs:
                found = entry[index] if entry else []
                rows.append(torch.stack([*found, *[blank] * (longest - len(found))]))
            stacked.append(torch.stack(rows))
        return stacked
