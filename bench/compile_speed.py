"""Compile and export speed of onnxquill, side by side with onnxscript when it is installed.

Run ``python bench/compile_speed.py`` from the repository root.  It prints one table:

- ms per realistic function, from an undecorated Python function to IR (onnxquill:
  ``script()(f).function``; onnxscript: ``script()(f)``, which converts on decoration).
  Every measurement uses a fresh function object, so no compile result is reused.
- µs per statement for one generated function of 500, 2000 and 10000 statements
  (goal <= 20 µs, and linear);
- µs per node for ``to_model_proto`` on those functions (goal <= 10 µs);
- ``import dsl`` time as a ratio of ``import onnx`` (fresh interpreters, median; goal <= 1.3x);
- the share of onnxquill's compile time spent inferring and checking static shapes (with
  the checks and without, interleaved; goal <= 15%, and linear in statements).
- the README's LLaMA-style decoder ("Writing a real model": helpers and a loop over a list
  of per-layer weight dicts, unrolled while compiling) at 1, 8 and 32 layers: compile time
  per node and its ratio to the 1-layer figure (goal: within 1.3x, 32 layers under 1 s).

Functions are written to a temporary module and imported, so ``inspect`` finds their
source exactly as it does for user code.  onnxscript is imported only here.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HEADERS = {
    "onnxquill": "from dsl import BOOL, FLOAT, INT64, script\nfrom dsl import opset18 as op\n",
    "onnxscript": "from onnxscript import BOOL, FLOAT, INT64, script\nfrom onnxscript import opset18 as op\n",
}

# Realistic bodies, valid for both libraries; {name} is replaced by a unique function name.
REALISTIC = {
    "gelu": '''
def {name}(x: FLOAT[...]) -> FLOAT[...]:
    return 0.5 * x * (1.0 + op.Erf(x / 1.4142135623730951))
''',
    "layer_norm": '''
def {name}(x: FLOAT["B", "D"], scale: FLOAT["D"], bias: FLOAT["D"], epsilon: float = 1e-5) -> FLOAT["B", "D"]:
    mean = op.ReduceMean(x, [-1])
    centered = x - mean
    variance = op.ReduceMean(centered * centered, [-1])
    return centered / op.Sqrt(variance + epsilon) * scale + bias
''',
    "rms_norm": '''
def {name}(x: FLOAT[...], weight: FLOAT[...]) -> FLOAT[...]:
    mean_square = op.ReduceMean(x * x, [-1])
    return x / op.Sqrt(mean_square + 1e-6) * weight
''',
    "attention": '''
def {name}(q: FLOAT[...], k: FLOAT[...], v: FLOAT[...], mask: FLOAT[...]) -> FLOAT[...]:
    scores = op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])) / 8.0
    scores = op.Where(mask > 0.0, scores, op.Constant(value_float=-1e9))
    return op.MatMul(op.Softmax(scores, axis=-1), v)
''',
    "swiglu_mlp": '''
def {name}(x: FLOAT[...], w_gate: FLOAT[...], w_up: FLOAT[...], w_down: FLOAT[...]) -> FLOAT[...]:
    gate = op.MatMul(x, w_gate)
    up = op.MatMul(x, w_up)
    return op.MatMul(gate * op.Sigmoid(gate) * up, w_down)
''',
    "conv_bn_relu": '''
def {name}(x: FLOAT[...], w: FLOAT[...], scale: FLOAT[...], bias: FLOAT[...], mean: FLOAT[...], var: FLOAT[...]) -> FLOAT[...]:
    conv = op.Conv(x, w, pads=[1, 1, 1, 1])
    return op.Relu(op.BatchNormalization(conv, scale, bias, mean, var, epsilon=1e-5))
''',
    "cross_entropy": '''
def {name}(logits: FLOAT[...], labels: INT64[...]) -> FLOAT[...]:
    log_probs = op.LogSoftmax(logits, axis=-1)
    picked = op.GatherElements(log_probs, op.Unsqueeze(labels, [1]), axis=1)
    return op.Neg(op.ReduceMean(picked, keepdims=0))
''',
    "attention_ranked": '''
def {name}(q: FLOAT["B", 4, "S", 16], k: FLOAT["B", 4, "S", 16], v: FLOAT["B", 4, "S", 16], mask: BOOL["S", "S"]) -> FLOAT["B", "S", 64]:
    scores = op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])) / 4.0
    scores = op.Where(mask, scores, op.Constant(value_float=-1e9))
    heads = op.MatMul(op.Softmax(scores, axis=-1), v)
    return op.Reshape(op.Transpose(heads, perm=[0, 2, 1, 3]), [0, 0, 64])
''',
    "mlp_ranked": '''
def {name}(x: FLOAT["B", "S", 64], w_gate: FLOAT[64, 256], w_up: FLOAT[64, 256], w_down: FLOAT[256, 64]) -> FLOAT["B", "S", 64]:
    gate = op.MatMul(x, w_gate)
    up = op.MatMul(x, w_up)
    return x + op.MatMul(gate * op.Sigmoid(gate) * up, w_down)
''',
    "conv_ranked": '''
def {name}(x: FLOAT["N", 3, 32, 32], w: FLOAT[16, 3, 3, 3], bias: FLOAT[16]) -> FLOAT["N", 16, 32, 32]:
    conv = op.Conv(x, w, bias, pads=[1, 1, 1, 1])
    return op.Relu(conv)
''',
    "rotary": '''
def {name}(x: FLOAT[...], cos: FLOAT[...], sin: FLOAT[...]) -> FLOAT[...]:
    first = op.Slice(x, [0], [4], [-1])
    second = op.Slice(x, [4], [8], [-1])
    rotated = op.Concat(op.Neg(second), first, axis=-1)
    return x * cos + rotated * sin
''',
}

_STATEMENTS = (
    "    v{i} = op.Add(v{p}, x)\n",
    "    v{i} = v{p} * x\n",
    "    v{i} = op.Relu(v{p})\n",
    "    v{i} = v{p} - 1.5\n",
)


def generated_source(name: str, statements: int) -> str:
    """A straight-line function of ``statements`` assignments (a mix of ops and operators)."""
    # Ranked annotations, as in most real code: the export then needs no shape inference.
    lines = [f'def {name}(x: FLOAT["N"]) -> FLOAT["N"]:\n', "    v0 = op.Identity(x)\n"]
    for index in range(1, statements):
        lines.append(_STATEMENTS[index % len(_STATEMENTS)].format(i=index, p=index - 1))
    lines.append(f"    return v{statements - 1}\n")
    return "".join(lines)


_MODULE_COUNT = 0


def load_module(source: str, directory: Path) -> Any:
    """Write ``source`` to a new file and import it (registered, as onnxscript needs)."""
    global _MODULE_COUNT
    _MODULE_COUNT += 1
    name = f"compile_speed_generated_{_MODULE_COUNT}"
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compilers() -> dict[str, Callable[[Any], Any]]:
    """Per library: undecorated function -> compiled object (its IR), nothing cached."""
    from dsl import script as dsl_script

    found: dict[str, Callable[[Any], Any]] = {"onnxquill": lambda f: dsl_script()(f).function}
    try:
        from onnxscript import script as onnxscript_script
    except ImportError:
        return found
    found["onnxscript"] = lambda f: onnxscript_script()(f)
    return found


def exporters() -> dict[str, Callable[[Any], Any]]:
    """Per library: compiled object -> ModelProto."""
    from converter.to_onnx import model_to_proto

    return {"onnxquill": model_to_proto, "onnxscript": lambda f: f.to_model_proto()}


def time_realistic(directory: Path, repeats: int) -> dict[str, dict[str, float | None]]:
    """Median ms per realistic function and library (None when the library rejects it)."""
    results: dict[str, dict[str, float | None]] = {}
    for library, compile_function in compilers().items():
        source = HEADERS[library] + "".join(
            body.format(name=f"{key}_{copy}") for key, body in REALISTIC.items() for copy in range(repeats)
        )
        module = load_module(source, directory)
        for key in REALISTIC:
            samples: list[float] = []
            try:
                for copy in range(repeats):
                    function = getattr(module, f"{key}_{copy}")
                    start = time.perf_counter()
                    compile_function(function)
                    samples.append(time.perf_counter() - start)
            except Exception as error:  # the other library may not support a construct
                print(f"  note: {library} failed on {key}: {type(error).__name__}: {str(error)[:120]}")
                results.setdefault(key, {})[library] = None
                continue
            # the first call of each library warms caches shared by all functions (opset schemas)
            results.setdefault(key, {})[library] = statistics.median(samples[1:] or samples) * 1e3
    return results


def time_generated(directory: Path, sizes: list[int]) -> dict[int, dict[str, tuple[float, float] | None]]:
    """Per size and library: (µs per statement to compile, µs per node to export)."""
    results: dict[int, dict[str, tuple[float, float] | None]] = {}
    export = exporters()
    for library, compile_function in compilers().items():
        for size in sizes:
            copies = 3
            source = HEADERS[library] + "".join(generated_source(f"chain_{c}", size) for c in range(copies))
            module = load_module(source, directory)
            compile_times: list[float] = []
            compiled: Any = None
            try:
                for copy in range(copies):
                    start = time.perf_counter()
                    compiled = compile_function(getattr(module, f"chain_{copy}"))
                    compile_times.append(time.perf_counter() - start)
                export_times = []
                model = None
                for _ in range(3):
                    start = time.perf_counter()
                    model = export[library](compiled)
                    export_times.append(time.perf_counter() - start)
            except Exception as error:
                print(f"  note: {library} failed on {size} statements: {type(error).__name__}: {str(error)[:120]}")
                results.setdefault(size, {})[library] = None
                continue
            nodes = len(model.graph.node) if model is not None else size
            results.setdefault(size, {})[library] = (
                min(compile_times) / size * 1e6,
                min(export_times) / max(nodes, 1) * 1e6,
            )
    return results


@contextlib.contextmanager
def shape_checks_off() -> Iterator[None]:
    """Compile without inferring or checking shapes (the static shape rules), to price them."""
    from dsl.frontend.static_shapes import ShapeTable

    kept = ShapeTable.record_node
    ShapeTable.record_node = lambda *args, **kwargs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        ShapeTable.record_node = kept  # type: ignore[method-assign]


@contextlib.contextmanager
def shape_checks_timed(spent: list[float]) -> Iterator[None]:
    """Add the seconds spent inside the shape checks to ``spent[0]`` (a direct measure, less
    exposed to a busy machine than the difference of two compile times)."""
    from dsl.frontend.static_shapes import ShapeTable

    kept = ShapeTable.record_node
    clock = time.perf_counter

    def timed(*args: Any, **kwargs: Any) -> None:
        start = clock()
        try:
            kept(*args, **kwargs)
        finally:
            spent[0] += clock() - start

    ShapeTable.record_node = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        ShapeTable.record_node = kept  # type: ignore[method-assign]


def time_shape_checks(directory: Path, repeats: int, sizes: list[int]) -> dict[str, tuple[float, float, float]]:
    """Per realistic function and generated size: (ms with the shape checks, ms without, the
    best of interleaved rounds on fresh functions; % of the compile time spent inside the
    checks, median), onnxquill only."""
    compile_function = compilers()["onnxquill"]
    cases = dict(REALISTIC)
    cases.update({f"{size} statements": generated_source("{name}", size) for size in sizes})
    results: dict[str, tuple[float, float, float]] = {}
    for key, body in cases.items():
        rounds = repeats if "statements" not in key else 7
        source = HEADERS["onnxquill"] + "".join(
            body.replace("{name}", f"f_{mode}_{copy}") for copy in range(rounds) for mode in ("on", "off"))
        module = load_module(source, directory)
        samples: dict[str, list[float]] = {"on": [], "off": [], "inside": []}
        for copy in range(rounds):
            for mode in ("on", "off"):
                function = getattr(module, f"f_{mode}_{copy}")
                spent = [0.0]
                with contextlib.ExitStack() as stack:
                    stack.enter_context(shape_checks_off() if mode == "off" else shape_checks_timed(spent))
                    start = time.perf_counter()
                    compile_function(function)
                    samples[mode].append(time.perf_counter() - start)
                if mode == "on":
                    samples["inside"].append(spent[0] / samples["on"][-1])
        results[key] = (min(samples["on"]) * 1e3, min(samples["off"]) * 1e3,  # best: least disturbed
                        statistics.median(samples["inside"][1:] or samples["inside"]) * 100)
    return results


def import_seconds(statement: str, repeats: int) -> float:
    """Median time of ``statement`` in fresh interpreters (startup excluded)."""
    code = f"import time; start = time.perf_counter(); {statement}; print(time.perf_counter() - start)"
    samples = []
    for _ in range(repeats):
        output = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        samples.append(float(output.strip()))
    return statistics.median(samples)


def _cell(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def readme_decoder(directory: Path) -> Any:
    """The code block of the README's "Writing a real model" section, imported."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Writing a real model"):]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "README: the decoder block is missing"
    return load_module(found.group(1), directory)


def time_decoder(directory: Path, layer_counts: list[int], repeats: int) -> list[tuple[int, int, float, float]]:
    """(layers, nodes, best seconds to compile to IR, best seconds to export) per layer count;
    every repeat builds a fresh @script function, so nothing compiled is reused."""
    import numpy as np

    import dsl

    module = readme_decoder(directory)
    cfg = {"dim": 64, "heads": 8, "kv_heads": 2, "head_dim": 8, "hidden": 128, "vocab": 100, "theta": 10000.0}
    rng = np.random.default_rng(0)

    def weight(*shape: int) -> Any:
        return rng.standard_normal(shape).astype(np.float32)

    rows = []
    for count in layer_counts:
        dim, kv = cfg["dim"], cfg["kv_heads"] * cfg["head_dim"]
        tree = {"embed": weight(cfg["vocab"], dim), "norm": weight(dim), "lm_head": weight(dim, cfg["vocab"]),
                "layers": [{"attn_norm": weight(dim), "ffn_norm": weight(dim), "wq": weight(dim, dim),
                            "wk": weight(dim, kv), "wv": weight(dim, kv), "wo": weight(dim, dim),
                            "w1": weight(dim, cfg["hidden"]), "w3": weight(dim, cfg["hidden"]),
                            "w2": weight(cfg["hidden"], dim)} for _ in range(count)]}
        weights = dsl.initializers(tree)
        compile_times, export_times, nodes = [], [], 0
        for _ in range(repeats):
            decoder = module.build_decoder(weights, cfg)
            start = time.perf_counter()
            function = decoder.function
            compile_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            decoder.to_model_proto()
            export_times.append(time.perf_counter() - start)
            nodes = len(function.nodes)
        rows.append((count, nodes, min(compile_times), min(export_times)))
    return rows


def print_decoder(rows: list[tuple[int, int, float, float]]) -> None:
    print()
    print("| decoder layers | nodes | compile (ms) | µs/node | ratio to 1 layer | to_model_proto (ms) | goal |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    base = rows[0][2] / rows[0][1]
    for count, nodes, compile_seconds, export_seconds in rows:
        per_node = compile_seconds / nodes
        print(f"| {count} | {nodes} | {compile_seconds * 1e3:.1f} | {per_node * 1e6:.1f} | {per_node / base:.2f}x | "
              f"{export_seconds * 1e3:.1f} | <= 1.3x; 32 layers < 1000 ms |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh functions per realistic case")
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 2000, 10000])
    parser.add_argument("--import-repeats", type=int, default=7)
    parser.add_argument("--decoder-layers", type=int, nargs="*", default=[1, 8, 32])
    parser.add_argument("--decoder-only", action="store_true", help="only the decoder table")
    args = parser.parse_args(argv)
    if args.decoder_only:
        with tempfile.TemporaryDirectory() as folder:
            print_decoder(time_decoder(Path(folder), args.decoder_layers, args.repeats))
        return 0

    libraries = list(compilers())
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        realistic = time_realistic(directory, args.repeats)
        generated = time_generated(directory, args.sizes)
        shape_checks = time_shape_checks(directory, args.repeats, args.sizes)
        decoder_rows = time_decoder(directory, args.decoder_layers, args.repeats)

    print()
    print("| measurement | " + " | ".join(libraries) + " | goal |")
    print("| --- | " + " | ".join("---:" for _ in libraries) + " | --- |")
    for key, by_library in realistic.items():
        cells = " | ".join(_cell(by_library.get(lib)) for lib in libraries)
        print(f"| compile {key} (ms) | {cells} | |")
    for size, by_library in generated.items():
        cells = " | ".join(_cell(None if by_library.get(lib) is None else by_library[lib][0]) for lib in libraries)
        print(f"| compile {size} statements (µs/statement) | {cells} | <= 20 |")
    for size, by_library in generated.items():
        cells = " | ".join(_cell(None if by_library.get(lib) is None else by_library[lib][1]) for lib in libraries)
        print(f"| to_model_proto, {size} statements (µs/node) | {cells} | <= 10 |")

    print()
    print("| onnxquill compile, shape checks | with (ms) | without (ms) | difference | time inside the checks | goal |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for key, (with_checks, without, inside) in shape_checks.items():
        share = (with_checks - without) / with_checks * 100
        print(f"| {key} | {with_checks:.3f} | {without:.3f} | {share:.1f}% | {inside:.1f}% | <= 15% |")
    largest = max(args.sizes)
    if f"{largest} statements" in shape_checks and args.sizes:
        smallest = min(args.sizes)
        per_small = shape_checks[f"{smallest} statements"][0] / smallest
        per_large = shape_checks[f"{largest} statements"][0] / largest
        print(f"| per statement, {largest} vs {smallest} statements (linear: ~1x) | {per_large / per_small:.2f}x | | | |")
    print()

    onnx_time = import_seconds("import onnx", args.import_repeats)
    dsl_time = import_seconds("import dsl", args.import_repeats)
    dsl_opset_time = import_seconds("from dsl import script, FLOAT, opset18", args.import_repeats)
    blanks = " | ".join("" for _ in libraries[1:])
    blank_cells = f" | {blanks}" if libraries[1:] else ""
    print(f"| import onnx (ms) | {onnx_time * 1e3:.1f}{blank_cells} | |")
    print(f"| import dsl (ms, ratio to onnx) | {dsl_time * 1e3:.1f} ({dsl_time / onnx_time:.2f}x){blank_cells} | <= 1.3x |")
    print(
        f"| from dsl import script, FLOAT, opset18 (ms, ratio) | {dsl_opset_time * 1e3:.1f} "
        f"({dsl_opset_time / onnx_time:.2f}x){blank_cells} | |"
    )
    print_decoder(decoder_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
