"""The ``onnxquill`` command: demo, to-python, compile, export.

Each subcommand is a thin shell over a public function, so everything the command does
can also be done from Python.  User mistakes exit with status 2 and the DslError report.
"""

from __future__ import annotations

import argparse
import sys

from dsl.errors import DslError

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxquill", description="Write, read and run ONNX as Python.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="compile an example model, run it in onnxruntime, print what happened")
    demo.set_defaults(run=_run_demo)
    # Further subcommands (to-python, compile, export) are registered below this line.
    return parser


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


if __name__ == "__main__":
    sys.exit(main())
