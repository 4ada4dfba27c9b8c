"""The ``onnxquill`` command: demo, to-python, compile, merge, cut, export, view.

Each subcommand is a thin shell over a public function, so everything the command does
can also be done from Python.  User mistakes exit with status 2 and the DslError report.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from dsl.errors import DslError

if TYPE_CHECKING:
    import onnx

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxquill", description="Write, read and run ONNX as Python.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="compile an example model, run it in onnxruntime, print what happened")
    demo.set_defaults(run=_run_demo)
    _add_export(commands)
    _add_to_python(commands)
    _add_compile(commands)
    _add_merge(commands)
    _add_cut(commands)
    _add_view(commands)
    return parser


def _add_to_python(commands: Any) -> None:
    to_python = commands.add_parser(
        "to-python",
        help="write an ONNX model as Python source for @script (weights beside it in an .npz)",
        description="Write MODEL as readable Python; tensors larger than --inline-limit elements go to an .npz file.",
    )
    to_python.add_argument("model", help="the model: an .onnx file, or a markup project (directory, .agr or .xml)")
    to_python.add_argument("-o", "--output", help="the .py file to write (default: print the source)")
    to_python.add_argument("--weights", help="the .npz file for large tensors (default: OUTPUT with .npz)")
    to_python.add_argument("--inline-limit", type=int, default=16, help="largest tensor written inline (elements)")
    to_python.add_argument(
        "--bind", action="append", default=[], metavar="NAME=VALUE", help="bind var(NAME) when MODEL is markup"
    )
    to_python.set_defaults(run=_run_to_python)


_MARKUP_SUFFIXES = (".agr", ".xml")


def _read_model(path: str, bindings: dict[str, str]) -> Any:
    """An IR model from an ONNX file, or from a markup project (its directory or .agr/.xml file)."""
    import os

    if os.path.isdir(path) or os.path.splitext(path)[1].lower() in _MARKUP_SUFFIXES:
        from dsl.markup import to_model

        return to_model(path, bindings=bindings)
    if bindings:
        raise DslError(
            f"--bind sets var(...) in markup, and {path} is not markup",
            hint="drop --bind, or pass a markup project (a directory, or an .agr/.xml file)",
        )
    from converter.from_onnx import load_model

    return load_model(path)


def _run_to_python(args: argparse.Namespace) -> int:
    import os

    from converter import to_python, write_python

    model = _read_model(args.model, _parse_bindings(args.bind))
    if args.output:
        weights = args.weights or os.path.splitext(args.output)[0] + ".npz"
        source = write_python(model, args.output, weights, inline_limit=args.inline_limit)
        print(f"wrote {args.output}" + (f" (weights: {source.weights_path})" if source.weights_path else ""))
    else:
        sys.stdout.write(to_python(model, args.weights, inline_limit=args.inline_limit))
    return 0


def _add_compile(commands: Any) -> None:
    compile_command = commands.add_parser(
        "compile",
        help="compile a @script function of a Python file to an ONNX model",
        description="Compile FILE.py[:FUNCTION] (default: the last @script function in the file) to ONNX.",
    )
    compile_command.add_argument("script", help="the Python file, optionally with :function")
    compile_command.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    compile_command.add_argument("--ir-version", type=int, help="force this IR version")
    compile_command.set_defaults(run=_run_compile)


def _run_compile(args: argparse.Namespace) -> int:


    from converter.script_module import load_script_function, model_options, split_spec

    path, name = split_spec(args.script)
    function = load_script_function(path, name)
    options = model_options(function)
    if args.ir_version is not None:
        options["ir_version"] = args.ir_version
    from dsl.progress import working

    with working(f"compiling {args.script}"):
        model = _write_compiled(function, options, args.output)
    print(f"wrote {args.output}: {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers")
    return 0


def _add_merge(commands: Any) -> None:
    merge = commands.add_parser(
        "merge",
        help="merge two ONNX models into one, outputs of the first feeding inputs of the second",
        description="Merge FIRST and SECOND: each --map OUT:IN feeds FIRST's output OUT to SECOND's input IN "
        "(no --map: side by side).  Clashing names in SECOND are renamed; the older opset is converted up.",
    )
    merge.add_argument("first", help="the first model (.onnx)")
    merge.add_argument("second", help="the second model (.onnx)")
    merge.add_argument(
        "--map", action="append", default=[], metavar="OUT:IN", help="wire FIRST's output OUT to SECOND's input IN"
    )
    merge.add_argument("--prefix1", help="prefix every name of FIRST")
    merge.add_argument("--prefix2", help="prefix every name of SECOND")
    merge.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    merge.set_defaults(run=_run_merge)


def _parse_io_map(pairs: list[str]) -> list[tuple[str, str]]:
    io_map: list[tuple[str, str]] = []
    for pair in pairs:
        output, colon, input_ = pair.rpartition(":")
        if not colon or not output or not input_:
            raise DslError(f"--map {pair!r} is not OUT:IN", hint="write e.g. --map logits:x")
        io_map.append((output, input_))
    return io_map


def _run_merge(args: argparse.Namespace) -> int:


    from converter import merge

    model = merge(args.first, args.second, _parse_io_map(args.map), prefix1=args.prefix1, prefix2=args.prefix2)
    _save_model(model, args.output)
    outputs = ", ".join(o.name for o in model.graph.output)
    print(f"wrote {args.output}: {len(model.graph.node)} nodes; outputs: {outputs}")
    return 0


# Protobuf cannot serialise 2 GB: models with more weights keep them in a side file.
_PROTO_LIMIT = 2**31 - 2**24


def _write_compiled(function: Any, options: dict[str, Any], path: str) -> onnx.ModelProto:
    """Compile and save; large weights go from the IR's arrays straight to ``PATH.data``."""
    import os

    from converter.external_data import ExternalDataWriter, StreamedWeights, write_streamed
    from dsl.file_writing import overwritten, write_bytes

    weights = sum(v.initializer.array.nbytes for v in function.function.graph.initializers
                  if v.initializer is not None)
    if weights <= _PROTO_LIMIT:
        streamed = StreamedWeights()
        model = function.to_model_proto(external_data=streamed, **options)
        with overwritten(path) as stream:
            write_streamed(model, stream, streamed)
        return model
    location = os.path.basename(path) + ".data"
    with overwritten(os.path.join(os.path.dirname(os.path.abspath(path)), location)) as stream:
        model = function.to_model_proto(external_data=ExternalDataWriter(stream, location), **options)
    write_bytes(path, model.SerializeToString())  # (the weights are in the side file: a small proto)
    return model


def _save_model(model: onnx.ModelProto, path: str) -> None:
    import os

    import onnx

    from dsl.file_writing import refuse_symlink, write_bytes

    large = sum(t.ByteSize() for t in model.graph.initializer) > _PROTO_LIMIT
    if not large:
        write_bytes(path, model.SerializeToString())  # (never through a symlink planted at the path)
        return
    for target in (path, path + ".data"):  # (onnx opens them itself)
        refuse_symlink(target)
    onnx.save_model(model, path, save_as_external_data=True, location=os.path.basename(path) + ".data")


def _add_cut(commands: Any) -> None:
    cut = commands.add_parser(
        "cut",
        help="keep the part of an ONNX model that computes some of its values",
        description="Cut MODEL down to what computes each --output NAME (or the outputs of layer --last-layers "
        "-K, SINGA's meaning: -1 keeps everything, -2 drops the last layer), from the --input NAMEs if given.",
    )
    cut.add_argument("model", help="the model (.onnx)")
    cut.add_argument("--output", action="append", metavar="NAME", help="a value to make an output (repeatable)")
    cut.add_argument("--input", action="append", metavar="NAME", help="a value to make an input (repeatable)")
    cut.add_argument("--last-layers", type=int, metavar="K", help="keep up to layer K (negative; -1: everything)")
    cut.add_argument("-o", "--output-file", dest="output_file", required=True, help="the .onnx file to write")
    cut.set_defaults(run=_run_cut)


def _run_cut(args: argparse.Namespace) -> int:


    from converter import cut

    model = cut(args.model, outputs=args.output, inputs=args.input, last_layers=args.last_layers)
    _save_model(model, args.output_file)
    inputs = ", ".join(i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer})
    outputs = ", ".join(o.name for o in model.graph.output)
    print(f"wrote {args.output_file}: {len(model.graph.node)} nodes; inputs: {inputs}; outputs: {outputs}")
    return 0


def _add_export(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="compile an XML markup project (.agr, Agrippa's format) to an ONNX file",
        description="Compile a markup project (a directory with one .agr/.xml file, or that file) to ONNX.",
    )
    export.add_argument("project", help="the project directory, or its architecture file")
    export.add_argument("-o", "--output", help="the .onnx file to write (default: PROJECT.onnx)")
    export.add_argument(
        "--bind", action="append", default=[], metavar="NAME=VALUE", help="bind var(NAME) in the markup (repeatable)"
    )
    export.add_argument("--index", help="the architecture file, when the project holds several")
    export.add_argument("--producer", default="Unknown", help="producer name (default: meta.json or Unknown)")
    export.add_argument("--graph-name", default="Unknown", help="graph name (default: meta.json or Unknown)")
    export.add_argument("--seed", type=int, help="random seed for weights initialised afresh")
    export.add_argument("--reinit", action="store_true", help="ignore stored weights and initialise all afresh")
    export.add_argument("--no-weights", action="store_true", help="do not write weights.npz into the project")
    export.add_argument("--quiet", action="store_true", help="no note about freshly initialised weights")
    export.add_argument(
        "--lenient", action="store_true", help="warn instead of failing on what Agrippa tolerated (unknown attributes, "
        "contradicted dims)"
    )
    export.add_argument(
        "--strict", action="store_true", help="fail on what Agrippa tolerated and onnxquill warns about (misspelt "
        "attributes, editor layout, exports of undefined names, attributes that are inputs)"
    )
    export.set_defaults(run=_run_export)


def _parse_bindings(pairs: list[str]) -> dict[str, str]:
    from dsl.errors import MarkupError

    bindings: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise MarkupError(f"--bind {pair!r} is not NAME=VALUE", hint="write e.g. --bind d_model=512")
        bindings[name.strip()] = value.strip()
    return bindings


def _run_export(args: argparse.Namespace) -> int:
    from dsl.markup import export

    model = export(
        args.project,
        args.output,
        producer=args.producer,
        graph_name=args.graph_name,
        write_weights=not args.no_weights,
        suppress=args.quiet,
        reinit=args.reinit,
        bindings=_parse_bindings(args.bind),
        index=args.index,
        seed=args.seed,
        lenient=args.lenient,
        strict=args.strict,
    )
    outputs = ", ".join(o.name for o in model.graph.output)
    print(f"wrote {len(model.graph.node)} nodes, {len(model.graph.initializer)} weights; outputs: {outputs}")
    return 0


def _add_view(commands: Any) -> None:
    view = commands.add_parser(
        "view",
        help="show a model's graph in the Netron viewer, served on 127.0.0.1 (the view extra)",
        description="Serve MODEL (an .onnx file, FILE.py[:function] with a @script function, or a markup project) "
        "to the Netron graph viewer on 127.0.0.1 until Ctrl+C.  Nodes compiled from Python or markup show "
        "their source line.",
    )
    view.add_argument("model", help="an .onnx file, FILE.py[:function], or a markup project (directory, .agr, .xml)")
    view.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    view.add_argument("--no-browser", action="store_true", help="only print the address, open no browser")
    view.add_argument(
        "--bind", action="append", default=[], metavar="NAME=VALUE", help="bind var(NAME) when MODEL is markup"
    )
    view.set_defaults(run=_run_view)


def _run_view(args: argparse.Namespace) -> int:
    from converter import show
    from converter.script_module import split_spec
    from dsl.progress import person_watching

    path, function = split_spec(args.model) if ".py:" in args.model else (args.model, None)
    view = show(path, port=args.port, bindings=_parse_bindings(args.bind), function=function)
    print(f"serving {view.name} at {view.url} (Ctrl+C stops)", flush=True)
    if not args.no_browser and person_watching():
        import webbrowser

        webbrowser.open(view.url)
    view.wait()
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from converter.demo import main as demo_main

    return demo_main()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except DslError as error:
        print(error, file=sys.stderr)
        return 2
    except OSError as error:  # a file that cannot be written (or read): a report, not a traceback
        where = f"{error.filename}: " if error.filename else ""
        print(DslError(f"{where}{error.strerror or error}", hint="check that the folder exists and that you may "
                       "write there (and read the inputs)"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
