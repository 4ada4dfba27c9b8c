"""Reading a ``TensorProto`` from a file of unknown origin into a numpy array, safely.

``onnx.numpy_helper.to_array`` trusts its input: negative or more than 64 dims, an
element count that overflows, or data that does not fit the shape end in whatever numpy
raises; a tensor whose data lives in an external file is read relative to the *working
directory* when no folder is given.  Here the dims are checked first, external data is
read only from the model's own folder (after resolving symlinks) and only when that
folder is known, and every failure is a :class:`dsl.errors.ModelLoadError`.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from dsl.errors import DslError, ModelLoadError
from dsl.safe_paths import contained

__all__ = ["MAX_RANK", "check_dims", "tensor_array", "uses_external_data"]

MAX_RANK = 64  # numpy's limit, and far above any real tensor
_MAX_ELEMENTS = 1 << 62  # a count above this cannot describe data that exists
_EXTERNAL = 1  # TensorProto.EXTERNAL
_HINT = "its data is missing or does not match its shape and type; the file may be truncated or damaged"


def check_dims(dims: Any, name: str, source: str) -> None:
    """Refuse dims no tensor can have: negative, more than 64, or an overflowing count.

    (One test in the common case: it runs for every tensor of every model read.)

    >>> check_dims([2, 3], "w", "model.onnx")
    """
    if len(dims) > MAX_RANK or (len(dims) and (min(dims) < 0 or math.prod(dims) > _MAX_ELEMENTS)):
        if len(dims) > MAX_RANK:
            problem = f"has {len(dims)} dims (at most {MAX_RANK})"
        elif min(dims) < 0:
            problem = f"has the negative dim {min(dims)}"
        else:
            problem = f"declares {math.prod(dims)} elements"
        raise ModelLoadError(f"{source}: tensor {name!r} {problem}", hint=_HINT)


def uses_external_data(proto: Any) -> bool:
    return bool(proto.data_location == _EXTERNAL)


def tensor_array(proto: Any, folder: str | None, source: str) -> np.ndarray:
    """The array of ``proto``; external data only from inside ``folder`` (the model's).

    ``folder`` is None for a proto that came without a file: its external data is
    refused, never looked up relative to the working directory.
    """
    from onnx import numpy_helper

    from converter.external_data import read_external_array

    check_dims(proto.dims, proto.name, source)
    try:
        if uses_external_data(proto):
            # (read straight into the array, never held in the proto)
            array = read_external_array(proto, _external_folder(proto, folder, source))
        else:
            array = numpy_helper.to_array(proto)
    except DslError:  # (the folder check's own, already located)
        raise
    except Exception as error:  # numpy_helper fails in many ways on damaged data; all are the file's fault
        raise ModelLoadError(f"{source}: tensor {proto.name!r} cannot be read ({type(error).__name__}: "
                             f"{str(error)[:200]})", hint=_HINT) from None
    return array  # (numpy_helper reshapes to the dims, so the size is right)


def _external_folder(proto: Any, folder: str | None, source: str) -> str:
    location = next((entry.value for entry in proto.external_data if entry.key == "location"), "")
    if folder is None:
        raise ModelLoadError(
            f"{source}: tensor {proto.name!r} keeps its data in the external file {location!r}, which was not loaded",
            hint="load the model from its file (converter.load_model(path), onnx.load(path)) so its external "
            "data is read from the model's own folder",
        )
    contained(folder, os.path.join(folder, location), f"{source}: the external data file {location!r}")
    return folder
