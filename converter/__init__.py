"""IR -> ONNX protos, ONNX protos -> IR, IR -> Python source, and the onnxquill command.

The public functions of the round trip (a model someone else wrote -> Python you can
edit -> a model again) and of composition (``merge`` two models, ``cut`` one: passes
over the IR between reading and writing protos) are re-exported here; onnx is imported
only when one of them runs, so ``import converter`` stays cheap.

>>> import converter
>>> source = converter.to_python("model.onnx", weights_path="model.npz")   # doctest: +SKIP
>>> converter.assert_isomorphic(onnx.load("a.onnx"), onnx.load("b.onnx"))  # doctest: +SKIP
>>> both = converter.merge("pre.onnx", "net.onnx", io_map=[("pixels", "data")])  # doctest: +SKIP
>>> trunk = converter.cut("net.onnx", last_layers=-2)                       # doctest: +SKIP
>>> module = converter.to_torch("net.onnx")                                # doctest: +SKIP
>>> view = converter.show("net.onnx")      # the graph in Netron (inline in Jupyter)   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import onnx

    from converter.python_source import PythonSource
    from dsl import ir

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def _user_traceback(function: _Callable) -> _Callable:
    """A DslError leaving ``function`` shows the user's frames only (see
    :mod:`dsl.tracebacks`; written here so that ``import converter`` stays cheap)."""

    @functools.wraps(function)
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            from dsl.tracebacks import hide_library_frames

            hide_library_frames(error)  # (DslErrors only)
            raise  # (a bare raise adds no frame)

    return entry_point  # type: ignore[return-value]


__all__ = [
    "to_python", "write_python", "load_model", "from_proto", "isomorphic", "assert_isomorphic", "merge", "split",
    "join", "cut", "to_torch", "with_weights", "show",
]


@_user_traceback
def to_python(
    model_or_path: Any,
    weights_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> PythonSource:
    """Python source for ``@script`` that rebuilds a model (a path, a proto or IR).

    Tensors larger than ``inline_limit`` (16 elements) are saved to ``weights_path``
    (an ``.npz``) and loaded by the generated code as initializers.  Without it nothing
    is written and the source stays short (a zoo model prints at once): it reads the
    large tensors from a weights file that ``source.save("model.py")`` writes beside
    it, and ``source.weights`` holds them meanwhile.  The source is a ``str`` whose
    ``weights_path`` names the weights file written (None if none was).  Other options
    as :func:`converter.python_source.model_to_python` (``inline_limit=math.inf``
    writes every tensor inline).

    >>> import converter
    >>> source = converter.to_python("resnet18.onnx")   # doctest: +SKIP
    >>> print(source)                                    # doctest: +SKIP
    >>> source.save("resnet18.py")                       # doctest: +SKIP
    """
    from converter.python_source import model_to_python
    from dsl import ir
    from dsl.progress import working

    model: ir.Model | ir.Function | ir.Graph
    if isinstance(model_or_path, (ir.Model, ir.Function, ir.Graph)):
        model = model_or_path
    else:
        from converter.from_onnx import from_proto as _from_proto

        model = _from_proto(model_or_path)
    try:
        with working("to_python"):
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


@_user_traceback
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


@_user_traceback
def load_model(path: str | os.PathLike[str], *, load_external_data: bool = True) -> ir.Model:
    """Read an ONNX file into an :class:`ir.Model`; see :func:`converter.from_onnx.load_model`.

    >>> model = converter.load_model("model.onnx")     # doctest: +SKIP
    """
    from converter.from_onnx import load_model as _load_model

    return _load_model(path, load_external_data=load_external_data)


@_user_traceback
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


@_user_traceback
def merge(
    first: Any,
    second: Any,
    io_map: Sequence[tuple[str, str]] = (),
    prefix1: str | None = None,
    prefix2: str | None = None,
) -> onnx.ModelProto:
    """One ModelProto running ``first`` then ``second``, outputs wired to inputs by ``io_map``.

    ``first`` and ``second`` are ModelProtos or paths (external data is read).  Each
    ``(first_output, second_input)`` of ``io_map`` feeds that output to that input; an
    empty map puts the models side by side.  Names are kept where they do not clash and
    renamed in the second model where they do (``prefix1``/``prefix2`` prefix every name
    of one model); the result's outputs are, as with ``onnx.compose.merge_models``, the
    first's outputs not in the map followed by all of the second's.  When the models
    import different ai.onnx opsets, the older one is converted up with
    ``onnx.version_converter`` first (a ConversionError names the op when it cannot be);
    other domains are kept at the higher version, and so is the IR version.  See
    :mod:`dsl.passes.merge` for the rules and the errors.

    >>> model = converter.merge("pre.onnx", "net.onnx", io_map=[("image", "data_0")])   # doctest: +SKIP
    """
    from dsl.passes.merge import merge_models

    return _compose(
        [(first, "<first model>"), (second, "<second model>")],
        lambda models, values: merge_models(
            models[0], models[1], list(io_map), prefix1=prefix1, prefix2=prefix2, read_values=(values[0], values[1])
        ),
    )


@_user_traceback
def split(
    parent: Any,
    left: Any,
    right: Any,
    left_map: Sequence[tuple[str, str]],
    right_map: Sequence[tuple[str, str]],
) -> onnx.ModelProto:
    """One ModelProto where the outputs of ``parent`` feed two children, ``left`` and ``right``.

    sclblonnx's ``split``: each ``(parent_output, child_input)`` of ``left_map`` /
    ``right_map`` feeds that output of ``parent`` to that input of ``left`` / ``right``;
    one output may feed both.  The result's inputs are the parent's, then the children's
    the maps leave open; its outputs the parent's no map consumes, then the left's, then
    the right's.  Models are ModelProtos or paths; opsets, names and errors as
    :func:`merge` (see :func:`dsl.passes.merge.split_models`).

    >>> model = converter.split("backbone.onnx", "head_a.onnx", "head_b.onnx", [("h", "x")], [("h", "x")])  # doctest: +SKIP
    """
    from dsl.passes.merge import split_models

    return _compose(
        [(parent, "<parent model>"), (left, "<left model>"), (right, "<right model>")],
        lambda models, values: split_models(models[0], models[1], models[2], list(left_map), list(right_map)),
    )


@_user_traceback
def join(
    left: Any,
    right: Any,
    child: Any,
    left_map: Sequence[tuple[str, str]],
    right_map: Sequence[tuple[str, str]],
) -> onnx.ModelProto:
    """One ModelProto where the outputs of two parents, ``left`` and ``right``, feed ``child``.

    sclblonnx's ``join``: each ``(parent_output, child_input)`` of ``left_map`` /
    ``right_map`` feeds that output of ``left`` / ``right`` to that input of ``child``.
    The parents are put side by side (clashing names of ``right`` are renamed), then
    ``child`` follows.  The result's inputs are the left's, the right's, then the child's
    the maps leave open; its outputs the parents' no map consumes, then the child's.
    Models are ModelProtos or paths; opsets, names and errors as :func:`merge` (see
    :func:`dsl.passes.merge.join_models`).

    >>> model = converter.join("image.onnx", "text.onnx", "fusion.onnx", [("img", "a")], [("txt", "b")])  # doctest: +SKIP
    """
    from dsl.passes.merge import join_models

    return _compose(
        [(left, "<left model>"), (right, "<right model>"), (child, "<child model>")],
        lambda models, values: join_models(models[0], models[1], models[2], list(left_map), list(right_map)),
    )


def _compose(models: list[tuple[Any, str]], combine: Any) -> onnx.ModelProto:
    """``combine`` run on the models (ModelProtos or paths, each with the name errors give
    it) read into IR, the older ones converted up to the newest ai.onnx opset first (a bar
    shows the time it takes, where that is long and a person watches).  ``combine`` takes
    the list of models and the list of their values by name as read (see
    :func:`converter.from_onnx.models_and_values_from_protos`)."""
    from dsl.progress import working

    with working("composing the models"):
        return _aligned_and_combined(models, combine)


def _aligned_and_combined(models: list[tuple[Any, str]], combine: Any) -> onnx.ModelProto:
    from converter.from_onnx import models_and_values_from_protos
    from converter.opset_conversion import convert_opset, onnx_opset
    from converter.to_onnx import model_to_proto
    from dsl.collection_pause import collection_paused

    protos = [_model_proto(model, source) for model, source in models]
    opsets = [onnx_opset(proto) for proto, _ in protos]
    version = max(opsets)
    if min(opsets) < version:
        hint = "convert or rewrite that op by hand, then merge"
        protos = [
            (convert_opset(proto, version, source, hint=hint) if opset < version else proto, source)
            for (proto, source), opset in zip(protos, opsets)
        ]
    with collection_paused():  # reading, the passes and the writer build many small objects
        # (attributes held unread: the passes rewire values, the writer encodes each distinct set once;
        # the readers share what they learn: see models_and_values_from_protos)
        read = models_and_values_from_protos(protos, hold_attributes=True)
        return model_to_proto(combine([model for model, _ in read], [values for _, values in read]))


def _model_proto(model: Any, source: str) -> tuple[Any, str]:
    """A ModelProto and the name errors give it: a proto as is, a path read with its external data."""
    import onnx

    if isinstance(model, onnx.ModelProto):  # (the common case first: the others import more)
        return model, source
    from converter.from_onnx import read_model_proto
    from dsl.errors import ModelLoadError

    if isinstance(model, (str, os.PathLike)):
        return read_model_proto(model), os.fspath(model)
    raise ModelLoadError(
        f"merge, split, join and cut take ModelProtos or paths, not {type(model).__name__}",
        hint="pass onnx.load(path) or the path",
    )


@_user_traceback
def cut(
    model: Any,
    outputs: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    last_layers: int | None = None,
) -> onnx.ModelProto:
    """The sub-model of ``model`` that computes ``outputs`` (value names) from ``inputs``.

    ``model`` is a ModelProto or a path (external data is read).  ``outputs`` None keeps
    the model's outputs; ``inputs`` None keeps the graph inputs those outputs need, and
    given ones are all the inputs (a needed input left out, or one nothing needs, is an
    error).  ``last_layers=-k`` is SINGA's: ``-1`` keeps everything, ``-2`` drops the
    last layer (layers: the main graph's nodes in order, Constants left out).  Nodes,
    initializers and model-local functions nothing needs are dropped; If/Loop bodies
    keep what they read.  Every mistake is a DslError naming the values; see
    :mod:`dsl.passes.cut` for the rules.

    >>> part = converter.cut("resnet50.onnx", outputs=["r173"])      # doctest: +SKIP
    >>> head = converter.cut("resnet50.onnx", last_layers=-3)         # doctest: +SKIP
    """
    from converter.to_onnx import model_to_proto
    from dsl.collection_pause import collection_paused
    from dsl.passes.cut import cut_model
    from dsl.progress import working

    proto, source = _model_proto(model, "<model>")
    if inputs is not None:  # a value made an input needs its type, which files often leave to inference
        proto = _with_inferred_types(proto)
    with collection_paused(), working("cutting the model"):  # reading and writing build many small objects
        # The IR read here is the cut's alone: the result may hold its nodes (no copy).
        read, names = _read_for_cut(proto, source, outputs, inputs, last_layers)
        return model_to_proto(cut_model(read, outputs, inputs, last_layers, share=True, names=names))


def _read_for_cut(
    proto: Any, source: str, outputs: Sequence[str] | None, inputs: Sequence[str] | None, last_layers: int | None
) -> tuple[ir.Model, dict[str, ir.Value] | None]:
    """The IR of ``proto`` and its main graph's values by name where the reader has them
    all (the cut looks names up in the reader's table); with only ``outputs`` named, the
    main graph's nodes up to the one that defines the last of them (what a sorted graph
    needs to compute them).  A graph that is not sorted, or a malformed one, is read whole
    (which names its fault)."""
    from converter.from_onnx import model_and_values_from_proto
    from dsl.errors import ModelLoadError

    if outputs is not None and inputs is None and last_layers is None and all(isinstance(n, str) for n in outputs):
        # (inputs and last_layers are checked against the whole graph: read it whole then)
        try:
            return model_and_values_from_proto(proto, source=source, until=outputs, hold_attributes=True)
        except ModelLoadError:
            pass
    return model_and_values_from_proto(proto, source=source, hold_attributes=True)


def _with_inferred_types(proto: Any) -> Any:
    """``proto`` with ONNX shape inference's value types, or as it is where inference fails."""
    import onnx.shape_inference

    try:
        return onnx.shape_inference.infer_shapes(proto)
    except Exception:  # inference refuses some models (> 2 GB, unknown ops); the cut names untyped inputs
        return proto


def to_torch(model_or_path_or_ir: Any, outputs: Sequence[str] | None = None, *, trainable: Sequence[str] = ()) -> Any:
    """A trainable ``torch.nn.Module`` (a ``torch.fx.GraphModule``) computing the model.

    ``model_or_path_or_ir`` is a path, a ModelProto or an :class:`ir.Model`.  Float
    initializers become parameters named after their ONNX names (``.`` written ``%2E``,
    see :mod:`converter.torch_module.names`); ``outputs`` (value names) ends the module at
    inner values.  A float weight used only as an exponent, a clip bound, scales, range
    bounds or an epsilon stays a buffer (see :mod:`converter.torch_module.weight_roles`)
    unless ``trainable`` names it.  ``module.train()`` switches BatchNormalization to batch statistics and
    Dropout on; ``module.to_onnx()`` gives the model back with the trained weights.  Ops
    without a torch kernel run on onnxruntime, detached.  Needs torch (the ``torch`` extra).

    >>> module = converter.to_torch("model.onnx")              # doctest: +SKIP
    >>> print(module.code)                                     # doctest: +SKIP
    """
    from converter.torch_module import build_module
    from dsl.progress import working

    with working("to_torch"):
        if isinstance(model_or_path_or_ir, (str, os.PathLike)):
            # read here, the model is the module's alone: the parameters take its weight arrays'
            # memory instead of a second copy (a proto or ir.Model passed in is the caller's)
            return build_module(load_model(model_or_path_or_ir), outputs, share_weights=True, trainable=trainable)
        return build_module(_ir_model(model_or_path_or_ir), outputs, trainable=trainable)


def with_weights(model: Any, state_dict: Any) -> onnx.ModelProto:
    """The model (a path, ModelProto or :class:`ir.Model`) with the weights of a
    ``state_dict`` from :func:`to_torch`'s module put back where the model holds them
    (initializers and weight Constants of any graph or function body), by ONNX name.
    A key that fits no weight is an error naming close matches, or saying that it holds
    the same tensor as a weight placed (a tied copy, to drop).

    >>> trained = converter.with_weights("model.onnx", torch.load("checkpoint.pt")["model"])  # doctest: +SKIP
    """
    from converter.to_onnx import model_to_proto
    from converter.torch_module import proto_with_weights

    return proto_with_weights(model_to_proto(_ir_model(model), infer_output_types=False), state_dict)


def _ir_model(model: Any) -> ir.Model:
    """A path, ModelProto or ir.Model as an ir.Model (what the torch back end reads)."""
    import onnx

    from converter.from_onnx import model_from_proto
    from dsl import ir
    from dsl.errors import ModelLoadError

    if isinstance(model, ir.Model):
        return model
    if not isinstance(model, (str, os.PathLike, onnx.ModelProto)):
        raise ModelLoadError(
            f"to_torch and with_weights take a path, a ModelProto or an ir.Model, not {type(model).__name__}",
            hint="for an ir.Function: ir.Model(function.graph, opset_imports=function.opset_imports)",
        )
    proto, source = _model_proto(model, "<model>")
    return model_from_proto(proto, source=source)


@_user_traceback
def show(model: Any, inputs: Any = None, **options: Any) -> Any:
    """Serve ``model`` to the Netron graph viewer on 127.0.0.1 (inline in Jupyter), with
    source links; with ``inputs``, each value's observed shape, dtype and statistics on the
    graph.  ``model``: a ModelProto, a ``@script`` function, an ir.Function/ir.Model, or a
    path (``.onnx``, ``.py``, markup); options and the returned view as
    :func:`converter.model_display.show`.  Needs the ``view`` extra (Netron).

    >>> view = converter.show(my_script_function, [x])     # doctest: +SKIP
    >>> view.url                                            # doctest: +SKIP
    'http://127.0.0.1:40123/'
    """
    from converter.model_display import show as _show

    return _show(model, inputs, **options)
