"""Parameters and results of a scripted function, read from its annotations.

A parameter annotated with a tensor type (``FLOAT``, ``FLOAT[2, "N"]``,
``Sequence[...]``, ``Optional[...]``) or not annotated at all is a graph input; one
annotated ``int``/``float``/``str``/``bool`` or a list of those (``list[int]``,
``typing.List[float]``, ``Sequence[str]``, ``Optional[int]``) is an attribute parameter
whose Python default becomes the attribute's default.  onnxscript's annotations work as
there (:func:`dsl.types.read_annotation`): a TypeVar bound to a Union of tensor types or
a Union is an input of any of them, ``typing.Optional[FLOAT]`` an input that may be
omitted; ``typing.Annotated[T, ...]`` is ``T`` unless its metadata holds a dsl type
(``Annotated[Tensor, FLOAT["B", 3]]``).  The return annotation gives output types;
``tuple[...]`` gives several outputs.
"""

from __future__ import annotations

import ast
import collections.abc
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsl import ir
from dsl import types as dsl_types
from dsl.errors import DslTypeError, OpAttributeError, UnsupportedSyntaxError
from dsl.opsets import python_to_attr

__all__ = ["Parameter", "Signature", "read_signature", "attr_kind_of_annotation"]

_SCALAR_KINDS: dict[Any, ir.AttrKind] = {
    int: ir.AttrKind.INT, float: ir.AttrKind.FLOAT, str: ir.AttrKind.STRING, bool: ir.AttrKind.INT,
}
_LIST_KINDS: dict[Any, ir.AttrKind] = {
    int: ir.AttrKind.INTS, float: ir.AttrKind.FLOATS, str: ir.AttrKind.STRINGS, bool: ir.AttrKind.INTS,
}
_SEQUENCE_ORIGINS = (list, tuple, collections.abc.Sequence)
_UNION_ORIGINS = (typing.Union, types.UnionType)
_MISSING = object()


@dataclass(slots=True)
class Parameter:
    """One Python parameter: a graph input (``attr_kind`` None) or an attribute parameter."""

    name: str
    location: ir.SourceLocation
    type: Any = None
    attr_kind: ir.AttrKind | None = None
    default: ir.Attr | None = None


@dataclass(slots=True)
class Signature:
    parameters: list[Parameter]
    output_types: list[Any] | None


def attr_kind_of_annotation(annotation: Any) -> ir.AttrKind | None:
    """``int`` -> INT, ``list[float]`` -> FLOATS, ...; None for anything else."""
    annotation = dsl_types.unwrap_annotated(annotation)  # Annotated[float, "doc"] is a float
    try:
        found = _SCALAR_KINDS.get(annotation)
    except TypeError:  # unhashable annotation object
        return None
    if found is not None:
        return found
    if typing.get_origin(annotation) in _UNION_ORIGINS:  # Optional[int]: an attribute that may be left out
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return attr_kind_of_annotation(members[0]) if len(members) == 1 else None
    if isinstance(annotation, (ir.SequenceType, ir.OptionalType)) and not isinstance(annotation.elem, ir.TensorType):
        try:
            return _LIST_KINDS.get(annotation.elem) if isinstance(annotation, ir.SequenceType) else None
        except TypeError:
            return None
    origin = typing.get_origin(annotation)
    if origin in _SEQUENCE_ORIGINS:
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if args and all(a == args[0] for a in args):
            try:
                return _LIST_KINDS.get(args[0])
            except TypeError:
                return None
    return None


def read_signature(
    tree: ast.FunctionDef,
    annotations: dict[str, Any] | None,
    defaults: dict[str, Any],
    evaluate: Callable[[ast.expr], Any],
    locate: Callable[[Any], ir.SourceLocation],
) -> Signature:
    """The parameters and output types of ``tree``.

    ``annotations`` are the function object's evaluated ``__annotations__`` when there
    is one (strings are evaluated with ``evaluate``); nested ``@graph`` definitions have
    none and their annotation expressions are evaluated directly.
    """
    args = tree.args
    for unsupported, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
        if unsupported is not None:
            raise UnsupportedSyntaxError(
                f"{what} parameters are not supported in @script", locate(unsupported),
                hint="list each input and attribute as its own parameter",
            )
    parameters: list[Parameter] = []
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        location = locate(arg)
        annotation = _annotation(arg.arg, arg.annotation, annotations, evaluate, location)
        parameter = Parameter(arg.arg, location)
        if annotation is _MISSING or annotation is None:
            parameters.append(parameter)
            continue
        kind = attr_kind_of_annotation(annotation)
        if kind is not None:
            parameter.attr_kind = kind
            default = defaults.get(arg.arg, _MISSING)
            if default is not _MISSING and default is not None:
                try:
                    parameter.default = python_to_attr(arg.arg, default, kind, location)
                except OpAttributeError as err:
                    err.hint = f"the default must match the annotation {_describe(annotation)}"
                    raise
            parameters.append(parameter)
            continue
        understood, ir_type = dsl_types.read_annotation(annotation)
        if not understood:
            raise DslTypeError(
                f"parameter {arg.arg!r} has annotation {_describe(annotation)}, which @script does not understand",
                locate(arg.annotation) if arg.annotation is not None else location,
                hint="annotate inputs with a tensor type (FLOAT, FLOAT[2, 'N'], Sequence[FLOAT[...]]) and "
                "attributes with int, float, str, bool or list[int]/list[float]/list[str]",
            )
        parameter.type = ir_type
        parameters.append(parameter)
    returns = _annotation("return", tree.returns, annotations, evaluate, locate(tree))
    output_types = None if returns is _MISSING else _output_types(returns, tree, locate)
    return Signature(parameters, output_types)


def _annotation(
    name: str, node: ast.expr | None, annotations: dict[str, Any] | None, evaluate: Callable[[ast.expr], Any],
    location: Any,
) -> Any:
    if node is None:
        return _MISSING
    if annotations is not None and name in annotations and not isinstance(annotations[name], str):
        return _unwrapped(annotations[name], location)
    found = evaluate(node)
    if isinstance(found, str):  # a string annotation (or ``from __future__ import annotations``)
        try:
            parsed = ast.parse(found, mode="eval").body
        except SyntaxError:
            return found
        found = evaluate(ast.copy_location(parsed, node) if _relocate(parsed, node) else parsed)
    return _unwrapped(found, location)


def _unwrapped(annotation: Any, location: Any) -> Any:
    """``Annotated[T, ...]`` read as @script reads it, an error pointing at the annotation."""
    try:
        return dsl_types.unwrap_annotated(annotation)
    except DslTypeError as error:
        raise error.with_location(location) from None


def _relocate(parsed: ast.expr, node: ast.expr) -> bool:
    """Give every node of a parsed annotation string the position of the string itself."""
    for inner in ast.walk(parsed):
        if hasattr(inner, "lineno"):
            ast.copy_location(inner, node)
    return True


def _output_types(returns: Any, tree: ast.FunctionDef, locate: Callable[[Any], Any]) -> list[Any]:
    location = locate(tree.returns)
    if returns is None:
        raise DslTypeError(
            "a scripted function must return at least one tensor, but its annotation is None",
            location,
            hint="annotate the result with a tensor type such as FLOAT[...], or remove the annotation",
        )
    if typing.get_origin(returns) is tuple:
        items = list(typing.get_args(returns))
    else:
        items = [returns]
    found: list[Any] = []
    for item in items:
        understood, ir_type = dsl_types.read_annotation(item)
        if not understood:
            raise DslTypeError(
                f"return annotation {_describe(item)} is not a tensor type",
                location,
                hint="write e.g. -> FLOAT[...] or -> tuple[FLOAT[...], INT64[...]]",
            )
        found.append(ir_type)
    return found


def _describe(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or repr(annotation)
