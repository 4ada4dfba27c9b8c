"""What a markup compilation knows while it runs: the name table, ONNX names, checks.

Names live in one flat table, as in Agrippa: a markup name (with its import prefix,
``enc$x``) maps to the IR value it currently stands for.  ONNX value names are handed
out here, mangled as Agrippa mangles them (``x``, ``x$1``, ``x$2``...); a name may be
redefined only by the same output tag (a repetition), never by another tag.  The rule
modules (:mod:`blocks`, :mod:`nodes`, :mod:`params`) all work on this one state.
"""

from __future__ import annotations

import difflib
import os
import warnings
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dsl import ir, types
from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.limits import check_limit
from dsl.markup import attributes as read
from dsl.markup.document import Attribute, Element, parse_document

__all__ = [
    "CompiledMarkup", "Declaration", "Context", "CompilerState", "MarkupWarning", "describe_tag", "warn",
    "DEFAULT_OPSET", "FLOAT", "IO_ATTRS", "EDITOR_ATTRIBUTES",
]

DEFAULT_OPSET = 13  # what Agrippa wrote; <model opset="18"> picks another
FLOAT = types.FLOAT.enum
IO_ATTRS = ("from", "dim", "type")
# Layout that Agrippa's graphical editor writes on the tags it draws; Agrippa ignores it,
# so it is skipped here too (with a warning, in case one was meant as something else).
EDITOR_ATTRIBUTES = ("x", "y", "width", "height", "color", "collapsed")


class MarkupWarning(UserWarning):
    """Something in a markup project that Agrippa tolerates and onnxquill skips or repairs."""


def warn(message: str, location: SourceLocation | None) -> None:
    """A :class:`MarkupWarning` that starts with ``file:line:column``, as errors do."""
    warnings.warn(f"{location}: {message}" if location is not None else message, MarkupWarning, stacklevel=3)


@dataclass(slots=True)
class Declaration:
    """A ``dim`` written in the markup for a value, checked against ONNX shape inference."""

    value: ir.Value
    dims: tuple[int | str | None, ...]
    location: SourceLocation
    what: str


@dataclass(slots=True)
class CompiledMarkup:
    """The IR model and what the back end checks need: weights, declared dims, node places."""

    model: ir.Model
    weights: dict[str, np.ndarray]
    frozen: set[str]
    declarations: list[Declaration]
    node_locations: dict[str, SourceLocation]
    fresh_weights: list[str] = field(default_factory=list)
    weights_file: Path | None = None
    lenient: bool = False


@dataclass(slots=True, frozen=True)
class Context:
    """The directory ``src`` paths are relative to, and the import chain (to catch cycles).

    ``root`` is the project folder: every imported file must lie inside it."""

    directory: Path
    files: tuple[Path, ...]
    root: Path


def describe_tag(element: Element) -> str:
    return f"<{element.tag}>"


class CompilerState:
    """The state one compilation shares between its block, node and parameter rules."""

    def __init__(
        self,
        *,
        bindings: Mapping[str, Any],
        stored_weights: Mapping[str, np.ndarray],
        reinit: bool,
        rng: np.random.Generator,
        lenient: bool = False,
        agrippa_weight_names: bool = False,
        strict: bool = False,
    ) -> None:
        self.bindings = dict(bindings)
        self.stored_weights = stored_weights
        self.reinit = reinit
        self.rng = rng
        self.lenient = lenient
        self.strict = strict
        # A weights.pkl from Agrippa names the parameters of imported files without
        # their name$ prefix, numbered across the whole model: look them up that way.
        self.agrippa_weight_names = agrippa_weight_names
        self.agrippa_counters: dict[str, int] = {}
        self.env: dict[str, ir.Value] = {}
        self.owners: dict[str, tuple[tuple[int, str], SourceLocation]] = {}
        self.defined_log: list[str] = []
        self.used_names: dict[str, ir.Value] = {}
        self.name_counters: dict[str, int] = {}
        self.node_counters: dict[str, int] = {}
        self.param_counters: dict[str, int] = {}
        self.shared_params: dict[str, tuple[ir.Value, SourceLocation]] = {}
        self.prefix_owners: dict[str, int] = {}
        self.documents: dict[Path, Element] = {}
        self.checked: set[int] = set()
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self.weights: dict[str, np.ndarray] = {}
        self.frozen: set[str] = set()
        self.fresh: list[str] = []
        self.declarations: list[Declaration] = []
        self.node_locations: dict[str, SourceLocation] = {}
        self.domains: dict[str, int] = {}
        self.opset_version = DEFAULT_OPSET
        self.tags_built = 0  # block copies and nodes so far, bounded by the markup_nodes limit
        self.copies = 1  # copies the enclosing rep/stretch blocks make of the block being compiled

    if TYPE_CHECKING:  # the rules of the sibling mixins that the others call, for mypy only

        @abstractmethod
        def _check_root(self, root: Element, main: bool) -> None: ...  # compile.MarkupCompiler

        @abstractmethod
        def _node(self, element: Element, prefix: str) -> None: ...  # nodes.NodeCompiler

        @abstractmethod
        def _param(self, element: Element, prefix: str) -> ir.Value: ...  # params.ParamCompiler

    # ------------------------------------------------------------------ validation

    def _document(self, path: Path) -> Element:
        found = self.documents.get(path)
        if found is None:
            shown = os.path.relpath(path)
            found = self.documents[path] = parse_document(path, str(path) if shown.startswith("..") else shown)
        return found

    def _check(
        self,
        element: Element,
        allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
        children: tuple[str, ...] = (),
        open_attributes: bool = False,
    ) -> None:
        """Unknown attributes and child tags are errors (Agrippa ignored them silently)."""
        if id(element) in self.checked:
            return
        if not open_attributes:
            for name, attribute in element.attributes.items():
                if name not in allowed:
                    self._unknown_attribute(element, name, attribute, allowed)
        for name in required:
            if name not in element.attributes:
                raise MarkupError(
                    f"{describe_tag(element)} needs a {name!r} attribute",
                    element.location,
                    hint=f"write <{element.tag} {name}=\"...\" ...>",
                )
        for child in element.children:
            if child.tag not in children:
                close = difflib.get_close_matches(child.tag, children, n=1)
                inside = ", ".join(f"<{c}>" for c in children) or "nothing"
                raise MarkupError(
                    f"unknown tag <{child.tag}> inside {describe_tag(element)}",
                    child.location,
                    hint=(f"did you mean <{close[0]}>? " if close else "") + f"{describe_tag(element)} holds {inside}",
                )
        self.checked.add(id(element))

    def _unknown_attribute(self, element: Element, name: str, attribute: Attribute, allowed: tuple[str, ...]) -> None:
        """Agrippa ignored every unknown attribute: editor layout and a misspelt one
        (``dims`` for ``dim``) are skipped with a warning, an error under ``strict=True``."""
        close = difflib.get_close_matches(name, allowed, n=1)
        if name in EDITOR_ATTRIBUTES:
            self.tolerate(f"{describe_tag(element)}: ignoring {name!r}, layout written by Agrippa's editor",
                          attribute.location, "remove it")
            return
        message = f"{describe_tag(element)} has no attribute {name!r}"
        hint = (f"did you mean {close[0]!r}? " if close else "") + (
            f"the attributes of {describe_tag(element)} are: {', '.join(allowed)}"
        )
        self.tolerate(f"{message}; ignored", attribute.location, hint)

    def tolerate(self, message: str, location: SourceLocation | None, hint: str) -> None:
        """What Agrippa accepted and what does not change the computed model: a
        :class:`MarkupWarning` at ``file:line:col``, or under ``strict=True`` an error."""
        if self.strict:
            raise MarkupError(message, location, hint=f"{hint}; without strict=True this is a warning")
        warn(f"{message} ({hint})", location)

    # ------------------------------------------------------------------ names

    def _string(self, element: Element, name: str) -> str:
        attribute = element.attributes[name]
        return read.read_string(attribute, self.bindings).strip()

    def _name(self, element: Element, name: str) -> str:
        """A value or parameter name: never empty (Agrippa let "" through to ONNX)."""
        text = self._string(element, name)
        if not text:
            raise MarkupError(
                f"{describe_tag(element)} has an empty {name}",
                element.attributes[name].value_location,
                hint="names are what connect nodes; write one",
            )
        return text

    def _fresh_name(self, base: str) -> str:
        """An ONNX value name: ``base`` if free, else ``base$1``, ``base$2``... (Agrippa's mangling)."""
        if base not in self.used_names:
            return base
        counter = self.name_counters.get(base, 0)
        while True:
            counter += 1
            candidate = f"{base}${counter}"
            if candidate not in self.used_names:
                self.name_counters[base] = counter
                return candidate

    def _node_name(self, base: str) -> str:
        """Node names always carry a number (``Linear$1``), as Agrippa's do."""
        count = self.node_counters.get(base, 0) + 1
        self.node_counters[base] = count
        return f"{base}${count}"

    def _claim(self, value: ir.Value) -> None:
        self.used_names[value.name] = value

    def _define(self, full: str, value: ir.Value, key: tuple[int, str], location: SourceLocation) -> None:
        owner = self.owners.get(full)
        if owner is None:
            self.owners[full] = (key, location)
        elif owner[0] != key:
            raise MarkupError(
                f"{full!r} is already defined (at {owner[1]})",
                location,
                hint="every output name must be unique; rename one of them",
            )
        self.env[full] = value
        self.defined_log.append(full)

    def _lookup(self, full: str, attribute: Attribute) -> ir.Value:
        found = self.env.get(full)
        if found is not None:
            return found
        close = difflib.get_close_matches(full, list(self.env), n=3)
        if full in self.owners:
            hint = f"{full!r} is defined only inside a block that has not run yet or whose import it was"
        elif close:
            hint = f"did you mean {' or '.join(repr(c) for c in close)}?"
        else:
            hint = "an input must name a model import or the output of an earlier node"
        raise MarkupError(f"{full!r} is not defined here", attribute.value_location, hint=hint)

    @staticmethod
    def _elem_of(value: ir.Value) -> int | None:
        return value.type.elem_type if isinstance(value.type, ir.TensorType) else None

    def _check_declared_type(self, element: Element, value: ir.Value) -> None:
        attribute = element.get("type")
        if attribute is None:
            return
        declared = read.read_element_type(attribute, self.bindings, FLOAT)
        actual = self._elem_of(value)
        if actual is not None and actual != declared:
            raise MarkupError(
                f"{value.name!r} is {types.element_type_name(actual)}, but type says "
                f"{types.element_type_name(declared)}",
                attribute.value_location,
                hint="fix the type, or insert a Cast node",
            )
        if actual is None:
            value.type = ir.TensorType(declared, None)

    def _count(self, element: Element, name: str) -> int:
        attribute = element.get(name)
        if attribute is None:
            return 1
        count = read.read_int(attribute, self.bindings, name, minimum=1)
        check_limit("markup_nodes", count, f"{name}={count}", attribute.value_location)
        return count

    def _declare_io(self, element: Element, value: ir.Value, what: str) -> None:
        self._check_declared_type(element, value)
        dim = element.get("dim")
        if dim is not None:
            self.declarations.append(Declaration(value, read.read_dims(dim, self.bindings), dim.value_location, what))
