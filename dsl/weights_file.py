"""The ``.npz`` weights file: the one reader and the one writer of it.

Generated Python (``converter.to_python``, read back by ``dsl.load_weights``) and markup
projects (``weights.npz``) keep their weights in the same kind of file: numpy's zip of
uncompressed ``.npy`` members, which ``np.load(path, allow_pickle=False)`` reads.  The
ml_dtypes element types (bfloat16, float8, 4-bit) have no ``.npy`` encoding: their
arrays are stored as their raw bits (unsigned integers of the same item size) and their
dtype names are recorded as JSON in the member ``__dtypes__``; the reader undoes that.

Reading is safe on a file from anywhere: no member can hold pickled objects, a
``__dtypes__`` entry may only name an ml_dtypes type of the stored item size, and a
member may not declare more data than it holds, so a damaged header cannot make the
reader allocate what the file does not contain.  Any such damage is a
:class:`WeightsFileError`.

Writing is fast for many small arrays: ``np.savez`` costs about 15 µs per array
whatever its size (a ``zipfile`` entry opened as a stream, zip64 extras, an ``.npy``
header formatted from scratch), which is most of the time of converting a model whose
weights are many small tensors.  :func:`write_npz` produces the same archive in one
pass: ``.npy`` headers are cached per (dtype, shape), array data is written straight
from the array's buffer without a copy, and the zip headers are packed with
:mod:`struct`.  Archives that would need zip64 (4 GiB or 65 535 members) are written
the way ``np.savez`` writes them.  Timestamps are fixed (1980-01-01), so the same
weights give the same bytes, and the file is rewritten in place
(:func:`dsl.file_writing.overwritten`).
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from dsl.errors import ModelLoadError
from dsl.file_writing import overwritten
from dsl.limits import check_limit
from dsl.tensor_protos import MAX_RANK

__all__ = ["DTYPES_KEY", "WeightsFileError", "read_weights_file", "write_weights_file", "write_npz"]

# The member that records the dtype names of arrays stored as raw bits.
DTYPES_KEY = "__dtypes__"


class WeightsFileError(ModelLoadError, ValueError):
    """A weights file that is damaged, or holds something other than plain arrays.

    A DslError like every user-facing mistake, and a ValueError as numpy's own refusals
    were before this reader existed."""

    default_hint = "write the file again with the project's weights writer (numpy.savez of plain arrays)"


# ---------------------------------------------------------------------------- reading


def read_weights_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, ml_dtypes arrays with their own dtypes.

    Raises :class:`WeightsFileError` for a damaged file (``OSError`` when it cannot be
    opened at all).

    >>> weights = read_weights_file("model.npz")     # doctest: +SKIP
    >>> weights["conv1_weight"].dtype                # doctest: +SKIP
    dtype('float32')
    """
    try:
        with zipfile.ZipFile(path) as archive:
            _check_inflation(archive, path)
            arrays = {_member_name(info): _read_member(archive, info) for info in archive.infolist()}
        dtypes = _dtype_names(arrays.pop(DTYPES_KEY, None))
        for name, dtype_name in dtypes.items():
            arrays[name] = _as_ml_dtype(name, arrays.get(name), dtype_name)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, NotImplementedError, RuntimeError,
            TypeError) as error:
        # (RuntimeError: an encrypted member, or JSON nested past the recursion limit (RecursionError);
        # NotImplementedError: an unknown compression; TypeError: a __dtypes__ entry numpy cannot read.)
        raise WeightsFileError(f"{os.fspath(path)}: {getattr(error, 'message', error)}") from None
    return arrays


def _check_inflation(archive: zipfile.ZipFile, path: str | os.PathLike[str]) -> None:
    """Compressed members may not inflate past the limit: 3 MB of deflate can declare 3 GB.
    (The zip reader stops at each member's declared size, and each array is checked against
    that size, so these declared sizes bound what reading allocates.)"""
    inflated = sum(max(info.file_size - info.compress_size, 0) for info in archive.infolist())
    check_limit("inflated_bytes", inflated, f"{os.fspath(path)}: compressed arrays that inflate by {inflated:,} bytes")


def _member_name(info: zipfile.ZipInfo) -> str:
    if not info.filename.endswith(".npy"):
        raise WeightsFileError(f"member {info.filename!r} is not an .npy array")
    return info.filename[: -len(".npy")]


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One ``.npy`` member; its header may not declare more data than the member holds."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(member)
        if len(shape) > MAX_RANK or any(dim < 0 for dim in shape):
            raise WeightsFileError(f"member {info.filename!r} declares the shape {shape!r}")
        if dtype.hasobject:
            raise WeightsFileError(f"member {info.filename!r} holds Python objects, which only pickle can rebuild")
        count = math.prod(shape)
        declared = count * dtype.itemsize
        held = info.file_size - member.tell()
        if declared > held:
            raise WeightsFileError(f"member {info.filename!r} declares {declared} bytes of data but holds {held}")
        flat = _read_into_array(member, dtype, count, info.filename)
    return flat.reshape(shape[::-1]).transpose() if fortran_order else flat.reshape(shape)


_CHUNK = 16 << 20  # bytes per read: the weights are read into their array, never held twice


def _read_into_array(member: IO[bytes], dtype: np.dtype, count: int, filename: str) -> np.ndarray:
    """``count`` items read straight into a new array (no intermediate bytes of its size)."""
    flat = np.empty(count, dtype)
    view = flat.view(np.uint8).data
    done = 0
    while done < len(view):
        chunk = member.read(min(_CHUNK, len(view) - done))
        if not chunk:
            raise WeightsFileError(f"member {filename!r} ends after {done} of its {len(view)} bytes")
        view[done: done + len(chunk)] = chunk
        done += len(chunk)
    return flat


def _dtype_names(stored: np.ndarray | None) -> dict[str, str]:
    if stored is None:
        return {}
    names = json.loads(str(stored))
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise WeightsFileError(f"{DTYPES_KEY} is not a JSON object of dtype names")
    return names


def _as_ml_dtype(name: str, bits: np.ndarray | None, dtype_name: str) -> np.ndarray:
    """The array stored as raw bits, viewed as the ml_dtypes type ``dtype_name``."""
    import ml_dtypes

    if bits is None:
        raise WeightsFileError(f"{DTYPES_KEY} names {name!r}, which the file does not hold")
    found = getattr(ml_dtypes, dtype_name, None) if dtype_name.isidentifier() and dtype_name[0] != "_" else None
    try:
        dtype = np.dtype(found) if found is not None else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind != "V" or bits.dtype.kind != "u" or bits.dtype.itemsize != dtype.itemsize:
        raise WeightsFileError(f"{DTYPES_KEY} gives {name!r} the dtype {dtype_name!r}, which does not fit {bits.dtype}")
    return bits.view(dtype)


# ---------------------------------------------------------------------------- writing


def write_weights_file(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as the ``.npz`` that :func:`read_weights_file` reads back.

    ml_dtypes arrays are stored as their raw bits, their dtype names under ``__dtypes__``.

    >>> import numpy as np
    >>> write_weights_file("model.npz", {"w": np.ones((2, 3), np.float32)})   # doctest: +SKIP
    """
    stored: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for name, array in arrays.items():
        array = np.asarray(array)
        if array.dtype.kind == "V" and array.dtype.names is None:  # an ml_dtypes type
            dtypes[name] = array.dtype.name
            stored[name] = array.view(np.dtype(f"u{array.dtype.itemsize}"))
        else:
            stored[name] = array
    stored[DTYPES_KEY] = np.array(json.dumps(dtypes))
    write_npz(path, stored)


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature .. extra length (30 bytes)
_CENTRAL_HEADER = struct.Struct("<4s6H3L5H2L")  # signature .. local header offset (46 bytes)
_END_RECORD = struct.Struct("<4s4H2LH")  # end of central directory (22 bytes)
_VERSION = 20  # "2.0": stored members, no zip64
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, the earliest zip date
_UTF8_FLAG = 0x800
_ZIP32_LIMIT = 0x7FFF_FFFF  # stay well inside 32-bit sizes and offsets
_MEMBER_LIMIT = 0xFFFF
# (dtype, shape) -> .npy header: models repeat a few weight shapes, and so do successive calls.
_HEADERS: dict[tuple[np.dtype, tuple[int, ...]], bytes] = {}
_HEADER_CACHE_LIMIT = 4096


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an uncompressed ``.npz`` that ``np.load`` reads.

    Unlike ``np.savez`` the file is written exactly at ``path`` (no ``.npz`` appended).
    Object arrays are refused, as ``np.load(..., allow_pickle=False)`` would refuse them.

    >>> import numpy as np
    >>> write_npz("weights.npz", {"w": np.ones((2, 3), np.float32)})   # doctest: +SKIP
    >>> np.load("weights.npz")["w"].shape                               # doctest: +SKIP
    (2, 3)
    """
    members: list[tuple[bytes, bytes, np.ndarray]] = []
    headers = _HEADERS
    if len(headers) > _HEADER_CACHE_LIMIT:
        headers.clear()
    total = 0
    for key, array in arrays.items():
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        if array.dtype.hasobject:
            raise ValueError(f"array {key!r} holds Python objects, which an .npz cannot store without pickle")
        header_key = (array.dtype, array.shape)
        header = headers.get(header_key)
        if header is None:
            header = headers[header_key] = _npy_header(array)
        name = (key + ".npy").encode("utf-8")
        members.append((name, header, array))
        total += 2 * len(name) + len(header) + array.nbytes + _LOCAL_HEADER.size + _CENTRAL_HEADER.size
    if total > _ZIP32_LIMIT or len(members) >= _MEMBER_LIMIT:
        _write_zip64(path, arrays)
        return
    with overwritten(path) as stream:  # (in place: re-converting a model rewrites the same file)
        _write_members(stream, members)


def _write_members(stream: IO[bytes], members: list[tuple[bytes, bytes, np.ndarray]]) -> None:
    """Local headers and data, then the central directory and its end record."""
    write = stream.write
    central: list[bytes] = []
    offset = 0
    for name, header, array in members:
        data = array.reshape(-1).view(np.uint8).data  # a memoryview: the buffer, not a copy
        crc = zlib.crc32(data, zlib.crc32(header))
        size = len(header) + array.nbytes
        flags = 0 if name.isascii() else _UTF8_FLAG
        local = _LOCAL_HEADER.pack(b"PK\x03\x04", _VERSION, flags, 0, 0, _DOS_DATE, crc, size, size, len(name), 0)
        write(local + name + header)  # (small: one write call, not three)
        write(data)
        central.append(
            _CENTRAL_HEADER.pack(
                b"PK\x01\x02", _VERSION, _VERSION, flags, 0, 0, _DOS_DATE, crc, size, size, len(name),
                0, 0, 0, 0, 0o600 << 16, offset,
            )
            + name
        )
        offset += _LOCAL_HEADER.size + len(name) + size
    directory = b"".join(central)
    write(directory)
    write(_END_RECORD.pack(b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), offset, 0))


def _write_zip64(path: str | os.PathLike[str], arrays: Mapping[str, Any]) -> None:
    # np.savez's members (zip64, so any size), written without its **arrays interface:
    # there an array named "file" or "allow_pickle" would clash with its parameters.
    with overwritten(path) as stream, zipfile.ZipFile(stream, "w") as archive:
        for key, array in arrays.items():
            with archive.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)


def _npy_header(array: np.ndarray) -> bytes:
    """The ``.npy`` magic and header of a C-ordered ``array``, as ``np.save`` writes it."""
    buffer = io.BytesIO()
    fields = np.lib.format.header_data_from_array_1_0(array)
    try:
        np.lib.format.write_array_header_1_0(buffer, fields)
    except ValueError:  # a header over 64 KiB (thousands of axes) needs format 2.0
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, fields)
    return buffer.getvalue()
