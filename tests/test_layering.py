"""The import layering of ../shared/ARCHITECTURE.md, read from the source with ``ast``.

Every import in the library — at module level or inside a function, ``TYPE_CHECKING``
blocks excepted (they never run) — is an arrow from one module to another.  An arrow
may only point down a layer, and within layer 2 a front end, a pass and a back end keep
to their own kind (with the exceptions the architecture names).  There must be no
import circle at all, not even inside one package.  ``from package import name`` is an
arrow to ``package.name`` when that is a module, else to ``package`` itself; importing a
package's submodule is not an arrow to the package's ``__init__`` (Python runs it, but
that is the package's own business: ``test_import_dsl_ir_loads_only_the_core`` checks
what it costs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dsl", "converter", "eager")


def _module_files() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _module_files()

# Layer 0 core, 1 knowledge, 2 front ends / passes / back ends, 3 facades.  A module is
# placed by the longest prefix listed here.
PLACES: dict[str, tuple[int, str]] = {
    "dsl.errors": (0, "core"),
    "dsl.ir": (0, "core"),
    "dsl.held_tensor": (0, "core"),
    "dsl.types": (0, "core"),
    "dsl.dtypes": (1, "knowledge"),
    "dsl.hooks": (0, "core"),
    "dsl.tracebacks": (0, "core"),
    "dsl.limits": (0, "core"),
    "dsl.collection_pause": (1, "knowledge"),
    "dsl.opsets": (1, "knowledge"),
    "dsl.attribute_values": (1, "knowledge"),
    "dsl.operators": (1, "knowledge"),
    "dsl.indexing": (1, "knowledge"),
    "dsl.loop_forms": (1, "knowledge"),
    "dsl.onnxruntime_limits": (1, "knowledge"),
    "dsl.weights_file": (1, "knowledge"),
    "dsl.file_writing": (1, "knowledge"),
    "converter.external_data": (1, "knowledge"),
    "dsl.safe_paths": (1, "knowledge"),
    "dsl.tensor_protos": (1, "knowledge"),
    "dsl.source_links": (1, "knowledge"),
    "dsl.progress": (1, "knowledge"),
    "dsl.shape_rules": (1, "knowledge"),
    "dsl.shape_rules_inputs": (1, "knowledge"),
    "dsl.shape_rules_gemm_conv": (1, "knowledge"),
    "dsl.shape_sizes": (1, "knowledge"),
    "dsl.node_inference": (1, "knowledge"),
    "dsl.annotation_checks": (1, "knowledge"),
    "dsl.list_packing": (1, "knowledge"),
    "dsl.reduction_ranks": (1, "knowledge"),
    "dsl.frontend": (2, "front end"),
    "dsl.markup": (2, "front end"),
    "converter.from_onnx": (2, "front end"),
    "converter.proto_values": (2, "front end"),
    "converter.proto_attributes": (2, "front end"),
    "converter.opset_conversion": (2, "front end"),
    "dsl.passes": (2, "pass"),
    "converter.to_onnx": (2, "back end"),
    "converter.onnx_encoding": (2, "back end"),
    "converter.node_wire": (2, "back end"),
    "converter.output_schemas": (2, "back end"),
    "converter.value_encoding": (2, "back end"),
    "converter.inferred_types": (2, "back end"),
    "converter.output_ranks": (2, "back end"),
    "converter.python_source": (2, "back end"),
    "converter.torch_module": (2, "back end"),
    "converter.compare": (2, "back end"),
    "converter.compare_values": (2, "back end"),
    "converter.undecodable": (2, "back end"),
    "converter.recorded_metadata": (2, "back end"),
    "converter.compare_metadata": (2, "back end"),
    "converter.node_source_links": (2, "back end"),
    "converter.value_overlay": (2, "back end"),
    "converter.model_view": (2, "back end"),
    "eager": (2, "back end"),
    "eager.op_facts": (2, "back end"),
    "eager.model_program": (2, "back end"),
    "dsl": (3, "facade"),
    "dsl.script_function": (3, "facade"),
    "dsl.loaded_model": (3, "facade"),
    "dsl.model_weights": (3, "facade"),
    "dsl.markup.export": (3, "facade"),
    "dsl.write_op_signatures": (3, "facade"),
    "converter": (3, "facade"),
    "converter.cli": (3, "facade"),
    "converter.demo": (3, "facade"),
    "converter.script_module": (3, "facade"),
}

# Packages whose ``__init__`` is a facade while their modules are not: the markup
# package's public face is Agrippa's ``export``, which runs front end and back end.
FACADE_INITS = {"dsl.markup"}

# Arrows between two kinds of layer 2 that the architecture allows, with its reason.
ALLOWED_ACROSS = {
    ("eager", "converter.to_onnx"): "eager encodes IR attributes, types and tensors with the ONNX back end's encoders",
    ("eager", "converter.onnx_encoding"): "eager encodes IR attributes with the ONNX back end's encoders",
    ("converter.torch_module", "eager"): "ops torch lacks run eagerly",
}

# Single arrows that break the rules, each with the reason it stays.  Keep it empty.
ALLOWED_ARROWS: dict[tuple[str, str], str] = {}


def place(module: str) -> tuple[int, str]:
    if module in FACADE_INITS:
        return 3, "facade"
    best = max((prefix for prefix in PLACES if module == prefix or module.startswith(prefix + ".")), key=len)
    return PLACES[best]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    is_package = MODULES[module].name == "__init__.py"
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def arrows_of(module: str) -> set[str]:
    """The library modules ``module`` imports, eagerly or lazily."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    targets = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            source = _resolve(module, node)
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


GRAPH = {module: arrows_of(module) for module in MODULES}


def _kind_group(module: str) -> str:
    for prefix in sorted((p for p, (layer, _) in PLACES.items() if layer == 2), key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return module


def _violation(source: str, target: str) -> str:
    (low, kind), (high, target_kind) = place(source), place(target)
    if high > low:
        return f"layer {low} ({kind}) imports layer {high} ({target_kind})"
    if low == high == 2 and kind != target_kind:
        allowed = any(
            (source == a or source.startswith(a + ".")) and (target == b or target.startswith(b + "."))
            for a, b in ALLOWED_ACROSS
        )
        if not allowed:
            return f"a {kind} imports a {target_kind}"
    return ""


def test_every_module_has_a_place() -> None:
    for module in MODULES:
        assert place(module), module


def test_arrows_only_point_down() -> None:
    wrong = []
    for source, targets in GRAPH.items():
        for target in sorted(targets):
            reason = _violation(source, target)
            if reason and (source, target) not in ALLOWED_ARROWS:
                wrong.append(f"{source} -> {target}: {reason}")
    assert not wrong, "\n".join(wrong)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    assert _cycles() == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    # The reader itself must find an import hidden in a function, and skip TYPE_CHECKING.
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import eager\ndef f():\n    import converter.cli\n"
    tree = ast.parse(source)
    found = [n.names[0].name for n in _imports(tree) if isinstance(n, ast.Import)]
    assert found == ["converter.cli"]
    assert _violation("dsl.ir", "dsl.opsets")
    assert _violation("dsl.frontend.calls", "dsl.script_function")
    assert _violation("dsl.markup.blocks", "converter.to_onnx")
    assert not _violation("eager.attributes", "converter.to_onnx")


def _fresh_import(statement: str) -> list[str]:
    code = (
        f"{statement}\nimport sys\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('dsl', 'converter', 'eager'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_import_dsl_ir_loads_only_the_core() -> None:
    assert _fresh_import("import dsl.ir") == ["dsl", "dsl.errors", "dsl.hooks", "dsl.ir"]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports_in_a_fresh_interpreter(module: str) -> None:
    loaded = _fresh_import(f"import {module}")
    assert module in loaded


def test_import_converter_loads_no_back_end() -> None:
    loaded = _fresh_import("import converter")
    assert not [m for m in loaded if m.startswith(("converter.to_onnx", "converter.python_source", "eager"))], loaded
