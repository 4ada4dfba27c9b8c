"""What eager.profile() costs: microseconds per eager call outside and inside a profile.

Run ``python bench/profile_overhead.py``.  Rows: ``op.Add`` on float32[4], a 10-op
scripted function on float32[4], and ``x.max()`` on an EagerTensor beside numpy's own
``max`` (the numpy-like methods).  Columns: plain (no profile running: nothing of the
profiler is installed, so this is the eager overhead of ``bench/eager_overhead.py``),
profiled (inside ``with eager.profile(print_table=False)``), and their ratio.  The
plain and profiled loops alternate in rounds; each figure is the best round.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import eager
from bench.eager_overhead import ten_ops
from dsl import opset18 as op


def _loop_us(call: Callable[[], Any], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        call()
    return (time.perf_counter() - start) / loops * 1e6


def plain_and_profiled_us(call: Callable[[], Any], loops: int = 300, rounds: int = 5) -> tuple[float, float]:
    """Best-of-``rounds`` microseconds per call, without and with a profile running, interleaved."""
    call()
    plain = profiled = float("inf")
    for _ in range(rounds):
        plain = min(plain, _loop_us(call, loops))
        with eager.profile(print_table=False):
            profiled = min(profiled, _loop_us(call, loops))
    return plain, profiled


def main() -> None:
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    tensor = eager.EagerTensor(x)
    rows = [
        ("op.Add f32[4]", lambda: op.Add(x, x)),
        ("10-op script f32[4]", lambda: ten_ops(x)),
        ("EagerTensor.max() f32[4]", tensor.max),
    ]
    print(f"{'us per call':26} {'plain':>9} {'profiled':>9} {'ratio':>6}")
    for name, call in rows:
        plain, profiled = plain_and_profiled_us(call)
        print(f"{name:26} {plain:9.2f} {profiled:9.2f} {profiled / plain:6.2f}")
    print(f"{'numpy ndarray.max() f32[4]':26} {_loop_us(x.max, 3000):9.2f}")


if __name__ == "__main__":
    main()
