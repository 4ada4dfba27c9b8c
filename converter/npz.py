"""A fast ``.npz`` writer for many small arrays: the weights file of ``to_python``.

``np.savez`` costs about 15 µs per array whatever its size (a ``zipfile`` entry opened
as a stream, zip64 extras, an ``.npy`` header formatted from scratch), which is most of
the time of converting a model whose weights are many small tensors.  This writer
produces the same kind of archive (uncompressed ``.npy`` members, read by ``np.load``)
in one pass: ``.npy`` headers are cached per (dtype, shape), array data is written
straight from the array's buffer without a copy, and the zip headers are packed with
:mod:`struct`.  Archives that would need zip64 (4 GiB or 65 535 members) are written
the way ``np.savez`` writes them.  Timestamps are fixed (1980-01-01), so the same weights give the same bytes.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from converter.in_place import overwritten

__all__ = ["write_npz"]

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
        # np.savez's members (zip64, so any size), written without its **arrays interface:
        # there an array named "file" or "allow_pickle" would clash with its parameters
        with zipfile.ZipFile(path, "w") as archive:
            for key, array in arrays.items():
                with archive.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
        return
    central: list[bytes] = []
    offset = 0
    with overwritten(path) as stream:  # (in place: re-converting a model rewrites the same file)
        write = stream.write
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

