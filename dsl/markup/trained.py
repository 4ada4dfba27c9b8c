"""Trained weights in and out of a markup project (Agrippa's ``save_torch_model``, ``find_params``).

A markup parameter's ONNX name is its markup name (``W1$1``, ``enc$W``), so a module
from :func:`converter.to_torch` holds each one under that name (escaped for torch, its
``onnx_names`` map says how).  :func:`save_weights` writes the module's values back into
the project's ``weights.npz`` under the markup's names, in each stored weight's dtype;
the module is read through ``state_dict()`` alone, so this front end imports neither
torch nor the torch back end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dsl.errors import MarkupError
from dsl.markup.project import locate_project
from dsl.markup.weights import NPZ_NAME, read_weights
from dsl.weights_file import write_weights_file

__all__ = ["save_weights", "find_params"]


def save_weights(project: str | Path, module: Any) -> Path:
    """Write ``module``'s parameters and buffers into the project's ``weights.npz``.

    ``module`` is what :func:`converter.to_torch` returned for the project's model (or
    a ``DistributedDataParallel`` around it).  Weights the module does not hold (cut
    away with ``outputs=``) keep their stored values.  Returns the file written; the
    next :func:`dsl.markup.export` reads the trained values from it.

    >>> module = converter.to_torch(dsl.markup.to_model("mlp", bindings=sizes))   # doctest: +SKIP
    >>> dsl.markup.save_weights("mlp", module)                                   # doctest: +SKIP
    """
    directory = locate_project(project).directory
    stored, _ = read_weights(directory)
    inner = getattr(module, "module", module)  # DistributedDataParallel / DataParallel wrap it
    names = getattr(inner, "onnx_names", None)
    if not isinstance(names, dict):
        raise MarkupError(
            f"save_weights takes the module converter.to_torch returned, not a {type(module).__name__}",
            hint="convert with module = converter.to_torch(dsl.markup.to_model(project)) and train that",
        )
    trained = dict(stored)
    for key, tensor in inner.state_dict().items():
        name = names.get(key)
        if name is None:
            continue
        array = tensor.detach().cpu().numpy()
        previous = stored.get(name)
        if previous is not None:
            if previous.shape != array.shape:
                raise MarkupError(
                    f"weight {name!r} is stored with shape {list(previous.shape)}, the module holds "
                    f"{list(array.shape)}",
                    hint="the module was converted from this project with other bindings",
                )
            array = array.astype(previous.dtype, copy=False)
        trained[name] = np.array(array, copy=True)
    path = directory / NPZ_NAME
    write_weights_file(path, trained)
    return path


def find_params(substring: str, project: str | Path) -> dict[str, np.ndarray]:
    """The project's stored weights whose names contain ``substring``, by name.

    >>> dsl.markup.find_params("W", "mlp")          # doctest: +SKIP
    {'W1': array(...), 'W2': array(...)}
    """
    stored, _ = read_weights(locate_project(project).directory)
    return {name: array for name, array in stored.items() if substring in name}
