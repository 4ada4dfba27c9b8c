"""Parameters: ``<params>`` -> graph initializers, loaded from the weights file or initialised.

Non-shared parameters are numbered per name (``W$1``, ``W$2``... one per copy, as in
Agrippa); a shared one keeps its bare name and is created once.  Parameters of an
imported file carry its ``name$`` prefix; Agrippa dropped it and numbered them with the
rest, so a ``weights.pkl`` from Agrippa is read under those names (``W$2`` for the
second ``W`` of the model wherever it is).  A frozen one carries ``$constant`` in its
name (Agrippa's marker, a torch buffer later).  A stored weight of the wrong shape is
an error, never reshaped or re-initialised.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from dsl import ir, types
from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.limits import check_limit
from dsl.markup import attributes as read
from dsl.markup.document import Element
from dsl.markup.state import FLOAT, CompilerState
from dsl.markup.weights import INIT_KINDS, fit_weight, initial_value
from dsl.tensor_protos import MAX_RANK

__all__ = ["ParamCompiler"]

_PARAMS_ATTRS = ("name", "dim", "type", "init", "init_args", "shared", "frozen")


class _Declaration(NamedTuple):
    """What a ``<param>`` element says, read and checked."""

    dims: tuple[int, ...]
    elem: int
    init: str
    init_args: Any
    shared: bool
    frozen: bool
    dims_location: SourceLocation
    args_location: SourceLocation


def _check_size(dims: tuple[int, ...], elem: int, location: SourceLocation) -> None:
    """A parameter is allocated from a few characters of markup: bound it before numpy tries."""
    if len(dims) > MAX_RANK:
        raise MarkupError(f"a parameter has {len(dims)} dims, more than {MAX_RANK}", location,
                          hint="a tensor has at most 64 axes")
    size = math.prod(dims) * types.numpy_dtype(elem).itemsize
    check_limit("tensor_bytes", size, f"a parameter of dims {list(dims)} ({size:,} bytes)", location)


class ParamCompiler(CompilerState):
    """The parameter rule."""

    def _param(self, element: Element, prefix: str) -> ir.Value:
        declared = self._param_declaration(element)
        local = self._name(element, "name") + ("$constant" if declared.frozen else "")
        base = prefix + local
        if declared.shared:
            existing = self._shared_param(base, declared, element)
            if existing is not None:
                return existing
            name = base
            stored_name = local if self.agrippa_weight_names else base
        else:
            name = self._numbered_param_name(base)
            stored_name = name
            if self.agrippa_weight_names:  # Agrippa: no import prefix, one count per name over the model
                count = self.agrippa_counters[local] = self.agrippa_counters.get(local, 0) + 1
                stored_name = f"{local}${count}"
        array = self._param_array(name, declared, stored_name)
        value = ir.Value(
            name,
            ir.TensorType(declared.elem, declared.dims),
            initializer=ir.Tensor(array, declared.elem, name),
            location=element.location,
        )
        self._claim(value)
        self.initializers.append(value)
        self.weights[name] = array
        if declared.frozen:
            self.frozen.add(name)
        if declared.shared:
            self.shared_params[base] = (value, element.location)
        return value

    def _param_declaration(self, element: Element) -> _Declaration:
        self._check(element, _PARAMS_ATTRS, ("name", "dim"))
        get = element.get
        dims_attr = element.attributes["dim"]
        dims = read.read_dims(dims_attr, self.bindings, symbolic=False)
        elem = read.read_element_type(get("type"), self.bindings, FLOAT)
        _check_size(dims, elem, dims_attr.value_location)
        init_attr = get("init")
        init = read.read_string(init_attr, self.bindings).strip() if init_attr is not None else "xavier"
        if init not in INIT_KINDS:
            raise MarkupError(
                f"unknown init {init!r}",
                init_attr.value_location if init_attr is not None else element.location,
                hint=f"init is one of {', '.join(INIT_KINDS)} (Agrippa fell back to N(0, 1) silently)",
            )
        args_attr = get("init_args")
        init_args = read.read_literal(args_attr, self.bindings, "init_args") if args_attr is not None else None
        args_location = args_attr.value_location if args_attr is not None else element.location
        # Check the arguments even when the weight is loaded, so a typo never lies dormant.
        initial_value(init, init_args, (), elem, np.random.default_rng(0), args_location)
        shared = read.read_choice(get("shared"), self.bindings, ("yes", "no"), "no") == "yes"
        frozen = read.read_choice(get("frozen"), self.bindings, ("yes", "no"), "no") == "yes"
        return _Declaration(dims, elem, init, init_args, shared, frozen, dims_attr.value_location, args_location)

    def _shared_param(self, base: str, declared: _Declaration, element: Element) -> ir.Value | None:
        """The shared parameter ``base`` if an earlier use created it (checked to agree), else None."""
        existing = self.shared_params.get(base)
        if existing is None:
            if base in self.used_names:
                raise MarkupError(f"parameter name {base!r} is already used by another value", element.location)
            return None
        value, first = existing
        wanted = ir.TensorType(declared.elem, declared.dims)
        if value.type != wanted:
            raise MarkupError(
                f"shared parameter {base!r} is {value.type!r} at {first}, but {wanted!r} here",
                declared.dims_location,
                hint="every use of a shared parameter must declare the same dim and type",
            )
        return value

    def _numbered_param_name(self, base: str) -> str:
        """``base$1``, ``base$2``...: the next free number for a non-shared parameter."""
        counter = self.param_counters.get(base, 0)
        while True:
            counter += 1
            name = f"{base}${counter}"
            if name not in self.used_names:
                break
        self.param_counters[base] = counter
        return name

    def _param_array(self, name: str, declared: _Declaration, stored_name: str) -> np.ndarray:
        """The stored weight ``stored_name`` (checked against the declaration), else a
        freshly initialised one."""
        # A frozen zeros/ones/constant is fully said by the markup: editing init_args must
        # take effect, so such a parameter is never read back from the weights file.
        from_markup = declared.frozen and declared.init in ("zeros", "ones", "constant")
        stored = None if self.reinit or from_markup else self.stored_weights.get(stored_name)
        if stored is not None:
            return fit_weight(name, stored, declared.dims, declared.elem, declared.dims_location)
        array = initial_value(
            declared.init, declared.init_args, declared.dims, declared.elem, self.rng, declared.args_location
        )
        if not from_markup:
            self.fresh.append(name)
        return array
