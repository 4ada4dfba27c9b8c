"""``converter.show`` and ``onnxquill view``: anything that is or makes a model, in Netron.

A model to look at comes in many forms: a ModelProto, a ``@script`` function, an IR
function or model, an ``.onnx`` file, a Python file with a ``@script`` function, a
markup project.  Each is written as a ModelProto with source links (nodes written from
Python or markup name their file, line and source line), optionally run on inputs with the
values observed written on it (:mod:`converter.value_overlay`), and served to the viewer
(:mod:`converter.model_view`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import onnx

from converter.model_view import ModelView, serve_model, viewer_folder
from dsl import ir
from dsl.errors import DslError
from dsl.progress import working

__all__ = ["show", "view_proto"]

_MARKUP_SUFFIXES = (".agr", ".xml")


def show(model: Any, inputs: Any = None, *, port: int = 0, height: int = 600, source_links: bool = True,
         bindings: Mapping[str, Any] | None = None, function: str | None = None) -> ModelView:
    """Serve ``model`` to the Netron graph viewer on 127.0.0.1; in Jupyter the returned view
    shows inline as the cell's output.

    ``model`` is a ModelProto, a ``@script`` function, an ``ir.Function``/``ir.Model``, or
    a path: an ``.onnx`` file, a ``.py`` file (its last ``@script`` function, or
    ``function=``), or a markup project (a directory, ``.agr`` or ``.xml``; ``bindings``
    sets its ``var(...)``).  Nodes compiled from Python or markup carry their source
    link.  With ``inputs`` (a list or dict of arrays) the model is run eagerly first and
    every value's observed shape, dtype and (floats) min/max/mean/NaN count is put on the
    graph; ``view.observed`` holds them by value name.  Needs Netron (the ``view`` extra).

    >>> import converter
    >>> view = converter.show(layer_norm, [x, scale, bias])      # doctest: +SKIP
    >>> view.url, view.observed["mean"]                           # doctest: +SKIP
    >>> view.stop()                                                # doctest: +SKIP
    """
    viewer_folder()  # (a missing viewer is said before any work)
    with working("preparing the view"):
        proto, name = view_proto(model, source_links=source_links, bindings=bindings, function=function)
        observed: dict[str, Any] = {}
        if inputs is not None:
            import eager
            from converter.value_overlay import overlay_values

            values = eager.run(proto, inputs, capture=True).values
            observed = overlay_values(proto, values)
        model_bytes = proto.SerializeToString()
    view = serve_model(model_bytes, name, port=port, model=proto, height=height)
    view.observed = observed
    return view


def view_proto(model: Any, *, source_links: bool = True, bindings: Mapping[str, Any] | None = None,
               function: str | None = None) -> tuple[onnx.ModelProto, str]:
    """The ModelProto ``show`` serves for ``model`` (a copy where the caller's proto is
    given), and the file name the viewer shows.

    >>> proto, name = view_proto("model.onnx")      # doctest: +SKIP
    """
    from converter.to_onnx import model_to_proto

    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy, (model.graph.name or "model") + ".onnx"
    if isinstance(model, (ir.Function, ir.Model)):
        name = model.name if isinstance(model, ir.Function) else (model.graph.name or "model")
        return model_to_proto(model, source_links=source_links), f"{name}.onnx"
    if isinstance(model, (str, os.PathLike)):
        return _proto_of_path(os.fspath(model), source_links, bindings, function)
    to_model_proto = getattr(model, "to_model_proto", None)
    if callable(to_model_proto) and isinstance(getattr(model, "function", None), ir.Function):  # a @script function
        return to_model_proto(source_links=source_links), f"{model.function.name}.onnx"
    raise DslError(
        f"show takes a ModelProto, a @script function, an ir.Function or ir.Model, or a path, "
        f"not {type(model).__name__}",
        hint="pass onnx.load(path), the path itself, or the scripted function",
    )


def _proto_of_path(path: str, source_links: bool, bindings: Mapping[str, Any] | None,
                   function: str | None) -> tuple[onnx.ModelProto, str]:
    from converter.to_onnx import model_to_proto

    base = os.path.basename(os.path.normpath(path))
    if os.path.isdir(path) or os.path.splitext(path)[1].lower() in _MARKUP_SUFFIXES:
        from dsl.markup import to_model

        return model_to_proto(to_model(path, bindings=dict(bindings or {})), source_links=source_links), base + ".onnx"
    if path.endswith(".py"):
        from converter.script_module import load_script_function, model_options

        scripted = load_script_function(path, function)
        return scripted.to_model_proto(**{**model_options(scripted), "source_links": source_links}), f"{scripted.name}.onnx"
    from converter.from_onnx import read_model_proto

    return read_model_proto(path), base
