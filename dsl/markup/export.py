"""The public entry points: a markup project -> IR model, ONNX model, files on disk.

``export`` keeps Agrippa's signature so existing scripts keep working; what differs is
that every problem is an error with a location instead of a printed note, and that the
weights are written as ``weights.npz``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir
from dsl.errors import MarkupError
from dsl.file_writing import write_bytes
from dsl.markup.compile import CompiledMarkup, MarkupCompiler
from dsl.markup.project import locate_project, read_meta
from dsl.markup.state import warn
from dsl.markup.weights import NPZ_NAME, PICKLE_NAME, read_weights
from dsl.weights_file import write_weights_file

if TYPE_CHECKING:
    import onnx

__all__ = ["compile_project", "to_model", "to_model_proto", "export"]

_DEFAULT_NAME = "Unknown"


def _normal_bindings(bindings: Mapping[str, Any] | None) -> dict[str, Any]:
    normal: dict[str, Any] = {}
    for key, value in (bindings or {}).items():
        if not isinstance(key, str) or not key:
            raise MarkupError(f"binding names are strings, got {key!r}")
        if isinstance(value, (np.integer, np.floating)):
            value = value.item()
        if not isinstance(value, (int, float, str)):
            raise MarkupError(
                f"binding {key!r} is a {type(value).__name__}",
                hint="bind names to numbers or strings: bindings={'n': 4, 'dtype': 'float32'}",
            )
        normal[key] = value
    return normal


def compile_project(
    infile: str | Path,
    *,
    bindings: Mapping[str, Any] | None = None,
    index: str | None = None,
    reinit: bool = False,
    seed: int | None = None,
    producer: str = _DEFAULT_NAME,
    graph_name: str = _DEFAULT_NAME,
    lenient: bool = False,
    strict: bool = False,
) -> CompiledMarkup:
    """Compile a markup project (a directory, or its architecture file) into IR plus weights.

    Stored weights (``weights.npz``, else Agrippa's ``weights.pkl``, read under
    Agrippa's parameter names) are used unless ``reinit``; missing ones are initialised
    from ``seed``, with a :class:`~dsl.markup.state.MarkupWarning` naming them when a
    weights file exists.  ``meta.json`` supplies ``producer`` and ``graph_name`` when
    they are left at their defaults.  What Agrippa accepted and what does not change the
    computed model (an unknown or misspelt attribute of a tag, editor layout, a block
    ``<export>`` of a name nothing defines) is a :class:`~dsl.markup.state.MarkupWarning`
    at ``file:line:col``, and an attribute that is an input of the op in the project's
    opset (ReduceSum's ``axes``) becomes that input with one; ``strict=True`` makes each
    an error.  ``lenient=True`` also turns an attribute the op does not have and a
    declared dim that shape inference contradicts into warnings (by default errors).

    >>> sizes = {"batch": 2, "n_in": 3, "hidden": 5, "n_out": 2}
    >>> compiled = compile_project("tests/data/markup/mlp", bindings=sizes)  # doctest: +SKIP
    >>> compiled.model.graph.nodes[0].op_type                                  # doctest: +SKIP
    'MatMul'
    """
    files = locate_project(infile, index)
    meta = read_meta(files.directory)
    if producer == _DEFAULT_NAME:
        producer = meta.get("producer", producer)
    if graph_name == _DEFAULT_NAME:
        graph_name = meta.get("graph_name", graph_name)
    stored, weights_file = ({}, None) if reinit else read_weights(files.directory)
    compiler = MarkupCompiler(
        bindings=_normal_bindings(bindings),
        stored_weights=stored,
        reinit=reinit,
        rng=np.random.default_rng(seed),
        lenient=lenient,
        agrippa_weight_names=weights_file is not None and weights_file.name == PICKLE_NAME,
        strict=strict,
    )
    compiled = compiler.compile(files.architecture, graph_name=graph_name, producer=producer)
    compiled.weights_file = weights_file
    compiled.lenient = lenient
    if weights_file is not None and compiled.fresh_weights:
        shown = ", ".join(compiled.fresh_weights[:10]) + (" ..." if len(compiled.fresh_weights) > 10 else "")
        warn(f"{len(compiled.fresh_weights)} weight(s) are not in {weights_file.name} and were initialised afresh: "
             f"{shown}", None)
    return compiled


def to_model(infile: str | Path, **options: Any) -> ir.Model:
    """The IR model of a markup project; ``options`` as for :func:`compile_project`.

    >>> model = to_model("tests/data/markup/meta")        # doctest: +SKIP
    """
    return compile_project(infile, **options).model


def _proto_of(compiled: CompiledMarkup) -> onnx.ModelProto:
    import onnx

    from converter.to_onnx import model_to_proto
    from dsl.markup.shapes import check_declared_shapes

    # (declared dims are checked next, at the tags that declare them; an output whose rank
    # is still unknown after that is refused by the checker below)
    proto = model_to_proto(compiled.model, producer_name=compiled.model.producer_name, require_output_ranks=False)
    param_locations = {
        value.name: value.location for value in compiled.model.graph.initializers if value.location is not None
    }
    check_declared_shapes(proto, compiled.declarations, compiled.node_locations, param_locations,
                          lenient=compiled.lenient)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as error:
        raise MarkupError(
            f"the exported model is not valid ONNX: {str(error).strip().splitlines()[0]}",
            compiled.model.location,
        ) from None
    return proto


def to_model_proto(infile: str | Path, **options: Any) -> onnx.ModelProto:
    """The checked ONNX model of a markup project, without writing any file.

    Declared dims are compared with ONNX shape inference; ``options`` as for
    :func:`compile_project`.

    >>> proto = to_model_proto("tests/data/markup/meta", seed=0)   # doctest: +SKIP
    """
    return _proto_of(compile_project(infile, **options))


def export(
    infile: str | Path,
    outfile: str | Path | None = None,
    producer: str = _DEFAULT_NAME,
    graph_name: str = _DEFAULT_NAME,
    write_weights: bool = True,
    suppress: bool = False,
    reinit: bool = False,
    bindings: Mapping[str, Any] | None = None,
    index: str | None = None,
    *,
    seed: int | None = None,
    lenient: bool = False,
    strict: bool = False,
) -> onnx.ModelProto:
    """Compile a markup project to an ONNX file (Agrippa's ``export``), returning the model.

    ``outfile`` defaults to the project path plus ``.onnx``.  With ``write_weights`` the
    parameters (loaded or freshly initialised) are saved as ``weights.npz`` in the
    project, so the next export reproduces the same model.  ``suppress`` silences the
    note about freshly initialised weights; ``lenient`` and ``strict`` are as for
    :func:`compile_project`.

    >>> export("my-project", "model.onnx", bindings={"n": 4, "layers": 6})   # doctest: +SKIP
    """

    compiled = compile_project(
        infile,
        bindings=bindings,
        index=index,
        reinit=reinit,
        seed=seed,
        producer=producer,
        graph_name=graph_name,
        lenient=lenient,
        strict=strict,
    )
    proto = _proto_of(compiled)
    source = Path(infile)
    if outfile is None:
        outfile = source.with_suffix(".onnx") if source.is_file() else Path(str(source).rstrip("/\\") + ".onnx")
    write_bytes(outfile, proto.SerializeToString())  # (never through a symlink planted at the path)
    if write_weights:
        directory = source.parent if source.is_file() else source
        write_weights_file(directory / NPZ_NAME, compiled.weights)
    if compiled.fresh_weights and not suppress and compiled.weights_file is None:  # (else warned already)
        shown = ", ".join(compiled.fresh_weights[:5]) + (" ..." if len(compiled.fresh_weights) > 5 else "")
        print(f"onnxquill: initialised {len(compiled.fresh_weights)} weights afresh: {shown}", file=sys.stderr)
    return proto

