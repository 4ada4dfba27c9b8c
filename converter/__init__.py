"""IR -> ONNX protos, ONNX protos -> IR, IR -> Python source, and the onnxquill command.

The public functions of the round trip (a model someone else wrote -> Python you can
edit -> a model again) are re-exported here; onnx is imported only when one of them
runs, so ``import converter`` stays cheap.

>>> import converter
>>> source = converter.to_python("model.onnx", weights_path="model.npz")   # doctest: +SKIP
>>> converter.assert_isomorphic(onnx.load("a.onnx"), onnx.load("b.onnx"))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converter.python_source import PythonSource
    from dsl import ir

__all__ = ["to_python", "write_python", "load_model", "from_proto", "isomorphic", "assert_isomorphic"]


def to_python(
    model_or_path: Any,
    weights_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> PythonSource:
    """Python source for ``@script`` that rebuilds a model (a path, a proto or IR).

    Tensors larger than ``inline_limit`` (16 elements) are saved to ``weights_path``
    (an ``.npz``) and loaded by the generated code as initializers; without it every
    tensor is written inline.  The source is a ``str`` whose ``weights_path`` names the
    weights file written (None if none was).  Other options as
    :func:`converter.python_source.model_to_python`.

    >>> import converter
    >>> print(converter.to_python("model.onnx", "model.npz"))   # doctest: +SKIP
    """
    from converter.python_source import model_to_python
    from dsl import ir

    model: ir.Model | ir.Function | ir.Graph
    if isinstance(model_or_path, (ir.Model, ir.Function, ir.Graph)):
        model = model_or_path
    else:
        from converter.from_onnx import from_proto as _from_proto

        model = _from_proto(model_or_path)
    try:
        return model_to_python(model, weights_path, **options)
    except (AttributeError, TypeError) as error:  # text where a corrupt file holds bytes?
        _raise_if_undecodable(model, error)
        raise


def _raise_if_undecodable(model: ir.Model | ir.Function | ir.Graph, error: Exception) -> None:
    """Report a model whose names are not UTF-8 (see :mod:`converter.undecodable`) as the
    corrupt input it is; any other failure is left to propagate."""
    from converter.undecodable import undecodable_text
    from dsl.errors import ModelLoadError

    found = undecodable_text(model)
    if found is not None:
        raise ModelLoadError(
            f"the model holds text that is not UTF-8: {found}",
            hint="the file is corrupt (names must be UTF-8); re-export or re-download it",
        ) from error


def write_python(
    model_or_path: Any,
    source_path: str | os.PathLike[str],
    weights_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> PythonSource:
    """Write the ``@script`` source of a model to ``source_path``, its large tensors beside it.

    What ``onnxquill to-python MODEL -o SOURCE`` does: the weights file defaults to
    ``source_path`` with the suffix ``.npz``, and the generated code loads it relative
    to its own folder, so the two files move together.  Both files are rewritten in
    place (see :mod:`dsl.file_writing`).  Returns the source, as :func:`to_python`
    (its ``weights_path`` is None when every tensor was written inline, no weights file).

    >>> converter.write_python("model.onnx", "model.py")   # doctest: +SKIP
    """
    from dsl.file_writing import write_text

    if weights_path is None:
        weights_path = os.path.splitext(os.fspath(source_path))[0] + ".npz"
    source = to_python(model_or_path, weights_path, source_path=source_path, **options)
    write_text(source_path, source)
    return source


def load_model(path: str | os.PathLike[str], *, load_external_data: bool = True) -> ir.Model:
    """Read an ONNX file into an :class:`ir.Model`; see :func:`converter.from_onnx.load_model`.

    >>> model = converter.load_model("model.onnx")     # doctest: +SKIP
    """
    from converter.from_onnx import load_model as _load_model

    return _load_model(path, load_external_data=load_external_data)


def from_proto(proto: Any) -> ir.Model | ir.Function | ir.Graph:
    """A ModelProto, FunctionProto, GraphProto or path -> IR; see :mod:`converter.from_onnx`.

    >>> graph = converter.from_proto(model_proto.graph)   # doctest: +SKIP
    """
    from converter.from_onnx import from_proto as _from_proto

    return _from_proto(proto)


def isomorphic(first: Any, second: Any, **options: Any) -> bool:
    """True when two protos are equal up to renaming and node order; see :mod:`converter.compare`.

    >>> converter.isomorphic(model, model)     # doctest: +SKIP
    True
    """
    from converter.compare import isomorphic as _isomorphic

    return _isomorphic(first, second, **options)


def assert_isomorphic(first: Any, second: Any, **options: Any) -> None:
    """Raise AssertionError naming the first difference unless the protos are isomorphic.

    >>> converter.assert_isomorphic(model, model)     # doctest: +SKIP
    """
    from converter.compare import assert_isomorphic as _assert_isomorphic

    _assert_isomorphic(first, second, **options)
