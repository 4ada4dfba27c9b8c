"""Weights for real models: files and pytrees of arrays turned into named initializers.

A model written with ``@script`` reads its weights from Python containers (a list of
per-layer dicts, a dataclass...).  :func:`initializers` turns any such tree of arrays
into the same tree of :class:`dsl.Initializer` objects, each named by its path in the
tree (``layers.0.wq``), so the exported model holds each weight once, as an initializer
under a readable name.  :func:`load_weights` reads a file of weights (an ``.npz``, or a
``torch.save`` state_dict) into a flat ``{name: Initializer}`` dict without running any
code the file names: ``.npz`` through :mod:`dsl.weights_file`, torch archives through
:mod:`dsl.markup.torch_pickle` (numpy arrays rebuilt from the bytes; torch not needed).
"""

from __future__ import annotations

import dataclasses
import io
import os
import types as pytypes
from typing import Any

import numpy as np

from dsl.errors import ModelLoadError
from dsl.frontend.weights import Initializer, initializer
from dsl.frontend.weights import load_weights as _load_beside_module
from dsl.weights_file import read_weights_file

__all__ = ["load_weights", "initializers", "WeightsLoadError"]

_MAX_FILE_BYTES = 1 << 40  # what a weights file may claim to hold at most (1 TiB)


class WeightsLoadError(ModelLoadError, ValueError):
    """A weights file that is not an ``.npz`` or a torch state_dict of tensors."""


def initializers(tree: Any, prefix: str = "") -> Any:
    """The same tree with every array (numpy, torch, anything ``np.asarray`` reads that is
    not a Python number) made an :class:`~dsl.Initializer` named by its path.

    Dict keys and list positions join with dots; an array already an Initializer keeps
    its name (or takes the path when it has none).  Lists, tuples, dicts, dataclasses and
    ``SimpleNamespace`` are rebuilt; numbers, strings and None are kept as they are.

    >>> import numpy as np
    >>> tree = initializers({"layers": [{"wq": np.zeros((2, 2), np.float32)}]})
    >>> tree["layers"][0]["wq"].name
    'layers.0.wq'
    """
    return _named(tree, prefix, 0)


def _named(value: Any, path: str, depth: int) -> Any:
    if depth > 64:
        raise WeightsLoadError(f"the weights tree nests deeper than 64 levels at {path!r}")
    if isinstance(value, Initializer):
        if not value.name:
            value.tensor.name = path
        return value
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, dict):
        return type(value)((key, _named(item, _join(path, key), depth + 1)) for key, item in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_named(item, _join(path, index), depth + 1) for index, item in enumerate(value))
    if isinstance(value, pytypes.SimpleNamespace):
        return pytypes.SimpleNamespace(**{k: _named(v, _join(path, k), depth + 1) for k, v in vars(value).items()})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _named(getattr(value, f.name), _join(path, f.name), depth + 1)
                   for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return initializer(_as_array(value), path)


def _as_array(value: Any) -> np.ndarray:
    detach = getattr(value, "detach", None)  # a torch tensor (a Parameter too)
    if callable(detach):
        value = detach().cpu().numpy()
    return np.asarray(value)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def load_weights(path: str | os.PathLike[str], file_name: str | None = None) -> Any:
    """Read a weights file into ``{name: Initializer}``, each weight named by its key.

    ``path`` is an ``.npz`` (as ``numpy.savez`` or ``converter.to_python`` write it) or a
    ``torch.save`` of a state_dict (a dict of tensors, nested dicts allowed: keys join
    with dots).  Nothing in the file can run code: a torch archive naming anything but
    tensors, numpy arrays and plain containers is refused with :class:`WeightsLoadError`.
    ``load_weights(__file__, "model.npz")`` (two arguments, the form source written by
    ``converter.to_python`` uses) reads the ``.npz`` beside a module as plain arrays.

    >>> weights = load_weights("llama.npz")                # doctest: +SKIP
    >>> weights["layers.0.wq"].name                       # doctest: +SKIP
    'layers.0.wq'
    """
    if file_name is not None:
        return _load_beside_module(path, file_name)
    with open(path, "rb") as stream:
        head = stream.read(4)
    if head != b"PK\x03\x04":
        raise WeightsLoadError(f"{os.fspath(path)} is neither an .npz nor a torch.save archive",
                               hint="save weights with numpy.savez or torch.save(model.state_dict(), path)")
    if _is_torch_archive(path):
        return initializers(_flat(_read_torch(path), ""))
    try:
        arrays = read_weights_file(path)
    except ModelLoadError as error:
        raise WeightsLoadError(str(error.message)) from None
    return {name: initializer(array, name) for name, array in arrays.items()}


def _is_torch_archive(path: str | os.PathLike[str]) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith("/data.pkl") and n.count("/") == 1 for n in archive.namelist())
    except (zipfile.BadZipFile, OSError) as error:
        raise WeightsLoadError(f"{os.fspath(path)}: {error}") from None


def _read_torch(path: str | os.PathLike[str]) -> Any:
    from dsl.markup.torch_pickle import RefusedGlobal, TorchPickleError, load_torch_zip

    size = os.path.getsize(path)
    if size > _MAX_FILE_BYTES:
        raise WeightsLoadError(f"{os.fspath(path)} is larger than {_MAX_FILE_BYTES} bytes")
    with open(path, "rb") as stream:
        raw = stream.read()
    try:
        return load_torch_zip(raw)
    except RefusedGlobal as error:
        raise WeightsLoadError(
            f"{os.fspath(path)} refers to {error}, which a state_dict has no business calling; refusing to load it",
            hint="save only tensors: torch.save(model.state_dict(), path)",
        ) from None
    except (TorchPickleError, ValueError, EOFError, io.UnsupportedOperation) as error:
        raise WeightsLoadError(f"cannot read {os.fspath(path)}: {error}", hint="the file is damaged") from None
    except Exception as error:  # a damaged pickle fails in many ways; none may escape as a crash
        raise WeightsLoadError(f"cannot read {os.fspath(path)}: {type(error).__name__}: {error}",
                               hint="the file is damaged") from None


def _flat(tree: Any, prefix: str) -> dict[str, Any]:
    """A state_dict (nested dicts allowed) as one ``{dotted name: array}`` dict."""
    if not isinstance(tree, dict):
        raise WeightsLoadError(f"a weights file holds a dict of tensors, not a {type(tree).__name__}",
                               hint="save model.state_dict(), not the model")
    found: dict[str, Any] = {}
    for key, value in tree.items():
        name = _join(prefix, key)
        if isinstance(value, dict):
            found.update(_flat(value, name))
        elif isinstance(value, np.ndarray):
            found[name] = value
        else:
            raise WeightsLoadError(f"{name!r} in the weights file is a {type(value).__name__}, not a tensor",
                                   hint="save model.state_dict(), a dict of tensors")
    return found
