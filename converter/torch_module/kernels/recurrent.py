"""Recurrent layers: RNN, GRU and LSTM (every direction, layout, activation, clip,
sequence_lens, peepholes, input_forget and linear_before_reset).

The time loop is unrolled in Python over the sequence length (a shape, known when the
module is traced); batch entries past their ``sequence_lens`` keep their state and emit
zeros, as ONNX specifies.  Outputs follow the op: ``(Y, Y_h)`` for RNN and GRU,
``(Y, Y_h, Y_c)`` for LSTM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

Activation = Callable[[torch.Tensor], torch.Tensor]


def _activation(name: str, alpha: float | None, beta: float | None) -> Activation:
    kind = name.lower()
    if kind == "relu":
        return torch.relu
    if kind == "tanh":
        return torch.tanh
    if kind == "sigmoid":
        return torch.sigmoid
    if kind == "softsign":
        return F.softsign
    if kind == "softplus":
        return F.softplus
    if kind == "affine":
        return lambda x: (1.0 if alpha is None else alpha) * x + (0.0 if beta is None else beta)
    if kind == "leakyrelu":
        return lambda x: F.leaky_relu(x, 0.01 if alpha is None else alpha)
    if kind == "thresholdedrelu":
        return lambda x: torch.where(x > (1.0 if alpha is None else alpha), x, torch.zeros_like(x))
    if kind == "scaledtanh":
        return lambda x: (1.0 if alpha is None else alpha) * torch.tanh((1.0 if beta is None else beta) * x)
    if kind == "hardsigmoid":
        return lambda x: torch.clamp((0.2 if alpha is None else alpha) * x + (0.5 if beta is None else beta), 0, 1)
    if kind == "elu":
        return lambda x: F.elu(x, 1.0 if alpha is None else alpha)
    raise ValueError(f"unknown recurrent activation {name!r}")


def _activations(
    names: Sequence[str] | None, defaults: tuple[str, ...], directions: int,
    alphas: Sequence[float] | None, betas: Sequence[float] | None,
) -> list[list[Activation]]:
    """One list of activation functions per direction (ONNX lists them back to back)."""
    chosen = list(names) if names else list(defaults) * directions
    alpha = list(alphas or [])
    beta = list(betas or [])
    functions = [
        _activation(name, alpha[i] if i < len(alpha) else None, beta[i] if i < len(beta) else None)
        for i, name in enumerate(chosen)
    ]
    per = len(defaults)
    return [functions[d * per : (d + 1) * per] for d in range(directions)]


class _Layer:
    """The inputs of one recurrent node in time-major layout, split by direction."""

    def __init__(
        self, x: torch.Tensor, sequence_lens: torch.Tensor | None, initial: Sequence[torch.Tensor | None],
        hidden_size: int, directions: int, layout: int,
    ) -> None:
        self.x = x.transpose(0, 1) if layout else x
        steps, batch = self.x.shape[0], self.x.shape[1]
        self.steps = steps
        self.lengths = sequence_lens.to(torch.int64) if sequence_lens is not None else None
        self.initial = []
        for state in initial:
            if state is None:
                self.initial.append(self.x.new_zeros(directions, batch, hidden_size))
            else:
                self.initial.append(state.transpose(0, 1) if layout else state)
        self.layout = layout

    def order(self, reverse: bool) -> range:
        return range(self.steps - 1, -1, -1) if reverse else range(self.steps)

    def valid(self, t: int) -> torch.Tensor | None:
        return None if self.lengths is None else (t < self.lengths).reshape(-1, 1)

    def finish(self, per_direction: list[list[torch.Tensor]], states: list[list[torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        y = torch.stack([torch.stack(outputs) for outputs in per_direction], dim=1)  # [seq, dir, batch, hidden]
        finals = [torch.stack(list(kind)) for kind in zip(*states)]  # each [dir, batch, hidden]
        if self.layout:
            return (y.permute(2, 0, 1, 3), *(state.transpose(0, 1) for state in finals))
        return (y, *finals)


def _step(new: torch.Tensor, old: torch.Tensor, valid: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The state after a step and the step's output, masked by sequence_lens."""
    if valid is None:
        return new, new
    return torch.where(valid, new, old), torch.where(valid, new, torch.zeros_like(new))


def _clipped(gates: torch.Tensor, clip: float | None) -> torch.Tensor:
    return gates if clip is None else torch.clamp(gates, -clip, clip)


def _directions(direction: str) -> list[bool]:
    return [False, True] if direction == "bidirectional" else [direction == "reverse"]


def rnn(
    x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None = None,
    sequence_lens: torch.Tensor | None = None, initial_h: torch.Tensor | None = None,
    activation_alpha: Sequence[float] | None = None, activation_beta: Sequence[float] | None = None,
    activations: Sequence[str] | None = None, clip: float | None = None, direction: str = "forward",
    hidden_size: int | None = None, layout: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    reverse_flags = _directions(direction)
    size = hidden_size or r.shape[-1]
    layer = _Layer(x, sequence_lens, [initial_h], size, len(reverse_flags), layout)
    functions = _activations(activations, ("Tanh",), len(reverse_flags), activation_alpha, activation_beta)
    outputs, states = [], []
    for d, reverse in enumerate(reverse_flags):
        bias = 0 if b is None else b[d, :size] + b[d, size:]
        h = layer.initial[0][d]
        steps: dict[int, torch.Tensor] = {}
        for t in layer.order(reverse):
            new = functions[d][0](_clipped(layer.x[t] @ w[d].T + h @ r[d].T + bias, clip))
            h, steps[t] = _step(new, h, layer.valid(t))
        outputs.append([steps[t] for t in range(layer.steps)])
        states.append([h])
    return layer.finish(outputs, states)  # type: ignore[return-value]


def gru(
    x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None = None,
    sequence_lens: torch.Tensor | None = None, initial_h: torch.Tensor | None = None,
    activation_alpha: Sequence[float] | None = None, activation_beta: Sequence[float] | None = None,
    activations: Sequence[str] | None = None, clip: float | None = None, direction: str = "forward",
    hidden_size: int | None = None, layout: int = 0, linear_before_reset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    reverse_flags = _directions(direction)
    size = hidden_size or r.shape[-1]
    layer = _Layer(x, sequence_lens, [initial_h], size, len(reverse_flags), layout)
    functions = _activations(activations, ("Sigmoid", "Tanh"), len(reverse_flags), activation_alpha, activation_beta)
    outputs, states = [], []
    for d, reverse in enumerate(reverse_flags):
        f, g = functions[d]
        wb = x.new_zeros(3 * size) if b is None else b[d, : 3 * size]
        rb = x.new_zeros(3 * size) if b is None else b[d, 3 * size :]
        w_z, w_r, w_h = w[d].split(size)
        r_z, r_r, r_h = r[d].split(size)
        h = layer.initial[0][d]
        steps: dict[int, torch.Tensor] = {}
        for t in layer.order(reverse):
            xt = layer.x[t]
            z = f(_clipped(xt @ w_z.T + h @ r_z.T + wb[:size] + rb[:size], clip))
            reset = f(_clipped(xt @ w_r.T + h @ r_r.T + wb[size : 2 * size] + rb[size : 2 * size], clip))
            if linear_before_reset:
                candidate = xt @ w_h.T + reset * (h @ r_h.T + rb[2 * size :]) + wb[2 * size :]
            else:
                candidate = xt @ w_h.T + (reset * h) @ r_h.T + rb[2 * size :] + wb[2 * size :]
            new = (1 - z) * g(_clipped(candidate, clip)) + z * h
            h, steps[t] = _step(new, h, layer.valid(t))
        outputs.append([steps[t] for t in range(layer.steps)])
        states.append([h])
    return layer.finish(outputs, states)  # type: ignore[return-value]


def lstm(
    x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None = None,
    sequence_lens: torch.Tensor | None = None, initial_h: torch.Tensor | None = None,
    initial_c: torch.Tensor | None = None, p: torch.Tensor | None = None,
    activation_alpha: Sequence[float] | None = None, activation_beta: Sequence[float] | None = None,
    activations: Sequence[str] | None = None, clip: float | None = None, direction: str = "forward",
    hidden_size: int | None = None, input_forget: int = 0, layout: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    reverse_flags = _directions(direction)
    size = hidden_size or r.shape[-1]
    layer = _Layer(x, sequence_lens, [initial_h, initial_c], size, len(reverse_flags), layout)
    functions = _activations(activations, ("Sigmoid", "Tanh", "Tanh"), len(reverse_flags), activation_alpha, activation_beta)
    outputs, states = [], []
    for d, reverse in enumerate(reverse_flags):
        f, g, act_h = functions[d]
        bias = x.new_zeros(4 * size) if b is None else b[d, : 4 * size] + b[d, 4 * size :]
        p_i, p_o, p_f = (x.new_zeros(size),) * 3 if p is None else p[d].split(size)
        h, c = layer.initial[0][d], layer.initial[1][d]
        steps: dict[int, torch.Tensor] = {}
        for t in layer.order(reverse):
            gates = layer.x[t] @ w[d].T + h @ r[d].T + bias
            g_i, g_o, g_f, g_c = gates.split(size, dim=-1)
            i = f(_clipped(g_i + p_i * c, clip))
            forget = 1 - i if input_forget else f(_clipped(g_f + p_f * c, clip))
            new_c = forget * c + i * g(_clipped(g_c, clip))
            o = f(_clipped(g_o + p_o * new_c, clip))
            new_h = o * act_h(new_c)
            valid = layer.valid(t)
            c = new_c if valid is None else torch.where(valid, new_c, c)
            h, steps[t] = _step(new_h, h, valid)
        outputs.append([steps[t] for t in range(layer.steps)])
        states.append([h, c])
    return layer.finish(outputs, states)  # type: ignore[return-value]
