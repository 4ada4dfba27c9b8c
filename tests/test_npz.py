"""dsl.weights_file.write_npz: archives that np.load and zipfile read back bit for bit."""

from __future__ import annotations

import zipfile

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl.weights_file as npz_module
from dsl.weights_file import write_npz

_DTYPES = st.sampled_from(["<f4", "<f8", "<f2", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8",
                           "|b1", "<c8", "<c16", ">i4", ">f8"])


def _assert_same(path, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every member's CRC matches its bytes
        assert [info.filename for info in archive.infolist()] == [f"{key}.npy" for key in arrays]
    with np.load(path, allow_pickle=False) as loaded:
        assert sorted(loaded.files) == sorted(arrays)
        for key, array in arrays.items():
            assert loaded[key].dtype == array.dtype and loaded[key].shape == array.shape, key
            assert loaded[key].tobytes() == np.ascontiguousarray(array).tobytes(), key


@settings(max_examples=60, deadline=None)
@given(st.lists(hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)),
                min_size=0, max_size=6))
def test_arrays_of_every_dtype_and_shape_come_back(tmp_path_factory, arrays: list[np.ndarray]) -> None:
    path = tmp_path_factory.mktemp("npz") / "w.npz"
    named = {f"a{index}": array for index, array in enumerate(arrays)}
    write_npz(path, named)
    _assert_same(path, named)


def test_same_bytes_as_np_savez_members(tmp_path) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "scalar": np.array(3, np.int64),  # 0-d stays 0-d
        "matrix": rng.random((3, 4), dtype=np.float32),
        "transposed": rng.random((4, 5)).T,  # not C-contiguous: written in C order
        "read_only": np.frombuffer(b"\x00\x00\x80?\x00\x00\x00@", "<f4").reshape(2, 1),
        "text": np.array('{"w": "bfloat16"}'),
        "record": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        "naïve": np.ones(3),  # a non-ASCII member name
    }
    write_npz(tmp_path / "fast.npz", arrays)
    np.savez(tmp_path / "reference.npz", **arrays)
    with zipfile.ZipFile(tmp_path / "fast.npz") as fast, zipfile.ZipFile(tmp_path / "reference.npz") as reference:
        for key in arrays:
            if key != "transposed":  # np.save writes that one in Fortran order; both load equal
                assert fast.read(f"{key}.npy") == reference.read(f"{key}.npy"), key
    _assert_same(tmp_path / "fast.npz", arrays)


def test_path_is_kept_as_given_and_output_is_deterministic(tmp_path) -> None:
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    write_npz(tmp_path / "weights.bin", arrays)
    with zipfile.ZipFile(tmp_path / "weights.bin") as archive:
        assert [info.extract_version for info in archive.infolist()] == [20]
    first = (tmp_path / "weights.bin").read_bytes()
    write_npz(str(tmp_path / "weights.bin"), arrays)
    assert (tmp_path / "weights.bin").read_bytes() == first
    assert not (tmp_path / "weights.bin.npz").exists()
    _assert_same(tmp_path / "weights.bin", arrays)


def test_large_archives_fall_back_to_np_savez(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(npz_module, "_ZIP32_LIMIT", 1000)  # as if the arrays were over 2 GiB
    arrays = {"big": np.arange(400, dtype=np.float64), "small": np.array([1, 2], np.int8)}
    write_npz(tmp_path / "w.npz", arrays)
    with zipfile.ZipFile(tmp_path / "w.npz") as archive:
        # np.savez writes zip64 members (version 4.5); the fast path writes 2.0 ones
        assert [info.extract_version for info in archive.infolist()] == [45, 45]
    _assert_same(tmp_path / "w.npz", arrays)


def test_object_arrays_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="Python objects"):
        write_npz(tmp_path / "w.npz", {"o": np.array([b"a", "b"], dtype=object)})


@pytest.mark.parametrize("limit", ["_ZIP32_LIMIT", "_MEMBER_LIMIT"])
def test_names_of_np_savez_parameters_are_kept(tmp_path, monkeypatch, limit: str) -> None:
    # np.savez(file, *args, allow_pickle=True, **arrays) would fail on "file" and take
    # "allow_pickle" for its flag, dropping that array; both paths must keep them.
    arrays = {"file": np.arange(3, dtype=np.float32), "allow_pickle": np.array([1, 2], np.int8)}
    write_npz(tmp_path / "fast.npz", arrays)
    _assert_same(tmp_path / "fast.npz", arrays)
    monkeypatch.setattr(npz_module, limit, 1)  # the large-archive path
    write_npz(tmp_path / "large.npz", arrays)
    _assert_same(tmp_path / "large.npz", arrays)
