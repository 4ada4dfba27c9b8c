"""The module being written: what it needs at top level, and the text of its head and tail.

Writing the functions' bodies records here which imports, opset aliases, module-level
names and weights the module needs; :func:`header` then writes the imports and weight
declarations above the functions, and :func:`model_options` the model fields below them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from converter.python_source.literals import dict_text, docstring, utf8
from converter.python_source.names import Namespace
from dsl import ir
from dsl.errors import ConversionError

__all__ = ["INLINE_LIMIT", "GeneratedModule", "header", "model_options", "weights_line"]

# Tensors with at most this many elements are written inline as np.array literals.
INLINE_LIMIT = 16


@dataclass
class GeneratedModule:
    """What the generated module needs at top level, collected while writing bodies."""

    globals: Namespace
    opset_aliases: dict[tuple[str, int], str] = field(default_factory=dict)
    type_names: set[str] = field(default_factory=set)
    uses_np: bool = False
    uses_ml_dtypes: bool = False
    uses_graph: bool = False
    uses_sparse_tensor: bool = False
    weight_lines: list[str] = field(default_factory=list)
    large_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    initializer_names: dict[ir.Value, str] = field(default_factory=dict)  # Value (hashed by identity) -> global name
    function_names: dict[int, str] = field(default_factory=dict)  # id(ir.Function) -> python name
    sparse_names: dict[str, str] = field(default_factory=dict)  # sparse initializer -> global name
    literal_cache: dict[Any, str] = field(default_factory=dict)  # (dtype, shape, bytes) -> np.array text
    # id(array) -> (array, its inline text): converter.from_onnx shares one read-only array
    # among equal tiny attribute tensors; holding the array keeps its id unique meanwhile.
    inline_texts: dict[int, tuple[np.ndarray, str]] = field(default_factory=dict)
    float_texts: dict[float, str] = field(default_factory=dict)  # FLOAT attribute value -> its text
    type_texts: dict[int, tuple[Any, str]] = field(default_factory=dict)  # id(TensorType) -> (it, "FLOAT[2]")
    weights_file: str | None = None  # as the source names it: relative to the source's folder
    inline_limit: float = INLINE_LIMIT  # math.inf: every tensor inline
    # The main function's io_types for model_options, when only some outputs can be
    # annotated: None per input, then each output's type text or None.
    partial_io_types: list[str | None] | None = None

    # A comment at the end of the weights line (the file is not written yet), and where
    # that line starts in the text: PythonSource.save rewrites it to name the file saved.
    weights_note: str = ""
    weights_line_at: int | None = None
    # The main function's value -> Python name, for the metadata kept by value name.
    main_value_names: dict[ir.Value, str] = field(default_factory=dict)

    @property
    def loads_weights(self) -> bool:
        """Whether the module reads a weights file (some tensor is too large to write inline)."""
        return bool(self.large_arrays and self.weights_file)


def header(module: GeneratedModule, doc: str, model: ir.Model | None) -> str:
    """The docstring, imports, opset aliases and weight declarations, then two blank lines."""
    lines: list[str] = []
    if doc:
        lines += [docstring(doc, ""), ""]
    elif model is not None and model.producer_name:
        producer = f"{model.producer_name} {model.producer_version}".strip()
        lines += [docstring(f"Model produced by {producer}.", ""), ""]
    if module.uses_np or module.weight_lines:
        lines.append("import numpy as np")
    if module.uses_ml_dtypes:
        lines.append("import ml_dtypes")
    if module.uses_np or module.weight_lines or module.uses_ml_dtypes:
        lines.append("")
    lines += _dsl_imports(module)
    custom = [(alias, domain, version) for (domain, version), alias in sorted(module.opset_aliases.items()) if domain]
    if custom or module.weight_lines:
        lines.append("")
    for alias, domain, version in custom:
        lines.append(f"{alias} = Opset({utf8(domain, 'opset domain')!r}, {version})")
    if module.loads_weights:
        module.weights_line_at = len("\n".join(lines)) + 1 if lines else 0
        lines.append(weights_line(module.weights_file or "", module.weights_note))
    lines.extend(module.weight_lines)
    return "\n".join(lines) + "\n\n\n"


def weights_line(weights_file: str, note: str = "") -> str:
    """The statement of the generated module that reads its weights file."""
    return f"weights = load_weights(__file__, {weights_file!r})" + (f"  # {note}" if note else "")


def _dsl_imports(module: GeneratedModule) -> list[str]:
    names = set(module.type_names) | {"script"}
    if module.uses_graph:
        names.add("graph")
    if any(domain != "" for domain, _ in module.opset_aliases):
        names.add("Opset")
    lines = [f"from dsl import {', '.join(sorted(names))}"]
    for (domain, version), alias in sorted(module.opset_aliases.items()):
        if domain == "":
            _check_default_opset(version)
            lines.append(f"from dsl import opset{version} as {alias}")
    weight_helpers: set[str] = set()
    declarations = "\n".join(module.weight_lines)  # (one search, not one a line: neither text holds "\n")
    if " = initializer(" in declarations:
        weight_helpers.add("initializer")
    if " = sparse_initializer(" in declarations:
        weight_helpers.add("sparse_initializer")
    if module.loads_weights:
        weight_helpers.add("load_weights")
    if module.uses_sparse_tensor:
        weight_helpers.add("sparse_tensor")
    if weight_helpers:
        lines.append(f"from dsl import {', '.join(sorted(weight_helpers))}")
    return lines


def _check_default_opset(version: int) -> None:
    """Refuse an ai.onnx version that ``from dsl import opsetN`` cannot give (0, negative, newer
    than the installed onnx): the written file would not import."""
    import onnx.defs

    if version < 1 or version > onnx.defs.onnx_opset_version():
        raise ConversionError(
            f"the model imports ai.onnx version {version}, which the installed onnx does not define",
            hint="set the model's ai.onnx opset_import to a released version (onnx.version_converter "
            "converts between versions)",
        )


def model_options(
    model: ir.Model, function_name: str, functions: list[str], weights: list[str], io_types: list[str | None] | None,
    recorded: list[tuple[str, str]] | None = None,
) -> str:
    """The model fields a function cannot carry, attached for ``to_model_proto``; the
    functions nothing calls and the weights nothing reads are listed by their Python names."""
    options: dict[str, Any] = {}
    # (always: a model without a producer compiles back without one, not as onnxquill's)
    options["producer_name"] = model.producer_name
    if model.producer_version:
        options["producer_version"] = model.producer_version
    if model.doc_string or model.graph.doc_string:  # the function's docstring is the graph's
        options["doc_string"] = model.doc_string
    if model.metadata_props:
        options["metadata_props"] = dict(model.metadata_props)
    if not options and not functions and not weights and io_types is None and not recorded:
        return ""
    items = "".join(f"    {key!r}: {dict_text(utf8(value, key), 4) if isinstance(value, dict) else repr(utf8(value, key))},\n"
                    for key, value in options.items())  # (a dict: metadata_props, which may hold long text)
    for key, names in (("functions", functions), ("initializers", weights)):
        if names:
            items += f"    {key!r}: [{', '.join(names)}],\n"
    if io_types is not None:  # (type texts, written as code: FLOAT[2], not 'FLOAT[2]')
        items += f"    'io_types': [{', '.join('None' if t is None else t for t in io_types)}],\n"
    items += "".join(f"    {key!r}: {text},\n" for key, text in recorded or [])  # (metadata last: the code reads first)
    return (
        "\n\n\n# Fields of the original model; `onnxquill compile` passes them to to_model_proto().\n"
        f"{function_name}.model_options = {{\n{items}}}"
    )
