"""How much of onnxscript's torch_lib compiles with onnxquill, on a seeded sample.

A reproducible sample of torch_lib functions (sorted names, fixed seed), each given
small example arguments: the first of a short fixed list of candidates
(``bench/torch_lib_examples.py``, from the signature alone) that onnxscript's eager
evaluator runs, a referee that is not onnxquill (it runs every op in onnxruntime, so a
call of the wrong rank or element type fails there); the first candidate, the old rule
(every tensor (3, 3)), when none runs, and for every function with
``--first-candidate-only``.  Both sides then get that example.  For each function:

- onnxscript: a scripted function must give ``to_function_proto()``; a trace_only one
  must run under the tracing evaluator torch.onnx's exporter uses;
- onnxquill: the same source, read from the installed onnxscript at run time and
  executed with onnxscript's names swapped for ``dsl``'s (``opset18 as op``, ``FLOAT``,
  ``script``, ``graph``, the TypeVars), compiles to a model, called from a generated
  entry function whose tensors are inputs and whose other arguments are constants
  (a trace_only function is a Python helper compiled in place, a scripted one a
  ``@script`` function);
- agreement: our eager run of the entry function against onnxruntime running the
  compiled model.

No onnxscript source is stored here.  Run: ``PYTHONPATH=$PWD python3 bench/torch_lib_sample.py
[--seed 26] [--count 100] [--verbose] [--only NAME...] [--first-candidate-only]``.  Skips with
a message when onnxscript is absent.
"""

from __future__ import annotations
import __future__

import argparse
import ast
import collections
import importlib
import inspect
import linecache
import pkgutil
import random
import sys
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torch_lib_examples import Candidate, candidates_for, is_tensor  # noqa: E402 (after the path)

_TORCH_LIB = "onnxscript.function_libs.torch_lib"


@dataclass
class Outcome:
    name: str
    kind: str
    onnxscript_ok: bool = False
    onnxscript_error: str = ""
    onnxscript_eager_ok: bool = False
    compiles: bool = False
    compile_error: str = ""
    agrees: bool | None = None
    agree_error: str = ""
    example_rule: str = ""
    notes: list[str] = field(default_factory=list)


def _short(error: BaseException) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    first = first.split(" error: ", 1)[-1]
    return f"{type(error).__name__}: {first}"[:160]


class Translator:
    """torch_lib's module globals with onnxscript's objects replaced by dsl's."""

    def __init__(self) -> None:
        import onnxscript
        from onnxscript import values as os_values

        import dsl

        self.dsl = dsl
        self.onnxscript = onnxscript
        self.os_values = os_values
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.converted: dict[int, Any] = {}

    def namespace(self, module_name: str) -> dict[str, Any]:
        if module_name in self.namespaces:
            return self.namespaces[module_name]
        module = sys.modules[module_name]
        space: dict[str, Any] = {}
        self.namespaces[module_name] = space
        for name, value in vars(module).items():
            space[name] = self.plain(value)
        return space

    def plain(self, value: Any) -> Any:
        """What a global becomes, without converting functions (done on demand)."""
        dsl, os_values = self.dsl, self.os_values
        if isinstance(value, os_values.Opset) and not isinstance(value, type):
            if value.domain == "":
                return getattr(dsl, f"opset{value.version}")
            return dsl.Opset(value.domain, value.version)
        if value is self.onnxscript.script:
            return dsl.script
        if value is self.onnxscript.graph:
            return dsl.graph
        if isinstance(value, type) and value.__module__.startswith("onnxscript.onnx_types"):
            return getattr(dsl, value.__name__, value)
        if typing.get_origin(value) is typing.Union:  # RealType = Union[FLOAT, ...]
            return self.bound(value)
        if isinstance(value, typing.TypeVar) and value.__bound__ is not None:
            return typing.TypeVar(value.__name__, bound=self.bound(value.__bound__))  # type: ignore[misc]
        if isinstance(value, types.ModuleType) and value.__name__.startswith(_TORCH_LIB + ".ops."):
            return _LazyModule(self, value.__name__)
        return value

    def bound(self, bound: Any) -> Any:
        args = typing.get_args(bound) or (bound,)
        mapped = tuple(getattr(self.dsl, getattr(arg, "__name__", ""), arg) for arg in args)
        return typing.Union[mapped] if len(mapped) > 1 else mapped[0]

    def function(self, module_name: str, name: str) -> Any:
        """The dsl version of torch_lib's ``module.name`` (converted once, with its callees)."""
        space = self.namespace(module_name)
        original = getattr(sys.modules[module_name], name)
        key = id(original)
        if key in self.converted:
            return self.converted[key]
        python_function = _python_function(original)
        if python_function is None or python_function.__module__ != module_name:
            return space[name]
        made = self._reexecute(python_function, space)
        if isinstance(original, self.os_values.OnnxFunction):
            made = self.dsl.script()(made)
        self.converted[key] = made
        space[name] = made
        for used in _global_names(python_function.__code__):
            value = getattr(sys.modules[module_name], used, None)
            if _python_function(value) is not None and getattr(_python_function(value), "__module__", "").startswith(_TORCH_LIB):
                self.function(_python_function(value).__module__, _python_function(value).__name__)
        return made

    def _reexecute(self, python_function: Any, space: dict[str, Any]) -> Any:
        file = python_function.__code__.co_filename
        lines = linecache.getlines(file)
        first = python_function.__code__.co_firstlineno
        tree = ast.parse("".join(lines))
        definition = next(node for node in ast.walk(tree)
                          if isinstance(node, ast.FunctionDef) and node.name == python_function.__name__
                          and (node.decorator_list[0].lineno if node.decorator_list else node.lineno) == first)
        start, end = definition.lineno, definition.end_lineno or definition.lineno
        text = "\n" * (start - 1) + "".join(lines[start - 1:end])
        code = compile(text, file, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
        local: dict[str, Any] = {}
        exec(code, space, local)
        return local[python_function.__name__]


class _LazyModule:
    """``common_ops`` and friends: a torch_lib module whose functions convert on access."""

    def __init__(self, translator: Translator, module_name: str) -> None:
        self._translator = translator
        self._module_name = module_name

    def __getattr__(self, name: str) -> Any:
        value = getattr(sys.modules[self._module_name], name)
        if _python_function(value) is not None:
            return self._translator.function(self._module_name, name)
        return self._translator.plain(value)


def _python_function(value: Any) -> Any:
    for attribute in ("function", "func"):
        inner = getattr(value, attribute, None)
        if inspect.isfunction(inner):
            return inner
    return value if inspect.isfunction(value) else None


def _global_names(code: Any) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names |= _global_names(constant)
    return names


def torch_lib_functions() -> list[tuple[str, str, Any]]:
    """(module, name, object) of every aten/prims function of torch_lib, sorted by name."""
    from onnxscript import values as os_values

    package = importlib.import_module(_TORCH_LIB + ".ops")
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, (os_values.OnnxFunction, os_values.TracedOnnxFunction)) \
                    and _python_function(value).__module__ == module.__name__ and not name.startswith("_"):
                found.append((module.__name__, name, value))
    return sorted(found, key=lambda item: (item[1], item[0]))


# ---------------------------------------------------------------- the three checks

def run_onnxscript(value: Any, arguments: list[tuple[str, Any]]) -> None:
    """onnxscript's own path: ``to_function_proto()`` of a scripted function; a trace_only
    one called on symbolic tensors of the examples' shapes and dtypes under the tracing
    evaluator torch.onnx's exporter uses (its ``OpRecorder``), as the exporter does."""
    from onnxscript import values as os_values

    if isinstance(value, os_values.OnnxFunction):
        value.to_function_proto()
        return
    import onnx_ir
    import onnxscript
    from torch.onnx._internal.exporter import _building, _tensors

    def symbolic(array: Any, name: str) -> Any:
        return _tensors.SymbolicTensor(onnxscript.opset18, name=name, shape=onnx_ir.Shape(array.shape),
                                       type=onnx_ir.TensorType(onnx_ir.DataType.from_numpy(array.dtype)))

    traced = [[symbolic(item, f"{name}_{i}") for i, item in enumerate(argument)] if is_tensor(argument)
              and isinstance(argument, list) else symbolic(argument, name) if isinstance(argument, np.ndarray)
              else argument for name, argument in arguments]
    with onnxscript.evaluator.default_as(_building.OpRecorder(onnxscript.opset18, {})):
        value(*traced)


def run_onnxscript_eager(value: Any, arguments: list[tuple[str, Any]]) -> None:
    """onnxscript's eager evaluator on (copies of) the example arrays: every op runs in
    onnxruntime, so a call the op's schema or kernel refuses fails here."""
    value(*(_copied(argument) for _, argument in arguments))


def _copied(argument: Any) -> Any:
    if isinstance(argument, np.ndarray):
        return argument.copy()
    return [_copied(item) for item in argument] if isinstance(argument, list) else argument


@dataclass
class Choice:
    """The example both sides get, and which rule picked it."""

    arguments: list[tuple[str, Any]]
    rule: str  # the candidate's label
    referee_runs: bool  # onnxscript's eager evaluator ran it


def choose_example(value: Any, candidates: list[Candidate], first_only: bool) -> Choice:
    """The first candidate onnxscript's eager evaluator runs (a referee that is not
    onnxquill); the first candidate (the old rule) when none runs or ``first_only``."""
    for candidate in candidates[:1] if first_only else candidates:
        try:
            run_onnxscript_eager(value, candidate.arguments)
        except Exception:  # (the referee refuses this candidate: try the next)
            continue
        return Choice(candidate.arguments, candidate.label, True)
    return Choice(candidates[0].arguments, candidates[0].label, False)


_ENTRY_COUNT = 0


def entry_function(target: Any, arguments: list[tuple[str, Any]]) -> tuple[Any, list[Any]]:
    """A ``@script`` function calling ``target`` with the tensors as inputs and the rest
    as constants, written to a file linecache serves (so dsl reads its source)."""
    import dsl

    global _ENTRY_COUNT
    _ENTRY_COUNT += 1
    inputs: list[Any] = []
    parts: list[str] = []
    space: dict[str, Any] = {"target": target}
    for name, value in arguments:
        if isinstance(value, np.ndarray):
            parts.append(f"{name}=a{len(inputs)}")
            inputs.append(value)
        elif is_tensor(value):
            names = []
            for item in value:
                names.append(f"a{len(inputs)}")
                inputs.append(item)
            parts.append(f"{name}=[{', '.join(names)}]")
        else:
            space[f"c_{name}"] = value
            parts.append(f"{name}=c_{name}")
    parameters = ", ".join(f"a{i}: {_annotation(array)}" for i, array in enumerate(inputs))
    space.update({name: getattr(dsl, name) for name in _ANNOTATIONS.values()})
    text = f"def entry({parameters}):\n    return target({', '.join(part.split('=', 1)[1] for part in parts)})\n"
    file = f"<torch_lib_sample entry {_ENTRY_COUNT}>"
    linecache.cache[file] = (len(text), None, text.splitlines(True), file)
    exec(compile(text, file, "exec"), space)
    return dsl.script()(space["entry"]), inputs


_ANNOTATIONS = {np.dtype(np.float32): "FLOAT", np.dtype(np.int64): "INT64", np.dtype(np.bool_): "BOOL",
                np.dtype(np.float64): "DOUBLE", np.dtype(np.int32): "INT32", np.dtype(np.int8): "INT8",
                np.dtype(np.uint8): "UINT8"}


def _annotation(array: np.ndarray) -> str:
    if not array.shape:  # a bare element type is a rank-0 tensor
        return _ANNOTATIONS[array.dtype]
    return f"{_ANNOTATIONS[array.dtype]}[{', '.join(str(size) for size in array.shape)}]"


def _as_list(result: Any) -> list[Any]:
    """The outputs of an eager call: a tuple holds several, a list is one sequence output
    (as onnxruntime returns a sequence: a list of arrays)."""
    return list(result) if isinstance(result, tuple) else [result]


def _as_value(item: Any) -> Any:
    return [np.asarray(element) for element in item] if isinstance(item, list) else np.asarray(item)


def _difference(ours: Any, theirs: Any) -> str:
    """'' when one eager output equals onnxruntime's (a sequence: element by element)."""
    if isinstance(ours, list) or isinstance(theirs, list):
        if not (isinstance(ours, list) and isinstance(theirs, list)):
            return f"eager {'a sequence' if isinstance(ours, list) else 'a tensor'} vs compiled " + (
                "a sequence" if isinstance(theirs, list) else "a tensor")
        if len(ours) != len(theirs):
            return f"eager sequence of {len(ours)} vs compiled sequence of {len(theirs)}"
        return next((found for found in map(_difference, ours, theirs) if found), "")
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return f"eager {ours.dtype}{ours.shape} vs compiled {theirs.dtype}{theirs.shape}"
    if not np.allclose(ours, theirs, rtol=1e-5, atol=1e-6, equal_nan=True):
        return "values differ"
    return ""


_BOTH_REFUSE = "both refuse the example at run time"


def compare(entry: Any, inputs: list[Any], model: Any) -> str:
    """'' when our eager outputs equal onnxruntime's on the compiled model, else why not."""
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: array for graph_input, array in zip(session.get_inputs(), inputs, strict=True)}
    try:
        eager = [_as_value(item) for item in _as_list(entry(*inputs))]
    except Exception as eager_error:  # (agreement when the model refuses the data too)
        try:
            session.run(None, feeds)
        except Exception:  # (onnxruntime refuses it as well)
            return _BOTH_REFUSE
        return f"eager refuses what the model runs: {_short(eager_error)}"
    compiled = session.run(None, feeds)
    if len(eager) != len(compiled):
        return f"{len(eager)} eager outputs, {len(compiled)} compiled"
    return next((found for found in map(_difference, eager, compiled) if found), "")


_RANDOM_OPS = {"Bernoulli", "Dropout", "RandomNormal", "RandomNormalLike", "RandomUniform",
               "RandomUniformLike", "Multinomial"}


def _all_nodes(model: Any) -> list[Any]:
    import onnx

    nodes = [*model.graph.node]
    for function in model.functions:
        nodes.extend(function.node)
    found = []
    while nodes:
        node = nodes.pop()
        found.append(node)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                nodes.extend(attribute.g.node)
            nodes.extend(node for graph in attribute.graphs for node in graph.node)
    return found


def measure(translator: Translator, module_name: str, name: str, value: Any, first_only: bool = False) -> Outcome:
    """The three checks of one function, on the example the referee picks."""
    from onnxscript import values as os_values

    outcome = Outcome(name, "scripted" if isinstance(value, os_values.OnnxFunction) else "trace_only")
    candidates = candidates_for(_python_function(value), name in _complex_functions())
    if candidates is None:
        outcome.onnxscript_error = outcome.compile_error = "variadic parameters (no example arguments)"
        return outcome
    choice = choose_example(value, candidates, first_only)
    outcome.example_rule, outcome.onnxscript_eager_ok = choice.rule, choice.referee_runs
    try:
        run_onnxscript(value, choice.arguments)
        outcome.onnxscript_ok = True
    except Exception as error:  # (recorded: onnxscript's tracing refuses the example)
        outcome.onnxscript_error = _short(error)
    try:
        entry, inputs, model = compile_entry(translator, module_name, name, choice.arguments)
        outcome.compiles = True
    except Exception as error:  # (recorded: the failure table groups these messages)
        outcome.compile_error = _short(error)
        return outcome
    _check_agreement(outcome, entry, inputs, model)
    return outcome


def compile_entry(translator: Translator, module_name: str, name: str,
                  arguments: list[tuple[str, Any]]) -> tuple[Any, list[Any], Any]:
    """onnxquill's side: the entry function, its inputs and its model (full check passed)."""
    import onnx

    entry, inputs = entry_function(translator.function(module_name, name), arguments)
    model = entry.to_model_proto()
    onnx.checker.check_model(model, full_check=True)
    return entry, inputs, model


def _check_agreement(outcome: Outcome, entry: Any, inputs: list[Any], model: Any) -> None:
    random_ops = sorted({node.op_type for node in _all_nodes(model) if node.op_type in _RANDOM_OPS})
    if random_ops:
        outcome.agree_error = f"not compared: random ({', '.join(random_ops)})"
        return
    try:
        reason = compare(entry, inputs, model)
        outcome.agrees = reason in ("", _BOTH_REFUSE)
        outcome.agree_error = reason
    except Exception as error:  # (recorded as a disagreement with its message)
        outcome.agrees = False
        outcome.agree_error = _short(error)


_COMPLEX: set[str] = set()


def _complex_functions() -> set[str]:
    """Names torch_lib registers as complex overloads (their tensors end in (real, imag))."""
    if not _COMPLEX:
        from onnxscript.function_libs.torch_lib import registration

        for overloaded in registration.default_registry.values():
            _COMPLEX.update(_python_function(function).__name__ for function in overloaded.complex)
    return _COMPLEX


def main() -> None:
    options = _arguments()
    try:
        import onnxscript
    except ImportError:
        print("onnxscript is not installed: pip install onnxscript (skipped)")
        return
    import logging

    import onnxruntime

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    onnxruntime.set_default_logger_severity(4)  # the referee's refused candidates log errors
    functions = torch_lib_functions()
    if options.only:
        sample = [item for item in functions if item[1] in options.only]
    else:
        sample = random.Random(options.seed).sample(functions, min(options.count, len(functions)))
        sample.sort(key=lambda item: item[1])
    translator = Translator()
    outcomes = [measure(translator, module, name, value, options.first_candidate_only)
                for module, name, value in sample]
    if options.verbose:
        for item in outcomes:
            print(f"{item.name:45s} {item.kind:10s} {item.example_rule:11s} "
                  f"onnxscript={'ok' if item.onnxscript_ok else 'FAIL':4s} "
                  f"onnxquill={'ok' if item.compiles else 'FAIL':4s} agree={item.agrees} "
                  f"{item.compile_error or item.agree_error} | onnxscript: {item.onnxscript_error}")
    _report(onnxscript.__version__, options, outcomes)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--verbose", action="store_true", help="one line per function")
    parser.add_argument("--only", nargs="*", help="measure these function names only")
    parser.add_argument("--first-candidate-only", action="store_true",
                        help="the old rule: every function's first candidate example (tensors (3, 3)), "
                             "whether onnxscript's eager evaluator runs it or not")
    return parser.parse_args()


def _report(version: str, options: Any, outcomes: list[Outcome]) -> None:
    total = len(outcomes)
    both = [o for o in outcomes if o.onnxscript_ok and o.compiles]
    print(f"\ntorch_lib sample: {total} functions (onnxscript {version}, seed {options.seed})")
    _report_example_rules(options, outcomes)
    print(f"  scripted / trace_only:                    {sum(o.kind == 'scripted' for o in outcomes)} / "
          f"{sum(o.kind == 'trace_only' for o in outcomes)}")
    print(f"  onnxscript ok (function proto / tracing): {sum(o.onnxscript_ok for o in outcomes)}")
    eager_ok = [o for o in outcomes if o.onnxscript_eager_ok]
    print(f"  onnxscript's eager evaluator runs it:     {len(eager_ok)} "
          f"(onnxquill compiles {sum(o.compiles for o in eager_ok)} of them)")
    print(f"  onnxquill compiles (checker full_check):  {sum(o.compiles for o in outcomes)}")
    print(f"  onnxquill compiles where onnxscript runs: {len(both)} of {sum(o.onnxscript_ok for o in outcomes)}")
    compared = sum(o.agrees is not None for o in outcomes)
    print(f"  eager == onnxruntime on compiled model:   {sum(bool(o.agrees) for o in outcomes)} of {compared} compared "
          f"({sum(o.compiles for o in outcomes) - compared} random, not compared)")
    for title, onnxscript_ran in (("where onnxscript runs", True), ("where onnxscript fails too", False)):
        grouped: dict[str, list[str]] = collections.defaultdict(list)
        for o in outcomes:
            if not o.compiles and o.onnxscript_ok == onnxscript_ran:
                grouped[o.compile_error].append(o.name)
        print(f"\nonnxquill compile failures {title}, by message:")
        for message, names in sorted(grouped.items(), key=lambda item: -len(item[1])):
            print(f"  {len(names):3d}  {message}\n       {', '.join(names)}")
    refused = [o.name for o in outcomes if o.agree_error == _BOTH_REFUSE]
    if refused:
        print(f"\neager and the compiled model both refuse the example data (counted as agreeing): {', '.join(refused)}")
    disagreements = [o for o in outcomes if o.agrees is False]
    if disagreements:
        print("\ncompiled but eager and onnxruntime disagree:")
        for o in disagreements:
            print(f"       {o.name}: {o.agree_error}")



def _report_example_rules(options: Any, outcomes: list[Outcome]) -> None:
    """Which rule picked each function's example: the old rule, a later candidate, or
    none ran under the referee (the old rule kept)."""
    if options.first_candidate_only:
        print("  examples: first candidate only (the old rule: tensors (3, 3)); the referee only counted")
        return
    picked = collections.Counter(o.example_rule for o in outcomes if o.onnxscript_eager_ok)
    unrefereed = [o.name for o in outcomes if not o.onnxscript_eager_ok and o.example_rule]
    later = ", ".join(f"{rule}: {count}" for rule, count in sorted(picked.items()) if rule != "old rule")
    print("  examples: the first candidate onnxscript's eager evaluator runs")
    print(f"    old rule runs: {picked['old rule']}; a later candidate runs: {sum(picked.values()) - picked['old rule']}"
          f" ({later or 'none'}); none runs, old rule kept: {len(unrefereed)}")
    if unrefereed:
        print(f"    (none runs: {', '.join(unrefereed)})")


if __name__ == "__main__":
    main()
