"""Torch tensors in an Agrippa ``weights.pkl``, rebuilt as numpy arrays without torch.

Agrippa's ``save_torch_model`` leaves torch tensors in the weights file, either pickled
directly (each tensor's storage then carries a nested legacy ``torch.save`` payload) or
as a ``torch.save`` zip archive.  Both name torch functions that a plain
``pickle.load`` would call (``torch.storage._load_from_bytes`` runs ``torch.load`` with
full unpickling).  Here each of those names resolves to a small function of this
module that rebuilds the array from the bytes and checks every offset, size and stride
against the storage it reads, so a file can describe tensors but never run code or read
past its own data; torch need not be installed.
"""

from __future__ import annotations

import io
import math
import pickle
import zipfile
from typing import Any, ClassVar

import numpy as np

__all__ = ["TorchPickleError", "RefusedGlobal", "TorchAwareUnpickler", "load_torch_zip", "is_torch_zip"]

# torch's storage classes as the pickles name them -> the numpy dtype of their elements.
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool",
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_NUMPY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict"),
}


class TorchPickleError(pickle.UnpicklingError):
    """A weights pickle names something outside the allow-list, or describes a bad tensor."""


class RefusedGlobal(TorchPickleError):
    """A pickle named a callable outside the allow-list (the message is ``module.name``)."""


class _StorageType:
    """What ``torch.FloatStorage`` and its siblings stand for here: an element dtype."""

    def __init__(self, dtype_name: str) -> None:
        self.dtype_name = dtype_name

    @property
    def dtype(self) -> np.dtype:
        if self.dtype_name == "bfloat16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.dtype_name)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_ignored: Any) -> np.ndarray:
    """A copy of the tensor viewing ``storage``; every index it covers is checked first."""
    if not isinstance(storage, np.ndarray) or storage.ndim != 1:
        raise TorchPickleError("a tensor refers to something that is not a storage")
    numbers = [offset, *tuple(size), *tuple(stride)]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers) or len(size) != len(stride):
        raise TorchPickleError(f"a tensor has a bad layout: offset {offset!r}, size {size!r}, stride {stride!r}")
    if math.prod(size) == 0:
        return np.zeros(tuple(size), storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.size:
        raise TorchPickleError(f"a tensor of size {tuple(size)} reaches element {last} of a storage of {storage.size}")
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=tuple(s * item for s in stride), writeable=False
    )
    return np.array(view)


def _rebuild_parameter(data: Any, *_ignored: Any) -> Any:
    return data


def _storage_from_bytes(raw: bytes, dtype: np.dtype, numel: Any) -> np.ndarray:
    if not isinstance(numel, int) or numel < 0 or len(raw) != numel * dtype.itemsize:
        raise TorchPickleError(f"a storage of {numel!r} elements holds {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<"))


def _load_legacy_storage(payload: Any) -> np.ndarray:
    """The storage a pickled tensor carries: torch's legacy (non-zip) ``torch.save`` of one
    storage: magic, protocol, system info, a persistent id, the storage keys, then each
    storage as an 8-byte element count and its bytes."""
    if not isinstance(payload, bytes):
        raise TorchPickleError("a storage payload is not bytes")
    stream = io.BytesIO(payload)
    header = [_PlainUnpickler(stream).load() for _ in range(3)]
    if header[0] != _LEGACY_MAGIC or not isinstance(header[2], dict) or not header[2].get("little_endian", True):
        raise TorchPickleError("a storage payload is not a little-endian torch storage")
    ids: list[tuple[Any, ...]] = []

    def remember(saved: Any) -> Any:
        ids.append(saved)
        return saved

    unpickler = _PlainUnpickler(stream)
    unpickler.persistent_load = remember  # type: ignore[method-assign]
    unpickler.load()
    keys = _PlainUnpickler(stream).load()
    if len(ids) != 1 or len(ids[0]) < 5 or ids[0][0] != "storage" or keys != [ids[0][2]]:
        raise TorchPickleError("a storage payload does not hold exactly one storage")
    storage_type, numel = ids[0][1], ids[0][4]
    if not isinstance(storage_type, _StorageType):
        raise TorchPickleError("a storage payload names no known storage type")
    count = int.from_bytes(stream.read(8), "little")
    if count != numel:
        raise TorchPickleError(f"a storage says {numel!r} elements in its id and {count} in its data")
    return _storage_from_bytes(stream.read(), storage_type.dtype, count)


class _PlainUnpickler(pickle.Unpickler):
    """Resolves only torch's storage classes and numpy's array rebuilders."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise RefusedGlobal(f"{module}.{name}")


class TorchAwareUnpickler(_PlainUnpickler):
    """An unpickler for weights files: numpy arrays, plain containers and torch tensors
    (rebuilt as numpy arrays); any other global is refused before it is looked up.

    >>> TorchAwareUnpickler(open("weights.pkl", "rb")).load()      # doctest: +SKIP
    {'W$1': array([[...]], dtype=float32)}
    """

    _TORCH: ClassVar[dict[tuple[str, str], Any]] = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("torch.storage", "_load_from_bytes"): _load_legacy_storage,
    }

    def __init__(self, stream: Any, archive: zipfile.ZipFile | None = None, root: str = "") -> None:
        super().__init__(stream)
        self.archive = archive
        self.root = root

    def find_class(self, module: str, name: str) -> Any:
        found = self._TORCH.get((module, name))
        return found if found is not None else super().find_class(module, name)

    def persistent_load(self, saved: Any) -> Any:
        # ('storage', storage type, key, location, element count): data/<key> of the zip.
        if self.archive is None or not isinstance(saved, tuple) or len(saved) < 5 or saved[0] != "storage":
            raise TorchPickleError(f"an unexpected persistent id {saved!r:.80}")
        storage_type, key, numel = saved[1], saved[2], saved[4]
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or not key.isalnum():
            raise TorchPickleError(f"a storage reference {saved!r:.80} names no storage of the archive")
        info = self.archive.getinfo(f"{self.root}data/{key}")
        if info.compress_type != zipfile.ZIP_STORED:  # torch stores; a compressed member could be a zip bomb
            raise TorchPickleError(f"storage {key} is compressed, which torch never writes")
        return _storage_from_bytes(self.archive.read(info), storage_type.dtype, numel)


def is_torch_zip(raw: bytes) -> bool:
    """True for what ``torch.save`` writes by default (a zip holding ``<name>/data.pkl``)."""
    return raw[:4] == b"PK\x03\x04"


def load_torch_zip(raw: bytes) -> Any:
    """The object a ``torch.save`` zip archive holds, its tensors as numpy arrays."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    except (zipfile.BadZipFile, OSError) as error:
        raise TorchPickleError(f"not a readable torch archive ({error})") from None
    if len(pickles) != 1:
        raise TorchPickleError("the archive holds no single data.pkl, so torch.save did not write it")
    root = pickles[0][: -len("data.pkl")]
    info = archive.getinfo(pickles[0])
    if info.compress_type != zipfile.ZIP_STORED:
        raise TorchPickleError("data.pkl is compressed, which torch never writes")
    try:
        return TorchAwareUnpickler(io.BytesIO(archive.read(info)), archive, root).load()
    except KeyError as error:  # a storage the pickle names is missing from the archive
        raise TorchPickleError(f"the archive lacks {error}") from None
