"""The model's weights in the generated module: one module-level declaration each, the
large ones read from an ``.npz`` file beside the source.

Each graph initializer is declared once at module level with ``dsl.initializer(array,
name=...)``, which returns an ``Initializer`` object; the body reads it by its Python
name::

    weights = load_weights(__file__, "model.npz")       # large ones, beside the source
    fc_weight = initializer(weights["fc_weight"], name="fc.weight")
    fc_bias = initializer(np.array([0.5, -1.0], dtype=np.float32), name="fc.bias")

The compiler turns a free name bound to an ``Initializer`` into an initializer of the
outermost graph (``dsl.frontend.weights.initializer_value``), so weights come back as
initializers, not Constants or inputs; a plain numpy array keeps meaning a Constant.
Initializers of subgraphs are declared with ``local=True``; the weights file is
written by :func:`dsl.weights_file.write_weights_file` (``save_weights`` here).
"""

from __future__ import annotations

import math

from converter.python_source.generated_module import GeneratedModule
from converter.python_source.literals import array_text
from dsl import ir
from dsl.weights_file import write_weights_file as save_weights

__all__ = ["declare_initializers", "save_weights", "unread_weights"]


def declare_initializers(graphs: list[ir.Graph], module: GeneratedModule) -> None:
    """Module-level declarations of the initializers of ``graphs``: the main graph first,
    then its subgraphs (whose initializers are declared ``local=True``)."""
    main = graphs[0]
    for graph in graphs:
        local = ", local=True" if graph is not main else ""
        _declare_dense(graph, module, local)
        if graph.sparse_initializers:
            _declare_sparse_only(graph, module, local)


def _declare_dense(graph: ir.Graph, module: GeneratedModule, local: str) -> None:
    """Each initializer of ``graph`` (a dense one that is also sparse: the sparse form)."""
    initializer_names = module.initializer_names
    fresh = module.globals.fresh
    weight_lines = module.weight_lines
    literal_cache = module.literal_cache
    # (what array_text() does first for a weights-file array and for a repeated small
    # one, written out: models have hundreds of initializers)
    inline_limit = module.inline_limit if module.weights_file else math.inf
    large_arrays = module.large_arrays
    sparse_initializers = graph.sparse_initializers
    for value in graph.initializers:
        if value in initializer_names:
            continue
        onnx_name = value.name
        name = fresh(onnx_name, "weight")
        initializer_names[value] = name
        sparse = sparse_initializers.get(onnx_name) if sparse_initializers else None
        if sparse is not None:
            weight_lines.append(_sparse_declaration(name, onnx_name, sparse, module, local))
            continue
        tensor = value.initializer
        assert tensor is not None
        array = tensor.array
        text: str | None
        if array.size > inline_limit and array.dtype.kind != "O":
            large_arrays[name] = array
            text = f"weights[{name!r}]"
        else:
            text = literal_cache.get((array.dtype, array.shape, array.tobytes())) if array.size <= 64 else None
            if text is None:
                text = array_text(array, module, name)
        weight_lines.append(f"{name} = initializer({text}, name={onnx_name!r}{local})")


def _declare_sparse_only(graph: ir.Graph, module: GeneratedModule, local: str) -> None:
    """The sparse initializers of ``graph`` that have no dense initializer of their name."""
    dense_names = {v.name for v in graph.initializers}
    for onnx_name, sparse in graph.sparse_initializers.items():
        if onnx_name in dense_names:
            continue
        name = module.globals.fresh(onnx_name, "weight")
        module.weight_lines.append(_sparse_declaration(name, onnx_name, sparse, module, local))
        module.sparse_names[onnx_name] = name


def _sparse_declaration(name: str, onnx_name: str, sparse: ir.SparseTensor, module: GeneratedModule,
                        local: str) -> str:
    return (
        f"{name} = sparse_initializer({array_text(sparse.values.array, module, name + '_values')}, "
        f"{array_text(sparse.indices.array, module, name + '_indices')}, {list(sparse.dims)!r}, "
        f"name={onnx_name!r}{local})"
    )


def unread_weights(graph: ir.Graph, graphs: list[ir.Graph], module: GeneratedModule) -> list[str]:
    """Module-level names of the initializers of ``graph`` that nothing reads: no node of
    ``graphs`` (it and its subgraphs), no output; an input's default is read by that input."""
    inputs = set(graph.inputs)  # (Values hash by identity)
    input_names = {v.name for v in inputs}
    dense = [v for v in graph.initializers if v not in inputs]
    sparse = [name for name in graph.sparse_initializers if name in module.sparse_names and name not in input_names]
    if not dense and not sparse:  # (models that list every weight as an input stop here)
        return []
    read: set[ir.Value | None] = set()
    for current in graphs:  # (a subgraph output may be an outer weight itself)
        read.update(current.outputs)
        for node in current.nodes:
            read.update(node.inputs)
    read_names = {v.name for v in read if v is not None and v.producer is None and v.initializer is None}
    return ([module.initializer_names[v] for v in dense if v not in read]
            + [module.sparse_names[name] for name in sparse if name not in read_names])
