"""Weights in scripted Python: graph initializers, and the ``.npz`` files that hold them.

Source written by ``converter.to_python`` declares each weight of the model at module
level and reads it in the body like any other name::

    weights = load_weights(__file__, "model.npz")
    conv1_weight = initializer(weights["conv1_weight"], name="conv1.weight")

    @script()
    def main_graph(x: FLOAT[1, 3, 224, 224]) -> FLOAT[1, 1000]:
        return op.Conv(x, conv1_weight)

The rule the compiler follows: a free name whose value is an :class:`Initializer`
becomes a graph initializer of the outermost graph (of the graph that reads it when
``local=True``), one per Initializer object however often it is read, named
``Initializer.name``; a tensor parameter whose default is an Initializer is a graph
input that is also an initializer (an overridable weight).  A plain numpy array stays
what it always is, a ``Constant`` node, so arrays written by hand keep their meaning.
:func:`initializer_operand` and :func:`attach_input_default` are that rule, called by
``dsl.frontend.compiler``.

:func:`load_weights` reads the ``.npz`` weights file that ``converter.to_python`` writes
beside the source (its format, ml_dtypes arrays included, is :mod:`dsl.weights_file`'s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl import hooks, ir, types
from dsl.dtypes import DType, dtype_of
from dsl.weights_file import read_weights_file

__all__ = [
    "Initializer",
    "initializer",
    "sparse_tensor",
    "sparse_initializer",
    "load_weights",
    "initializer_value",
    "initializer_operand",
    "attach_input_default",
]


@dataclass(slots=True, eq=False)
class Initializer:
    """A weight: read in a scripted body, it is a graph initializer, not a Constant node.

    ``tensor`` is dense (``sparse`` None) or ``sparse`` holds a COO sparse weight.
    ``local`` makes it an initializer of the (sub)graph that reads it, as a subgraph's
    own initializers are, instead of one of the outermost graph.
    """

    tensor: ir.Tensor
    sparse: ir.SparseTensor | None = None
    local: bool = False

    @property
    def name(self) -> str:
        return self.tensor.name

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Eager calls see the data itself.
        return np.asarray(self.tensor.array, dtype=dtype)

    def eager(self) -> Any:
        """The weight as an eager tensor: Python operators on it run the ONNX ops the
        compiler writes for them (``w * 2.0`` is Mul), as they do in a compiled body."""
        return hooks.eager_tensor(np.asarray(self.tensor.array))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.array.shape)

    @property
    def dtype(self) -> DType:
        """The :class:`~dsl.dtypes.DType` a compiled body reads too (equal to numpy's)."""
        return dtype_of(self.tensor.elem_type)


def _eager_operator(name: str) -> Any:
    def apply(self: Initializer, *others: Any) -> Any:
        return getattr(self.eager(), name)(*others)

    apply.__name__ = name
    return apply


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__mod__", "__rmod__", "__and__", "__rand__",
    "__or__", "__ror__", "__xor__", "__rxor__", "__neg__", "__pos__", "__invert__",
    "__lt__", "__le__", "__gt__", "__ge__", "__getitem__",
):
    setattr(Initializer, _name, _eager_operator(_name))


def initializer(array: Any, name: str = "", *, local: bool = False) -> Initializer:
    """Declare a weight: ``array`` (numpy, any dtype incl. ml_dtypes) named ``name`` in the model.

    >>> import numpy as np
    >>> w = initializer(np.zeros((2, 2), np.float32), name="fc.weight")
    >>> w.name
    'fc.weight'
    """
    array = np.asarray(array)
    return Initializer(ir.Tensor(array, types.element_type_of_dtype(array.dtype), name), local=local)


def sparse_tensor(values: Any, indices: Any, dims: Any) -> ir.SparseTensor:
    """A COO sparse tensor for a SPARSE_TENSOR attribute (``op.Constant(sparse_value=...)``).

    >>> import numpy as np
    >>> sparse_tensor(np.array([1.0], np.float32), np.array([3], np.int64), [2, 2]).dims
    (2, 2)
    """
    values_array = np.asarray(values)
    indices_array = np.asarray(indices, dtype=np.int64)
    return ir.SparseTensor(
        ir.Tensor(values_array, types.element_type_of_dtype(values_array.dtype)),
        ir.Tensor(indices_array, types.INT64.enum),
        tuple(int(d) for d in dims),
    )


def sparse_initializer(values: Any, indices: Any, dims: Any, name: str = "", *, local: bool = False) -> Initializer:
    """Declare a sparse weight (a ``sparse_initializer`` of the graph)."""
    sparse = sparse_tensor(values, indices, dims)
    sparse.values.name = name
    dense = np.zeros(sparse.dims, dtype=sparse.values.array.dtype)
    flat_indices = sparse.indices.array
    if flat_indices.ndim == 2:
        flat_indices = np.ravel_multi_index(tuple(flat_indices.T), sparse.dims)
    dense.reshape(-1)[flat_indices] = sparse.values.array
    return Initializer(ir.Tensor(dense, sparse.values.elem_type, name), sparse, local)


def load_weights(module_file: str | os.PathLike[str], file_name: str) -> dict[str, np.ndarray]:
    """Read the ``.npz`` file ``file_name`` that lies beside ``module_file`` (pass ``__file__``).

    A damaged file raises :class:`dsl.weights_file.WeightsFileError`.

    >>> weights = load_weights(__file__, "model.npz")      # doctest: +SKIP
    """
    path = os.path.join(os.path.dirname(os.path.abspath(os.fspath(module_file))), file_name)
    return read_weights_file(path)


def initializer_value(
    weight: Initializer, root_graph: ir.Graph, new_value: Any, known: dict[Any, ir.Value]
) -> ir.Value:
    """The initializer Value of ``weight`` in ``root_graph``, added on first use.

    ``new_value(base_name) -> ir.Value`` makes a uniquely named value (the compiler's
    name allocator); ``known`` is a dict the compiler keeps for one compiled function, so
    the same Initializer object read twice is one initializer (found in constant time).
    """
    key = (id(weight), id(root_graph))
    found = known.get(key)
    if found is not None:
        return found
    value = new_value(weight.name or "weight")
    value.type = ir.TensorType(weight.tensor.elem_type, weight.tensor.shape)
    if weight.sparse is not None:  # as from_onnx reads them: by name, not in ``initializers``
        root_graph.sparse_initializers[value.name] = weight.sparse
    else:
        value.initializer = weight.tensor
        root_graph.initializers.append(value)
    known[key] = value
    return value


def initializer_operand(compiler: Any, weight: Initializer) -> ir.Value:
    """What a free name bound to ``weight`` compiles to: the outermost graph's initializer.

    ``compiler`` is the :class:`dsl.frontend.compiler.FunctionCompiler` at work; one
    Initializer object read in several places (or several subgraphs) is one initializer.
    """
    builder = compiler.builder
    while builder.parent is not None and not weight.local:
        builder = builder.parent
    known: dict[Any, ir.Value] = compiler.__dict__.setdefault("_initializer_values", {})
    return initializer_value(weight, builder.graph, compiler.ctx.new_value, known)


def attach_input_default(compiler: Any, value: ir.Value, default: Any) -> None:
    """A tensor parameter whose default is an Initializer is an overridable weight.

    It stays a graph input and also becomes an initializer with the default's data (the
    IR < 4 style that ``converter.to_python`` writes as ``w: FLOAT[3] = w_init``).
    """
    if not isinstance(default, Initializer):
        return
    if default.sparse is not None:  # a sparse weight behind an input: named as the input
        compiler.builder.graph.sparse_initializers[value.name] = default.sparse
        return
    value.initializer = default.tensor
    compiler.builder.graph.initializers.append(value)
    known: dict[Any, ir.Value] = compiler.__dict__.setdefault("_initializer_values", {})
    known.setdefault((id(default), id(compiler.builder.graph)), value)
