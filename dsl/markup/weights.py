"""Parameter values: reading weight files, and initialising missing weights.

The default weight file is ``weights.npz`` (numpy's zip of arrays, in the format of
:mod:`dsl.weights_file`): nothing in it can run code.  Agrippa wrote ``weights.pkl``, a
pickle (of numpy arrays, or of torch tensors); those are still readable, through an
unpickler that resolves only the handful of numpy functions that rebuild arrays and
rebuilds torch tensors itself (:mod:`dsl.markup.torch_pickle`), so a pickle carrying
code fails before anything runs.  Initialisers follow Agrippa's names (default scaled normal, ``normal``,
``uni_random``, ``zeros``, ``ones``, ``constant``) but check their arguments instead of
silently falling back to N(0, 1).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from dsl import types
from dsl.errors import MarkupError
from dsl.ir import SourceLocation
from dsl.limits import check_limit
from dsl.markup.torch_pickle import RefusedGlobal, TorchAwareUnpickler, is_torch_zip, load_torch_zip
from dsl.safe_paths import contained
from dsl.tensor_protos import MAX_RANK
from dsl.weights_file import WeightsFileError, read_weights_file

__all__ = [
    "NPZ_NAME",
    "PICKLE_NAME",
    "INIT_KINDS",
    "read_weights",
    "load_pickled_weights",
    "initial_value",
    "fit_weight",
]

NPZ_NAME = "weights.npz"
PICKLE_NAME = "weights.pkl"
INIT_KINDS = ("xavier", "normal", "uni_random", "zeros", "ones", "constant")


def load_pickled_weights(path: Path) -> dict[str, np.ndarray]:
    """Read an Agrippa ``weights.pkl`` without letting it run code.

    Only dicts, lists, numbers, numpy arrays and torch tensors (a pickle of them, or a
    ``torch.save`` archive, as Agrippa's ``save_torch_model`` leaves; rebuilt as numpy
    arrays by :mod:`dsl.markup.torch_pickle`, torch not needed) can come out; a pickle
    that names any other callable (``os.system``, ``builtins.eval``...) raises
    :class:`MarkupError` before the callable is ever looked up.
    """
    shown = SourceLocation(str(path), 1, 0)
    try:
        raw = path.read_bytes()
        if is_torch_zip(raw):
            loaded = load_torch_zip(raw)
        else:
            loaded = TorchAwareUnpickler(io.BytesIO(raw)).load()
    except RefusedGlobal as error:
        raise MarkupError(
            f"{path.name} refers to {error}, which a weights file has no business calling; refusing to load it",
            shown,
            hint="a weights pickle may hold only numpy arrays or torch tensors in a dict; re-save as weights.npz",
        ) from None
    except Exception as error:  # a damaged pickle fails in many ways; none may escape as a crash
        raise MarkupError(f"cannot read {path.name}: {error}", shown, hint="the file is damaged") from None
    if not isinstance(loaded, dict):
        raise MarkupError(f"{path.name} holds a {type(loaded).__name__}, not a dict of arrays", shown)
    weights: dict[str, np.ndarray] = {}
    for key, value in loaded.items():
        if isinstance(value, (list, tuple)):
            _check_nested_list(value, f"{path.name}: entry {key!r}", len(raw), shown)
        array = np.asarray(value) if isinstance(value, (list, int, float, np.ndarray, np.generic)) else None
        if not isinstance(key, str) or array is None or (array.dtype.kind not in "biufc" and array.dtype.name != "bfloat16"):
            raise MarkupError(
                f"{path.name}: entry {key!r} is not a numeric array",
                shown,
                hint="a weights file maps parameter names to numeric arrays",
            )
        weights[key] = array
    return weights


def _check_nested_list(value: list[Any] | tuple[Any, ...], what: str, file_size: int, shown: SourceLocation) -> None:
    """Refuse a nested list numpy could not stack, or would stack into more than the limits
    allow, before numpy builds it: shared pickle references let a few hundred bytes list
    billions of numbers, and a list that contains itself would recurse forever."""
    shapes: dict[int, tuple[int, ...]] = {}

    def shape_of(item: Any, depth: int) -> tuple[int, ...]:
        if isinstance(item, np.ndarray):
            return item.shape
        if not isinstance(item, (list, tuple)):
            return ()
        known = shapes.get(id(item))
        if known is not None:
            return known
        if depth >= MAX_RANK:
            raise MarkupError(f"{what} nests lists more than {MAX_RANK} deep (or contains itself)", shown,
                              hint="a weight is a rectangular array of at most 64 axes")
        inner = {shape_of(child, depth + 1) for child in item}
        if len(inner) > 1:
            raise MarkupError(f"{what} is a ragged list (rows of different shapes)", shown,
                              hint="a weight is a rectangular array; re-save it with numpy")
        found = (len(item), *next(iter(inner), ()))
        shapes[id(item)] = found
        return found

    count = math.prod(shape_of(value, 0))
    check_limit("inflated_bytes", count * 8 - file_size, f"{what}: a list of {count:,} numbers, which would take "
                f"{count * 8:,} bytes from a file of {file_size:,}", shown)


def read_weights(project: Path) -> tuple[dict[str, np.ndarray], Path | None]:
    """The project's weights (``weights.npz`` first, else ``weights.pkl``) and the file read."""
    npz_path = project / NPZ_NAME
    if npz_path.is_file():
        contained(project, npz_path, NPZ_NAME)
        try:
            return read_weights_file(npz_path), npz_path
        except (WeightsFileError, OSError) as error:
            raise MarkupError(
                f"cannot read {npz_path.name}: {error}",
                SourceLocation(str(npz_path), 1, 0),
                hint="delete it and export with reinit=True to start from fresh weights",
            ) from None
    pickle_path = project / PICKLE_NAME
    if pickle_path.is_file():
        contained(project, pickle_path, PICKLE_NAME)
        return load_pickled_weights(pickle_path), pickle_path
    return {}, None


def _check_args(kind: str, args: Any, count: int, location: SourceLocation | None) -> list[float]:
    if count == 0:
        if args is not None:
            raise MarkupError(f"init {kind!r} takes no init_args, got {args!r}", location)
        return []
    words = {"normal": "[mean, std]", "uni_random": "[low, high]", "constant": "[value]"}[kind]
    if args is None:
        if kind == "constant":
            raise MarkupError("init 'constant' needs init_args=\"[value]\"", location)
        return []
    if (
        not isinstance(args, (list, tuple))
        or len(args) != count
        or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
    ):
        raise MarkupError(
            f"init_args of init {kind!r} must be {count} number{'s' if count > 1 else ''} {words}, got {args!r}",
            location,
            hint=f'write init_args="{words}" with numbers',
        )
    return [float(a) for a in args]


def initial_value(
    kind: str,
    args: Any,
    dims: tuple[int, ...],
    elem_type: int,
    rng: np.random.Generator,
    location: SourceLocation | None = None,
) -> np.ndarray:
    """A fresh parameter of ``dims`` and ``elem_type`` initialised by ``kind``.

    ``xavier`` (the default) draws N(0, 2 / (fan_in + fan_out)) over the last two axes;
    a vector uses std 1/sqrt(n) (Agrippa used sqrt(n), which grows with the size).

    >>> initial_value("constant", [0.5], (2,), 1, np.random.default_rng(0))
    array([0.5, 0.5], dtype=float32)
    """
    dtype = types.numpy_dtype(elem_type)
    random_kinds = ("xavier", "normal", "uni_random")
    if kind not in INIT_KINDS:
        raise MarkupError(
            f"unknown init {kind!r}",
            location,
            hint=f"init is one of {', '.join(INIT_KINDS)}",
        )
    is_real = np.dtype(dtype).kind in "fc" or "FLOAT" in types.element_type_name(elem_type)
    if kind in random_kinds and not is_real:
        raise MarkupError(
            f"init {kind!r} draws random reals, but the parameter is {types.element_type_name(elem_type)}",
            location,
            hint="initialise integer and bool parameters with zeros, ones or constant",
        )
    if kind == "xavier":
        _check_args(kind, args, 0, location)
        if len(dims) >= 2:
            std = math.sqrt(2.0 / max(dims[-1] + dims[-2], 1))
        elif len(dims) == 1:
            std = 1.0 / math.sqrt(max(dims[0], 1))
        else:
            std = 1.0
        values: Any = rng.normal(0.0, std, size=dims)
    elif kind == "normal":
        mean, std = _check_args(kind, args, 2, location) or [0.0, 1.0]
        if std < 0:
            raise MarkupError(f"init 'normal' needs a std >= 0, got {std}", location)
        values = rng.normal(mean, std, size=dims)
    elif kind == "uni_random":
        low, high = _check_args(kind, args, 2, location) or [-1.0, 1.0]
        if high < low:
            raise MarkupError(f"init 'uni_random' needs low <= high, got [{low}, {high}]", location)
        values = rng.uniform(low, high, size=dims)
    elif kind == "zeros":
        _check_args(kind, args, 0, location)
        values = np.zeros(dims)
    elif kind == "ones":
        _check_args(kind, args, 0, location)
        values = np.ones(dims)
    else:
        (value,) = _check_args(kind, args, 1, location)
        values = np.full(dims, value)
    return np.asarray(values).astype(dtype)


def fit_weight(
    name: str, stored: np.ndarray, dims: tuple[int, ...], elem_type: int, location: SourceLocation | None
) -> np.ndarray:
    """A stored weight checked against its declaration: same shape, a castable dtype.

    A shape that differs is an error, never reshaped or silently re-initialised.
    """
    if tuple(stored.shape) != tuple(dims):
        raise MarkupError(
            f"weight {name!r} in the weights file has shape {list(stored.shape)}, but its dim is {list(dims)}",
            location,
            hint="fix the dim, or export with reinit=True (--reinit) to initialise the weights afresh",
        )
    dtype = types.numpy_dtype(elem_type)
    if stored.dtype != dtype and not np.can_cast(stored.dtype, dtype, casting="same_kind"):
        raise MarkupError(
            f"weight {name!r} is stored as {stored.dtype}, which does not convert to "
            f"{types.element_type_name(elem_type)}",
            location,
            hint="fix the parameter's type, or export with reinit=True",
        )
    return np.ascontiguousarray(stored.astype(dtype, copy=False))
