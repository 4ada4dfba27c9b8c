"""Microseconds per eager call, next to the floor (a raw onnxruntime run) and other libraries.

Run ``python bench/eager_overhead.py``.  Rows: ``op.Add`` on float32[4] and on
float32[256, 256], and a 10-op scripted function on float32[4].  Columns: onnxquill
eager; the floor — ``InferenceSession.run`` on a session built beforehand for the same
one-op model (for the function: ten such runs, one per op, since eager mode runs ten
ops); numpy; torch and onnxscript's eager mode when they are installed.  Each figure
is the best of several repeats of a timed loop, so it measures the steady state, with
every session already cached.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import onnx.helper as oh
import onnxruntime

from dsl import FLOAT, script
from dsl import opset18 as op


def per_call_us(call: Callable[[], Any], budget_s: float = 0.25, repeats: int = 5) -> float:
    """Best-of-``repeats`` microseconds per call of a loop sized to take about ``budget_s``."""
    call()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < budget_s / 10:
        call()
        n += 1
    loops = max(int(n * 10 / repeats), 10)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            call()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def raw_session(op_type: str, n_inputs: int, **attributes: Any) -> Callable[[list[np.ndarray]], Any]:
    """The floor: a prebuilt one-op session called through the public InferenceSession.run."""
    names = [f"x{i}" for i in range(n_inputs)]
    graph = oh.make_graph(
        [oh.make_node(op_type, names, ["y"], **attributes)],
        op_type,
        [oh.make_tensor_value_info(name, 1, None) for name in names],
        [oh.make_tensor_value_info("y", 1, None)],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(arrays: list[np.ndarray]) -> Any:
        return session.run(None, dict(zip(names, arrays)))

    return run


@script()
def ten_ops(x: FLOAT[...]) -> FLOAT[...]:
    a = op.Relu(x)
    b = a * 2.0
    c = b + 1.0
    d = op.Tanh(c)
    e = d - x
    f = op.Abs(e)
    g = f * f
    h = op.Sqrt(g)
    i = h / 3.0
    return op.Neg(i)


def ten_ops_numpy(x: np.ndarray) -> np.ndarray:
    a = np.maximum(x, 0)
    d = np.tanh(a * np.float32(2) + np.float32(1))
    f = np.abs(d - x)
    return -(np.sqrt(f * f) / np.float32(3))


def ten_ops_floor() -> Callable[[np.ndarray], Any]:
    unary = {name: raw_session(name, 1) for name in ("Relu", "Tanh", "Abs", "Sqrt", "Neg")}
    binary = {name: raw_session(name, 2) for name in ("Mul", "Add", "Sub", "Div")}
    two, one, three = np.float32(2), np.float32(1), np.float32(3)
    two, one, three = np.array(two), np.array(one), np.array(three)

    def run(x: np.ndarray) -> Any:
        a = unary["Relu"]([x])[0]
        b = binary["Mul"]([a, two])[0]
        c = binary["Add"]([b, one])[0]
        d = unary["Tanh"]([c])[0]
        e = binary["Sub"]([d, x])[0]
        f = unary["Abs"]([e])[0]
        g = binary["Mul"]([f, f])[0]
        h = unary["Sqrt"]([g])[0]
        i = binary["Div"]([h, three])[0]
        return unary["Neg"]([i])[0]

    return run


def onnxscript_rows(small: np.ndarray, large: np.ndarray) -> dict[str, float] | None:
    try:
        from onnxscript import FLOAT as OS_FLOAT
        from onnxscript import opset18 as os_op
        from onnxscript import script as os_script
    except ImportError:
        return None
    # onnxscript resolves the names in a function's annotations and body in its module's globals.
    globals().update(OS_FLOAT=OS_FLOAT, os_op=os_op)

    @os_script()
    def os_ten_ops(x: OS_FLOAT[...]) -> OS_FLOAT[...]:
        a = os_op.Relu(x)
        b = a * 2.0
        c = b + 1.0
        d = os_op.Tanh(c)
        e = d - x
        f = os_op.Abs(e)
        g = f * f
        h = os_op.Sqrt(g)
        i = h / 3.0
        return os_op.Neg(i)

    np.testing.assert_allclose(np.asarray(os_ten_ops(small)), ten_ops_numpy(small), rtol=1e-4, atol=1e-6)
    return {
        "add4": per_call_us(lambda: os_op.Add(small, small)),
        "add256": per_call_us(lambda: os_op.Add(large, large)),
        "ten": per_call_us(lambda: os_ten_ops(small)),
    }


def torch_rows(small: np.ndarray, large: np.ndarray) -> dict[str, float] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    ts, tl = torch.from_numpy(small), torch.from_numpy(large)

    def ten(x: Any) -> Any:
        a = torch.relu(x)
        d = torch.tanh(a * 2.0 + 1.0)
        f = torch.abs(d - x)
        return -(torch.sqrt(f * f) / 3.0)

    eager_torch = {
        "add4": per_call_us(lambda: op.Add(ts, ts)),
        "add256": per_call_us(lambda: op.Add(tl, tl)),
        "ten": per_call_us(lambda: ten_ops(ts)),
    }
    native = {
        "add4": per_call_us(lambda: torch.add(ts, ts)),
        "add256": per_call_us(lambda: torch.add(tl, tl)),
        "ten": per_call_us(lambda: ten(ts)),
    }
    return {"native": native, "eager_torch": eager_torch}  # type: ignore[dict-item]


def main() -> None:
    small = np.array([1.0, -2.0, 3.0, -4.0], dtype=np.float32)
    large = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    np.testing.assert_allclose(ten_ops(small), ten_ops_numpy(small), rtol=1e-4, atol=1e-6)
    add_floor = raw_session("Add", 2)
    ten_floor = ten_ops_floor()
    rows = {
        "eager": {
            "add4": per_call_us(lambda: op.Add(small, small)),
            "add256": per_call_us(lambda: op.Add(large, large)),
            "ten": per_call_us(lambda: ten_ops(small)),
        },
        "floor": {
            "add4": per_call_us(lambda: add_floor([small, small])),
            "add256": per_call_us(lambda: add_floor([large, large])),
            "ten": per_call_us(lambda: ten_floor(small)),
        },
        "numpy": {
            "add4": per_call_us(lambda: np.add(small, small)),
            "add256": per_call_us(lambda: np.add(large, large)),
            "ten": per_call_us(lambda: ten_ops_numpy(small)),
        },
    }
    torch_found = torch_rows(small, large)
    if torch_found is not None:
        rows["eager (torch in/out)"] = torch_found["eager_torch"]
        rows["torch"] = torch_found["native"]
    onnxscript_found = onnxscript_rows(small, large)
    if onnxscript_found is not None:
        rows["onnxscript eager"] = onnxscript_found

    header = f"{'µs per call':<22}{'Add f32[4]':>12}{'Add f32[256,256]':>18}{'10-op script':>14}"
    print(header)
    print("-" * len(header))
    for name, found in rows.items():
        print(f"{name:<22}{found['add4']:>12.2f}{found['add256']:>18.2f}{found['ten']:>14.2f}")
    print("-" * len(header))
    eager, floor = rows["eager"], rows["floor"]
    print(
        f"{'eager / floor':<22}{eager['add4'] / floor['add4']:>12.2f}{eager['add256'] / floor['add256']:>18.2f}"
        f"{eager['ten'] / floor['ten']:>14.2f}"
    )
    if torch_found is None:
        print("torch: not installed (pip install torch==2.13.0)")
    if onnxscript_found is None:
        print("onnxscript: not installed")


if __name__ == "__main__":
    main()
