"""dsl.weights_file: the one .npz reader and writer, on good files and on damaged ones.

The writer's archive format is checked bit for bit in tests/test_npz.py; here: what the
reader gives back, and what it refuses (pickled objects, headers that promise more data
than the member holds, ``__dtypes__`` entries that name anything but an ml_dtypes type).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from dsl.errors import DslError
from dsl.weights_file import DTYPES_KEY, WeightsFileError, read_weights_file, write_weights_file


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_every_kind_of_array_comes_back(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "matrix": rng.random((3, 4), dtype=np.float32),
        "scalar": np.array(7, np.int64),
        "empty": np.zeros((0, 2), np.float16),
        "flags": np.array([True, False]),
        "bf16": np.array([1.5, -2.0], ml_dtypes.bfloat16),
        "f8": np.array([0.5, 4.0], ml_dtypes.float8_e4m3fn),
        "int4": np.array([1, -3, 7], ml_dtypes.int4),
        "file": np.arange(3, dtype=np.int8),  # named like a parameter of np.savez
    }
    write_weights_file(tmp_path / "w.npz", arrays)
    found = read_weights_file(tmp_path / "w.npz")
    assert sorted(found) == sorted(arrays)
    for name, array in arrays.items():
        assert found[name].dtype == array.dtype and found[name].shape == array.shape, name
        assert found[name].tobytes() == array.tobytes(), name
        assert found[name].flags.writeable, name


def test_files_np_savez_wrote_are_read_as_np_load_reads_them(tmp_path: Path) -> None:
    arrays = {"fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "big_endian": np.arange(4, dtype=">i4")}
    np.savez_compressed(tmp_path / "w.npz", **arrays)
    found = read_weights_file(tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as expected:
        for name in arrays:
            assert found[name].dtype == expected[name].dtype
            np.testing.assert_array_equal(found[name], expected[name])
            assert found[name].flags.f_contiguous == expected[name].flags.f_contiguous


def test_pickled_objects_are_refused_and_never_rebuilt(tmp_path: Path) -> None:
    path = _archive(tmp_path / "w.npz", {"w.npy": _npy(np.array([1, "text"], dtype=object))})
    with pytest.raises(WeightsFileError, match="Python objects"):
        read_weights_file(path)


def test_a_header_promising_more_data_than_the_member_holds_is_refused(tmp_path: Path) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**7, 10**6)})
    path = _archive(tmp_path / "w.npz", {"w.npy": header.getvalue() + bytes(16)})
    with pytest.raises(WeightsFileError, match="declares 40000000000000 bytes of data but holds 16"):
        read_weights_file(path)
    truncated = _archive(tmp_path / "t.npz", {"w.npy": _npy(np.zeros(100))[:-8]})
    with pytest.raises(WeightsFileError, match="declares 800 bytes"):
        read_weights_file(truncated)


@pytest.mark.parametrize(
    ("dtypes", "message"),
    [
        ([1], "not a JSON object"),
        ({"w": "__loader__"}, "does not fit"),
        ({"w": "finfo"}, "does not fit"),
        ({"w": "float8_e4m3fn"}, "does not fit uint16"),  # one byte, stored as two
        ({"missing": "bfloat16"}, "does not hold"),
    ],
)
def test_dtype_names_must_name_an_ml_dtypes_type_of_the_stored_size(tmp_path: Path, dtypes, message: str) -> None:
    members = {"w.npy": _npy(np.zeros(2, np.uint16)), f"{DTYPES_KEY}.npy": _npy(np.array(json.dumps(dtypes)))}
    with pytest.raises(WeightsFileError, match=message):
        read_weights_file(_archive(tmp_path / "w.npz", members))


def test_damaged_archives_are_one_error_and_missing_files_another(tmp_path: Path) -> None:
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(WeightsFileError, match=r"junk\.npz"):
        read_weights_file(tmp_path / "junk.npz")
    with pytest.raises(WeightsFileError, match=r"not an \.npy array"):
        read_weights_file(_archive(tmp_path / "text.npz", {"notes.txt": b"hello"}))
    with pytest.raises(WeightsFileError, match="magic string"):
        read_weights_file(_archive(tmp_path / "magic.npz", {"w.npy": b"hello world"}))
    with pytest.raises(FileNotFoundError):
        read_weights_file(tmp_path / "missing.npz")


def test_a_damaged_file_is_a_dsl_error_with_a_hint_and_still_a_value_error(tmp_path: Path) -> None:
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DslError) as caught:
        read_weights_file(tmp_path / "junk.npz")
    assert isinstance(caught.value, ValueError)
    assert "junk.npz" in str(caught.value) and "hint:" in str(caught.value)
