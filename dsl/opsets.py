"""Opsets built lazily from the ``onnx.defs`` schemas, for every domain and version onnx knows.

``opset18.Relu`` is an :class:`Op` bound to the newest ``Relu`` schema whose version is at
most 18.  Nothing is generated ahead of time: an Op is made on first attribute access and
cached, so ``import dsl`` stays cheap.  Custom domains without schemas
(``Opset("com.example", 1)``) accept any op and any attributes.

The front ends ask an Op to check a call (:meth:`Op.check_call`) and to turn Python
attribute values into IR attributes (:meth:`Op.make_attr`); eager mode calls the Op.
"""

from __future__ import annotations

import difflib
import functools
import re
import sys
from typing import TYPE_CHECKING, Any, TypeVar

from dsl import hooks, ir, types

# (attribute conversion lives in dsl.attribute_values; its names stay importable from here)
from dsl.attribute_values import attr_kind_of_python, python_to_attr, tensor_from_proto, to_tensor
from dsl.errors import DslTypeError, OpAttributeError, OpCallError, UnknownOpError
from dsl.tracebacks import frame_location, hide_library_frames, is_library_frame

if TYPE_CHECKING:
    # Editors and type checkers see every op with its signature (a generated stub:
    # opset18 is an Opset18, whose methods are the ops of opset 18).
    from dsl.op_signatures import *  # noqa: F403

T = TypeVar("T")

__all__ = [
    "Opset", "Op", "OPSET_NAME", "schema_domains", "python_to_attr", "attr_kind_of_python", "tensor_from_proto",
    "to_tensor", "elem_of_type_str",
]

_STANDARD_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview")
_MODULE_NAMES = {
    "opset": "",
    "ai_onnx_ml": "ai.onnx.ml",
    "ai_onnx_preview_training": "ai.onnx.preview.training",
    "ai_onnx_preview": "ai.onnx.preview",
}
# Module-level opset names: opset18, ai_onnx_ml3, ... (and the bare `opset`, the newest runnable).
OPSET_NAME = re.compile(r"^(opset|ai_onnx_ml|ai_onnx_preview_training|ai_onnx_preview)(\d+)$|^opset$")


def _normal_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


@functools.cache
def schema_domains() -> dict[str, int]:
    """Each domain onnx has schemas for, with the newest version it defines."""
    import onnx.defs

    found: dict[str, int] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        found[schema.domain] = max(found.get(schema.domain, 0), schema.since_version)
    found[""] = max(found.get("", 0), onnx.defs.onnx_opset_version())
    return found


class _OpsetFields:
    """An opset's domain, version and op cache.  (Opset's constructor lives here so that a
    type checker takes the type of ``Opset(...)`` from ``Opset.__new__``: mypy reads
    ``__new__`` only when ``__init__`` is defined in a base class.)"""

    def __init__(self, domain: str, version: int) -> None:
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise DslTypeError(f"an opset version is a positive int, not {version!r}")
        self.domain = _normal_domain(domain)
        self.version = version
        self._ops: dict[str, Op] = {}
        self._has_schemas = self.domain in _STANDARD_DOMAINS


class Opset(_OpsetFields):
    """A (domain, version) pair whose attributes are the ops of that opset.

    >>> from dsl import Opset
    >>> op = Opset("", 18)
    >>> op.Relu                                   # doctest: +ELLIPSIS
    Op(Relu, opset 18, since 14)
    >>> custom = Opset("com.example", 1)        # no schemas: any op, any attribute
    """

    @property
    def has_schemas(self) -> bool:
        """True for the domains onnx defines; custom domains are unchecked."""
        return self._has_schemas

    if TYPE_CHECKING:
        # A type checker sees the ops of opset18 & co. in their stub classes, which have no
        # __getattr__ (so op.Softmaxx is flagged); Opset("com.example", 1) takes any op.
        def __new__(cls, domain: str, version: int) -> AnyOpOpset: ...

    else:

        def __getattr__(self, name: str) -> Op:
            if name.startswith("__"):
                raise AttributeError(name)
            found = self._ops.get(name)
            if found is None:
                try:
                    found = self.get_op(name)
                except UnknownOpError as error:  # ``op.Softmaxx`` in the user's own line (eager code)
                    caller = sys._getframe(1)
                    if not is_library_frame(caller):
                        error.with_location(frame_location(caller))
                    raise
            return found

    def get_op(self, name: str) -> Op:
        """The op called ``name``; :class:`UnknownOpError` when no schema defines it here."""
        found = self._ops.get(name)
        if found is not None:
            return found
        schema = None
        if self._has_schemas:
            import onnx.defs

            try:
                schema = onnx.defs.get_schema(name, self.version, self.domain)
            except onnx.defs.SchemaError:
                raise UnknownOpError(
                    f"{self.describe()} has no op {name!r}",
                    hint=self._suggest(name),
                ) from None
            if schema.deprecated:
                raise UnknownOpError(
                    f"{name} is deprecated in {self.describe()}",
                    hint="use an older opset, or the op that replaced it",
                )
        found = Op(self, name, schema)
        self._ops[name] = found
        return found

    def _suggest(self, name: str) -> str:
        later = [s.since_version for s in _all_schemas_named(name, self.domain) if s.since_version > self.version]
        if later:
            return f"{name} exists from opset {min(later)} on; use opset{min(later)} or newer"
        close = difflib.get_close_matches(name, self.op_names(), n=3)
        if close:
            return "did you mean " + " or ".join(close) + "?"
        return "see the op list of the ONNX specification for this domain"

    def op_names(self) -> list[str]:
        """Names of the ops available at this version (empty for a custom domain)."""
        if not self._has_schemas:
            return sorted(self._ops)
        import onnx.defs

        return sorted(
            {
                s.name
                for s in onnx.defs.get_all_schemas_with_history()
                if s.domain == self.domain and s.since_version <= self.version and not s.deprecated
            }
        )

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.op_names()]

    def describe(self) -> str:
        return f"opset {self.domain or 'ai.onnx'} {self.version}"

    def __repr__(self) -> str:
        return f"Opset({self.domain!r}, {self.version})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opset) and (self.domain, self.version) == (other.domain, other.version)

    def __hash__(self) -> int:
        return hash((self.domain, self.version))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Opset, (self.domain, self.version))


if TYPE_CHECKING:

    class AnyOpOpset(Opset):
        """What ``Opset(domain, version)`` is to a type checker: any attribute is an op."""

        def __getattr__(self, name: str) -> Op: ...


def _all_schemas_named(name: str, domain: str) -> list[Any]:
    import onnx.defs

    return [s for s in onnx.defs.get_all_schemas_with_history() if s.name == name and s.domain == domain]


class Op:
    """One operator at one opset version, with its schema when onnx has one.

    Calling it outside ``@script`` runs it eagerly on numpy arrays (or torch tensors)::

        >>> import numpy as np
        >>> from dsl import opset18 as op
        >>> op.Add(np.float32(1), np.float32(2))
        array(3., dtype=float32)
    """

    __slots__ = ("_allowed_types", "_attr_kinds", "_eager_key", "_input_kinds", "_input_range", "_output_range", "name",
                 "opset", "schema")

    def __init__(self, opset: Opset, name: str, schema: Any) -> None:
        self.opset = opset
        self.name = name
        self.schema = schema
        self._eager_key: Any = None
        self._input_kinds: dict[str, tuple[int, bool, bool]] | None = None
        self._allowed_types: dict[str, list[str]] | None = None
        if schema is not None:
            self._attr_kinds = {n: ir.AttrKind(int(a.type)) for n, a in schema.attributes.items()}
            self._input_range = (schema.min_input, schema.max_input)
            self._output_range = (schema.min_output, schema.max_output)
        else:
            self._attr_kinds = {}
            self._input_range = (0, 2**31 - 1)
            self._output_range = (1, 2**31 - 1)

    @property
    def domain(self) -> str:
        return self.opset.domain

    @property
    def version(self) -> int:
        """The opset version this op was requested at."""
        return self.opset.version

    @property
    def since_version(self) -> int | None:
        """The version of the schema in force (the newest change at or before ``version``)."""
        return None if self.schema is None else int(self.schema.since_version)

    def __repr__(self) -> str:
        since = "" if self.schema is None else f", since {self.since_version}"
        domain = f"{self.domain} " if self.domain else ""
        return f"Op({self.name}, opset {domain}{self.version}{since})"

    def allowed_type_strs(self, type_str: str) -> list[str]:
        """The type strings a formal typed ``type_str`` admits: those of its type
        constraint, or ``type_str`` itself (``"tensor(int64)"``); [] without a schema.

        >>> from dsl import opset18 as op
        >>> op.ConcatFromSequence.allowed_type_strs("S")[:2]
        ['seq(tensor(uint8))', 'seq(tensor(uint16))']
        """
        if self.schema is None:
            return []
        allowed = self._allowed_types
        if allowed is None:
            allowed = self._allowed_types = {
                c.type_param_str: list(c.allowed_type_strs) for c in self.schema.type_constraints}
        return allowed.get(type_str, [type_str])

    # ------------------------------------------------------------------ checking calls

    @property
    def input_names(self) -> list[str]:
        return [] if self.schema is None else [p.name for p in self.schema.inputs]

    @property
    def output_names(self) -> list[str]:
        return [] if self.schema is None else [p.name for p in self.schema.outputs]

    @property
    def min_outputs(self) -> int:
        return self._output_range[0]

    @property
    def max_outputs(self) -> int:
        return self._output_range[1]

    def default_output_count(self) -> int:
        """Outputs a call produces when the caller does not say: all non-variadic ones."""
        if self.schema is None:
            return 1
        outs = self.schema.outputs
        if outs and _is_variadic(outs[-1]):
            return max(len(outs) - 1, 1)
        required = [p for p in outs if not _is_optional(p)]
        return max(len(required), 1)

    def check_inputs(self, count: int, location: Any = None) -> None:
        """Raise :class:`OpCallError` unless ``count`` inputs fit the schema."""
        low, high = self._input_range
        if low <= count <= high:
            return
        names = ", ".join(self.input_names) or "none"
        if high == low:
            want = f"{low} input{'s' if low != 1 else ''}"
        elif high >= 2**31 - 1:
            want = f"at least {low} inputs"
        else:
            want = f"{low} to {high} inputs"
        raise OpCallError(
            f"{self.name} takes {want}, got {count}",
            location,
            hint=f"the inputs of {self.name} are ({names}); attributes are passed by keyword",
        )

    def check_outputs(self, count: int, location: Any = None) -> None:
        """Raise :class:`OpCallError` unless the caller may ask for ``count`` outputs."""
        low, high = self._output_range
        if low <= count <= high:
            return
        raise OpCallError(
            f"{self.name} has {low if low == high else f'{low} to {high}'} outputs, but {count} are bound",
            location,
            hint=f"the outputs of {self.name} are ({', '.join(self.output_names)})",
        )

    def attribute_kind(self, name: str) -> ir.AttrKind | None:
        """The kind the schema declares for attribute ``name`` (None: unknown or no schema)."""
        return self._attr_kinds.get(name)

    def check_attribute_name(self, name: str, location: Any = None) -> None:
        if self.schema is None or name in self._attr_kinds:
            return
        if name in self.input_names:
            raise OpAttributeError(
                f"{name!r} is an input of {self.name}, not an attribute",
                location,
                hint=f"pass it positionally: the inputs of {self.name} are ({', '.join(self.input_names)})",
            )
        close = difflib.get_close_matches(name, [*self._attr_kinds, *self.input_names], n=2)
        known = ", ".join(sorted(self._attr_kinds)) or "none"
        raise OpAttributeError(
            f"{self.name} has no attribute {name!r}",
            location,
            hint=(f"did you mean {' or '.join(close)}? " if close else "") + f"its attributes are: {known}",
        )

    def check_required_attributes(self, given: set[str] | dict[str, Any], location: Any = None) -> None:
        if self.schema is None:
            return
        missing = [n for n, a in self.schema.attributes.items() if a.required and n not in given]
        if missing:
            raise OpAttributeError(
                f"{self.name} requires attribute{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
                location,
                hint=f"pass {missing[0]}=... as a keyword argument",
            )

    def make_attr(self, name: str, value: Any, location: Any = None) -> ir.Attr:
        """Turn a Python value passed as ``name=value`` into an attribute of the schema's kind."""
        self.check_attribute_name(name, location)
        if isinstance(value, ir.Attr):
            expected = self._attr_kinds.get(name)
            if expected is not None and value.kind != expected:
                raise OpAttributeError(
                    f"attribute {name} of {self.name} is {expected.name}, but "
                    f"{value.ref_attr_name or value.name!r} is {value.kind.name}",
                    location,
                    hint=f"pass a {expected.name} value, or an attribute parameter annotated as one",
                )
            value.name = name
            return value
        kind = self._attr_kinds.get(name)
        try:
            return python_to_attr(name, value, kind, location)
        except OpAttributeError as err:
            err.message = f"{self.name}: {err.message}"
            raise

    def keyword_inputs(self, keywords: Any) -> list[str]:
        """The keywords of a call that name inputs of the schema rather than attributes
        (``op.Unsqueeze(x, axes=[1])``): onnxscript binds inputs by name too."""
        if self.schema is None or (isinstance(keywords, dict) and keywords.keys() <= self._attr_kinds.keys()):
            return []  # (the usual call, checked without a loop: eager calls are timed in microseconds)
        inputs = self._inputs_by_name()
        return [name for name in keywords if name not in self._attr_kinds and name in inputs]

    def _inputs_by_name(self) -> dict[str, tuple[int, bool, bool]]:
        # name -> (index, optional, variadic), read from the schema once (pybind access is slow)
        found = self._input_kinds
        if found is None:
            formals = [] if self.schema is None else self.schema.inputs
            found = self._input_kinds = {
                f.name: (i, _is_optional(f), _is_variadic(f)) for i, f in enumerate(formals)
            }
        return found

    def place_inputs(self, positional: list[T], named: dict[str, T], omitted: T, location: Any = None) -> list[T]:
        """The inputs of a call in schema order: ``positional`` first, then each of ``named``
        (input name -> argument) at its place, ``omitted`` for optional inputs skipped."""
        inputs = self._inputs_by_name()
        names = list(inputs)
        placed: list[Any] = list(positional)
        for name, argument in named.items():
            index, _, variadic = inputs[name]
            if variadic:
                raise OpCallError(f"{name!r} of {self.name} is variadic and cannot be passed by keyword", location,
                                  hint=f"pass the inputs of {self.name} ({', '.join(names)}) positionally")
            if index < len(positional):
                raise OpCallError(f"{self.name} got input {name!r} twice, by position and by keyword", location,
                                  hint=f"the inputs of {self.name} are ({', '.join(names)})")
            placed.extend([None] * (index + 1 - len(placed)))
            placed[index] = argument
        for index, argument in enumerate(placed):
            if argument is None:
                if not inputs[names[index]][1]:
                    raise OpCallError(f"{self.name} is missing its input {names[index]!r}", location,
                                      hint=f"the inputs of {self.name} are ({', '.join(names)})")
                placed[index] = omitted
        return placed

    def check_call(self, n_inputs: int, attr_names: set[str] | dict[str, Any], location: Any = None) -> None:
        """All checks of one call that need nothing but counts and names."""
        for attr_name in attr_names:  # first: a misspelt keyword also leaves an input count short
            self.check_attribute_name(attr_name, location)
        self.check_inputs(n_inputs, location)
        self.check_required_attributes(attr_names, location)

    # ------------------------------------------------------------- element-type rules

    def output_elem_types(
        self, input_elem_types: list[int | None], attributes: dict[str, ir.Attr] | None = None
    ) -> list[int | None]:
        """Element types of the outputs, where the schema's type constraints decide them.

        An output typed ``T`` takes the element type of an input typed ``T``; a constraint
        that admits a single type decides it; ``Cast``/``Constant``-like ops read their
        attribute.  Unknown -> None (the back end's shape inference fills it later).
        """
        if self.schema is None:
            return [None]
        attributes = attributes or {}
        special = _attribute_decided_type(self.name, attributes, input_elem_types)
        by_param: dict[str, int | None] = {}
        for formal, elem in zip(_expand(self.schema.inputs, len(input_elem_types)), input_elem_types):
            # A heterogeneous variadic (Scan, Loop) says nothing about its other types.
            if elem is not None and formal.type_str not in by_param and _is_homogeneous(formal):
                by_param[formal.type_str] = elem
        result: list[int | None] = []
        for formal in self.schema.outputs:
            if special is not None:
                result.append(special)
                continue
            type_str = formal.type_str
            if not _is_homogeneous(formal):
                result.append(None)
                continue
            elem = by_param.get(type_str)
            if elem is None:
                allowed = self.allowed_type_strs(type_str)
                if len(allowed) == 1:
                    elem = elem_of_type_str(allowed[0])
            result.append(elem)
        return result

    def check_input_types(self, input_elem_types: list[int | None], location: Any = None) -> None:
        """Raise :class:`DslTypeError` when a known input element type breaks a constraint."""
        if self.schema is None:
            return
        constraints = {c.type_param_str: set(c.allowed_type_strs) for c in self.schema.type_constraints}
        bound: dict[str, tuple[int, str]] = {}
        formals = _expand(self.schema.inputs, len(input_elem_types))
        for formal, elem in zip(formals, input_elem_types):
            if elem is None:
                continue
            allowed = constraints.get(formal.type_str, {formal.type_str})
            type_str = f"tensor({_TYPE_STR_BY_ENUM.get(elem, '?')})"
            if not any(type_str == a or a.endswith(type_str + ")") for a in allowed):
                raise DslTypeError(
                    f"input {formal.name!r} of {self.name} is {types.element_type_name(elem)}, which "
                    f"{self.opset.describe()} does not allow",
                    location,
                    hint=f"allowed: {', '.join(sorted(_pretty_type_str(a) for a in allowed))}; insert op.Cast(..., to=...)",
                )
            if formal.type_str in constraints and _is_homogeneous(formal):
                previous = bound.get(formal.type_str)
                if previous is not None and previous[0] != elem:
                    raise DslTypeError(
                        f"inputs {previous[1]!r} and {formal.name!r} of {self.name} must have the same element "
                        f"type, got {types.element_type_name(previous[0])} and {types.element_type_name(elem)}",
                        location,
                        hint="cast one of them with op.Cast(..., to=...) or op.CastLike",
                    )
                bound[formal.type_str] = (elem, formal.name)

    # -------------------------------------------------------------------------- eager

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Outside @script an op runs eagerly, through the runner the dsl facade installs.
        try:
            return hooks.run_op_eagerly(self, args, kwargs)
        except Exception as error:
            hide_library_frames(error)  # (a DslError's traceback ends at the user's call)
            raise


def _is_variadic(formal: Any) -> bool:
    import onnx.defs

    return formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic


def _is_optional(formal: Any) -> bool:
    import onnx.defs

    return formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional


def _is_homogeneous(formal: Any) -> bool:
    return not _is_variadic(formal) or bool(formal.is_homogeneous)


def _expand(formals: list[Any], count: int) -> list[Any]:
    """Formal parameters for ``count`` actual arguments (a variadic last one repeats)."""
    if not formals:
        return []
    if len(formals) >= count:
        return list(formals[:count])
    return list(formals) + [formals[-1]] * (count - len(formals))


_TYPE_STR_BY_ENUM = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
    9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 14: "complex64",
    15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
    20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0",
    25: "uint2", 26: "int2", 27: "float6e2m3", 28: "float6e3m2",
}
_ENUM_BY_TYPE_STR = {v: k for k, v in _TYPE_STR_BY_ENUM.items()}


def elem_of_type_str(type_str: str) -> int | None:
    """The element type a schema's ``tensor(...)`` type string names, or None."""
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        return _ENUM_BY_TYPE_STR.get(type_str[7:-1])
    return None


def _pretty_type_str(type_str: str) -> str:
    elem = elem_of_type_str(type_str)
    return types.element_type_name(elem) if elem is not None else type_str


def _attribute_decided_type(
    op_name: str, attributes: dict[str, ir.Attr], input_elem_types: list[int | None]
) -> int | None:
    if op_name == "Cast" and "to" in attributes and attributes["to"].ref_attr_name is None:
        return int(attributes["to"].value)
    if op_name == "CastLike" and len(input_elem_types) > 1:
        return input_elem_types[1]
    if op_name in ("Constant", "ConstantOfShape"):
        for name, attr in attributes.items():
            if attr.ref_attr_name is not None:
                return None
            if name == "value" and isinstance(attr.value, ir.Tensor):
                return attr.value.elem_type
            if name in ("value_float", "value_floats"):
                return types.FLOAT.enum
            if name in ("value_int", "value_ints"):
                return types.INT64.enum
            if name in ("value_string", "value_strings"):
                return types.STRING.enum
        return types.FLOAT.enum if op_name == "ConstantOfShape" else None
    if op_name in ("EyeLike", "RandomNormalLike", "RandomUniformLike", "Bernoulli") and "dtype" in attributes:
        if attributes["dtype"].ref_attr_name is None:
            return int(attributes["dtype"].value)
    if op_name in ("RandomNormal", "RandomUniform"):
        dtype = attributes.get("dtype")
        return int(dtype.value) if dtype is not None and dtype.ref_attr_name is None else types.FLOAT.enum
    return None


# ------------------------------------------------------------ module-level opset names

_OPSETS: dict[tuple[str, int], Opset] = {}


def get_opset(domain: str, version: int) -> Opset:
    """The shared Opset object for (domain, version)."""
    key = (_normal_domain(domain), version)
    found = _OPSETS.get(key)
    if found is None:
        found = _OPSETS[key] = Opset(*key)
    return found


def __getattr__(name: str) -> Opset:
    if name == "opset":
        from dsl.onnxruntime_limits import max_opset

        return get_opset("", max_opset())
    match = OPSET_NAME.match(name)
    if match is None:
        raise AttributeError(f"module 'dsl.opsets' has no attribute {name!r}")
    domain = _MODULE_NAMES[match.group(1)]
    version = int(match.group(2))
    if domain == "":
        import onnx.defs

        newest = onnx.defs.onnx_opset_version()
    else:
        newest = schema_domains().get(domain, 0)
    if version > newest or version < 1:
        raise AttributeError(
            f"the installed onnx knows {domain or 'ai.onnx'} up to version {newest}, not {version}"
        )
    return get_opset(domain, version)


def __dir__() -> list[str]:
    names = list(globals())
    for domain, newest in schema_domains().items():
        prefix = next(k for k, v in _MODULE_NAMES.items() if v == domain)
        names += [f"{prefix}{v}" for v in range(1, newest + 1)]
    return names
