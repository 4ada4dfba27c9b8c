"""The contract, held differentially: what runs eagerly compiles to the same outputs,
or compiling raises the documented DslError at the user's line.

Hypothesis writes small programs (seeded: the corpus is the same on every run) mixing
the constructs Python evaluates while compiling: loops over lists of weight dicts,
``enumerate``/``zip``/``reversed``, comprehensions, helpers, ``is None``, ``assert``,
``len`` of containers and of a Split, dicts and namespaces of tensors, ``range`` loops
that stay Loops or unroll, and If on tensors; a few constructs that need a tensor's
value at run time are mixed in.  Each program runs eagerly and exported (onnxruntime).
"""

from __future__ import annotations

import linecache
import textwrap
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnxruntime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsl
from dsl import DslError, StaticAssertionError
from dsl import opset18 as op

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def _weights() -> dict[str, Any]:
    layers = [{"w": RNG.standard_normal((4, 4)).astype(np.float32) * 0.5,
               "b": RNG.standard_normal(4).astype(np.float32), "s": np.float32(1.0 + 0.1 * i)} for i in range(3)]
    return dsl.initializers({"layers": layers})


NAMESPACE_BASE: dict[str, Any] = {
    "op": op, "FLOAT": dsl.FLOAT, "script": dsl.script, "SimpleNamespace": SimpleNamespace,
    "LAYERS": _weights()["layers"], "SCALES": [0.5, -1.0, 2.0], "OPT_W": dsl.initializer(np.full(4, 0.25, np.float32), "opt"),
    "OPT_NONE": None, "np": np,
}

HELPERS = '''
def block(x, layer, activation=True):
    y = op.MatMul(x, layer["w"]) + layer["b"]
    return op.Relu(y) if activation else y


def pair(x):
    return op.Neg(x), x * 0.5
'''

# Statements of the corpus; {j} {k} {flag} {opt} {key} are filled by the strategy.  Those
# marked with an error class need a tensor's value at run time (or fail an assert).
STATEMENTS: list[tuple[str, type[DslError] | None]] = [
    ("for layer in LAYERS[:{k}]:\n    x = block(x, layer, activation={flag})", None),
    ("for i, layer in enumerate(LAYERS):\n    x = x + layer[\"b\"] * float(i)", None),
    ("for a, b in zip(LAYERS, reversed(LAYERS)):\n    x = x * a[\"s\"] - b[\"b\"]", None),
    ("parts = [op.Relu(x + s) for s in SCALES if s > {threshold}]\nx = op.Sum(x, *parts)", None),
    ("if {opt} is not None:\n    x = x + {opt}", None),
    ("assert len(LAYERS) == 3, \"three layers\"", None),
    ("for i in range({k}):\n    x = x * 0.5 + 1.0", None),
    ("for i in range({k}):\n    x = x + LAYERS[i][\"b\"]", None),
    ("if op.ReduceSum(x) > 0.0:\n    x = x - 1.0\nelse:\n    x = x + 1.0", None),
    ("x = block(x, LAYERS[{j}], {flag})", None),
    ("d = {{\"a\": x, \"b\": op.Neg(x)}}\nx = d[\"{key}\"] * 2.0", None),
    ("ns = SimpleNamespace(y=x, n={k})\nx = ns.y * float(ns.n)", None),
    ("neg, half = pair(x)\nx = neg + half", None),
    ("halves = op.Split(x, num_outputs=2, axis=1)\nx = op.Concat(*reversed(halves), axis=1) * float(len(halves))", None),
    ("if isinstance(SCALES, list) and len(SCALES) > {j}:\n    x = x + SCALES[{j}]", None),
    ("x = x + LAYERS[{j}][\"b\"] * 2.0", None),
    ("outs = []\nfor layer in LAYERS:\n    outs.append(op.MatMul(x, layer[\"w\"]))\nx = outs[{j}] + outs[-1]", None),
    ("scale = {opt} is not None and 2.0 or 3.0\nx = x * scale", None),
    ("x = sum([op.Relu(x), x * 0.5] * ({k} + 1), {threshold})", None),
    ("if {opt} is not None and len(SCALES) > {j}:\n    x = x + {opt}", None),
    ("assert len(LAYERS) == {k}, \"the layer count\"", StaticAssertionError),
    ("for v in zip(x, x):\n    x = v[0]", dsl.UnsupportedSyntaxError),
    ("t = x[0] * 0.0\nfor v in x:\n    t = t + v\nx = x + t", None),
    ("x = x * len(x)", dsl.DslTypeError),
    ("outs = []\nif op.ReduceSum(x) > 0.0:\n    outs.append(x)", dsl.UnsupportedSyntaxError),
]


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[type[DslError]]]:
    count = draw(st.integers(1, 4))
    chosen = [draw(st.sampled_from(STATEMENTS)) for _ in range(count)]
    fill = {"j": draw(st.integers(0, 2)), "k": draw(st.integers(0, 3)), "flag": draw(st.booleans()),
            "opt": draw(st.sampled_from(["OPT_W", "OPT_NONE"])), "key": draw(st.sampled_from("ab")),
            "threshold": draw(st.sampled_from([-2.0, 0.0, 1.0]))}
    lines: list[str] = []
    errors: list[type[DslError]] = []
    for text, error in chosen:
        lines.extend(text.format(**fill).splitlines())
        if error is not None and not (error is StaticAssertionError and fill["k"] == 3):
            errors.append(error)
    body = "\n".join("    " + line for line in lines)
    return f"@script()\ndef f(x: FLOAT[\"N\", 4]) -> FLOAT[\"N\", 4]:\n{body}\n    return x\n", errors


_COUNTER = iter(range(1 << 30))


def _load(source: str) -> Any:
    """The program's function, its text registered with linecache as a file's would be."""
    text = HELPERS + "\n\n" + source
    filename = f"<contract-{next(_COUNTER)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace = dict(NAMESPACE_BASE)
    exec(compile(text, filename, "exec"), namespace)
    return namespace["f"], filename


_OPTIONS = onnxruntime.SessionOptions()
_OPTIONS.intra_op_num_threads = 1


@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_each_program_compiles_to_its_eager_outputs_or_raises_the_documented_error(
    program: tuple[str, list[type[DslError]]],
) -> None:
    source, expected_errors = program
    function, filename = _load(source)
    try:
        try:
            model = function.to_model_proto()
        except DslError as error:
            assert expected_errors, f"an unexpected refusal:\n{source}\n{error}"
            assert isinstance(error, tuple(expected_errors)), f"{type(error).__name__}, expected {expected_errors}: {error}"
            assert error.location is not None and error.location.file == filename, str(error)
            assert error.hint, str(error)
            return
        assert not expected_errors, f"compiled although it needs a tensor's value:\n{source}"
        session = onnxruntime.InferenceSession(model.SerializeToString(), _OPTIONS, providers=["CPUExecutionProvider"])
        compiled = session.run(None, {"x": X})[0]
        eager = np.asarray(function(X))
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-5, err_msg=source)
    finally:
        linecache.cache.pop(filename, None)


def test_the_corpus_holds_programs_of_both_outcomes() -> None:
    """The generator reaches both sides of the contract (a corpus of refusals only, or
    of successes only, would check half of it)."""
    refusing = [text for text, error in STATEMENTS if error is not None]
    working = [text for text, error in STATEMENTS if error is None]
    assert len(refusing) >= 3 and len(working) >= 15
    source = "@script()\ndef f(x: FLOAT[\"N\", 4]) -> FLOAT[\"N\", 4]:\n" + textwrap.indent(working[0].format(
        k=2, flag=True), "    ") + "\n    return x\n"
    function, filename = _load(source)
    try:
        np.testing.assert_allclose(np.asarray(function(X)), np.maximum(np.maximum(X @ np.asarray(
            NAMESPACE_BASE["LAYERS"][0]["w"]) + np.asarray(NAMESPACE_BASE["LAYERS"][0]["b"]), 0) @ np.asarray(
            NAMESPACE_BASE["LAYERS"][1]["w"]) + np.asarray(NAMESPACE_BASE["LAYERS"][1]["b"]), 0), rtol=1e-5)
    finally:
        linecache.cache.pop(filename, None)
