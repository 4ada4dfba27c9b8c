"""IR -> readable Python source for ``@script``: the back end that lets people edit a model.

The source is one module: imports and weight declarations
(:mod:`~converter.python_source.weights`), then one ``@script`` function per model-local
function and the main graph last (:mod:`~converter.python_source.functions`), each node
one statement (:mod:`~converter.python_source.statements`), an If or Loop in the forms the
compiler rebuilds as ``if``/``for``/``while``
(:mod:`~converter.python_source.control_flow`), every other graph attribute a nested
``@graph()`` function.  Names come from the model (made valid identifiers, never a
keyword, a builtin or a name the generated module uses itself:
:mod:`~converter.python_source.names`).  Everything is one pass over the nodes.

>>> from converter.from_onnx import load_model
>>> source = model_to_python(load_model("model.onnx"), "model.npz")   # doctest: +SKIP
>>> source.weights_path                                              # doctest: +SKIP
'model.npz'
"""

from __future__ import annotations

import os

import numpy as np

from converter.python_source.functions import (
    callee_order,
    graph_tree,
    uncalled_functions,
    write_function,
    write_main,
)
from converter.python_source.generated_module import (
    INLINE_LIMIT,
    GeneratedModule,
    header,
    model_options,
    weights_line,
)
from converter.python_source.metadata import metadata_items
from converter.python_source.names import RESERVED, Namespace
from converter.python_source.weights import declare_initializers, save_weights, unread_weights
from dsl import ir
from dsl.errors import ConversionError

# The weights file a source names before it is saved (PythonSource.save renames it).
DEFAULT_WEIGHTS_FILE = "model.npz"

__all__ = ["model_to_python", "function_to_python", "save_weights", "INLINE_LIMIT", "PythonSource"]


class PythonSource(str):
    """The generated source text, which also says what was written beside it and what
    it reads: ``weights_path`` is the ``.npz`` file written, or None when none was (every
    tensor is inline, or no weights path was given); ``weights`` maps each name the
    source reads from its weights file to the array, and :meth:`save` writes both.

    >>> source = converter.to_python("resnet18.onnx")    # doctest: +SKIP
    >>> source.save("resnet18.py")                       # and resnet18.npz beside it  # doctest: +SKIP
    """

    __slots__ = ("_weights_line", "weights", "weights_path")
    weights_path: str | None
    weights: dict[str, np.ndarray]
    _weights_line: tuple[int, int] | None

    def __new__(
        cls,
        text: str,
        weights_path: str | None = None,
        weights: dict[str, np.ndarray] | None = None,
        weights_line: tuple[int, int] | None = None,
    ) -> PythonSource:
        source = super().__new__(cls, text)
        source.weights_path = weights_path
        source.weights = dict(weights or {})
        source._weights_line = weights_line
        return source

    @property
    def source(self) -> str:
        """The text as a plain ``str``."""
        return str(self)

    def save(
        self, source_path: str | os.PathLike[str], weights_path: str | os.PathLike[str] | None = None
    ) -> PythonSource:
        """Write the source to ``source_path`` and the arrays it reads to ``weights_path``
        (default: ``source_path`` with the suffix ``.npz``), the source naming that file
        relative to its own folder; returns the source as written.

        >>> converter.to_python("model.onnx").save("model.py")   # doctest: +SKIP
        """
        from dsl.file_writing import write_text

        if self._weights_line is None or not self.weights:
            write_text(source_path, self)
            return PythonSource(str(self))
        if weights_path is None:
            weights_path = os.path.splitext(os.fspath(source_path))[0] + ".npz"
        folder = os.path.dirname(os.path.abspath(os.fspath(source_path)))
        line = weights_line(os.path.relpath(os.path.abspath(os.fspath(weights_path)), folder))
        start, end = self._weights_line
        text = self[:start] + line + self[end:]
        save_weights(weights_path, self.weights)
        write_text(source_path, text)
        return PythonSource(text, os.fspath(weights_path), self.weights, (start, start + len(line)))


def model_to_python(
    model: ir.Model | ir.Function | ir.Graph,
    weights_path: str | os.PathLike[str] | None = None,
    *,
    source_path: str | os.PathLike[str] | None = None,
    inline_limit: float = INLINE_LIMIT,
    initializer_inputs: str = "keep",
) -> PythonSource:
    """Python source that, compiled with ``@script``, rebuilds ``model``.

    Tensors with more than ``inline_limit`` elements go to ``weights_path`` (an ``.npz``
    written now; its path is recorded relative to ``source_path``'s folder, by default
    the weights file's own folder).  Without ``weights_path`` nothing is written: the
    source reads them from ``model.npz`` and holds them in ``.weights`` until
    :meth:`PythonSource.save` writes both files, so printing a large model is fast and
    readable (``inline_limit=math.inf`` writes every tensor inline instead).
    ``initializer_inputs="drop"`` writes initializers that are also graph inputs as
    plain initializers (the IR >= 4 reading) instead of parameters with defaults.

    >>> from converter.from_onnx import load_model
    >>> print(model_to_python(load_model("model.onnx"), "model.npz"))   # doctest: +SKIP
    """
    if initializer_inputs not in ("keep", "drop"):
        raise ConversionError(f"initializer_inputs is 'keep' or 'drop', not {initializer_inputs!r}")
    module = GeneratedModule(Namespace(RESERVED), inline_limit=inline_limit)
    if weights_path is not None:
        folder = os.path.dirname(os.path.abspath(os.fspath(source_path))) if source_path is not None else None
        absolute = os.path.abspath(os.fspath(weights_path))
        module.weights_file = os.path.relpath(absolute, folder) if folder else os.path.basename(absolute)
    else:
        module.weights_file = DEFAULT_WEIGHTS_FILE
        module.weights_note = "not written yet: PythonSource.save() or onnxquill to-python -o writes it"
    text = _module_text(model, module, initializer_inputs == "keep")
    if not module.loads_weights or module.weights_line_at is None:
        return PythonSource(text)
    start = module.weights_line_at
    line = (start, text.index("\n", start))
    if weights_path is not None:
        save_weights(weights_path, module.large_arrays)
        return PythonSource(text, os.fspath(weights_path), module.large_arrays, line)
    return PythonSource(text, None, module.large_arrays, line)


def function_to_python(function: ir.Function) -> PythonSource:
    """Python source of one IR function (and the model-local functions it calls).

    >>> print(function_to_python(my_function.function_ir))   # doctest: +SKIP
    """
    return model_to_python(function)


def _module_text(model: ir.Model | ir.Function | ir.Graph, module: GeneratedModule, keep_inputs: bool) -> str:
    if isinstance(model, ir.Graph):
        model = ir.Model(graph=model)
    functions = [*model.callees(), model] if isinstance(model, ir.Function) else callee_order(model.functions)
    opset_imports = dict(model.opset_imports)
    for function in functions:
        module.function_names[id(function)] = module.globals.fresh(function.name, "function")
    if not isinstance(model, ir.Model):  # a function and what it calls
        blocks = [write_function(function, module, opset_imports) for function in functions]
        return "".join([header(module, model.doc_string, None), "\n\n\n".join(blocks), "\n"])
    main = model.graph
    main_name = module.globals.fresh(main.name or "main_graph", "graph")
    tree = graph_tree(main)
    declare_initializers(tree.graphs, module)  # (first: weights keep their names, locals give way)
    blocks = [write_function(function, module, opset_imports) for function in functions]
    blocks.append(write_main(main, main_name, module, opset_imports, keep_inputs, tree))
    kept = [module.function_names[id(f)] for f in uncalled_functions(model)]
    unread = unread_weights(main, tree.graphs, module)
    tail = model_options(model, main_name, kept, unread, module.partial_io_types, metadata_items(model, module))
    # One join: the source is ~250 bytes a node, and each "a + b" would copy all of it.
    return "".join([header(module, model.doc_string, model), "\n\n\n".join(blocks), tail, "\n"])
