"""IR -> readable Python source for ``@script``: the back end that lets people edit a model.

Proposal for weights (agreed shape of the contract with the ``@script`` compiler)
--------------------------------------------------------------------------------
Each graph initializer is declared once at module level with
``dsl.initializer(array, name=...)``, which returns an
``Initializer`` object; the body reads it by its Python name::

    weights = load_weights(__file__, "model.npz")       # large ones, beside the source
    fc_weight = initializer(weights["fc_weight"], name="fc.weight")
    fc_bias = initializer(np.array([0.5, -1.0], dtype=np.float32), name="fc.bias")

The compiler turns a free name bound to an ``Initializer`` into an initializer of the
outermost graph (``dsl.frontend.weights.initializer_value``), so weights come back as
initializers, not Constants or inputs; a plain numpy array keeps meaning a Constant.
An initializer that the model also lists as a graph input (the IR < 4 style, an
overridable weight) is written as a parameter whose default is the Initializer:
``def main(x: FLOAT[1, 3], w: FLOAT[3] = w_init)``.

Spelling rules (conservative: what the compiler certainly handles)
------------------------------------------------------------------
* one statement per node, ``y = op.Relu(x)`` or ``a, b = op.TopK(x, k, axis=1)``; an
  omitted optional input is ``None``; an omitted output in the middle is ``_``;
* ``a + b`` etc. only for the ops whose Python operator the compiler maps to that very
  op whatever the element types (the inverse of :mod:`dsl.operators`): Add, Sub, Mul,
  Div, MatMul, Pow, And, Or, Xor, Equal, Less, LessOrEqual, Greater, GreaterOrEqual,
  Neg and Not, with no attributes;
* an If is written ``if cond: ... else: ...`` when the compiler turns that back into the
  same If (each branch computes its own outputs, the condition is known to be BOOL);
  a Loop is written ``for i in range(n):`` or ``while c:`` (with ``break``) in the forms
  the compiler turns back into the same Loop (see "structured loops" below: no scan
  outputs, conditions the compiler reproduces node for node); otherwise, and for every
  other subgraph attribute (Scan bodies...), the graph is a nested ``@graph()`` function
  defined just before the node that uses it;
* model-local functions are ``@script(opset, domain=..., name=...)`` functions written
  before their callers, called by their Python name;
* tensor attributes are ``np.array(...)`` literals (large ones: module-level names read
  from the weights file); element-type attributes (``to=``) are written ``FLOAT`` etc.

Names come from the model (made valid identifiers, never a keyword, a builtin or a name
the generated module uses itself).  Everything is one pass over the nodes.
"""

from __future__ import annotations

import builtins
import gc
import json
import keyword
import math
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from converter.npz import write_npz
from dsl import ir, types
from dsl.errors import ConversionError, ModelLoadError

__all__ = ["model_to_python", "function_to_python", "save_weights", "INLINE_LIMIT"]

# Tensors with at most this many elements are written inline as np.array literals.
INLINE_LIMIT = 16

_BINARY = {
    "Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "MatMul": "@", "Pow": "**",
    "And": "&", "Or": "|", "Xor": "^",
    "Equal": "==", "Less": "<", "LessOrEqual": "<=", "Greater": ">", "GreaterOrEqual": ">=",
}
_UNARY = {"Neg": "-", "Not": "~"}
# Integer attributes that hold an element type, written FLOAT rather than 1.
_ELEMENT_TYPE_ATTRIBUTES = {("Cast", "to"), ("EyeLike", "dtype"), ("RandomNormal", "dtype"),
                            ("RandomUniform", "dtype"), ("RandomNormalLike", "dtype"),
                            ("RandomUniformLike", "dtype"), ("Multinomial", "dtype"), ("Bernoulli", "dtype")}

_ATTR_ANNOTATIONS = {
    ir.AttrKind.FLOAT: "float", ir.AttrKind.INT: "int", ir.AttrKind.STRING: "str",
    ir.AttrKind.FLOATS: "list[float]", ir.AttrKind.INTS: "list[int]", ir.AttrKind.STRINGS: "list[str]",
}

_NOT_IDENTIFIER = re.compile(r"[^0-9a-zA-Z_]+")
# Bytes -> the same byte if it may appear in an identifier, else 0 (bytes.translate is fast).
_MARK_OTHERS = bytes(code if chr(code).isascii() and (chr(code).isalnum() or code == 95) else 0 for code in range(256))
_MODULE_NAMES = {"np", "ml_dtypes", "op", "script", "graph", "Opset", "initializer", "sparse_tensor",
                 "sparse_initializer", "load_weights", "weights", "Sequence", "Optional", "_"}
_RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins)) \
    | frozenset(types.ELEMENT_TYPES) | _MODULE_NAMES


def _python_keeps(name: str) -> bool:
    """Whether ``name`` can be written as a keyword argument or attribute and read back as
    itself: an identifier, not a keyword, and (for non-ASCII) one Python's NFKC
    normalisation of identifiers leaves alone (``\ufb01`` would become ``fi``)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return False
    return name.isascii() or unicodedata.normalize("NFKC", name) == name


def _identifier(name: str, fallback: str) -> str:
    if name.isidentifier() and name.isascii():
        return name
    return _cleaned(name, fallback)


def _cleaned(name: str, fallback: str) -> str:
    """``name`` (not an ASCII identifier) made one: each run of other characters becomes "_"."""
    # Exporters' names ("gpu_0/conv1_w_0") have single separators, which bytes.translate
    # replaces several times faster; and where "/" is the only other character,
    # str.replace faster still.
    if name.isascii():
        slashed = name.replace("/", "_")
        if slashed.isidentifier() and "//" not in name:
            name = slashed.strip("_")
        else:
            marked = name.encode("ascii").translate(_MARK_OTHERS)
            if b"\0\0" in marked:
                name = _NOT_IDENTIFIER.sub("_", name).strip("_")
            else:
                name = marked.replace(b"\0", b"_").decode("ascii").strip("_")
    else:
        name = _NOT_IDENTIFIER.sub("_", name).strip("_")
    if not name:
        return fallback
    if name[0].isdigit():
        name = fallback + name
    return name


class _Names:
    """A namespace: hands out valid, unused identifiers; ``parent`` names are taken too."""

    __slots__ = ("counters", "taken")

    def __init__(self, taken: set[str] | frozenset[str]) -> None:
        self.taken = set(taken)
        if not _RESERVED <= self.taken:  # (fresh() relies on it; both callers pass supersets)
            self.taken |= _RESERVED
        self.counters: dict[str, int] = {}

    def fresh(self, wanted: str, fallback: str = "v") -> str:
        if wanted.isidentifier() and wanted.isascii():
            base = wanted
        else:
            # Exporters' "gpu_0/conv1_w_0" (what _cleaned() makes of it, without the call)
            base = wanted.replace("/", "_")
            if not (base.isidentifier() and base.isascii() and base[0] != "_" and base[-1] != "_"
                    and "__" not in base):
                base = _cleaned(wanted, fallback)
        taken = self.taken
        if base not in taken:  # (taken holds _RESERVED: every namespace starts from it)
            taken.add(base)
            return base
        if base in _RESERVED and base + "_" not in taken:
            taken.add(base + "_")
            return base + "_"
        counter = self.counters.get(base, 0)
        while True:
            counter += 1
            candidate = f"{base}_{counter}"
            if candidate not in taken:
                break
        self.counters[base] = counter
        taken.add(candidate)
        return candidate


@dataclass
class _Module:
    """What the generated module needs at top level, collected while writing bodies."""

    globals: _Names
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
    weights_file: str | None = None
    inline_limit: int = INLINE_LIMIT
    # The main function's io_types for model_options, when only some outputs can be
    # annotated: None per input, then each output's type text or None.
    partial_io_types: list[str | None] | None = None


def model_to_python(
    model: ir.Model | ir.Function | ir.Graph,
    weights_path: str | os.PathLike[str] | None = None,
    *,
    source_path: str | os.PathLike[str] | None = None,
    inline_limit: int = INLINE_LIMIT,
    initializer_inputs: str = "keep",
) -> str:
    """Python source that, compiled with ``@script``, rebuilds ``model``.

    Tensors with more than ``inline_limit`` elements go to ``weights_path`` (an ``.npz``
    written now; its path is recorded relative to ``source_path``'s folder, by default
    the weights file's own folder); without ``weights_path`` every tensor is inline.
    ``initializer_inputs="drop"`` writes initializers that are also graph inputs as
    plain initializers (the IR >= 4 reading) instead of parameters with defaults.

    >>> from converter.from_onnx import load_model
    >>> print(model_to_python(load_model("model.onnx"), "model.npz"))   # doctest: +SKIP
    """
    if initializer_inputs not in ("keep", "drop"):
        raise ConversionError(f"initializer_inputs is 'keep' or 'drop', not {initializer_inputs!r}")
    # Writing allocates many objects and frees few: pausing the cyclic GC keeps the cost
    # per node flat as models grow (see converter.from_onnx.gc_paused for the why).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _model_to_python(model, weights_path, source_path, inline_limit, initializer_inputs)
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:  # (as converter.from_onnx: no scan of what was just made)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _model_to_python(
    model: ir.Model | ir.Function | ir.Graph,
    weights_path: str | os.PathLike[str] | None,
    source_path: str | os.PathLike[str] | None,
    inline_limit: int,
    initializer_inputs: str,
) -> str:
    if isinstance(model, ir.Graph):
        model = ir.Model(graph=model)
    if isinstance(model, ir.Function):
        functions = [*model.callees(), model]
        main: ir.Graph | None = None
        opset_imports = dict(model.opset_imports)
        doc = model.doc_string
    else:
        functions = _callee_order(model.functions)
        main = model.graph
        opset_imports = dict(model.opset_imports)
        doc = model.doc_string
    module = _Module(_Names(_RESERVED), inline_limit=inline_limit)
    if weights_path is not None:
        folder = os.path.dirname(os.path.abspath(os.fspath(source_path))) if source_path is not None else None
        absolute = os.path.abspath(os.fspath(weights_path))
        module.weights_file = os.path.relpath(absolute, folder) if folder else os.path.basename(absolute)
    for function in functions:
        module.function_names[id(function)] = module.globals.fresh(function.name, "function")
    main_name = module.globals.fresh(main.name or "main_graph", "graph") if main is not None else ""
    if main is not None:
        has_loops, has_subgraphs = _declare_initializers(main, module, initializer_inputs == "keep")

    blocks: list[str] = []
    for function in functions:
        blocks.append(_write_function(function, module, opset_imports))
    model_options = ""
    if main is not None:
        blocks.append(
            _write_main(main, main_name, module, opset_imports, initializer_inputs == "keep", has_loops, has_subgraphs)
        )
        if isinstance(model, ir.Model):
            kept = [module.function_names[id(f)] for f in _uncalled_functions(model)]
            model_options = _model_options(
                model, main_name, kept, _unread_weights(main, module), module.partial_io_types
            )

    header = _header(module, doc, model if isinstance(model, ir.Model) else None)
    if module.large_arrays and weights_path is not None:
        save_weights(weights_path, module.large_arrays)
    # One join: the source is ~250 bytes a node, and each "a + b" would copy all of it.
    return "".join([header, "\n\n\n".join(blocks), model_options, "\n"])


def save_weights(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to the ``.npz`` that ``dsl.load_weights`` reads.

    ml_dtypes arrays (bfloat16, float8, 4-bit) have no ``.npy`` encoding: they are stored
    as unsigned integers of the same item size, and their dtype names are recorded as
    JSON under ``__dtypes__``.
    """
    stored: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for key, array in arrays.items():
        if array.dtype.kind == "V":
            dtypes[key] = array.dtype.name
            stored[key] = array.view(np.dtype(f"u{array.dtype.itemsize}"))
        else:
            stored[key] = array
    stored["__dtypes__"] = np.array(json.dumps(dtypes))
    write_npz(path, stored)  # np.savez's format, without its ~15 µs per array


def function_to_python(function: ir.Function) -> str:
    """Python source of one IR function (and the model-local functions it calls)."""
    return model_to_python(function)


# --------------------------------------------------------------------------- header


def _header(module: _Module, doc: str, model: ir.Model | None) -> str:
    lines: list[str] = []
    if doc:
        lines += [_docstring(doc, ""), ""]
    elif model is not None and model.producer_name:
        producer = f"{model.producer_name} {model.producer_version}".strip()
        lines += [_docstring(f"Model produced by {producer}.", ""), ""]
    if module.uses_np or module.weight_lines:
        lines.append("import numpy as np")
    if module.uses_ml_dtypes:
        lines.append("import ml_dtypes")
    if module.uses_np or module.weight_lines or module.uses_ml_dtypes:
        lines.append("")
    names = set(module.type_names) | {"script"}
    if module.uses_graph:
        names.add("graph")
    if any(domain != "" for domain, _ in module.opset_aliases):
        names.add("Opset")
    lines.append(f"from dsl import {', '.join(sorted(names))}")
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
    if module.large_arrays and module.weights_file:
        weight_helpers.add("load_weights")
    if module.uses_sparse_tensor:
        weight_helpers.add("sparse_tensor")
    if weight_helpers:
        lines.append(f"from dsl import {', '.join(sorted(weight_helpers))}")
    custom = [(alias, domain, version) for (domain, version), alias in sorted(module.opset_aliases.items()) if domain]
    if custom or module.weight_lines:
        lines.append("")
    for alias, domain, version in custom:
        lines.append(f"{alias} = Opset({_utf8(domain, 'opset domain')!r}, {version})")
    if module.large_arrays and module.weights_file:
        lines.append(f"weights = load_weights(__file__, {module.weights_file!r})")
    lines.extend(module.weight_lines)
    return "\n".join(lines) + "\n\n\n"


_CLOSING_QUOTE = re.compile(r'"(?="|$)')


def _check_default_opset(version: int) -> None:
    """Refuse an ai.onnx version that ``from dsl import opsetN`` cannot give (0, negative, newer
    than the installed onnx): the written file would not import."""
    import dsl

    if version < 1 or not hasattr(dsl, f"opset{version}"):
        raise ConversionError(
            f"the model imports ai.onnx version {version}, which the installed onnx does not define",
            hint="set the model's ai.onnx opset_import to a released version (onnx.version_converter "
            "converts between versions)",
        )


def _docstring(text: str, indent: str) -> str:
    """A docstring literal of ``text``: the text is the model's, so nothing in it may end the
    literal early (a quote, a backslash) or make the file unreadable (NUL, lone surrogates)."""
    text = text.strip().replace("\\", "\\\\").replace("\r", "\\r").replace("\0", "\\x00")
    if '"' in text:  # a quote before another or at the end could close the literal
        text = _CLOSING_QUOTE.sub('\\\\"', text)
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return f'{indent}"""{text}\n{indent}"""' if "\n" in text else f'{indent}"""{text}"""'


# ------------------------------------------------------------------------ functions


def _callee_order(functions: list[ir.Function]) -> list[ir.Function]:
    order: list[ir.Function] = []
    seen: set[int] = set()
    for function in functions:
        for callee in function.callees():
            if id(callee) not in seen:
                seen.add(id(callee))
                order.append(callee)
        if id(function) not in seen:
            seen.add(id(function))
            order.append(function)
    return order


def _declare_initializers(graph: ir.Graph, module: _Module, keep_inputs: bool) -> tuple[bool, bool]:
    """Module-level declarations of the initializers of ``graph`` and of its subgraphs.

    Returns whether any of these graphs has a Loop node, and whether any node has a
    graph-valued attribute: this walk visits every node, so the writer need not look
    again for loops to plan or subgraphs to write where there are none.
    """
    has_loops = has_subgraphs = False
    stack = [graph]
    initializer_names = module.initializer_names
    fresh = module.globals.fresh
    weight_lines = module.weight_lines
    literal_cache = module.literal_cache
    # (what _array_text() does first for a weights-file array and for a repeated small
    # one, written out: models have hundreds of initializers)
    inline_limit = module.inline_limit if module.weights_file else math.inf
    large_arrays = module.large_arrays
    while stack:
        current = stack.pop()
        local = ", local=True" if current is not graph else ""
        sparse_initializers = current.sparse_initializers
        for value in current.initializers:
            if value in initializer_names:
                continue
            onnx_name = value.name
            name = fresh(onnx_name, "weight")
            initializer_names[value] = name
            tensor = value.initializer
            assert tensor is not None
            array = tensor.array
            size = array.size
            dtype = array.dtype
            array_text: str | None
            if size > inline_limit and dtype.kind != "O":
                large_arrays[name] = array
                array_text = f"weights[{name!r}]"
            else:
                array_text = literal_cache.get((dtype, array.shape, array.tobytes())) if size <= 64 else None
                if array_text is None:
                    array_text = _array_text(array, module, name)
            if not sparse_initializers:
                weight_lines.append(f"{name} = initializer({array_text}, name={onnx_name!r}{local})")
                continue
            sparse = sparse_initializers.get(onnx_name)
            if sparse is not None:
                weight_lines.append(
                    f"{name} = sparse_initializer({_array_text(sparse.values.array, module, name + '_values')}, "
                    f"{_array_text(sparse.indices.array, module, name + '_indices')}, {list(sparse.dims)!r}, "
                    f"name={value.name!r}{local})"
                )
            else:
                weight_lines.append(f"{name} = initializer({array_text}, name={value.name!r}{local})")
        if sparse_initializers:
            dense_names = {v.name for v in current.initializers}
            for name, sparse in sparse_initializers.items():
                if name in dense_names:
                    continue
                py_name = fresh(name, "weight")
                weight_lines.append(
                    f"{py_name} = sparse_initializer({_array_text(sparse.values.array, module, py_name + '_values')}, "
                    f"{_array_text(sparse.indices.array, module, py_name + '_indices')}, {list(sparse.dims)!r}, "
                    f"name={name!r}{local})"
                )
                module.sparse_names[name] = py_name
        for node in current.nodes:
            if node.op_type == "Loop":
                has_loops = True
            attributes = node.attributes
            if not attributes:
                continue
            for attr in attributes.values():
                kind = attr.kind
                if kind in _GRAPH_KINDS:
                    has_subgraphs = True
                    if attr.value is not None:
                        if kind == _GRAPH:
                            stack.append(attr.value)
                        else:
                            stack.extend(attr.value)
    return has_loops, has_subgraphs


class _Writer:
    """Writes the body of one top-level function (and its nested @graph functions)."""

    def __init__(self, module: _Module, opset_imports: dict[str, int], main_version: int | None) -> None:
        self.module = module
        self.names = _Names(module.globals.taken)
        self.value_names: dict[ir.Value, str] = dict(module.initializer_names)  # (Values hash by identity)
        self.attr_param_names: dict[str, str] = {}
        self.graph_names: dict[int, str] = {}
        self.op_texts: dict[tuple[str, str], str] = {}  # (domain, op_type) -> "op.Relu"
        self.keyword_names: set[str] = set()  # attribute names already checked to be valid keywords
        self.opset_imports = opset_imports
        self.main_version = main_version
        self.lines: list[str] = []
        self.loop_plans: dict[int, _LoopPlan] | None = None  # id(Loop node) -> how to write it
        self.absorbed: set[int] = set()  # ids of nodes a structured loop's Python stands for
        self.has_subgraphs = True  # False: no node has a graph attribute (known for the main graph)

    def name_of(self, value: ir.Value) -> str:
        name = self.value_names.get(value)
        if name is None:
            if value.producer is None and value.initializer is None and value.name in self.module.sparse_names:
                name = self.module.sparse_names[value.name]
            else:
                name = self.names.fresh(value.name)
            self.value_names[value] = name
        return name

    def new_global(self, wanted: str, fallback: str) -> str:
        """A module-level name that no local of this function (so far or later) uses."""
        name = self.names.fresh(wanted, fallback)
        self.module.globals.taken.add(name)
        return name

    def define(self, value: ir.Value) -> str:
        if not value.name:
            return "_"
        return self.name_of(value)

    def opset(self, domain: str) -> str:
        version = self.opset_imports.get(domain)
        if version is None:
            version = 1
        key = (domain, version)
        alias = self.module.opset_aliases.get(key)
        if alias is None:
            if domain == "":
                wanted = "op" if version == self.main_version else f"op{version}"
                alias = wanted if wanted == "op" else self.new_global(wanted, "op")
            else:
                alias = self.new_global(domain.replace(".", "_"), "domain")
            self.module.opset_aliases[key] = alias
        return alias

    # ------------------------------------------------------------------ statements

    def graph_body(self, graph: ir.Graph, indent: str) -> None:
        if self.loop_plans is None:  # the function's own graph: plan its loops, nested ones included
            self.loop_plans, self.absorbed = _plan_loops(graph)
        self.nodes(graph.nodes, indent)
        returned = ", ".join(self.name_of(v) for v in graph.outputs)
        self.lines.append(f"{indent}return {returned}")

    def nodes(self, nodes: list[ir.Node], indent: str) -> None:
        """One statement per node (a structured If or Loop: several).

        Models have thousands of nodes and most are one op call with a few plain
        attributes, so what every node needs is looked up once here, not once per node.
        """
        lines = self.lines
        value_names = self.value_names
        known, name_of, fresh = value_names.get, self.name_of, self.names.fresh
        inline_texts, float_texts = self.module.inline_texts, self.module.float_texts
        op_texts, keyword_names = self.op_texts, self.keyword_names
        has_subgraphs = self.has_subgraphs
        for node in nodes:
            attrs = node.attributes
            op_type = node.op_type
            if has_subgraphs:  # (else no If, no Loop with a body, nothing absorbed)
                if op_type == "If" and node.domain == "" and node.callee is None and self.structured_if(node, indent):
                    continue
                if self.absorbed and id(node) in self.absorbed:
                    continue  # written by the structured loop that uses it
                if op_type == "Loop" and self.loop_plans and self.structured_loop(node, indent):
                    continue
                for attr in attrs.values():
                    if attr.kind in _GRAPH_KINDS and attr.ref_attr_name is None:
                        self.subgraphs(attr, indent)
            outputs = node.outputs
            targets: str | None
            if len(outputs) == 1 and outputs[0].name:  # the usual case
                target = outputs[0]
                targets = known(target)
                if targets is None:
                    if target.producer is None:
                        targets = name_of(target)
                    else:  # (name_of(target), written out)
                        targets = value_names[target] = fresh(target.name)
            else:
                targets = self.targets(node)
            inputs = node.inputs
            domain = node.domain
            callee = node.callee
            if not attrs and callee is None and domain == "" and len(outputs) == 1 and None not in inputs:
                symbol = _BINARY.get(op_type)
                if symbol is not None and len(inputs) == 2:
                    lines.append(f"{indent}{targets} = {name_of(inputs[0])} {symbol} {name_of(inputs[1])}")  # type: ignore[arg-type]
                    continue
                symbol = _UNARY.get(op_type)
                if symbol is not None and len(inputs) == 1:
                    lines.append(f"{indent}{targets} = {symbol}{name_of(inputs[0])}")  # type: ignore[arg-type]
                    continue
            if callee is not None:
                callable_text: str | None = self.module.function_names.get(id(callee))
                if callable_text is None:
                    raise ConversionError(f"node {op_type} calls a function that is not part of the model")
            else:
                callable_text = op_texts.get((domain, op_type))
                if callable_text is None:
                    if not _python_keeps(op_type):
                        raise ConversionError(
                            f"op type {op_type!r} is not a Python identifier (or is a keyword, or a name Python "
                            f"normalises to another), so it cannot be written as op.{op_type}"
                        )
                    callable_text = op_texts[(domain, op_type)] = f"{self.opset(domain)}.{op_type}"
            # Inputs are mostly named already: look them all up at once, then name the rest
            # (and write the omitted ones, None, as None).
            arguments: list[str | None] = list(map(known, inputs))  # type: ignore[arg-type]
            if None in arguments:
                for index, argument in enumerate(arguments):
                    if argument is None:
                        value = inputs[index]
                        arguments[index] = "None" if value is None else name_of(value)
            for attr in attrs.values():
                attr_name = attr.name
                if attr_name not in keyword_names:
                    if not _python_keeps(attr_name):
                        raise ConversionError(
                            f"attribute name {attr_name!r} of {op_type} is not a Python identifier (or is a "
                            "keyword, or a name Python normalises to another), so it cannot be a keyword argument"
                        )
                    keyword_names.add(attr_name)
                value = attr.value
                kind = attr.kind
                if attr.ref_attr_name is not None:
                    arguments.append(f"{attr_name}={self.attribute(attr, op_type, domain)}")
                elif kind == _INTS and type(value) is list:
                    arguments.append(f"{attr_name}={value!r}")  # the most frequent case, as attribute() writes it
                elif kind == _TENSOR:  # (ConstantOfShape's value, Constant)
                    cached = inline_texts.get(id(value.array))  # (as tensor() looks it up, without the call)
                    if cached is not None and cached[0] is value.array:
                        arguments.append(f"{attr_name}={cached[1]}")
                    else:
                        arguments.append(f"{attr_name}={self.tensor(value)}")
                elif kind == _FLOAT and value in float_texts:  # (epsilon, alpha)
                    arguments.append(f"{attr_name}={float_texts[value]}")  # (what attribute() returns for it)
                elif kind == _INT and not ((op_type, attr_name) in _ELEMENT_TYPE_ATTRIBUTES and domain == ""):
                    arguments.append(f"{attr_name}={value!r}")  # (as attribute() writes a plain INT)
                else:
                    arguments.append(f"{attr_name}={self.attribute(attr, op_type, domain)}")
            lines.append(f"{indent}{targets} = {callable_text}({', '.join(arguments)})")  # type: ignore[arg-type]

    def targets(self, node: ir.Node) -> str:
        """The left-hand side for a node with several (or unnamed) outputs."""
        outputs = node.outputs
        while outputs and not outputs[-1].name:
            outputs = outputs[:-1]
        if not outputs:
            raise ConversionError(f"node {node.op_type} {node.name!r} has no outputs; Python cannot call it for nothing")
        if len(outputs) == 1:  # (its unnamed trailing outputs dropped)
            return self.name_of(outputs[0])
        return ", ".join([self.define(v) for v in outputs])

    def structured_loop(self, node: ir.Node, indent: str) -> bool:
        """Write ``node`` as a ``for``/``while`` loop when :func:`_plan_loop` found the form
        the compiler turns back into this very Loop; False leaves it to ``op.Loop``.

        Each loop-carried value is one Python variable: set from the initial value before
        the loop, read in the body, set to the body's result at its end, read after the
        loop as the Loop's output::

            y = x                      # Loop(n, "", x) -> y
            for i in range(n):
                t = y * i
                y = t
        """
        assert self.loop_plans is not None
        plan = self.loop_plans.get(id(node))
        if plan is None:
            return False
        body: ir.Graph = node.attributes["body"].value
        lines = self.lines
        inner = indent + "    "
        names = [self.define(v) for v in node.outputs]
        for name, initial, formal in zip(names, node.inputs[2:], body.inputs[2:]):
            lines.append(f"{indent}{name} = {self.name_of(initial)}")  # type: ignore[arg-type]
            self.value_names[formal] = name
        condition_name = ""
        if plan.form == "while":
            assert plan.condition is not None
            condition_name = self.names.fresh("keep_going")
            lines.append(f"{indent}{condition_name} = {self.name_of(plan.condition)}")
            lines.append(f"{indent}while {condition_name}:")
        else:
            trip = node.inputs[0]
            assert trip is not None
            lines.append(f"{indent}for {self.name_of(body.inputs[0])} in range({self.name_of(trip)}):")
            if plan.condition is not None:
                lines.append(f"{inner}if not {self.name_of(plan.condition)}:")
                lines.append(f"{inner}    break")
        self.nodes(body.nodes, inner)
        for name, final in zip(names, body.outputs[1:]):
            lines.append(f"{inner}{name} = {self.name_of(final)}")
        if plan.form == "while":
            assert plan.final is not None
            lines.append(f"{inner}{condition_name} = {self.name_of(plan.final)}")
        elif plan.final is not None:
            lines.append(f"{inner}if {self.name_of(plan.final)}:")
            lines.append(f"{inner}    break")
        return True

    def structured_if(self, node: ir.Node, indent: str) -> bool:
        """Write ``node`` as ``if cond: ... else: ...`` when that compiles back to the same If.

        The compiler makes an If output of each name assigned in both branches, in the
        order the then-branch first assigns them; so every branch output must be computed
        in its branch (not an outer value, not twice the same value), and the condition
        must be known to be BOOL (else the compiler casts it).  Otherwise: False, and the
        caller writes ``op.If`` with ``@graph()`` branches.
        """
        then_attr, else_attr = node.attributes.get("then_branch"), node.attributes.get("else_branch")
        if len(node.attributes) != 2 or then_attr is None or else_attr is None:
            return False
        if then_attr.ref_attr_name is not None or else_attr.ref_attr_name is not None:
            return False
        if not isinstance(then_attr.value, ir.Graph) or not isinstance(else_attr.value, ir.Graph):
            return False  # (a malformed If: a branch of another kind, which op.If reports)
        condition = node.inputs[0] if len(node.inputs) == 1 else None
        if condition is None or not node.outputs or any(not v.name for v in node.outputs):
            return False
        if not _is_bool(condition):
            return False
        branches: list[ir.Graph] = [then_attr.value, else_attr.value]
        for branch in branches:
            if branch.inputs or len(branch.outputs) != len(node.outputs) or not _outputs_computed_here(branch):
                return False
        names = [self.define(v) for v in node.outputs]
        then_branch, else_branch = branches
        # Branch outputs take the If outputs' names; the then-branch must assign them in order.
        positions = {id(v): (i, j) for i, n in enumerate(then_branch.nodes) for j, v in enumerate(n.outputs)}
        order = [positions[id(v)] for v in then_branch.outputs]
        aliases = order != sorted(order) or len(set(order)) != len(order)
        for value, name in zip(else_branch.outputs, names):
            self.value_names[value] = name
        if not aliases:
            for value, name in zip(then_branch.outputs, names):
                self.value_names[value] = name
        inner = indent + "    "
        self.lines.append(f"{indent}if {self.name_of(condition)}:")
        self.nodes(then_branch.nodes, inner)
        if aliases:
            for value, name in zip(then_branch.outputs, names):
                self.lines.append(f"{inner}{name} = {self.name_of(value)}")
        self.lines.append(f"{indent}else:")
        self.nodes(else_branch.nodes, inner)
        return True

    def subgraphs(self, attr: ir.Attr, indent: str) -> None:
        graphs = [attr.value] if attr.kind == ir.AttrKind.GRAPH else list(attr.value)
        names = []
        for sub in graphs:
            name = self.names.fresh(sub.name or attr.name, "body")
            names.append(name)
            self.module.uses_graph = True
            self.lines.append(f"{indent}@graph()")
            params = [self.parameter(v) for v in sub.inputs]
            returns = _return_annotation(sub.outputs, self.module)
            self.lines.append(_def_line(indent, name, params, returns))
            self.graph_body(sub, indent + "    ")
        # Remember the Python names, in order, for the attribute text.
        self.graph_names[id(attr)] = names[0] if attr.kind == ir.AttrKind.GRAPH else "[" + ", ".join(names) + "]"

    def parameter(self, value: ir.Value, default: str | None = None) -> str:
        annotation = _type_text(value.type, self.module)
        text = self.name_of(value) + (f": {annotation}" if annotation else "")
        if default is not None:
            text += f" = {default}" if annotation else f"={default}"
        return text

    # ------------------------------------------------------------------ attributes

    def attribute(self, attr: ir.Attr, op_type: str = "", domain: str = "") -> str:
        """The Python literal of an attribute value (``op_type`` decides ``to=FLOAT`` spellings)."""
        if attr.ref_attr_name is not None:
            name = self.attr_param_names.get(attr.ref_attr_name)
            if name is None:
                raise ConversionError(
                    f"attribute {attr.name} refers to {attr.ref_attr_name!r}, which is not a parameter",
                    hint="only attributes inside a model-local function may refer to (ref_attr_name) an attribute "
                    "parameter of that function; elsewhere the attribute needs a value",
                )
            return name
        K = ir.AttrKind
        value = attr.value
        kind = attr.kind
        # The frequent kinds first, compared with module constants (enum lookups are slow).
        if kind == _INTS:
            return repr(value if type(value) is list else list(value))
        if kind == _INT:
            if (op_type, attr.name) in _ELEMENT_TYPE_ATTRIBUTES and domain == "" and value in _ENUM_NAMES:
                self.module.type_names.add(_ENUM_NAMES[value])
                return _ENUM_NAMES[value]
            return repr(value)
        if kind == _FLOAT:
            # Models repeat a few values (epsilon, alpha), and numpy's str() is slow.  Only
            # ordinary values are cached: 0.0 == -0.0 have different texts, NaN matches nothing.
            texts = self.module.float_texts
            text = texts.get(value)
            if text is None:
                text = _float_text(value, np.float32)
                if value and value == value:
                    texts[value] = text
            return text
        if kind == _TENSOR:
            return self.tensor(value)
        if kind == K.STRING:
            return repr(value)
        if kind == K.FLOATS:
            return "[" + ", ".join(_float_text(v, np.float32) for v in value) + "]"
        if kind == K.STRINGS:
            return repr(list(value))
        if kind == K.TENSORS:
            return "[" + ", ".join(self.tensor(t) for t in value) + "]"
        if kind in (K.GRAPH, K.GRAPHS):
            return self.graph_names[id(attr)]
        if kind == K.SPARSE_TENSOR:
            return self.sparse(value)
        if kind == K.SPARSE_TENSORS:
            return "[" + ", ".join(self.sparse(s) for s in value) + "]"
        if kind == K.TYPE_PROTO:
            return self.type_attr(value)
        if kind == K.TYPE_PROTOS:
            return "[" + ", ".join(self.type_attr(t) for t in value) + "]"
        raise ConversionError(f"attribute {attr.name} of {op_type} has kind {kind.name}, which has no Python spelling")

    def type_attr(self, ir_type: Any) -> str:
        text = _type_text(ir_type, self.module)
        if not text:
            raise ConversionError(f"type {ir_type!r} has no Python spelling")
        return text

    def tensor(self, tensor: ir.Tensor) -> str:
        array = tensor.array
        module = self.module
        cached = module.inline_texts.get(id(array))
        if cached is not None and cached[0] is array:
            return cached[1]
        if array.size > module.inline_limit and module.weights_file and array.dtype != object:
            name = self.new_global(tensor.name or "constant", "constant")
            module.large_arrays[name] = array
            module.weight_lines.append(f"{name} = weights[{name!r}]")
            return name
        text = _array_text(array, module, "")
        module.inline_texts[id(array)] = (array, text)
        return text

    def sparse(self, sparse: ir.SparseTensor) -> str:
        self.module.uses_sparse_tensor = True
        return (f"sparse_tensor({self.tensor(sparse.values)}, {self.tensor(sparse.indices)}, "
                f"{list(sparse.dims)!r})")


_ENUM_NAMES = {t.enum: name for name, t in types.ELEMENT_TYPES.items()}
_GRAPH_KINDS = frozenset((ir.AttrKind.GRAPH, ir.AttrKind.GRAPHS))
_INT, _INTS, _FLOAT, _TENSOR = ir.AttrKind.INT, ir.AttrKind.INTS, ir.AttrKind.FLOAT, ir.AttrKind.TENSOR
_GRAPH, _GRAPHS = ir.AttrKind.GRAPH, ir.AttrKind.GRAPHS
# Ops whose output the compiler knows to be BOOL (so ``if x:`` needs no Cast).
_BOOL_OPS = {"Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "Not",
             "IsNaN", "IsInf"}


def _is_bool(value: ir.Value) -> bool:
    if isinstance(value.type, ir.TensorType) and value.type.elem_type == types.BOOL.enum:
        return True
    producer = value.producer
    return producer is not None and producer.domain == "" and producer.op_type in _BOOL_OPS


def _outputs_computed_here(branch: ir.Graph) -> bool:
    """Each output of ``branch`` computed by one of its nodes, no value twice, no ``_`` target."""
    produced: set[int] = set()
    for node in branch.nodes:
        present = len(node.outputs)
        while present and not node.outputs[present - 1].name:
            present -= 1
        if any(not v.name for v in node.outputs[:present]):
            return False  # an omitted middle output is written ``_``, which both branches would assign
        produced.update(id(v) for v in node.outputs)
    ids = [id(v) for v in branch.outputs]
    return len(set(ids)) == len(ids) and all(i in produced for i in ids)


# ------------------------------------------------------------------ structured loops
#
# A Loop is written as ``for``/``while`` only in the forms the compiler turns back into
# the very same Loop (dsl/frontend/control_flow.py), decided from the structure alone:
#
#   for i in range(n):                 Loop(n, "", v...), body condition Identity(cond_in)
#   for i in range(n):                 Loop(n, c, v...), body condition Identity(cond_in)
#       if not c: break
#   for i in range(n): ...; if b: break    Loop(n, Constant(True), v...), condition Not(b)
#   k = c / while k: ...; k = d            Loop("", c, v...), body condition d
#
# ``c``, ``b`` and ``d`` must be BOOL tensors the compiler knows to be scalars, or the
# ``Reshape(x, [])`` the compiler puts around a condition it cannot prove to be one
# (those nodes are then left to the compiler to make again).  Every other Loop (scan
# outputs, an iteration number or condition input the Python cannot read, ...) keeps
# ``op.Loop`` with a ``@graph()`` body.


@dataclass(slots=True)
class _LoopPlan:
    """How a Loop is written: ``form`` is "for" or "while"; ``condition`` the value the
    ``if not c: break`` guard (for) or the loop test (while) starts from; ``final`` the
    ``if b: break`` value (for) or the test's value at the end of the body (while)."""

    form: str
    condition: ir.Value | None = None
    final: ir.Value | None = None


_INT64_OPS = frozenset({"Shape", "Size", "SequenceLength", "ArgMax", "ArgMin", "NonZero"})
# Ops whose result the compiler takes as a scalar when all inputs are (control_flow._SCALAR_PRESERVING).
_SCALAR_PRESERVING = frozenset({
    "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "Cast", "CastLike", "Identity", "Add", "Sub", "Mul", "Div", "Neg", "Abs",
})


class _LoopFacts:
    """What the planner knows of one function: uses of each value, the graph each node is
    in, and the role of each Loop body input (the compiler types them its own way)."""

    __slots__ = ("graph_of", "roles", "uses")

    def __init__(self) -> None:
        self.uses: dict[int, int] = {}
        self.graph_of: dict[int, int] = {}  # id(node) -> id(graph)
        self.roles: dict[int, str] = {}  # id(body input) -> "iteration" | "condition" | "carried"

    def used(self, value: ir.Value) -> int:
        return self.uses.get(id(value), 0)


def _plan_loops(graph: ir.Graph) -> tuple[dict[int, _LoopPlan], set[int]]:
    """Plans for every Loop of ``graph`` and its subgraphs, and the nodes they absorb."""
    graphs = [graph]
    loops: list[ir.Node] = []
    index = 0
    while index < len(graphs):
        for node in graphs[index].nodes:
            if node.op_type == "Loop":
                loops.append(node)
            if node.attributes:
                for attr in node.attributes.values():
                    if attr.kind == _GRAPH and attr.value is not None:  # (module constants: enum lookups are slow)
                        graphs.append(attr.value)
                    elif attr.kind == _GRAPHS and attr.value is not None:
                        graphs.extend(attr.value)
        index += 1
    plans: dict[int, _LoopPlan] = {}
    absorbed: set[int] = set()
    if not loops:
        return plans, absorbed
    facts = _LoopFacts()
    uses = facts.uses
    for current in graphs:
        for value in current.outputs:
            uses[id(value)] = uses.get(id(value), 0) + 1
        for node in current.nodes:
            facts.graph_of[id(node)] = id(current)
            for read in node.inputs:
                if read is not None:
                    uses[id(read)] = uses.get(id(read), 0) + 1
    for loop in loops:
        body = _loop_body(loop)
        if body is not None:
            for position, formal in enumerate(body.inputs):
                facts.roles[id(formal)] = ("iteration", "condition")[position] if position < 2 else "carried"
    for loop in loops:
        found = _plan_loop(loop, facts)
        if found is not None:
            plan, eaten = found
            plans[id(loop)] = plan
            absorbed.update(id(n) for n in eaten)
    return plans, absorbed


def _loop_body(loop: ir.Node) -> ir.Graph | None:
    if loop.domain != "" or loop.callee is not None or len(loop.attributes) != 1:
        return None
    attr = loop.attributes.get("body")
    if attr is None or attr.kind != ir.AttrKind.GRAPH or attr.ref_attr_name is not None:
        return None
    return attr.value if isinstance(attr.value, ir.Graph) else None


def _plan_loop(loop: ir.Node, facts: _LoopFacts) -> tuple[_LoopPlan, list[ir.Node]] | None:
    body = _loop_body(loop)
    if body is None or len(loop.inputs) < 3 or body.initializers or body.sparse_initializers:
        return None
    trip, condition, initials = loop.inputs[0], loop.inputs[1], loop.inputs[2:]
    carried = len(initials)
    if any(v is None for v in initials) or any(not v.name for v in loop.outputs):
        return None
    if len(body.inputs) != 2 + carried or len(body.outputs) != 1 + carried or len(loop.outputs) != carried:
        return None
    if not _outputs_computed_here(body) or _omits_middle_outputs(body):
        return None
    iteration, condition_in, condition_out = body.inputs[0], body.inputs[1], body.outputs[0]
    body_id = id(body)
    loop_graph = facts.graph_of[id(loop)]
    passes_condition = (
        _is_plain(condition_out.producer, "Identity", 1)
        and condition_out.producer.inputs[0] is condition_in  # type: ignore[union-attr]
        and facts.used(condition_out) == 1 and facts.used(condition_in) == 1
    )
    if trip is not None:
        if not _compiler_knows_int64(trip, facts):
            return None
        if condition is None:
            if not passes_condition:
                return None
            return _LoopPlan("for"), [condition_out.producer]  # type: ignore[list-item]
        if passes_condition:  # for i in range(n): if not c: break
            start = _condition_source(condition, facts, loop_graph)
            if start is None:
                return None
            guard, eaten = start
            return _LoopPlan("for", condition=guard), [*eaten, condition_out.producer]  # type: ignore[list-item]
        # for i in range(n): ... if b: break  ->  Loop(n, True, ...), condition Not(b)
        if facts.used(condition_in) or not _is_true_constant(condition) or facts.used(condition) != 1:
            return None
        if facts.graph_of.get(id(condition.producer)) != loop_graph:
            return None
        stop = _break_source(condition_out, facts, body_id)
        if stop is None:
            return None
        broken_by, eaten = stop
        return _LoopPlan("for", final=broken_by), [condition.producer, *eaten]  # type: ignore[list-item]
    if condition is None or facts.used(iteration) or facts.used(condition_in):
        return None
    start = _condition_source(condition, facts, loop_graph)
    end = _condition_source(condition_out, facts, body_id, output=True)
    if start is None or end is None:
        return None
    return _LoopPlan("while", condition=start[0], final=end[0]), [*start[1], *end[1]]


def _is_plain(node: ir.Node | None, op_type: str, input_count: int) -> bool:
    return (node is not None and node.op_type == op_type and node.domain == "" and node.callee is None
            and not node.attributes and len(node.inputs) == input_count and None not in node.inputs)


def _omits_middle_outputs(graph: ir.Graph) -> bool:
    """Whether a node here or in a subgraph omits a middle output (written ``_``, which the
    compiler would carry through the loop like any name assigned before it)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        for node in current.nodes:
            named = [bool(v.name) for v in node.outputs]
            while named and not named[-1]:
                named.pop()
            if not all(named):
                return True
            for attr in node.attributes.values():
                if attr.kind == ir.AttrKind.GRAPH and attr.value is not None:
                    stack.append(attr.value)
                elif attr.kind == ir.AttrKind.GRAPHS and attr.value is not None:
                    stack.extend(attr.value)
    return False


def _condition_source(
    value: ir.Value, facts: _LoopFacts, graph_id: int, output: bool = False
) -> tuple[ir.Value, list[ir.Node]] | None:
    """The Python-level condition that compiles to ``value`` (a Loop condition input, or
    with ``output`` a body's condition output), and the nodes the compiler makes for it."""
    if _compiler_knows_bool(value, facts) and _scalar_certainty(value, facts) is True:
        if output and (value.producer is None or facts.graph_of.get(id(value.producer)) != graph_id):
            return None  # an outer value or an input would be copied with Identity
        return value, []
    reshape = value.producer
    if not _is_plain(reshape, "Reshape", 2) or facts.graph_of.get(id(reshape)) != graph_id or facts.used(value) != 1:
        return None
    assert reshape is not None
    source, shape = reshape.inputs[0], reshape.inputs[1]
    assert source is not None and shape is not None
    shape_node = shape.producer
    if not _is_empty_shape_constant(shape_node) or facts.used(shape) != 1:
        return None
    if facts.graph_of.get(id(shape_node)) != graph_id:
        return None
    if not _compiler_knows_bool(source, facts) or _scalar_certainty(source, facts) is not False:
        return None
    return source, [reshape, shape_node]  # type: ignore[list-item]


def _break_source(value: ir.Value, facts: _LoopFacts, body_id: int) -> tuple[ir.Value, list[ir.Node]] | None:
    """``b`` when a body's condition output is what ``if b: break`` compiles to: Not(b),
    reshaped to a scalar when the compiler cannot prove ``b`` is one."""
    eaten: list[ir.Node] = []
    negation = value.producer
    if _is_plain(negation, "Reshape", 2) and facts.graph_of.get(id(negation)) == body_id:
        assert negation is not None
        shape = negation.inputs[1]
        assert shape is not None
        if not _is_empty_shape_constant(shape.producer) or facts.used(shape) != 1 or facts.used(value) != 1:
            return None
        if facts.graph_of.get(id(shape.producer)) != body_id:
            return None
        eaten += [negation, shape.producer]  # type: ignore[list-item]
        value = negation.inputs[0]  # type: ignore[assignment]
        negation = value.producer
        scalar_wanted: bool = False
    else:
        scalar_wanted = True
    if not _is_plain(negation, "Not", 1) or facts.graph_of.get(id(negation)) != body_id or facts.used(value) != 1:
        return None
    assert negation is not None
    broken_by = negation.inputs[0]
    assert broken_by is not None
    if not _compiler_knows_bool(broken_by, facts) or _scalar_certainty(broken_by, facts) is not scalar_wanted:
        return None
    return broken_by, [*eaten, negation]


def _constant_array(node: ir.Node | None) -> np.ndarray | None:
    """The data of a plain ``Constant(value=tensor)`` node, else None."""
    if node is None or node.op_type != "Constant" or node.domain != "" or set(node.attributes) != {"value"}:
        return None
    payload = node.attributes["value"].value
    return payload.array if isinstance(payload, ir.Tensor) else None


def _is_empty_shape_constant(node: ir.Node | None) -> bool:
    array = _constant_array(node)
    return array is not None and array.dtype == np.int64 and array.shape == (0,)


def _is_true_constant(value: ir.Value) -> bool:
    array = _constant_array(value.producer)
    return array is not None and array.dtype == np.bool_ and array.shape == () and bool(array)


def _compiler_knows_bool(value: ir.Value, facts: _LoopFacts) -> bool:
    """Whether the compiler certainly knows ``value`` is BOOL (so it adds no Cast)."""
    return _compiler_knows_elem(value, facts, types.BOOL.enum, _BOOL_OPS)


def _compiler_knows_int64(value: ir.Value, facts: _LoopFacts) -> bool:
    """Whether the compiler certainly knows ``value`` is INT64 (``range(n)`` adds no Cast)."""
    return _compiler_knows_elem(value, facts, types.INT64.enum, _INT64_OPS)


def _compiler_knows_elem(value: ir.Value, facts: _LoopFacts, elem_type: int, typed_ops: Any) -> bool:
    """Whether the compiler's element-type tracking certainly gives ``value`` ``elem_type``:
    a declared input, an op whose output type is fixed (``typed_ops``), a Cast to it, or a
    Constant of it; loop-carried values and conditions are unknown inside a body."""
    producer = value.producer
    if producer is None:
        role = facts.roles.get(id(value))
        declared = value.type
        if value.initializer is not None or role in ("carried", "condition"):
            return False
        if role == "iteration":
            return declared == ir.TensorType(elem_type, ())
        return isinstance(declared, ir.TensorType) and declared.elem_type == elem_type
    if producer.domain != "" or producer.callee is not None:
        return False
    if producer.op_type in typed_ops:
        return True
    if producer.op_type == "Cast":
        to = producer.attributes.get("to")
        return to is not None and to.ref_attr_name is None and to.value == elem_type
    if producer.op_type == "Constant" and set(producer.attributes) == {"value"}:
        payload = producer.attributes["value"].value
        return isinstance(payload, ir.Tensor) and payload.elem_type == elem_type
    return False


def _scalar_certainty(value: ir.Value, facts: _LoopFacts, depth: int = 0) -> bool | None:
    """Whether the compiler's ``_known_scalar`` holds for the compiled ``value``: True,
    False, or None where that cannot be told from here (then no structured loop)."""
    producer = value.producer
    if producer is None:
        if value.initializer is not None:
            return None
        declared = value.type
        is_scalar = isinstance(declared, ir.TensorType) and declared.shape == ()
        role = facts.roles.get(id(value))
        if role == "carried":  # the compiler declares a carried value with an unknown shape
            return None if is_scalar else False
        if role is not None:  # iteration number and condition: scalars either way when declared so
            return True if is_scalar else None
        if isinstance(declared, ir.TensorType) and declared.elem_type in _ENUM_NAMES and declared.shape is not None:
            return declared.shape == ()
        return False
    if producer.callee is not None:
        return None
    if producer.domain != "" or depth > 6:
        return False
    if producer.op_type == "Constant":
        payload = producer.attributes.get("value")
        if payload is None:
            return any(name in producer.attributes for name in ("value_int", "value_float", "value_string"))
        return isinstance(payload.value, ir.Tensor) and payload.value.array.ndim == 0
    if producer.op_type in _SCALAR_PRESERVING:
        result: bool | None = True
        for operand in producer.inputs:
            if operand is None:
                return False
            known = _scalar_certainty(operand, facts, depth + 1)
            if known is False:
                return False
            if known is None:
                result = None
        return result
    return False


def _write_function(function: ir.Function, module: _Module, model_imports: dict[str, int]) -> str:
    imports = dict(function.opset_imports) or dict(model_imports)
    main_version = model_imports.get("", imports.get(""))
    writer = _Writer(module, imports, main_version)
    python_name = module.function_names[id(function)]
    # Attribute parameters keep their names (callers pass them by name); inputs, named
    # after them, give way.
    for param in function.attr_params:
        name = writer.names.fresh(param.name, "attr")
        if name != param.name:
            raise ConversionError(
                f"attribute parameter {param.name!r} of function {function.name} cannot be a Python parameter "
                f"of that name (it is not an identifier, or the generated code needs the name itself)",
                hint="rename the attribute (in the function and at its calls) with onnx before converting",
            )
        writer.attr_param_names[param.name] = name
    params = [writer.parameter(v) for v in function.inputs]
    plain: list[str] = []
    with_default: list[str] = []
    for param in function.attr_params:
        name = writer.attr_param_names[param.name]
        if param.kind == ir.AttrKind.UNDEFINED:
            annotation = "int"  # never referenced, no default: the proto records only the name
        elif param.kind in _ATTR_ANNOTATIONS:
            annotation = _ATTR_ANNOTATIONS[param.kind]
        else:
            raise ConversionError(
                f"attribute parameter {param.name!r} of function {function.name} is {param.kind.name}; "
                "@script attribute parameters are int, float, str or lists of them",
                hint="inline the function into its callers before converting",
            )
        if param.default is not None:
            with_default.append(f"{name}: {annotation} = {writer.attribute(param.default)}")
        else:
            plain.append(f"{name}: {annotation}")
    body_indent = "    "
    writer.graph_body(function.graph, body_indent)
    op_alias = writer.opset("") if "" in imports else None
    decorator_args = []
    if op_alias is not None:
        decorator_args.append(op_alias)
    decorator_args.append(f"domain={_utf8(function.domain, 'function domain')!r}")
    if python_name != function.name:
        decorator_args.append(f"name={_utf8(function.name, 'function name')!r}")
    header = [f"@script({', '.join(decorator_args)})", _def_line("", python_name, params + plain + with_default, "")]
    if function.doc_string:
        header.append(_docstring(function.doc_string, body_indent))
    return "\n".join(header + writer.lines)


def _write_main(
    graph: ir.Graph, python_name: str, module: _Module, opset_imports: dict[str, int], keep_inputs: bool,
    has_loops: bool = True, has_subgraphs: bool = True,
) -> str:
    writer = _Writer(module, opset_imports, opset_imports.get(""))
    # (What _plan_loops and node() would find: _declare_initializers saw every node.)
    if not has_loops:
        writer.loop_plans, writer.absorbed = {}, set()
    writer.has_subgraphs = has_subgraphs
    initializer_names = module.initializer_names  # (each initializer of graph and subgraphs)
    value_names = writer.value_names
    type_texts = module.type_texts
    params: list[str] = []
    defaults_started = False
    for value in graph.inputs:
        if value.initializer is not None:
            global_name = initializer_names.get(value)
        elif value.producer is None and value.name in module.sparse_names:  # (a sparse weight behind it)
            global_name = module.sparse_names[value.name]
        else:
            global_name = None
        if global_name is not None:
            if not keep_inputs:
                continue  # written as a plain initializer: the body reads the module-level name
            defaults_started = True
            # ``w: FLOAT[3] = w``: the default is the module-level Initializer of that name
            # (writer.parameter(value, global_name), written out: models have hundreds).
            value_type = value.type
            cached = type_texts.get(id(value_type))
            annotation = cached[1] if cached is not None and cached[0] is value_type else _type_text(value_type, module)
            name = value_names.get(value) or writer.name_of(value)
            params.append(f"{name}: {annotation} = {global_name}" if annotation else f"{name}={global_name}")
        else:
            if defaults_started and "*" not in params:
                # A plain input after an overridable weight: keyword-only keeps the order.
                params.append("*")
            writer.value_names.pop(value, None)
            params.append(writer.parameter(value))
    writer.graph_body(graph, "    ")
    returns = _return_annotation(graph.outputs, module)
    if not returns and graph.outputs:
        # One output Python cannot annotate (untyped, a map...) leaves the annotation out;
        # the others keep their types through io_types (by position: inputs, then outputs).
        output_types: list[str | None] = [_type_text(v.type, module) or None for v in graph.outputs]
        if any(output_types):
            input_types: list[str | None] = [None] * sum(p != "*" for p in params)
            module.partial_io_types = input_types + output_types
    version = opset_imports.get("")
    decorator = f"@script({writer.opset('')})" if version is not None else "@script()"
    header = [decorator, _def_line("", python_name, params, returns)]
    if graph.doc_string:
        header.append(_docstring(graph.doc_string, "    "))
    return "\n".join(header + writer.lines)


def _uncalled_functions(model: ir.Model) -> list[ir.Function]:
    """The model-local functions that no call of the main graph reaches: the compiled main
    function would leave them out, so ``model_options`` lists them."""
    if not model.functions:
        return []
    reached: set[int] = set()
    for graph in _all_graphs(model.graph):
        for node in graph.nodes:
            callee = node.callee
            if callee is not None and id(callee) not in reached:
                reached.add(id(callee))
                reached.update(id(f) for f in callee.callees())
    return [f for f in _callee_order(model.functions) if id(f) not in reached]


def _unread_weights(graph: ir.Graph, module: _Module) -> list[str]:
    """Module-level names of the main graph's initializers that nothing reads (no node of
    it or of its subgraphs, no output; an input's default is read by that input)."""
    inputs = set(graph.inputs)  # (Values hash by identity)
    input_names = {v.name for v in inputs}
    dense = [v for v in graph.initializers if v not in inputs]
    sparse = [name for name in graph.sparse_initializers if name in module.sparse_names and name not in input_names]
    if not dense and not sparse:  # (models that list every weight as an input stop here)
        return []
    read: set[ir.Value | None] = set()
    for current in _all_graphs(graph):  # (a subgraph output may be an outer weight itself)
        read.update(current.outputs)
        for node in current.nodes:
            read.update(node.inputs)
    read_names = {v.name for v in read if v is not None and v.producer is None and v.initializer is None}
    return ([module.initializer_names[v] for v in dense if v not in read]
            + [module.sparse_names[name] for name in sparse if name not in read_names])


def _all_graphs(graph: ir.Graph) -> Iterator[ir.Graph]:
    """``graph`` and every subgraph in it, at any depth."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        for node in current.nodes:
            for attr in node.attributes.values():
                if attr.kind in _GRAPH_KINDS and attr.value is not None:
                    if attr.kind == _GRAPH:
                        stack.append(attr.value)
                    else:
                        stack.extend(attr.value)


def _model_options(
    model: ir.Model, function_name: str, functions: list[str], weights: list[str], io_types: list[str | None] | None
) -> str:
    """The model fields a function cannot carry, attached for ``to_model_proto``; the
    functions nothing calls and the weights nothing reads are listed by their Python names."""
    options: dict[str, Any] = {}
    if model.producer_name or model.producer_version:
        options["producer_name"] = model.producer_name
        options["producer_version"] = model.producer_version
    if model.doc_string or model.graph.doc_string:  # the function's docstring is the graph's
        options["doc_string"] = model.doc_string
    if model.metadata_props:
        options["metadata_props"] = dict(model.metadata_props)
    if not options and not functions and not weights and io_types is None:
        return ""
    items = "".join(f"    {key!r}: {_utf8(value, key)!r},\n" for key, value in options.items())
    for key, names in (("functions", functions), ("initializers", weights)):
        if names:
            items += f"    {key!r}: [{', '.join(names)}],\n"
    if io_types is not None:  # (type texts, written as code: FLOAT[2], not 'FLOAT[2]')
        items += f"    'io_types': [{', '.join('None' if t is None else t for t in io_types)}],\n"
    return (
        "\n\n\n# Fields of the original model; `onnxquill compile` passes them to to_model_proto().\n"
        f"{function_name}.model_options = {{\n{items}}}"
    )


def _utf8(text: Any, what: str) -> Any:
    """``text``, refused where a corrupt file holds bytes that are not UTF-8 (proto2 parsing
    hands those out as bytes; written as a bytes literal, the file would not compile back).
    Dicts (metadata_props) are checked key by key."""
    if isinstance(text, dict):
        for key, value in text.items():
            _utf8(key, what)
            _utf8(value, what)
    elif isinstance(text, bytes):
        raise ModelLoadError(
            f"the model's {what} is not UTF-8 text: {text!r}",
            hint="the file is corrupt (ONNX text fields are UTF-8); re-export or re-download it",
        )
    return text


def _def_line(indent: str, name: str, params: list[str], returns: str) -> str:
    """``def name(params) -> T:`` on one line, or one parameter a line when that is long."""
    one_line_length = len(indent) + len(name) + sum(map(len, params)) + 2 * len(params) + len(returns) + 5
    if one_line_length <= 120 or not params:
        return f"{indent}def {name}({', '.join(params)}){returns}:"
    inner = indent + "    "
    listed = inner + f",\n{inner}".join(params)  # "*" keeps its place too
    return f"{indent}def {name}(\n{listed},\n{indent}){returns}:"


def _return_annotation(outputs: list[ir.Value], module: _Module) -> str:
    texts = [_type_text(v.type, module) for v in outputs]
    if not texts or not all(texts):
        return ""
    if len(texts) == 1:
        return f" -> {texts[0]}"
    return f" -> tuple[{', '.join(texts)}]"


# ---------------------------------------------------------------------- literals


def _type_text(ir_type: Any, module: _Module) -> str:
    # Models share a few type objects among many values (converter.from_onnx does): their
    # text is made once.  The cache holds the type, so its id stays unique meanwhile.
    cached = module.type_texts.get(id(ir_type))
    if cached is not None and cached[0] is ir_type:
        return cached[1]
    if isinstance(ir_type, ir.TensorType):
        name = _ENUM_NAMES.get(ir_type.elem_type)
        if name is None:
            return ""
        module.type_names.add(name)
        if ir_type.shape is None:
            text = f"{name}[...]"
        elif not ir_type.shape:
            text = name
        else:
            text = f"{name}[{', '.join('None' if d is None else repr(d) for d in ir_type.shape)}]"
            if any(type(d) is int and d < 0 for d in ir_type.shape):
                raise ConversionError(
                    f"the type {text} has a negative dimension",
                    hint="ONNX dimensions are sizes (>= 0); clear that dim_value (an unknown size) in the model",
                )
        module.type_texts[id(ir_type)] = (ir_type, text)
        return text
    if isinstance(ir_type, (ir.SequenceType, ir.OptionalType)):
        inner = _type_text(ir_type.elem, module)
        if not inner:
            return ""
        wrapper = "Sequence" if isinstance(ir_type, ir.SequenceType) else "Optional"
        module.type_names.add(wrapper)
        return f"{wrapper}[{inner}]"
    return ""


def _float_text(value: float, dtype: Any) -> str:
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "-float('inf')"
    return str(dtype(value)) if dtype is not float else repr(value)


_NUMPY_NAMES = {
    "float32": "np.float32", "float64": "np.float64", "float16": "np.float16", "int8": "np.int8",
    "int16": "np.int16", "int32": "np.int32", "int64": "np.int64", "uint8": "np.uint8",
    "uint16": "np.uint16", "uint32": "np.uint32", "uint64": "np.uint64", "bool": "np.bool_",
    "complex64": "np.complex64", "complex128": "np.complex128", "object": "object",
}

_NUMPY_BY_DTYPE = {np.dtype(name): text for name, text in _NUMPY_NAMES.items()}


def _array_text(array: np.ndarray, module: _Module, name: str) -> str:
    """``np.array([...], dtype=...)``, or the name of an array kept in the weights file."""
    if name and array.size > module.inline_limit and module.weights_file and array.dtype != object:
        module.large_arrays[name] = array
        return f"weights[{name!r}]"
    module.uses_np = True
    dtype = array.dtype
    # Exported models repeat small constants (ConstantOfShape's 0, Unsqueeze axes): write each once.
    key = (dtype, array.shape, array.tobytes()) if dtype.kind != "O" and array.size <= 64 else None
    if key is not None:
        cached = module.literal_cache.get(key)
        if cached is not None:
            return cached
    dtype_text = _NUMPY_BY_DTYPE.get(dtype)
    if dtype_text is None:
        module.uses_ml_dtypes = True
        dtype_text = f"ml_dtypes.{dtype.name}"
    text = _literal(array, dtype, dtype_text)
    if key is not None:
        module.literal_cache[key] = text
    return text


def _literal(array: np.ndarray, dtype: np.dtype, dtype_text: str) -> str:
    """The ``np.array(...)`` text of ``array``, exact for every element type."""
    if dtype.kind == "V":  # ml_dtypes: write the values through float32 (exact for these types)
        as_float = array.astype(np.float32)
        items = [_float_text(float(v), np.float32) for v in as_float.reshape(-1)]
        if dtype.name.startswith(("int", "uint")):
            items = [str(int(v)) for v in as_float.reshape(-1)]
    elif dtype.kind == "f":
        scalar = dtype.type
        items = [_float_text(float(v), scalar) for v in array.reshape(-1).tolist()]
    elif dtype.kind == "c":
        items = [_complex_text(complex(v)) for v in array.reshape(-1).tolist()]
    else:
        items = [repr(v) for v in array.reshape(-1).tolist()]
    if array.ndim == 0:
        return f"np.array({items[0]}, dtype={dtype_text})"
    body = "[" + ", ".join(items) + "]"
    if array.ndim == 1:
        return f"np.array({body}, dtype={dtype_text})"
    if array.size == 0:
        return f"np.zeros({tuple(int(d) for d in array.shape)!r}, dtype={dtype_text})"
    return f"np.array({body}, dtype={dtype_text}).reshape({tuple(int(d) for d in array.shape)!r})"


def _complex_text(value: complex) -> str:
    return f"complex({_float_text(value.real, float)}, {_float_text(value.imag, float)})"
